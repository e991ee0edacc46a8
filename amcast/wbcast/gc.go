package wbcast

import (
	"slices"

	"github.com/weft-dev/weft/wire"
)

// doneSet remembers the ids of collected messages, per client session, as
// a contiguous high-water mark plus the sequence numbers above it. Sessions
// number their messages 1, 2, 3, ..., so the set stays small. It is keyed by
// session, not by client: a client restarted with the same id starts a new
// session at seq 1, and its messages must not be taken for the collected
// ones of the earlier incarnation (which would answer them "delivered"
// without ever ordering them).
type doneSet map[wire.SessionKey]*clientDone

type clientDone struct {
	w     uint64              // every seq in [1, w] is done
	above map[uint64]struct{} // done seqs > w+1
}

func (d doneSet) has(id wire.MsgID) bool {
	c := d[id.Key()]
	if c == nil {
		return false
	}
	if id.Seq != 0 && id.Seq <= c.w {
		return true
	}
	_, ok := c.above[id.Seq]
	return ok
}

func (d doneSet) add(id wire.MsgID) {
	c := d[id.Key()]
	if c == nil {
		c = &clientDone{above: map[uint64]struct{}{}}
		d[id.Key()] = c
	}
	if id.Seq != 0 && id.Seq <= c.w {
		return
	}
	c.above[id.Seq] = struct{}{} // seq 0 (unused by clients) is kept here
	for {
		if _, ok := c.above[c.w+1]; !ok {
			break
		}
		delete(c.above, c.w+1)
		c.w++
	}
}

// size returns the number of entries held (for memory accounting).
func (d doneSet) size() int {
	n := 0
	for _, c := range d {
		n += 1 + len(c.above)
	}
	return n
}

func (d doneSet) clone() doneSet {
	out := doneSet{}
	for k, c := range d {
		a := make(map[uint64]struct{}, len(c.above))
		for s := range c.above {
			a[s] = struct{}{}
		}
		out[k] = &clientDone{w: c.w, above: a}
	}
	return out
}

// collect is garbage collection (spec §6, P14): a message delivered here
// whose global timestamp is at or below the delivered floor of every one of
// its destination groups has been delivered by every process that will
// ever need it; its record is dropped and its id kept in the done set.
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
		if !p.mut(MutForgetDone) { // P15
			p.done.add(id)
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
