package sim

import (
	"math/rand/v2"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/internal/check"
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
		dest := adversaryDest(cfg, r, now)
		if dest == nil {
			return nil
		}
		m := wire.AppMsg{
			ID:      wire.MsgID{Client: wire.ProcID(nrep + r.IntN(cfg.Workload.Clients)), Session: wire.Session(uint64(r.IntN(4))), Seq: 1 + uint64(r.IntN(60))},
			Dest:    dest,
			Payload: []byte{byte(r.Uint32()), 0xf0, 0x4e},
		}
		m.Seal()
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

// Equivocator returns a Config.Inject that, as a client of its own outside
// the run (id adv, session 1), multicasts messages that reuse its sequence
// numbers for other content (issue #10 item 7): each names one of seq 1-20
// with random destinations and payload, sealed as an honest client would,
// and goes to every replica of a random non-empty subset of its
// destination groups, so that groups hold different contents under one
// sequence number and some learn a message only from another group's
// ACCEPT. A message's identity is its content (wire.MsgID.Digest): each
// must be ordered as a message of its own, and none may block a group. The
// equivocator does not retry; the simulator records its messages as
// optional (check.Event.Optional). n, if not nil, counts its MULTICASTs.
func Equivocator(cfg *Config, adv wire.ProcID, n *int) func(now int64) []wire.Envelope {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x4551_5549_564f)) // "EQUIVO"
	return func(now int64) []wire.Envelope {
		dest := adversaryDest(cfg, r, now)
		if dest == nil {
			return nil
		}
		m := wire.NewAppMsg(wire.MsgID{Client: adv, Session: wire.Session(1), Seq: 1 + uint64(r.IntN(20))}, dest, []byte{byte(r.Uint32()), 0xe9})
		var out []wire.Envelope
		for _, g := range dest {
			if len(dest) > 1 && r.IntN(2) == 0 {
				continue // this group learns it from the others' ACCEPTs
			}
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

// adversaryDest decides whether an adversary acts at time now (at one
// global tick in four, during the fault phase only) and, if so, draws the
// destinations of its message; nil when it does not act.
func adversaryDest(cfg *Config, r *rand.Rand, now int64) []wire.GroupID {
	if now > cfg.Faults.GST || r.IntN(4) != 0 {
		return nil
	}
	k := 1 + r.IntN(cfg.Groups)
	dest := make([]wire.GroupID, 0, k)
	for _, g := range r.Perm(cfg.Groups)[:k] {
		dest = append(dest, wire.GroupID(g))
	}
	sortGroups(dest)
	return dest
}

// ForgedClients adds adversarial clients to cfg, from two processes
// outside the run: a Forger and an Equivocator.
func ForgedClients(cfg *Config) {
	adv := wire.ProcID(cfg.Groups*cfg.Replicas + cfg.Workload.Clients)
	forge, equiv := Forger(cfg, adv, nil), Equivocator(cfg, adv+1, nil)
	cfg.Inject = func(now int64) []wire.Envelope { return append(forge(now), equiv(now)...) }
}

// inject hands Config.Inject's envelopes to their live recipients,
// ignoring refusals.
func (s *Sim) inject() error {
	for _, env := range s.cfg.Inject(s.now) {
		s.recordInjected(env)
		if int(env.To) >= len(s.procs) || !s.up[env.To] {
			continue
		}
		for e := range amcast.Unbatch(env) {
			_ = s.procs[env.To].Step(e)
		}
		if err := s.flush(env.To, false); err != nil {
			return err
		}
	}
	return nil
}

// recordInjected records in the history, as an optional multicast, a
// well-formed MULTICAST that a process outside the run sends in its own
// name (an Equivocator's): replicas may order it, and the checkers then
// hold it to every rule but termination (the sender does not retry).
// Forged ones (another client's id) are not recorded: ordering one is a
// violation.
func (s *Sim) recordInjected(env wire.Envelope) {
	mc, ok := env.Msg.(*wire.Multicast)
	if !ok || s.hist == nil || int(env.From) < s.nrep || mc.M.ID.Client != env.From ||
		mc.M.Validate(s.cfg.Groups) != nil || mc.M.CheckDigest() != nil || s.optional[mc.M.ID] {
		return
	}
	if s.optional == nil {
		s.optional = map[wire.MsgID]bool{}
	}
	s.optional[mc.M.ID] = true
	d := make([]int, len(mc.M.Dest))
	for j, g := range mc.M.Dest {
		d[j] = int(g)
	}
	s.hist.Events = append(s.hist.Events, check.Event{Ev: check.EvMulticast, ID: mc.M.ID.Full(), Dest: d, T: s.now,
		Digest: check.Digest(mc.M.Payload), Optional: true})
}
