package sim

import (
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// TestSwarmForgedClients runs swarm seeds (faults, leader changes, client
// sessions turning over) with an adversary forging the genuine clients'
// ids throughout the fault phase: every checker still passes.
func TestSwarmForgedClients(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	forged := 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		cfg := SwarmConfig("wbcast", seed)
		adv := wire.ProcID(cfg.Groups*cfg.Replicas + cfg.Workload.Clients)
		cfg.Inject = Forger(&cfg, adv, &forged)
		if r := RunSwarmConfig(cfg); r.Violations() > 0 {
			t.Fatalf("seed %d with forged clients: %s", seed, r.Failure())
		}
	}
	if forged == 0 {
		t.Fatal("nothing was forged")
	}
	t.Logf("%d seeds, %d forged MULTICASTs refused", seeds, forged)
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
// replica that answers a client with a gts it did not deliver.
func TestClientReplyCheck(t *testing.T) {
	ps := *wbcastSpec(nil)
	newHonest := ps.New
	ps.New = func(topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) {
		m, err := newHonest(topo, id)
		if err != nil {
			return nil, err
		}
		return liar{m}, nil
	}
	cfg := Config{Spec: &ps, Groups: 2, Replicas: 3, Seed: 1, Workload: Workload{Messages: 20, Clients: 2}}
	_, err := Run(cfg)
	if err == nil || !strings.Contains(err.Error(), "replicas delivered it at") {
		t.Fatalf("a lying replier passed: %v", err)
	}
	cfg.Spec = nil
	cfg.Protocol = "wbcast"
	res, err := Run(cfg)
	if err != nil || res.Stats.Replies != 20 {
		t.Fatalf("honest run: %v, %d replies checked", err, res.Stats.Replies)
	}
}
