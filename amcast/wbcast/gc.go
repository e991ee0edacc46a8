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
func (p *Process) collect() {
	var ids []wire.MsgID
	for id, r := range p.recs {
		if !r.issued {
			continue
		}
		ok := true
		for _, g := range r.m.Dest {
			if p.linf[g].Less(r.gts) && (g == p.g || !p.mut(MutEarlyCollect)) {
				ok = false
				break
			}
		}
		if ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	slices.SortFunc(ids, wire.MsgID.Compare)
	for _, id := range ids {
		delete(p.recs, id)
		s := p.sess.get(id.Key())
		s.live--
		s.last = p.ticks
		if !p.mut(MutForgetDone) { // P15
			p.sess.add(id, p.ticks)
		}
	}
	k := 0
	for k < len(p.dlog) && p.recs[p.dlog[k].id] == nil {
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

// maxRecordIDs bounds the ids (and expired sessions) one REC_COLLECTED or
// REC_EXPIRED carries: what one collection or one forget pass produces is
// persisted as several records of at most this many entries, so a record
// stays far below the decoder's per-list cap (wire.MaxStateEntries) and a
// WAL record limit of 1 MiB (an id encodes in at most 41 bytes; 16,384 of
// them in under 700 KiB), whatever the state: a million idle sessions
// expiring in one pass used to make one record no node could write or
// read back.
const maxRecordIDs = 16 << 10

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
