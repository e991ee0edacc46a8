package wbcast

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weft-dev/weft/wire"
)

// Fingerprint renders every field of p's state, volatile ones included, in
// a deterministic form: tests compare it before and after an input that
// must leave the process unchanged (a refused one, Step's contract).
func Fingerprint(p *Process) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status=%s ballot=%s cballot=%s clock=%d ticks=%d maxd=%s linf=%v\n",
		p.status, p.ballot, p.cballot, p.clock, p.ticks, p.maxDelivered, p.linf)
	fmt.Fprintf(&b, "dlog=%v sessions=%+v pending=%d committed=%d deferred=%d local=%d\n",
		p.dlog, p.sess.records(), p.pending.Len(), p.committed.Len(), len(p.deferred), len(p.local))
	for _, cd := range p.sess.records() {
		s := p.sess.m[wire.SessionKey{Client: cd.Client, Session: cd.Session}]
		fmt.Fprintf(&b, "session %d@%x live=%d last=%d done=%v\n", cd.Client, cd.Session, s.live, s.last, s.done.String())
	}
	fmt.Fprintf(&b, "peers=%+v joined=%d lastStart=%d started=%v cov=%+v detector=%+v\n",
		p.peers, p.joinedAt, p.lastStart, p.started, p.cov, p.cfg.Detector)
	if c := p.cand; c != nil {
		var from []wire.ProcID
		for q := range c.acks {
			from = append(from, q)
		}
		slices.Sort(from)
		fmt.Fprintf(&b, "cand b=%s start=%d acks=%v stateAcks=%b\n", c.b, c.start, from, c.stateAcks)
	}
	for _, id := range p.sortedIDs() {
		r := p.recs[id]
		fmt.Fprintf(&b, "%s known=%v dest=%v payload=%q phase=%s lts=%s gts=%s acc=%+v nacc=%d issued=%v since=%d acceptAt=%d ackB=%v ackGTS=%s ackFrom=%v\n",
			id, r.known, r.m.Dest, r.m.Payload, r.phase, r.lts, r.gts, r.acc, r.nacc, r.issued, r.since, r.acceptAt, r.ackB, r.ackGTS, r.ackFrom)
	}
	return b.String()
}

// ReadWithoutQuorum breaks the read index on purpose (test only): p
// releases reads at once, without confirming its leadership.
func ReadWithoutQuorum(p *Process) { p.ri.noQuorum = true }

// Records is the number of message records p holds (delivered or not).
func Records(p *Process) int { return len(p.recs) }
