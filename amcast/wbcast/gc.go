package wbcast

import (
	"slices"

	"github.com/weft-dev/weft/wire"
)

// collect is garbage collection (spec §6, P14): a message delivered here
// whose global timestamp is at or below the delivered floor of every one of
// its destination groups has been delivered by every process that will
// ever need it; its record is dropped and its id kept in its session's
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
	p.persist(&wire.RecCollected{IDs: ids})
}

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
	p.persist(&wire.RecExpired{Sessions: ks, IDs: ids})
}
