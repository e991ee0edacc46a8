package wbcast

import (
	"fmt"

	"github.com/weft-dev/weft/amcast/internal/tsheap"
	"github.com/weft-dev/weft/wire"
)

// Commit and delivery: H3.5-H3.8 at the leader, H4 (the delivery rule and
// the DELIVER chain) and H5 at followers.

// commit is H3.5-H3.8.
func (p *Process) commit(r *record, gts wire.Timestamp) {
	r.phase = wire.PhaseCommitted
	r.gts = gts
	r.since = p.ticks
	r.ackB, r.ackFrom = nil, nil
	p.clock = max(p.clock, gts.T) // P4: the acks may beat the ACCEPTs here
	p.committed.Push(tsheap.Entry[*record]{TS: gts, ID: r.m.ID, Ref: r})
	p.tryDeliver()
}

// tryDeliver is H4: issue committed messages in gts order while no PROPOSED
// or ACCEPTED message has a local timestamp at or below the next one's gts.
func (p *Process) tryDeliver() {
	for p.committed.Len() > 0 {
		c := p.committed.Top()
		r := c.Ref
		if r.dropped || r.issued || r.phase != wire.PhaseCommitted || r.gts != c.TS {
			p.committed.Pop() // stale entry
			continue
		}
		for p.pending.Len() > 0 {
			e := p.pending.Top()
			if r := e.Ref; !r.dropped && !r.issued && (r.phase == wire.PhaseProposed || r.phase == wire.PhaseAccepted) && r.lts == e.TS {
				break
			}
			p.pending.Pop() // stale entry
		}
		if p.pending.Len() > 0 && p.pending.Top().TS.LessEq(c.TS) && !p.mut(MutSkipDeliveryBlock) {
			return // P6: blocked by a message that may still commit below c
		}
		p.committed.Pop()
		prev := p.maxDelivered
		p.deliverLocal(r)
		d := &wire.Deliver{ID: r.m.ID, B: p.cballot, LTS: r.lts, GTS: r.gts, Prev: prev, Linf: p.linf[p.g]}
		for _, q := range p.topo.Members(p.g) {
			if q != p.id {
				p.send(q, d)
			}
		}
		p.reply(&r.m, r.gts)
	}
}

// deliverLocal hands r to the application once its record is durable.
func (p *Process) deliverLocal(r *record) {
	if !p.maxDelivered.Less(r.gts) {
		panic(fmt.Sprintf("wbcast: p%d delivers %s with gts %s after %s (INV-8)", p.id, r.m.ID, r.gts, p.maxDelivered))
	}
	prev := p.maxDelivered
	r.issued = true
	r.phase = wire.PhaseCommitted
	p.maxDelivered = r.gts
	p.clock = max(p.clock, r.gts.T)
	p.dlog = append(p.dlog, logEntry{gts: r.gts, prev: prev, r: r})
	p.deliverDurable(r.m, r.gts, &wire.RecDelivered{M: r.m, LTS: r.lts, GTS: r.gts})
	r.durDelivered()
}

// onDeliver is H5 at a follower, with the chain check: a DELIVER is taken
// only if it directly follows this process's last delivery.
func (p *Process) onDeliver(from wire.ProcID, d *wire.Deliver) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g || d.B.Leader() != from {
		return p.rejects.Reject("wrong_sender", "DELIVER with ballot %s from p%d", d.B, from)
	}
	if d.M != nil {
		if d.M.ID != d.ID {
			return p.rejects.Reject("invalid_message", "DELIVER %s carries message %s", d.ID, d.M.ID)
		}
		if _, err := p.checkKnown(d.M); err != nil {
			return err
		}
	}
	// The leader's lts for the message is its group's (P7), at or below the
	// gts; the chain's previous delivery is below it (INV-8).
	if err := p.checkLTS("DELIVER", d.ID, d.LTS, p.g); err != nil {
		return err
	}
	if d.GTS.Less(d.LTS) || !d.Prev.Less(d.GTS) || d.GTS.T >= maxClock || int(d.GTS.G) >= p.topo.NumGroups() {
		return p.rejects.Reject("bad_timestamp", "DELIVER %s with lts %s, gts %s, previous %s", d.ID, d.LTS, d.GTS, d.Prev)
	}
	r := p.recs[d.ID]
	if r != nil && r.known && r.m.DestIndex(d.GTS.G) < 0 {
		return p.rejects.Reject("bad_timestamp", "DELIVER %s with gts %s of a group that is not a destination", d.ID, d.GTS)
	}
	p.raiseLinf(p.g, d.Linf)
	if p.status != Follower || d.B != p.cballot {
		return nil
	}
	if d.GTS.LessEq(p.maxDelivered) || (d.Prev != p.maxDelivered && !p.mut(MutSkipDeliverChain)) {
		return nil // a duplicate, or a gap (the leader's catch-up fills it)
	}
	if r == nil || !r.known {
		if d.M == nil {
			return nil // P9: no payload here; wait for a catch-up carrying it
		}
		r = p.rec(d.ID)
		p.learn(r, d.M)
	}
	r.lts, r.gts = d.LTS, d.GTS
	p.deliverLocal(r)
	return nil
}

// raiseLinf records that every member of group g delivered everything
// addressed to g up to ts.
func (p *Process) raiseLinf(g wire.GroupID, ts wire.Timestamp) {
	if int(g) < len(p.linf) && p.linf[g].Less(ts) {
		p.linf[g] = ts
	}
}
