package wbcast

import (
	"fmt"
	"slices"

	"github.com/weft-dev/weft/amcast/internal/tsheap"
	"github.com/weft-dev/weft/wire"
)

// candidate is the state of a process establishing its own ballot.
type candidate struct {
	b         wire.Ballot
	start     uint64
	acks      map[wire.ProcID]*wire.NewLeaderAck
	stateAcks uint64 // member-index bitmask of NEW_STATE_ACKs (self included)
}

// startBallot is H6: propose a ballot led by this process, higher than any
// it has joined, to every member of the group (itself included).
func (p *Process) startBallot() { p.startBallotAbove(p.ballot) }

// startBallotAbove starts a ballot higher than both cur and p.ballot.
func (p *Process) startBallotAbove(cur wire.Ballot) {
	b := wire.Ballot{N: max(p.ballot.N, cur.N) + 1, P: p.id}
	p.lastStart, p.started = p.ticks, true
	p.cov.BallotsStarted++
	p.sendGroup(p.g, &wire.NewLeader{B: b})
}

// stepDown leaves the leader role: the delivery queues are rebuilt if this
// process leads again.
func (p *Process) stepDown() {
	if p.status == Leader {
		p.pending.Reset()
		p.committed.Reset()
	}
	p.status = Follower
}

// onNewLeader is H7: join a higher ballot, stop acking (P10) and report this
// process's state to the candidate.
func (p *Process) onNewLeader(from wire.ProcID, nl *wire.NewLeader) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g || nl.B.Leader() != from {
		return p.rejects.Reject("wrong_sender", "NEW_LEADER %s from p%d", nl.B, from)
	}
	if !p.ballot.Less(nl.B) {
		return nil // stale or duplicate
	}
	p.stepDown()
	p.ballot = nl.B
	p.status = Recovering
	p.joinedAt = p.ticks
	p.cand = nil
	if from == p.id {
		p.cand = &candidate{b: nl.B, start: p.ticks, acks: map[wire.ProcID]*wire.NewLeaderAck{}}
	}
	p.persist(&wire.RecBallot{Ballot: p.ballot, CBallot: p.cballot}) // the promise, before the ack
	p.send(from, &wire.NewLeaderAck{B: nl.B, CBallot: p.cballot, Clock: p.clock, MaxDelivered: p.maxDelivered, State: p.snapshot()})
	return nil
}

// snapshot lists this process's ACCEPTED and COMMITTED messages, leaving
// out those the whole group has delivered (gts <= linf of the group).
func (p *Process) snapshot() []wire.MsgState {
	var st []wire.MsgState
	for _, id := range p.sortedIDs() {
		r := p.recs[id]
		if !r.known || r.phase < wire.PhaseAccepted {
			continue
		}
		if r.issued && r.gts.LessEq(p.linf[p.g]) {
			continue
		}
		st = append(st, p.msgState(r))
	}
	return st
}

// onNewLeaderAck is H8 at the candidate: with a quorum of acks, merge the
// states of the acks with the highest cballot (highest phase per message),
// take the clock max over the quorum, adopt and send NEW_STATE.
func (p *Process) onNewLeaderAck(from wire.ProcID, a *wire.NewLeaderAck) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g {
		return p.rejects.Reject("wrong_sender", "NEW_LEADER_ACK from p%d outside group %d", from, p.g)
	}
	if err := p.checkPromise("NEW_LEADER_ACK", a.B, a.CBallot); err != nil {
		return err
	}
	if err := p.checkClock("NEW_LEADER_ACK", a.Clock); err != nil {
		return err
	}
	c := p.cand
	if c == nil || p.status != Recovering || a.B != c.b || p.ballot != c.b || p.cballot == c.b {
		return nil
	}
	if _, dup := c.acks[from]; dup {
		return nil
	}
	if err := p.checkState("NEW_LEADER_ACK", a.State); err != nil {
		return err
	}
	if err := p.checkMerge(c, a); err != nil {
		return err
	}
	c.acks[from] = a
	p.peers[p.topo.MemberIndex(from)].maxDelivered = wire.MaxTS(p.peers[p.topo.MemberIndex(from)].maxDelivered, a.MaxDelivered)
	if len(c.acks) < p.topo.Quorum(p.g) {
		return nil
	}
	var cmax wire.Ballot
	clock := p.clock
	for _, x := range c.acks {
		if cmax.Less(x.CBallot) {
			cmax = x.CBallot
		}
		clock = max(clock, x.Clock)
	}
	merged := map[wire.MsgID]*wire.MsgState{}
	senders := make([]wire.ProcID, 0, len(c.acks))
	for q := range c.acks {
		senders = append(senders, q)
	}
	slices.Sort(senders) // deterministic merge order
	for _, q := range senders {
		x := c.acks[q]
		if x.CBallot != cmax && !p.mut(MutMergeAllCBallots) {
			continue // P11: only the most recently synchronised members count
		}
		for i := range x.State {
			s := &x.State[i]
			cur := merged[s.M.ID]
			switch {
			case cur == nil:
				cp := *s
				cp.Ballots = slices.Clone(s.Ballots)
				cp.LTSs = slices.Clone(s.LTSs)
				merged[s.M.ID] = &cp
			case s.Phase > cur.Phase:
				bs, ls := cur.Ballots, cur.LTSs
				*cur = *s
				cur.Ballots, cur.LTSs = bs, ls
				mergeAcc(cur, s)
			default:
				if s.Phase == cur.Phase && s.LTS != cur.LTS && !(s.Phase == wire.PhaseCommitted && s.GTS == cur.GTS) {
					panic(fmt.Sprintf("wbcast: p%d merging %s: local timestamps %s and %s at cballot %s (INV-4)", p.id, s.M.ID, cur.LTS, s.LTS, cmax))
				}
				// Both panics are unreachable from input: checkMerge refused
				// any ack that disagrees with one of the same cballot.
				if s.Phase == wire.PhaseCommitted && s.GTS != cur.GTS {
					panic(fmt.Sprintf("wbcast: p%d merging %s: committed with %s and %s (INV-5)", p.id, s.M.ID, cur.GTS, s.GTS))
				}
				mergeAcc(cur, s)
			}
		}
	}
	state := make([]wire.MsgState, 0, len(merged))
	for _, s := range merged {
		state = append(state, *s)
	}
	slices.SortFunc(state, func(a, b wire.MsgState) int { return a.M.ID.Compare(b.M.ID) })
	p.cballot = c.b
	p.adopt(c.b, clock, state)
	c.stateAcks = 1 << p.gi
	ns := &wire.NewState{B: c.b, Clock: p.clock, State: state}
	for _, q := range p.topo.Members(p.g) {
		if q != p.id {
			p.send(q, ns)
		}
	}
	if popcount(c.stateAcks) >= p.topo.Quorum(p.g) {
		p.becomeLeader()
	}
	return nil
}

// mergeAcc folds s's per-group ACCEPTs into cur, keeping the higher ballot
// for each destination group.
func mergeAcc(cur, s *wire.MsgState) {
	if len(cur.Ballots) != len(s.Ballots) || len(cur.LTSs) != len(s.LTSs) {
		return
	}
	for i := range s.Ballots {
		if cur.Ballots[i].Less(s.Ballots[i]) || (cur.LTSs[i].IsZero() && !s.LTSs[i].IsZero()) {
			cur.Ballots[i], cur.LTSs[i] = s.Ballots[i], s.LTSs[i]
		}
	}
}

// adopt installs a new leader's state (H8.10-H8.11 at the candidate, H9 at
// members): phases and timestamps are replaced wholesale (missing messages
// go back to START), while deliveries, payloads and other groups' ACCEPTs
// are kept; the own group's ACCEPT bookkeeping and all ack tallies are
// dropped (the new leader's retry provides them again).
func (p *Process) adopt(b wire.Ballot, clock uint64, state []wire.MsgState) {
	p.clock = max(p.clock, clock)
	in := make(map[wire.MsgID]bool, len(state))
	for i := range state {
		s := &state[i]
		if p.done.has(s.M.ID) {
			continue // delivered here and collected
		}
		in[s.M.ID] = true
		r := p.rec(s.M.ID)
		p.learnState(r, &s.M)
		r.since = p.ticks
		if !r.issued {
			// Unreachable from input: checkState refused such an entry in the
			// NEW_STATE or NEW_LEADER_ACK it came in.
			if s.Phase == wire.PhaseCommitted && s.GTS.LessEq(p.maxDelivered) {
				panic(fmt.Sprintf("wbcast: p%d: committed %s at %s is below its last delivery %s but was not delivered (INV-8)", p.id, s.M.ID, s.GTS, p.maxDelivered))
			}
			r.phase, r.lts, r.gts = s.Phase, s.LTS, s.GTS
			if !p.mut(MutSkipAcceptClock) { // H2.11 for state learnt in recovery
				p.clock = max(p.clock, s.GTS.T)
			}
		}
		if len(s.Ballots) == len(r.acc) && len(s.LTSs) == len(r.acc) {
			for j := range r.acc {
				if s.LTSs[j].IsZero() {
					continue
				}
				if e := &r.acc[j]; !e.ok || e.b.Less(s.Ballots[j]) {
					if !e.ok {
						r.nacc++
					}
					*e = accEntry{b: s.Ballots[j], lts: s.LTSs[j], ok: true}
				}
			}
		}
	}
	for id, r := range p.recs {
		if !in[id] && !r.issued {
			r.phase, r.lts, r.gts = wire.PhaseStart, wire.Timestamp{}, wire.Timestamp{}
		}
		if r.known {
			if j := r.m.DestIndex(p.g); r.acc[j].ok {
				r.acc[j] = accEntry{}
				r.nacc--
			}
		}
		r.ackB, r.ackFrom = nil, nil
	}
	p.persist(&wire.RecNewState{B: b, Clock: p.clock, State: state})
}

// onNewState is H9 at a member: adopt the new leader's state and confirm.
// A leader also re-sends NEW_STATE (its current state) to a member whose
// heartbeat shows it missed the recovery; members that already adopted the
// ballot ignore it, so a re-sent state never overwrites acks given under it.
func (p *Process) onNewState(from wire.ProcID, ns *wire.NewState) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g || ns.B.Leader() != from {
		return p.rejects.Reject("wrong_sender", "NEW_STATE %s from p%d", ns.B, from)
	}
	if ns.B.Less(p.ballot) || !p.cballot.Less(ns.B) {
		return nil
	}
	if err := p.checkClock("NEW_STATE", ns.Clock); err != nil {
		return err
	}
	if err := p.checkState("NEW_STATE", ns.State); err != nil {
		return err
	}
	p.stepDown()
	p.ballot, p.cballot = ns.B, ns.B
	p.status = Follower
	p.cand = nil
	p.adopt(ns.B, ns.Clock, ns.State)
	p.send(from, &wire.NewStateAck{B: ns.B, MaxDelivered: p.maxDelivered})
	p.replayDeferred()
	return nil
}

// onNewStateAck is H10 at the candidate: with a quorum, lead.
func (p *Process) onNewStateAck(from wire.ProcID, a *wire.NewStateAck) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g {
		return p.rejects.Reject("wrong_sender", "NEW_STATE_ACK from p%d outside group %d", from, p.g)
	}
	if err := p.checkBallot("NEW_STATE_ACK", a.B); err != nil {
		return err
	}
	i := p.topo.MemberIndex(from)
	pr := &p.peers[i]
	if a.B == p.cballot {
		pr.cballot = a.B
		pr.maxDelivered = wire.MaxTS(pr.maxDelivered, a.MaxDelivered)
	}
	c := p.cand
	if c == nil || a.B != c.b || p.cballot != c.b || p.status != Recovering {
		if p.status == Leader && a.B == p.cballot {
			p.catchUp(i)
		}
		return nil
	}
	c.stateAcks |= 1 << i
	if popcount(c.stateAcks) >= p.topo.Quorum(p.g) {
		p.becomeLeader()
	}
	return nil
}

// becomeLeader ends recovery (H10): rebuild the delivery queues, retry
// every ACCEPTED message with its old local timestamp (P3), re-issue
// committed ones in gts order, catch followers up, resume.
func (p *Process) becomeLeader() {
	p.status = Leader
	p.cand = nil
	p.cov.LeaderChanges++
	p.pending.Reset()
	p.committed.Reset()
	var retry []*record
	for _, id := range p.sortedIDs() {
		r := p.recs[id]
		if r.issued || !r.known {
			continue
		}
		switch r.phase {
		case wire.PhaseAccepted:
			if p.mut(MutFreshRetryLTS) { // P3 broken
				p.clock++
				r.lts = wire.Timestamp{T: p.clock, G: p.g}
			}
			p.pending.Push(tsheap.Entry{TS: r.lts, ID: id})
			retry = append(retry, r)
		case wire.PhaseCommitted:
			p.committed.Push(tsheap.Entry{TS: r.gts, ID: id})
			retry = append(retry, r) // other groups may still need our acks
		}
	}
	for _, r := range retry {
		if r.phase == wire.PhaseAccepted {
			p.cov.RecoveriesWithAccepted++
			break
		}
	}
	slices.SortFunc(retry, func(a, b *record) int { return a.lts.Compare(b.lts) })
	for _, r := range retry {
		r.since = p.ticks
		p.cov.Retried++
		p.sendAccept(r)
	}
	p.tryDeliver()
	for i, q := range p.topo.Members(p.g) {
		if q != p.id && p.peers[i].cballot == p.cballot {
			p.catchUp(i)
		}
	}
	p.replayDeferred()
}
