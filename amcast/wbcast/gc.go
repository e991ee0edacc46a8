package wbcast

import (
	"slices"

	"github.com/weft-dev/weft/wire"
)

// collect is garbage collection (spec §6, P14): a message delivered here
// whose global timestamp is at or below the delivered floor of every one of
// its destination groups has been delivered by a quorum of each (by every
// member with Config.CollectAfterAll; a member behind gets a SNAPSHOT,
// transfer.go); its record is dropped and its id kept in its session's
// duplicate-suppression state (sessions.go).
//
// It looks only at what it may collect: the delivery log up to this
// group's floor (every message here has this group among its
// destinations, and the log is in gts order, so nothing past the first
// entry above the floor qualifies) and the deliveries the log does not
// hold (offLog). Scanning every record held instead cost a loaded agent
// 4.5% of its CPU (docs/batching.md): most records are in flight, not
// delivered.
func (p *Process) collect() {
	var ids []wire.MsgID
	k := 0
	for _, id := range p.offLog {
		r := p.recs[id]
		switch {
		case r == nil || !r.issued: // dropped meanwhile
		case p.collectable(r):
			r.dropped = true // below
			ids = append(ids, id)
		default:
			p.offLog[k] = id
			k++
		}
	}
	clear(p.offLog[k:])
	p.offLog = p.offLog[:k]
	for i := range p.dlog {
		e := &p.dlog[i]
		if p.linf[p.g].Less(e.gts) {
			break
		}
		// A delivery to several groups waits here for the others' floors,
		// tick after tick; while the floor that held it back last time is
		// still below it, it cannot be collected, and looking its record
		// up (a 48-byte key) on every tick was about 2% of a loaded agent's
		// CPU with two destination groups. Its destinations are fixed
		// (they are in its id's digest), so the group is one of them.
		if e.wait > 0 && p.linf[e.wait-1].Less(e.gts) {
			continue
		}
		r := e.r
		if r.dropped || !r.issued {
			continue
		}
		if g, held := p.heldBack(r); held {
			e.wait = int32(g) + 1
			continue
		}
		r.dropped = true // below
		ids = append(ids, r.m.ID)
	}
	if len(ids) == 0 {
		return
	}
	// By session: a REC_COLLECTED's ids are encoded in runs of one session
	// (wire/idlist.go), about 19 bytes an id in a run against 43 alone.
	ids = groupBySession(ids)
	for _, id := range ids {
		delete(p.recs, id)
		s := p.sess.get(id.Key())
		s.live--
		s.last = p.ticks
		if !p.mut(MutForgetDone) { // P15
			p.sess.add(id, p.ticks)
		}
	}
	k = 0
	for k < len(p.dlog) && p.dlog[k].r.dropped {
		k++
	}
	p.dlog = slices.Delete(p.dlog, 0, k)
	p.cov.Collected += len(ids)
	for len(ids) > 0 { // bounded records (maxRecordIDs)
		n := min(len(ids), maxRecordIDs)
		p.persist(&wire.RecCollected{IDs: ids[:n:n]})
		ids = ids[n:]
	}
}

// groupBySession returns ids with each session's ids together, sessions
// in the order of their first id, each session's ids in their order (the
// delivery order: increasing sequence numbers, so doneSet.add appends).
// Linear, where a sort of the ids cost 1% of a loaded agent's CPU.
func groupBySession(ids []wire.MsgID) []wire.MsgID {
	if len(ids) < 2 {
		return ids
	}
	var keys []wire.SessionKey
	var index map[wire.SessionKey]int // once there are many sessions
	slot := make([]int32, len(ids))   // each id's session, an index in keys
	last := -1
	for i, id := range ids {
		k := id.Key()
		switch {
		case last >= 0 && keys[last] == k:
		case index != nil:
			j, ok := index[k]
			if !ok {
				j = len(keys)
				keys = append(keys, k)
				index[k] = j
			}
			last = j
		default:
			last = slices.Index(keys, k)
			if last < 0 {
				last = len(keys)
				keys = append(keys, k)
				if len(keys) > 8 {
					index = make(map[wire.SessionKey]int, 2*len(keys))
					for j, k := range keys {
						index[k] = j
					}
				}
			}
		}
		slot[i] = int32(last)
	}
	if len(keys) == 1 {
		return ids
	}
	start := make([]int, len(keys)+1) // where each session's ids go
	for _, s := range slot {
		start[s+1]++
	}
	for j := 1; j < len(start); j++ {
		start[j] += start[j-1]
	}
	out := make([]wire.MsgID, len(ids))
	for i, id := range ids {
		out[start[slot[i]]] = id
		start[slot[i]]++
	}
	return out
}

// collectable reports whether delivered record r is at or below the
// delivered floor of each of its destination groups.
func (p *Process) collectable(r *record) bool {
	if !r.issued {
		return false
	}
	_, held := p.heldBack(r)
	return !held
}

// heldBack returns a destination group of delivered record r whose
// delivered floor is below r's gts, if there is one.
func (p *Process) heldBack(r *record) (wire.GroupID, bool) {
	for _, g := range r.m.Dest {
		if p.linf[g].Less(r.gts) && (g == p.g || !p.mut(MutEarlyCollect)) {
			return g, true
		}
	}
	return 0, false
}

// offLogIDs lists the delivered records the delivery log does not hold,
// sorted: after a restart or an installed snapshot, every delivered
// record (the log starts empty there).
func (p *Process) offLogIDs() []wire.MsgID {
	var ids []wire.MsgID
	for id, r := range p.recs {
		if r.issued {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, wire.MsgID.Compare)
	return ids
}

// maxRecordIDs bounds the ids (and expired sessions) one REC_COLLECTED or
// REC_EXPIRED carries: what one collection or one forget pass produces is
// persisted as several records of at most this many entries, so a record
// stays far below the decoder's per-list cap (wire.MaxStateEntries) and a
// WAL record limit of 1 MiB (an id encodes in at most 52 bytes, alone in
// its run of one session: wire/idlist.go; 16,384 of them in under 850 KiB), whatever the state: a million idle sessions
// expiring in one pass used to make one record no node could write or
// read back.
const maxRecordIDs = 16 << 10

// forgetPasses is how many forget passes a lease (Config.SessionTicks)
// has. Each pass forgets what expired since the one before, so the work
// (the walk, the REC_EXPIRED records, their write) comes in small pieces:
// at 8 passes a lease, every replica forgot 7.5 s of ids at once at the
// default lease, at the same tick as its peers, and at 30,000 multicasts a
// second that stalled every agent's loop for up to 600 ms every 7.5 s,
// long enough for gossip to convict loaded leaders (docs/batching.md,
// "Loops stalled together every 7.5 seconds").
const forgetPasses = 64

// forget drops what sessions no longer need to remember (sessions.go):
// collected ids below their client's floor and idle sessions, each once
// SessionTicks have passed; the store forgets the same.
func (p *Process) forget() {
	lease := uint64(p.cfg.SessionTicks)
	ids := p.sess.prune(p.ticks, lease)
	ks := p.sess.expire(p.ticks, lease)
	if len(ids) == 0 && len(ks) == 0 {
		return
	}
	p.cov.SessionsExpired += len(ks)
	for len(ids) > 0 || len(ks) > 0 { // bounded records (maxRecordIDs)
		r := &wire.RecExpired{}
		n := min(len(ks), maxRecordIDs)
		r.Sessions, ks = ks[:n:n], ks[n:]
		n = min(len(ids), maxRecordIDs-n)
		r.IDs, ids = ids[:n:n], ids[n:]
		p.persist(r)
	}
}
