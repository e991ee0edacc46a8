package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// TestSwarmForgedClients runs swarm seeds (faults, leader changes, client
// sessions turning over) with two adversaries throughout the fault phase:
// one forging the genuine clients' ids, one reusing its own ids for other
// content (Equivocator). Every checker still passes: the forgeries are
// never ordered, each reused id's contents are ordered as messages of
// their own, and no group is blocked (the genuine clients' messages all
// complete).
func TestSwarmForgedClients(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	forged, equivocated, delivered := 0, 0, 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		cfg := SwarmConfig("wbcast", seed)
		adv := wire.ProcID(cfg.Groups*cfg.Replicas + cfg.Workload.Clients)
		forge, equiv := Forger(&cfg, adv, &forged), Equivocator(&cfg, adv+1, &equivocated)
		cfg.Inject = func(now int64) []wire.Envelope { return append(forge(now), equiv(now)...) }
		r := RunSwarmConfig(cfg)
		if r.Violations() > 0 {
			t.Fatalf("seed %d with forged clients: %s", seed, r.Failure())
		}
		delivered += r.Stats.InjectedDeliveries
	}
	if forged == 0 || equivocated == 0 || delivered == 0 {
		t.Fatalf("forged %d, equivocated %d MULTICASTs, %d of the latter's deliveries: the adversaries did not act", forged, equivocated, delivered)
	}
	t.Logf("%d seeds: %d forged MULTICASTs refused; %d MULTICASTs reusing ids, %d deliveries of them", seeds, forged, equivocated, delivered)
}

// liar is a WbCast replica that tells clients a wrong gts.
type liar struct{ amcast.Machine }

func (l liar) Ready() amcast.Ready {
	rd := l.Machine.Ready()
	for i := range rd.Messages {
		if d, ok := rd.Messages[i].Msg.(*wire.Delivered); ok {
			lie := *d
			lie.GTS.T++
			rd.Messages[i].Msg = &lie
		}
	}
	return rd
}

// TestClientReplyCheck: the simulator's client-reply check passes honest
// runs (TestDeterministic and every swarm seed run it) and catches a
// replica that answers a client with a gts it did not deliver: after some
// replica delivered the message, and, with pipelined storage and slow
// disks, where the answer arrives before any replica's delivery is
// durable, at the first delivery.
func TestClientReplyCheck(t *testing.T) {
	for _, c := range []struct {
		pipeline bool
		caught   string
	}{
		{false, "replicas delivered it at"},
		{true, "its client was told"},
	} {
		t.Run(fmt.Sprintf("pipeline=%v", c.pipeline), func(t *testing.T) { testClientReplyCheck(t, c.pipeline, c.caught) })
	}
}

func testClientReplyCheck(t *testing.T, pipeline bool, caught string) {
	ps := *wbcastSpec(nil)
	newHonest := ps.New
	ps.New = func(topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) {
		m, err := newHonest(topo, id)
		if err != nil {
			return nil, err
		}
		return liar{m}, nil
	}
	cfg := Config{Spec: &ps, Groups: 2, Replicas: 3, Seed: 1, Workload: Workload{Messages: 20, Clients: 2}, Pipeline: pipeline}
	if pipeline {
		// Slow disks: the answers, which leave before the sync, arrive
		// before any replica's delivery is durable.
		cfg.SyncDelay = func(int64, wire.ProcID) int64 { return 5000 }
	}
	_, err := Run(cfg)
	if err == nil || !strings.Contains(err.Error(), caught) {
		t.Fatalf("a lying replier passed, or was caught by another check (want %q): %v", caught, err)
	}
	cfg.Spec = nil
	cfg.Protocol = "wbcast"
	res, err := Run(cfg)
	if err != nil || res.Stats.Replies != 20 {
		t.Fatalf("honest run: %v, %d replies checked", err, res.Stats.Replies)
	}
}

// TestClientsGiveUp runs swarm seeds whose clients restart with messages
// in flight (Workload.CrashClients) and give up on messages unanswered
// past a short lease (Workload.ExpireTicks): the given-up messages are
// optional for the checkers (delivered everywhere or nowhere), every other
// message still completes, and none is given up after GST.
func TestClientsGiveUp(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	expired, givenUp := 0, 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		cfg := SwarmConfig("wbcast", seed)
		if cfg.Workload.SessionEvery == 0 {
			cfg.Workload.SessionEvery = 5
		}
		cfg.Workload.CrashClients = true
		cfg.Workload.ExpireTicks = 30
		r := RunSwarmConfig(cfg)
		if r.Violations() > 0 {
			t.Fatalf("seed %d: %s", seed, r.Failure())
		}
		expired += r.Stats.Expired
		givenUp += r.Stats.GivenUp
	}
	if expired == 0 || givenUp <= expired {
		t.Fatalf("%d messages expired, %d given up in all: the test no longer exercises both", expired, givenUp)
	}
	t.Logf("%d seeds: %d messages given up (%d expired, %d outstanding at a client restart)", seeds, givenUp, expired, givenUp-expired)
}
