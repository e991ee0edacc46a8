package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// forger returns a Config.Inject that, from an adversary process outside
// the run (id adv), sends MULTICASTs forged in the name of the run's
// genuine clients (issue #10 item 7): an id a genuine client used or will
// use (sessions 0-3, sequence numbers 1-60), with its own destinations and
// payload, to every replica of the destination groups, leaders included.
// Every replica must refuse them (amcast.CheckMulticastSender): were one
// ordered, the checkers would see a payload nobody multicast under a
// genuine id, or an id nobody multicast.
func forger(cfg *Config, adv wire.ProcID, n *int) func(now int64) []wire.Envelope {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x464f_5247_4552)) // "FORGER"
	nrep := cfg.Groups * cfg.Replicas
	return func(now int64) []wire.Envelope {
		if now > cfg.Faults.GST || r.IntN(4) != 0 {
			return nil
		}
		k := 1 + r.IntN(cfg.Groups)
		dest := make([]wire.GroupID, 0, k)
		for _, g := range r.Perm(cfg.Groups)[:k] {
			dest = append(dest, wire.GroupID(g))
		}
		sortGroups(dest)
		m := wire.AppMsg{
			ID:      wire.MsgID{Client: wire.ProcID(nrep + r.IntN(cfg.Workload.Clients)), Session: uint64(r.IntN(4)), Seq: 1 + uint64(r.IntN(60))},
			Dest:    dest,
			Payload: []byte{byte(r.Uint32()), 0xf0, 0x4e},
		}
		var out []wire.Envelope
		for _, g := range dest {
			for i := range cfg.Replicas {
				out = append(out, wire.Envelope{From: adv, To: wire.ProcID(int(g)*cfg.Replicas + i), Msg: &wire.Multicast{M: m}})
			}
		}
		*n += len(out)
		return out
	}
}

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
		cfg.Inject = forger(&cfg, adv, &forged)
		if r := RunSwarmConfig(cfg); r.Violations() > 0 {
			t.Fatalf("seed %d with forged clients: %s", seed, r.Failure())
		}
	}
	if forged == 0 {
		t.Fatal("nothing was forged")
	}
	t.Logf("%d seeds, %d forged MULTICASTs refused", seeds, forged)
}
