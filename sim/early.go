package sim

import (
	"fmt"
	"slices"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// Deliveries applied before they are durable (pipelined storage).
//
// A node running a state machine may apply a deferring leader's
// deliveries at once, before the sync of its records, and answer its
// clients with their results (node/pipeline.go): what a delivery is, and
// what precedes it, was decided on its followers' durable acks, so a
// crash of the leader before the sync must not change it. The simulator
// checks that claim for every WbCast replica with pipelined storage, a
// stronger rule than the node's, which applies early only at a leader
// whose followers make its quorums:
//
//   - every delivery a replica's Ready makes is "applied" at once, and
//     noted with the one the replica applied before it (a crash takes the
//     replica back to its last durable delivery; a state transfer to the
//     gts it installs; a lost disk to nothing);
//   - at the end of a run that converged, each applied delivery must be
//     the run's delivery of that message, at the same gts, and no message
//     of its group may have been delivered between the delivery applied
//     before it and it: the state machine applied a prefix of the order.
//
// A crash can lose an applied delivery whose records were not durable;
// nothing else in the history would show that it was wrong.
// TestEarlyApplyCaught shows this check catches a leader that counts its
// own unsynced ack (wbcast.MutSelfAckEarly) in a run where every other
// checker passes.
type earlyCheck struct {
	applied []earlyApplied
}

// earlyApplied is one delivery applied before its records were durable.
type earlyApplied struct {
	t         int64
	p         wire.ProcID
	g         wire.GroupID
	id        wire.MsgID
	prev, gts wire.Timestamp
}

// earlyApplies reports whether replica m's deliveries are applied before
// they are durable: a WbCast replica's (the node's deferring leaders run
// WbCast).
func earlyApplies(m amcast.Machine) bool {
	_, ok := m.(interface{ FollowersMakeQuorum() bool })
	return ok
}

// applyEarly notes the deliveries of replica p's Ready as applied now.
// An applied message is awaited like a delivered one (msgInfo.applied):
// the run converges only once every replica delivered it.
func (s *Sim) applyEarly(p wire.ProcID, m amcast.Machine, ds []amcast.Delivery) {
	if len(ds) == 0 || !earlyApplies(m) {
		return
	}
	if s.early == nil {
		s.early = &earlyCheck{}
	}
	ps := s.pipes[p]
	g, _ := s.topo.GroupOf(p)
	for _, d := range ds {
		if d.Install {
			ps.applied = d.GTS
			continue
		}
		if s.optional[d.M.ID] {
			s.trackOptional(&d.M)
		}
		if mi := s.msgs[d.M.ID]; mi != nil {
			mi.applied = true
		}
		s.early.applied = append(s.early.applied, earlyApplied{t: s.now, p: p, g: g, id: d.M.ID, prev: ps.applied, gts: d.GTS})
		s.stats.Pipeline.AppliedEarly++
		ps.applied = d.GTS
	}
}

// noteDurable records replica p's durable delivery (or installation) at
// gts: a crash takes the replica back to it.
func (s *Sim) noteDurable(p wire.ProcID, gts wire.Timestamp) {
	if earlyApplies(s.procs[p]) {
		s.pipes[p].appliedDurable = gts
	}
}

// checkEarly checks every applied delivery against the run's deliveries
// (earlyCheck: msgInfo.gts, the gts of a message's first delivery); it is
// run once the run converged, so every message delivered or applied was
// delivered by every replica of its destinations.
func (s *Sim) checkEarly() error {
	e := s.early
	if e == nil || len(e.applied) == 0 {
		return nil
	}
	order := make([][]wire.Timestamp, s.cfg.Groups)
	for _, mi := range s.msgs {
		if mi.gts.IsZero() {
			continue
		}
		for _, g := range mi.dest {
			order[g] = append(order[g], mi.gts)
		}
	}
	for g := range order {
		slices.SortFunc(order[g], wire.Timestamp.Compare)
	}
	for _, a := range e.applied {
		var final wire.Timestamp
		if mi := s.msgs[a.id]; mi != nil {
			final = mi.gts
		}
		if final != a.gts {
			return fmt.Errorf("sim: t=%d p%d applied %s at %s before its records were durable; the run delivered it at %s (zero: never)",
				a.t, a.p, a.id, a.gts, final)
		}
		o := order[a.g]
		i, _ := slices.BinarySearchFunc(o, a.prev, wire.Timestamp.Compare)
		if i < len(o) && o[i] == a.prev {
			i++
		}
		if i < len(o) && o[i].Less(a.gts) {
			return fmt.Errorf("sim: t=%d p%d applied %s at %s right after %s, before its records were durable; the run delivered a message at %s between them",
				a.t, a.p, a.id, a.gts, a.prev, o[i])
		}
	}
	return nil
}
