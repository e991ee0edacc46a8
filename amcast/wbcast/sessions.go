package wbcast

import (
	"fmt"
	"slices"

	"github.com/weft-dev/weft/wire"
)

// Client sessions and bounded duplicate suppression (docs/sessions.md).
//
// A late copy of a message that was delivered everywhere and then
// garbage-collected must not be ordered again (P15): a client's retry, a
// replica's re-multicast (H12) delayed in the network, a leader's re-sent
// ACCEPT (P2). A replica therefore remembers, per client session, the ids
// it collected, exactly: sequence number and content digest (a message's
// identity is its content, wire.MsgID.Digest, so a client that reuses a
// sequence number for other content sends another message, which must not
// be mistaken for a late copy of the first). What keeps that memory small:
//
//   - The client's floor (wire.AppMsg.Floor): "every message of mine up to
//     here is answered and I will never send it again". A collected id at
//     or below the floor is forgotten once Config.SessionTicks have passed
//     since it was collected, so a session's set holds the client's window
//     of unanswered messages plus what was collected in the last
//     SessionTicks.
//   - Idle expiry: a session with no message held here and no activity for
//     SessionTicks is forgotten altogether.
//
// Forgetting is exact under one timing assumption (docs/sessions.md): no
// copy of a message reaches a replica more than SessionTicks after the
// replica collected it. The floor is a claim of the client; it only ever
// shortens how long ids of that client's own messages are remembered, and
// never decides by itself whether a message is ordered, so a false floor
// cannot make one destination group refuse what another proposed.
type sessionTable struct {
	m       map[wire.SessionKey]*session
	entries int // sum over sessions of len(done)

	// hit is the session found by the last lookup, under hitKey: a
	// client's messages come in runs (one connection's frames, one batch's
	// ACCEPT, the records mirrored after one Ready), so the next lookup is
	// nearly always for it. Each lookup in m hashes a 24-byte key, and a
	// loaded agent made about eight per multicast: 4% of its CPU
	// (docs/batching.md). A cache only: drop clears it.
	hitKey wire.SessionKey
	hit    *session
}

// session is one client session's duplicate-suppression state here.
//
// There is no contiguous "[1, w] collected" mark: a mark cannot say which
// content each covered sequence number had, so a reused sequence number
// below it would be taken for a collected message and refused at this
// group while another destination group proposed it (the id-reuse block,
// docs/sessions.md). The floor bounds the set instead.
type session struct {
	floor uint64  // highest AppMsg.Floor seen
	done  doneSet // collected ids, with the tick each was collected at
	live  int     // records of the session held in Process.recs
	last  uint64  // tick of the last activity
}

func seqDigest(id wire.MsgID) wire.SeqDigest { return wire.SeqDigest{Seq: id.Seq, Digest: id.Digest} }

func newSessionTable() sessionTable { return sessionTable{m: map[wire.SessionKey]*session{}} }

// lookup returns k's session, or nil.
func (t *sessionTable) lookup(k wire.SessionKey) *session {
	if t.hit != nil && t.hitKey == k {
		return t.hit
	}
	s := t.m[k]
	if s != nil {
		t.hit, t.hitKey = s, k
	}
	return s
}

// get returns k's session, creating it.
func (t *sessionTable) get(k wire.SessionKey) *session {
	s := t.lookup(k)
	if s == nil {
		s = &session{}
		t.m[k] = s
		t.hit, t.hitKey = s, k
	}
	return s
}

// touch records activity of m's session at tick now and raises its floor.
func (t *sessionTable) touch(m *wire.AppMsg, now uint64) { t.get(m.ID.Key()).seen(m, now) }

// seen records m as activity of session s at tick now.
func (s *session) seen(m *wire.AppMsg, now uint64) {
	s.last = now
	s.floor = max(s.floor, m.Floor)
}

// collected reports whether id was collected here and is still remembered.
func (t *sessionTable) collected(id wire.MsgID) bool {
	s := t.lookup(id.Key())
	if s == nil {
		return false
	}
	return s.done.has(seqDigest(id))
}

// collectedElseTouch is collected(m.ID), and if m was not collected,
// touch(m, now), with one lookup of m's session: the store mirrors every
// REC_ACCEPTED and REC_DELIVERED through it, two per multicast.
func (t *sessionTable) collectedElseTouch(m *wire.AppMsg, now uint64) bool {
	s := t.lookup(m.ID.Key())
	switch {
	case s == nil:
		s = t.get(m.ID.Key())
	case s.done.has(seqDigest(m.ID)):
		return true
	}
	s.seen(m, now)
	return false
}

// mayHaveForgotten reports whether id could be a message collected here
// whose id is no longer remembered: one still remembered, one at or below
// its client's floor, or one of a session not (or no longer) known here.
func (t *sessionTable) mayHaveForgotten(id wire.MsgID) bool {
	s := t.lookup(id.Key())
	return s == nil || s.done.has(seqDigest(id)) || (id.Seq != 0 && id.Seq <= s.floor)
}

// add remembers that id was collected here at tick now.
func (t *sessionTable) add(id wire.MsgID, now uint64) {
	if t.get(id.Key()).done.add(seqDigest(id), now) {
		t.entries++
	}
}

// prune forgets the collected ids at or below their session's floor that
// were collected at least lease ticks ago, and returns them, sorted. Each
// session's set is walked from its lowest id up to the first chunk that
// starts above the floor or with an id collected less than lease ticks
// ago: a client's ids are collected nearly in the order of their sequence
// numbers, so a pass looks at what expired since the last one and one
// chunk more, not at the whole lease's worth of ids. An expired id behind
// a younger one (a message collected late) waits for a later pass: it is
// remembered longer, never shorter, than the lease, by as long as that
// one's collection lagged behind it (short, unless one of its destination
// groups could not deliver for a while; the session's ids above the floor
// are kept meanwhile in any case).
func (t *sessionTable) prune(now, lease uint64) []wire.MsgID {
	// The sessions are visited in the map's order and only those that
	// forgot something are sorted: sorting every session's key each pass
	// cost 33 ms a pass at 100,000 sessions (BenchmarkForgetManySessions),
	// on the loop, 64 times a lease.
	type run struct {
		k          wire.SessionKey
		start, end int
	}
	var (
		out  []wire.MsgID
		runs []run
	)
	for k, s := range t.m {
		stop := func(first doneEntry) bool { return first.q.Seq > s.floor || now < first.at+lease }
		if s.done.len() == 0 || stop(s.done.first()) {
			continue // nothing to forget: the usual case, without the walk's setup
		}
		start := len(out)
		t.entries -= s.done.filter(stop, func(e doneEntry) bool {
			if e.q.Seq != 0 && e.q.Seq <= s.floor && now >= e.at+lease {
				out = append(out, wire.MsgID{Client: k.Client, Session: k.Session, Seq: e.q.Seq, Digest: e.q.Digest})
				return false
			}
			return true
		})
		if len(out) > start {
			runs = append(runs, run{k, start, len(out)})
		}
	}
	if len(runs) < 2 {
		return out // one session's ids, in order
	}
	slices.SortFunc(runs, func(a, b run) int { return a.k.Compare(b.k) })
	sorted := make([]wire.MsgID, 0, len(out))
	for _, r := range runs {
		sorted = append(sorted, out[r.start:r.end]...)
	}
	return sorted
}

// forgetIDs drops remembered collected ids (a REC_EXPIRED's, sorted as
// prune returns them), one pass over each session's set.
func (t *sessionTable) forgetIDs(ids []wire.MsgID) {
	var qs []wire.SeqDigest
	for len(ids) > 0 {
		k := ids[0].Key()
		qs = qs[:0]
		for len(ids) > 0 && ids[0].Key() == k {
			qs = append(qs, seqDigest(ids[0]))
			ids = ids[1:]
		}
		if s := t.lookup(k); s != nil {
			t.entries -= s.done.removeSorted(qs)
		}
	}
}

// expire forgets the sessions with nothing held here and no activity for
// lease ticks, and returns their keys, sorted.
func (t *sessionTable) expire(now, lease uint64) []wire.SessionKey {
	var out []wire.SessionKey
	for k, s := range t.m {
		if s.live == 0 && now >= s.last+lease {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, wire.SessionKey.Compare)
	for _, k := range out {
		t.drop(k)
	}
	return out
}

func (t *sessionTable) drop(k wire.SessionKey) {
	if s := t.m[k]; s != nil {
		t.entries -= s.done.len()
		delete(t.m, k)
		if t.hit == s {
			t.hit = nil
		}
	}
}

// size is the number of entries held: one per session plus the collected
// ids remembered.
func (t *sessionTable) size() int { return len(t.m) + t.entries }

// clone copies the table (Restore takes the store's). Collection ticks are
// reset to 0, the restarted process's first tick: a restarted process
// remembers each id a full lease more.
func (t *sessionTable) clone() sessionTable {
	out := sessionTable{m: make(map[wire.SessionKey]*session, len(t.m)), entries: t.entries}
	for k, s := range t.m {
		cp := *s
		cp.last = 0
		cp.done = s.done.clone(0)
		out.m[k] = &cp
	}
	return out
}

// records lists the table as snapshot entries, sorted by session.
func (t *sessionTable) records() []wire.ClientDone {
	keys := make([]wire.SessionKey, 0, len(t.m))
	for k := range t.m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, wire.SessionKey.Compare)
	out := make([]wire.ClientDone, 0, len(keys))
	for _, k := range keys {
		s := t.m[k]
		cd := wire.ClientDone{Client: k.Client, Session: k.Session, Floor: s.floor}
		if n := s.done.len(); n > 0 {
			cd.Collected = s.done.appendIDs(make([]wire.SeqDigest, 0, n))
		}
		out = append(out, cd)
	}
	return out
}

// load replaces the table with snapshot entries.
func (t *sessionTable) load(ds []wire.ClientDone) {
	*t = newSessionTable()
	for _, c := range ds {
		s := t.get(wire.SessionKey{Client: c.Client, Session: c.Session})
		s.floor = c.Floor
		for _, q := range c.Collected {
			if s.done.add(q, 0) {
				t.entries++
			}
		}
	}
}

// durableDiff compares a restored process's table t with the live one's
// (CompareRestored): the same collected ids wherever either remembers
// some, floors at most live's, no session live does not hold. It returns
// the first difference, or "".
func (t *sessionTable) durableDiff(live *sessionTable) string {
	for k, r := range t.m {
		l := live.m[k]
		if l == nil {
			return fmt.Sprintf("session %s restored, not live", k)
		}
		if r.floor > l.floor {
			return fmt.Sprintf("session %s: floor %d, live %d", k, r.floor, l.floor)
		}
	}
	for k, l := range live.m {
		r := t.m[k]
		if r == nil {
			if l.done.len() != 0 {
				return fmt.Sprintf("session %s: live remembers %d collected ids, restored nothing", k, l.done.len())
			}
			continue
		}
		if r.done.len() != l.done.len() {
			return fmt.Sprintf("session %s: %d collected ids, live %d", k, r.done.len(), l.done.len())
		}
		var missing wire.SeqDigest
		found := false
		l.done.each(func(e doneEntry) {
			if !found && !r.done.has(e.q) {
				missing, found = e.q, true
			}
		})
		if found {
			return fmt.Sprintf("session %s: seq %d (digest %x) collected live, not restored", k, missing.Seq, missing.Digest[:4])
		}
	}
	return ""
}

// deliveredHere reports whether a recovery state entry (H8, H9) is a
// message this process delivered and then collected, so adopting it would
// bring it back: one remembered as collected, or one committed at or below
// the last delivery with no record held. Deliveries follow gts order with
// no gaps (INV-8), so every message addressed here whose gts is at most
// maxDelivered was delivered here; without a record it was collected, and
// its id may have been forgotten since.
func (p *Process) deliveredHere(s *wire.MsgState) bool {
	if p.recs[s.M.ID] != nil {
		return false
	}
	return p.sess.collected(s.M.ID) || (s.Phase == wire.PhaseCommitted && s.GTS.LessEq(p.maxDelivered))
}

// merge adds another member's collected ids (a SNAPSHOT's sessions) at
// tick now: every one was delivered in the installed prefix. An id for
// which held reports a record here is left to this process's own
// collection; a record that was never delivered here was dropped by the
// caller first when the id is in the prefix.
func (t *sessionTable) merge(ds []wire.ClientDone, now uint64, held func(wire.MsgID) bool) {
	for _, d := range ds {
		k := wire.SessionKey{Client: d.Client, Session: d.Session}
		s := t.get(k)
		s.floor = max(s.floor, d.Floor)
		s.last = max(s.last, now)
		for _, q := range d.Collected {
			id := wire.MsgID{Client: d.Client, Session: d.Session, Seq: q.Seq, Digest: q.Digest}
			if !held(id) {
				t.add(id, now)
			}
		}
	}
}
