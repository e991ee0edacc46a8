package wbcast

import (
	"fmt"
	"slices"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// Store is a WbCast process's durable image (amcast.Store): the result of
// applying its records in order. It holds the promise (ballot, cballot),
// the clock of the last adopted state, every message accepted or delivered
// and not yet collected, and the client sessions' duplicate-suppression
// state (sessions.go).
type Store struct {
	Ballot, CBallot wire.Ballot
	Clock           uint64
	msgs            map[wire.MsgID]*storedMsg
	maxDelivered    wire.Timestamp
	sess            sessionTable
	records         int
	pending         *wire.RecNewState   // a paged state whose last page is not applied yet
	installing      []*wire.RecSnapshot // a paged install whose last page is not applied yet
	rejoined        bool                // an adopted state or an image was applied (RestoreAmnesiac)
}

type storedMsg struct {
	s         wire.MsgState
	delivered bool
}

var _ amcast.Store = (*Store)(nil)

// NewStore returns an empty store (a process that never persisted anything).
func NewStore() *Store {
	return &Store{msgs: map[wire.MsgID]*storedMsg{}, sess: newSessionTable()}
}

// Messages returns the number of messages the store holds.
func (st *Store) Messages() int { return len(st.msgs) }

// Records returns the number of records applied.
func (st *Store) Records() int { return st.records }

// Apply implements amcast.Store.
//
// A state adopted in pages (REC_NEW_STATE with wire.Paged) is applied as a
// whole at its last page. Pages of a set cut short by a crash in the middle
// of writing them (a torn Ready: the process sent no NEW_STATE_ACK for it)
// are dropped, as if that NEW_STATE had never arrived.
func (st *Store) Apply(rec wire.Message) error {
	st.records++
	if ns, ok := rec.(*wire.RecNewState); ok {
		st.installing = nil
		return st.applyNewStatePage(ns)
	}
	st.pending = nil
	if r, ok := rec.(*wire.RecInstall); ok {
		return st.applyInstallPage(r)
	}
	st.installing = nil
	switch r := rec.(type) {
	case *wire.RecBallot:
		st.Ballot, st.CBallot = r.Ballot, r.CBallot
	case *wire.RecAccepted:
		if st.sess.collectedElseTouch(&r.S.M, 0) {
			return nil
		}
		if m := st.msgs[r.S.M.ID]; m != nil && m.delivered {
			return nil
		}
		st.msgs[r.S.M.ID] = &storedMsg{s: r.S}
	case *wire.RecDelivered:
		st.maxDelivered = wire.MaxTS(st.maxDelivered, r.GTS)
		if st.sess.collectedElseTouch(&r.M, 0) {
			return nil // collected already: a delivery cannot come back
		}
		m := st.msgs[r.M.ID]
		if m == nil {
			m = &storedMsg{s: wire.MsgState{M: r.M}}
			st.msgs[r.M.ID] = m
		}
		m.s.Phase, m.s.LTS, m.s.GTS = wire.PhaseCommitted, r.LTS, r.GTS
		m.delivered = true
		st.maxDelivered = wire.MaxTS(st.maxDelivered, r.GTS)
	case *wire.RecCollected:
		for _, id := range r.IDs {
			delete(st.msgs, id)
			st.sess.add(id, 0)
		}
	case *wire.RecExpired:
		for _, k := range r.Sessions {
			st.sess.drop(k)
		}
		st.sess.forgetIDs(r.IDs)
	case *wire.RecSnapshot:
		if len(r.Delivered) != len(r.Msgs) {
			return fmt.Errorf("wbcast: snapshot with %d messages and %d delivered flags", len(r.Msgs), len(r.Delivered))
		}
		records := st.records
		*st = *NewStore()
		st.records = records
		st.Ballot, st.CBallot, st.Clock, st.maxDelivered = r.Ballot, r.CBallot, r.Clock, r.MaxDelivered
		for i, s := range r.Msgs {
			st.msgs[s.M.ID] = &storedMsg{s: s, delivered: r.Delivered[i]}
		}
		st.sess.load(r.Done)
		st.rejoined = true // an inert member persists nothing to compact
	default:
		return fmt.Errorf("wbcast: store cannot apply %s", rec.Kind())
	}
	return nil
}

// applyNewStatePage collects a page of an adopted state and applies the
// state once its last page arrived.
func (st *Store) applyNewStatePage(r *wire.RecNewState) error {
	switch {
	case r.Page == 0:
		st.pending = nil
	case st.pending == nil || st.pending.B != r.B || st.pending.Clock != r.Clock || st.pending.Page+1 != r.Page:
		return errStorePage("REC_NEW_STATE", r.Page)
	}
	if r.More || st.pending != nil {
		if st.pending == nil {
			st.pending = &wire.RecNewState{B: r.B, Clock: r.Clock}
		}
		st.pending.State = append(st.pending.State, r.State...)
		st.pending.Page = r.Page
		if r.More {
			return nil
		}
		r, st.pending = st.pending, nil
	}
	st.Ballot, st.CBallot = r.B, r.B
	st.Clock = max(st.Clock, r.Clock)
	st.rejoined = true
	in := make(map[wire.MsgID]bool, len(r.State))
	for _, s := range r.State {
		if st.msgs[s.M.ID] == nil && (st.sess.collected(s.M.ID) || (s.Phase == wire.PhaseCommitted && s.GTS.LessEq(st.maxDelivered))) {
			continue // delivered and collected (Process.deliveredHere)
		}
		st.sess.touch(&s.M, 0)
		in[s.M.ID] = true
		if m := st.msgs[s.M.ID]; m != nil && m.delivered {
			continue
		}
		st.msgs[s.M.ID] = &storedMsg{s: dropOwnAccepts(s, r.B)}
	}
	for id, m := range st.msgs {
		if !in[id] && !m.delivered {
			delete(st.msgs, id) // back to START: nothing durable about it
		}
	}
	return nil
}

func errStorePage(kind string, page uint32) error {
	return fmt.Errorf("wbcast: store: %s page %d does not follow the pages before it", kind, page)
}

// dropOwnAccepts records H9.3 for a state adopted under ballot b: the own
// group's ACCEPT bookkeeping is dropped (adopt), including ACCEPTs under b
// itself that a leader's re-sent state carries. Only own-group ACCEPTs can
// have ballot b (a ballot is led by a member of its group); those of older
// own-group ballots are left out by Restore, which knows the group.
func dropOwnAccepts(s wire.MsgState, b wire.Ballot) wire.MsgState {
	if !slices.Contains(s.Ballots, b) || len(s.LTSs) != len(s.Ballots) {
		return s
	}
	s.Ballots, s.LTSs = slices.Clone(s.Ballots), slices.Clone(s.LTSs)
	for j := range s.Ballots {
		if s.Ballots[j] == b {
			s.Ballots[j], s.LTSs[j] = wire.Ballot{}, wire.Timestamp{}
		}
	}
	return s
}

// Snapshot returns the store's whole image as one record, from which
// Apply rebuilds an equal store: what a node writes when it compacts its
// log. Its size follows the retained messages and the clients, not the
// length of the history.
func (st *Store) Snapshot() *wire.RecSnapshot {
	snap := &wire.RecSnapshot{Ballot: st.Ballot, CBallot: st.CBallot, Clock: st.Clock, MaxDelivered: st.maxDelivered}
	for _, id := range wire.SortedIDs(st.msgs) {
		m := st.msgs[id]
		snap.Msgs = append(snap.Msgs, m.s)
		snap.Delivered = append(snap.Delivered, m.delivered)
	}
	snap.Done = st.sess.records()
	return snap
}

// Restore rebuilds a process after a crash from its durable image. The
// process comes back as a follower of its last adopted ballot (RECOVERING
// if it had joined a later one); every volatile thing — proposals it made
// as leader, ack tallies, messages it held but had not accepted — is gone.
// Config.Detector must be fresh (or nil) for the new incarnation.
func Restore(cfg Config, st *Store) (*Process, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	p := newProcess(cfg)
	p.ballot, p.cballot = st.Ballot, st.CBallot
	if st.Ballot == (wire.Ballot{}) && st.CBallot == (wire.Ballot{}) {
		b0 := wire.Ballot{N: 0, P: cfg.Topology.InitialLeader(p.g)}
		p.ballot, p.cballot = b0, b0
	}
	p.status = Follower
	if p.ballot != p.cballot {
		p.status = Recovering
	}
	p.clock, p.durClock = st.Clock, st.Clock
	p.maxDelivered = st.maxDelivered
	p.ackFloor = st.maxDelivered // it may have collected up to here (transfer.go)
	p.sess = st.sess.clone()
	for id, m := range st.msgs {
		r := &record{}
		s := m.s
		r.m, r.known = s.M, true
		r.acc = r.newAcc(len(s.M.Dest))
		own := s.M.DestIndex(p.g)
		if len(s.Ballots) == len(r.acc) && len(s.LTSs) == len(r.acc) {
			for i := range r.acc {
				// H9.3, as the live process applies it in adopt: an own-group
				// ACCEPT of a ballot other than cballot was dropped when the
				// process adopted cballot (the records keep it: a state's
				// vectors, or a RecAccepted before the RecNewState). Rebuilt,
				// it would let the process ack under a vector it has left.
				if i == own && s.Ballots[i] != p.cballot {
					continue
				}
				if !s.LTSs[i].IsZero() {
					r.acc[i] = accEntry{b: s.Ballots[i], lts: s.LTSs[i], ok: true}
					r.nacc++
				}
			}
		}
		r.phase, r.lts, r.gts = s.Phase, s.LTS, s.GTS
		r.issued = m.delivered
		r.dur = durState{s: &s, held: true, delivered: m.delivered}
		p.clock = max(p.clock, s.GTS.T)
		p.recs[id] = r
		p.sess.get(id.Key()).live++
	}
	// No delivery log: the chain of this incarnation starts at its last
	// delivery (catchUp sends members behind it a SNAPSHOT).
	p.clock = max(p.clock, p.maxDelivered.T)
	p.offLog = p.offLogIDs()
	return p, nil
}
