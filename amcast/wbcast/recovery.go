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
	acks      map[wire.ProcID]*wire.NewLeaderAck // complete acks: every page arrived
	partial   map[wire.ProcID]*ackInbound        // acks whose pages are arriving
	stateAcks uint64                             // member-index bitmask of NEW_STATE_ACKs (self included)
}

// ackInbound is a member's NEW_LEADER_ACK arriving in pages: the first
// page's fields, which every later page must repeat, and the state so far.
type ackInbound struct {
	hdr wire.NewLeaderAck
	inbound
}

// stateInbound is the new leader's NEW_STATE arriving in pages at a member.
type stateInbound struct {
	b     wire.Ballot
	clock uint64
	inbound
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
	if nl.B == p.ballot && p.status == Recovering && p.cballot.Less(nl.B) && from != p.id {
		// The candidate lost a page of this member's ack (a gap, paging.go)
		// and asks again. The promise stands, and a RECOVERING member's
		// state does not change (P10): the ack is the same.
		p.sendAck(from, nl.B)
		return nil
	}
	if !p.ballot.Less(nl.B) {
		return nil // stale or duplicate
	}
	p.stepDown()
	p.ballot = nl.B
	p.status = Recovering
	p.joinedAt = p.ticks
	p.cand = nil
	p.stateIn = nil // a lower ballot's NEW_STATE can no longer be adopted
	if from == p.id {
		p.cand = &candidate{b: nl.B, start: p.ticks, acks: map[wire.ProcID]*wire.NewLeaderAck{},
			partial: map[wire.ProcID]*ackInbound{}}
	}
	p.persist(&wire.RecBallot{Ballot: p.ballot, CBallot: p.cballot}) // the promise, before the ack
	p.sendAck(from, nl.B)
	return nil
}

// sendAck is H7.4: this process's promise for ballot b with its state, in
// pages under the byte budget (paging.go).
func (p *Process) sendAck(to wire.ProcID, b wire.Ballot) {
	hdr := wire.NewLeaderAck{B: b, CBallot: p.cballot, Clock: p.clock, MaxDelivered: p.maxDelivered, Linf: wire.MaxTS(p.linf[p.g], p.ackFloor)}
	for _, pg := range p.paginate(p.snapshot(), pageHeader(&hdr)) {
		a := hdr
		a.State, a.Paged = pg.state, pg.Paged
		p.send(to, &a)
	}
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
// take the clock max over the quorum, adopt and send NEW_STATE. A member's
// ack counts once all its pages arrived (paging.go).
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
	full, err := p.collectAck(c, from, a)
	if full == nil {
		return err
	}
	c.acks[from] = full
	p.peers[p.topo.MemberIndex(from)].maxDelivered = full.MaxDelivered // its latest report (peerReport)
	if len(c.acks) < p.topo.Quorum(p.g) {
		return nil
	}
	var cmax wire.Ballot
	var floor wire.Timestamp // the highest Linf this quorum reported
	clock := p.clock
	for _, x := range c.acks {
		if cmax.Less(x.CBallot) {
			cmax = x.CBallot
		}
		clock = max(clock, x.Clock)
		// Not raiseLinf: a member's Linf may be its last delivery at a
		// restart (ackFloor), which bounds what it collected but is no
		// group floor; taken for one, it would let this process (and,
		// through its messages, every process) collect what members have
		// not delivered (swarm seed 300768 with forged clients: late
		// copies then delivered twice).
		floor = wire.MaxTS(floor, x.Linf)
	}
	p.ackedFloor = wire.MaxTS(p.ackedFloor, floor)
	if (p.behind() || p.maxDelivered.Less(floor)) && !p.mut(MutLeadBehind) {
		// Members left out of their states what they delivered below their
		// floor, which this candidate never delivered: it cannot lead. It
		// gives the ballot up; the group's next successor passes it over
		// and its leader sends it a SNAPSHOT (transfer.go). Only this
		// quorum's reports count: the merge holds this quorum's states,
		// and every message one of them left out is below the floor it
		// reports here. A floor an earlier quorum reported (ackedFloor,
		// kept for the restart rule and for reads) may come from members
		// now gone for good, whose omissions do not reach this merge:
		// counting it made every live candidate give up for ever (swarm
		// seed 311782 with collection by a quorum, 2 of 5 members down for
		// good: a livelock).
		p.cand = nil
		p.cov.BallotsAbandoned++
		return nil
	}
	senders := make([]wire.ProcID, 0, len(c.acks))
	for q := range c.acks {
		senders = append(senders, q)
	}
	slices.Sort(senders) // deterministic merge order
	var states, commits [][]wire.MsgState
	for _, q := range senders {
		// P11: only the most recently synchronised members count, but for
		// what they committed (commitsOf).
		if x := c.acks[q]; x.CBallot == cmax || p.mut(MutMergeAllCBallots) {
			states = append(states, x.State)
		} else if cs := commitsOf(x.State); len(cs) > 0 {
			commits = append(commits, cs)
		}
	}
	// The highest cballot's states first: a commit from a lower one then
	// only raises an entry's phase (mergeStates folds in list order).
	state := p.mergeStates(append(states, commits...), cmax)
	c.acks, c.partial = nil, nil // the merged state replaces them (memory)
	p.cballot = c.b
	p.adopt(c.b, clock, state)
	c.stateAcks = 1 << p.gi
	pages := p.statePages(state)
	for i := range p.topo.Members(p.g) {
		if i != p.gi {
			p.sendState(i, pages)
		}
	}
	if popcount(c.stateAcks) >= p.topo.Quorum(p.g) {
		p.becomeLeader()
	}
	return nil
}

// collectAck adds a page of from's NEW_LEADER_ACK and returns the whole ack
// once its last page arrived (nil before). A page that does not follow the
// previous one (a gap) drops the partial ack and asks the member for it
// again.
func (p *Process) collectAck(c *candidate, from wire.ProcID, a *wire.NewLeaderAck) (*wire.NewLeaderAck, error) {
	in := c.partial[from]
	switch {
	case a.Page == 0:
		in = &ackInbound{hdr: *a}
		in.hdr.State, in.hdr.Paged = nil, wire.Paged{}
	case in == nil || !in.follows(a.Paged):
		if in != nil {
			// A page was lost (e.g. on a link reset): drop the partial ack
			// and ask the member again (onNewLeader re-sends it). The rest
			// of the broken set is ignored (in is nil then).
			delete(c.partial, from)
			p.send(from, &wire.NewLeader{B: c.b})
		}
		return nil, nil
	case a.CBallot != in.hdr.CBallot || a.Clock != in.hdr.Clock || a.MaxDelivered != in.hdr.MaxDelivered || a.Linf != in.hdr.Linf:
		return nil, p.rejects.Reject("page_mismatch", "NEW_LEADER_ACK %s page %d from p%d: cballot %s clock %d maxd %s, page 0 had %s %d %s",
			a.B, a.Page, from, a.CBallot, a.Clock, a.MaxDelivered, in.hdr.CBallot, in.hdr.Clock, in.hdr.MaxDelivered)
	}
	size := wire.Size(a)
	if from == p.id {
		size = 0 // its own state is in memory already: not bounded
	} else if err := p.checkPage(&in.inbound, a.Paged, a.State, size, "NEW_LEADER_ACK"); err != nil {
		return nil, err
	}
	if err := p.checkState("NEW_LEADER_ACK", a.State); err != nil {
		return nil, err
	}
	if a.More {
		in.add(a.Paged, a.State, size)
		c.partial[from] = in
		return nil, nil
	}
	// The last page: the whole ack must agree with the acks held, checked
	// before anything changes, so a refused page leaves the partial ack as
	// it was (appending into spare capacity does not change it).
	full := in.hdr
	full.State = a.State
	if len(in.state) > 0 {
		full.State = append(in.state, a.State...)
	}
	if err := p.checkMerge(c, &full); err != nil {
		return nil, err
	}
	delete(c.partial, from)
	return &full, nil
}

// mergeStates is H8.5-H8.8: the union of the given states (each sorted by
// id, checked on arrival), the highest phase of each message winning, the
// per-group ACCEPTs folded in (mergeAcc). A sorted k-way merge: linear in
// the entries, no map, which matters with 100,000 messages per member.
func (p *Process) mergeStates(states [][]wire.MsgState, cmax wire.Ballot) []wire.MsgState {
	total := 0
	for _, st := range states {
		total = max(total, len(st))
	}
	merged := make([]wire.MsgState, 0, total)
	pos := make([]int, len(states))
	for {
		// The lowest id at the head of any list; its entries are folded in
		// list (sender) order.
		var low *wire.MsgID
		for k, st := range states {
			if pos[k] < len(st) && (low == nil || st[pos[k]].M.ID.Less(*low)) {
				low = &st[pos[k]].M.ID
			}
		}
		if low == nil {
			return merged
		}
		id := *low
		var cur *wire.MsgState
		for k, st := range states {
			if pos[k] >= len(st) || st[pos[k]].M.ID != id {
				continue
			}
			s := &st[pos[k]]
			pos[k]++
			switch {
			case cur == nil:
				merged = append(merged, *s)
				cur = &merged[len(merged)-1]
				cur.Ballots = slices.Clone(s.Ballots)
				cur.LTSs = slices.Clone(s.LTSs)
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
}

// commitsOf returns the committed entries of a lower cballot's state.
//
// A commit is a decision: its gts is final under every ballot (INV-5), so
// the merge may learn it from any member, however stale its other entries.
// It must, as groups collect by a quorum (unless Config.CollectAfterAll): a
// message committed here under an earlier ballot, that this group's quorum
// then delivered, may be carried by the highest cballot's states only as
// ACCEPTED (the recovery that made that cballot saw its acceptance, not its
// commit). Re-running its ACCEPT phase needs every destination group's
// local timestamp again, and a group that collected the message has
// forgotten it: it would take the message for a new one and propose
// another timestamp, a second gts for one message (swarm seed 509452 with
// forged clients). A member of this quorum delivered it (the quorum that
// delivered it and this one intersect); unless that member collected it
// too (then its floor makes this candidate give up if it is behind,
// transfer.go), its ack lists the message as COMMITTED.
func commitsOf(st []wire.MsgState) []wire.MsgState {
	var out []wire.MsgState
	for i := range st {
		if st[i].Phase == wire.PhaseCommitted {
			out = append(out, st[i])
		}
	}
	return out
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
		if p.deliveredHere(s) {
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
		foldAccepts(r, s)
		if !p.mut(MutImageSkipsAdopt) {
			r.durAdopted(s, b)
		}
	}
	for id, r := range p.recs {
		if !in[id] && !r.issued {
			r.phase, r.lts, r.gts = wire.PhaseStart, wire.Timestamp{}, wire.Timestamp{}
		}
		if !in[id] && !r.dur.delivered {
			r.durForget()
		}
		if r.known {
			if j := r.m.DestIndex(p.g); r.acc[j].ok {
				r.acc[j] = accEntry{}
				r.nacc--
			}
		}
		r.ackB, r.ackFrom = nil, nil
	}
	// In pages, like NEW_STATE: one record of 100,000 messages would pass
	// the log's record limit. The store applies the state at its last page.
	hdr := wire.RecNewState{B: b, Clock: p.clock}
	p.durClock = max(p.durClock, p.clock)
	for _, pg := range p.paginate(state, pageHeader(&hdr)) {
		rec := hdr
		rec.State, rec.Paged = pg.state, pg.Paged
		p.persist(&rec)
	}
}

// onNewState is H9 at a member: adopt the new leader's state and confirm.
// A leader also re-sends NEW_STATE (its current state) to a member whose
// heartbeat shows it missed the recovery; members that already adopted the
// ballot ignore it, so a re-sent state never overwrites acks given under it.
// The state is adopted only once all its pages arrived (paging.go).
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
	state, done, err := p.collectState(ns)
	if !done {
		return err
	}
	p.stepDown()
	p.ballot, p.cballot = ns.B, ns.B
	p.status = Follower
	p.cand = nil
	p.adopt(ns.B, ns.Clock, state)
	p.rejoined() // a member that lost its disk is a follower again (amnesia.go)
	p.send(from, &wire.NewStateAck{B: ns.B, MaxDelivered: p.maxDelivered})
	p.replayDeferred()
	return nil
}

// collectState adds a page of a NEW_STATE and returns the whole state
// (done) once its last page arrived. A gap drops the partial state: the new
// leader re-sends its state to a member whose heartbeat shows it missed the
// recovery.
func (p *Process) collectState(ns *wire.NewState) (state []wire.MsgState, done bool, err error) {
	in := p.stateIn
	switch {
	case ns.Page == 0:
		in = &stateInbound{b: ns.B, clock: ns.Clock}
	case in == nil || !in.follows(ns.Paged) || in.b != ns.B:
		p.stateIn = nil
		return nil, false, nil
	case ns.Clock != in.clock:
		return nil, false, p.rejects.Reject("page_mismatch", "NEW_STATE %s page %d: clock %d, page 0 had %d", ns.B, ns.Page, ns.Clock, in.clock)
	}
	size := wire.Size(ns)
	if err := p.checkPage(&in.inbound, ns.Paged, ns.State, size, "NEW_STATE"); err != nil {
		return nil, false, err
	}
	if err := p.checkState("NEW_STATE", ns.State); err != nil {
		return nil, false, err
	}
	if !in.add(ns.Paged, ns.State, size) {
		p.stateIn = in
		return nil, false, nil
	}
	p.stateIn = nil
	return in.state, true, nil
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
		pr.maxDelivered = a.MaxDelivered // its latest report (peerReport)
	}
	c := p.cand
	if c == nil || a.B != c.b || p.cballot != c.b || p.status != Recovering {
		if p.status == Leader && a.B == p.cballot {
			p.catchUp(i, true)
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
			p.pending.Push(tsheap.Entry[*record]{TS: r.lts, ID: id, Ref: r})
			retry = append(retry, r)
		case wire.PhaseCommitted:
			p.committed.Push(tsheap.Entry[*record]{TS: r.gts, ID: id, Ref: r})
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
			p.catchUp(i, true)
		}
	}
	p.replayDeferred()
}
