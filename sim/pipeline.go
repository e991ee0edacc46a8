package sim

import (
	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// Pipelined storage (Config.Pipeline; amcast/pipeline.go, node/pipeline.go).
//
// A pipelined replica writes each Ready's records and goes on stepping
// input; a sync, up to a δ later, covers every record written by then,
// and releases, in order, what the Readys of those records held back
// (amcast.Pipeline): the messages their protocol does not let leave
// before the sync, and the deliveries. Unsynced records are volatile: a
// crash loses every one of them, possibly several Readys' worth whose
// early messages left, and a torn crash keeps a prefix of them. A node
// does this for a leader's Readys that nobody waits on (node/pipeline.go);
// the simulator does it for every Ready of every replica (a sync within a
// δ, a tick by default, as the node's within a tick), so the swarm checks
// the argument, and a core that let a decision rest on its own unsynced
// records (wbcast's MutSelfAckEarly) is caught (TestSelfAckEarlyCaught).

// PipelineStats counts what replicas' pipelined storage did.
type PipelineStats struct {
	Readies      int // Readys written
	Syncs        int // syncs, each covering the Readys written before it
	LostUnsynced int // unsynced records crashes lost
	// AppliedEarly counts the deliveries applied before they were durable
	// and checked against the run's (early.go); LostApplied the crashes
	// that took some back.
	AppliedEarly, LostApplied int
}

func (p *PipelineStats) add(o PipelineStats) {
	p.Readies += o.Readies
	p.Syncs += o.Syncs
	p.LostUnsynced += o.LostUnsynced
	p.AppliedEarly += o.AppliedEarly
	p.LostApplied += o.LostApplied
}

// pipeState is one replica's pipelined storage.
type pipeState struct {
	p        *amcast.Pipeline
	unsynced [][]byte // encoded records written, not yet durable, in order
	written  uint64   // records written since the replica (re)started
	synced   uint64   // of them, durable
	syncing  bool     // a sync is scheduled
	// applied is the gts of the last delivery the replica applied (at its
	// Ready, early.go), appliedDurable of the last one durable.
	applied, appliedDurable wire.Timestamp
}

// newPipes returns the pipelined storage of n replicas.
func newPipes(n int, early func(wire.Message) bool) []*pipeState {
	ps := make([]*pipeState, n)
	for i := range ps {
		ps[i] = &pipeState{p: amcast.NewPipeline(early)}
	}
	return ps
}

// reset forgets what a crash loses: every unsynced record, what waits, and
// the deliveries applied that were not durable.
func (ps *pipeState) reset() {
	ps.p.Reset()
	ps.unsynced, ps.written, ps.synced, ps.syncing = nil, 0, 0, false
	ps.applied = ps.appliedDurable
}

// flushPipelined handles replica id's Ready rd with pipelined storage: its
// records are written, not durable; what may leave before their sync
// leaves now, the rest waits for the sync.
func (s *Sim) flushPipelined(id wire.ProcID, m amcast.Machine, rd *amcast.Ready, fg bool) error {
	ps := s.pipes[id]
	if s.f != nil {
		for _, r := range rd.Persist {
			ps.unsynced = append(ps.unsynced, wire.Append(nil, r))
		}
	}
	ps.written += uint64(len(rd.Persist))
	s.stats.Pipeline.Readies++
	s.applyEarly(id, m, rd.Deliveries)
	now := ps.p.Add(rd, ps.written)
	if s.f != nil && s.f.torn[id] != noTorn {
		return s.f.tornCrashPipelined(id, now, fg)
	}
	if err := s.sendRouted(id, now, fg); err != nil {
		return err
	}
	m.Advance()
	return s.scheduleSync(id, fg)
}

// scheduleSync schedules a sync of replica id's written records, unless one
// is scheduled or all are durable. It takes up to a δ, as a loaded disk
// does next to the network.
func (s *Sim) scheduleSync(id wire.ProcID, fg bool) error {
	ps := s.pipes[id]
	if ps.syncing {
		return nil
	}
	if ps.written == ps.synced {
		return s.release(id, fg) // a Ready without records, behind none
	}
	ps.syncing = true
	inc := int32(0)
	if s.f != nil {
		inc = int32(s.f.inc[id])
	}
	var d int64
	if s.cfg.SyncDelay != nil {
		d = s.cfg.SyncDelay(s.now, id)
	} else {
		d = 1 + s.rng.Int64N(s.cfg.Delta)
	}
	s.push(event{at: s.now + d, kind: evSync, to: id, arg: inc, fg: fg})
	return nil
}

// synced ends a sync of replica id in incarnation inc: every record written
// by now becomes durable, and what waited for them is released in order.
func (s *Sim) synced(id wire.ProcID, inc int32, fg bool) error {
	if !s.up[id] || (s.f != nil && inc != int32(s.f.inc[id])) {
		return nil // the replica crashed since: its unsynced records are lost
	}
	ps := s.pipes[id]
	ps.syncing = false
	s.stats.Pipeline.Syncs++
	if s.f != nil {
		if err := s.f.persistEncoded(id, ps.unsynced); err != nil {
			return err
		}
		clear(ps.unsynced)
		ps.unsynced = ps.unsynced[:0]
	}
	ps.synced = ps.written
	if err := s.release(id, fg); err != nil {
		return err
	}
	return s.scheduleSync(id, fg)
}

// release does, in order, what replica id's durable Readys released: their
// messages leave and their deliveries happen.
func (s *Sim) release(id wire.ProcID, fg bool) error {
	g, _ := s.topo.GroupOf(id)
	for _, e := range s.pipes[id].p.Release(s.pipes[id].synced) {
		if err := s.sendRouted(id, e.Messages, fg); err != nil {
			return err
		}
		for _, d := range e.Deliveries {
			s.recordDelivery(id, g, d)
		}
	}
	return nil
}

// persistEncoded applies encoded records to replica p's store.
func (f *faultState) persistEncoded(p wire.ProcID, recs [][]byte) error {
	if f.stores == nil {
		return nil
	}
	for _, b := range recs {
		if err := f.applyRecord(p, b); err != nil {
			return err
		}
	}
	return nil
}

// tornCrashPipelined crashes pipelined replica p in the middle of handling
// a Ready: the messages that may leave before the sync (early) leave, a
// prefix of its unsynced records (this Ready's included) reaches the store
// and the deliveries those make durable happen; nothing else leaves.
func (f *faultState) tornCrashPipelined(p wire.ProcID, early []wire.Envelope, fg bool) error {
	s := f.s
	ps := s.pipes[p]
	if err := s.sendRouted(p, early, fg); err != nil {
		return err
	}
	keep := f.tornKeep(p, len(ps.unsynced))
	if err := f.persistEncoded(p, ps.unsynced[:keep]); err != nil {
		return err
	}
	s.stats.Pipeline.LostUnsynced += len(ps.unsynced) - keep
	durable := ps.synced + uint64(keep)
	g, _ := s.topo.GroupOf(p)
	for _, e := range ps.p.Held() {
		for _, d := range e.Deliveries {
			if d.Rec >= 0 && e.First+uint64(d.Rec) < durable {
				s.recordDelivery(p, g, d)
			}
		}
	}
	f.crash(p, true)
	return nil
}
