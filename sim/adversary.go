package sim

import (
	"math/rand/v2"

	"github.com/weft-dev/weft/wire"
)

// Forger returns a Config.Inject that, from an adversary process outside
// the run (id adv), sends MULTICASTs forged in the name of the run's
// genuine clients (issue #10 item 7): an id a genuine client used or will
// use (sessions 0-3, sequence numbers 1-60), with its own destinations and
// payload, to every replica of the destination groups, leaders included.
// Every replica must refuse them (amcast.CheckMulticastSender): were one
// ordered, the checkers would see a payload nobody multicast under a
// genuine id, or an id nobody multicast. n, if not nil, counts the forged
// envelopes.
func Forger(cfg *Config, adv wire.ProcID, n *int) func(now int64) []wire.Envelope {
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
		if n != nil {
			*n += len(out)
		}
		return out
	}
}

// ForgedClients adds a Forger to cfg, from a process outside the run.
func ForgedClients(cfg *Config) {
	adv := wire.ProcID(cfg.Groups*cfg.Replicas + cfg.Workload.Clients)
	cfg.Inject = Forger(cfg, adv, nil)
}
