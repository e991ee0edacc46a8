package wbcast

import (
	"sort"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// Tick implements amcast.Machine: heartbeats, failure detection and
// elections, liveness re-multicasts (H12) and garbage collection.
func (p *Process) Tick() {
	p.ticks++
	p.deliveredAt[p.ticks%uint64(len(p.deliveredAt))] = p.maxDelivered // stalled
	if p.amn != nil {
		p.tickAmnesiac() // inert until it rejoined (amnesia.go)
		p.drainLocal()
		return
	}
	p.releaseHeld() // MutSendBeforePersist only
	if p.ticks%uint64(p.cfg.HeartbeatTicks) == 0 {
		p.heartbeat()
	}
	p.checkLeadership()
	p.tickHandOver()
	if p.ticks%uint64(max(p.cfg.RetryTicks/2, 1)) == 0 {
		p.remulticast()
	}
	if p.ticks%4 == 0 {
		p.collect()
	}
	if p.ticks%uint64(max(p.cfg.SessionTicks/forgetPasses, 1)) == 0 {
		p.forget()
	}
	p.drainLocal()
	p.checkReads()
}

// claimsLead reports whether this process leads or is establishing its
// ballot; its heartbeats say so.
func (p *Process) claimsLead() bool {
	return p.status == Leader || (p.status == Recovering && p.cand != nil)
}

func (p *Process) heartbeat() {
	if p.status == Leader && !p.holding() {
		// Not while handing over: the floor stays where the successor's
		// DELIVERs put it (handover.go, "The floor").
		p.updateGroupLinf()
	}
	hb := &wire.Heartbeat{B: p.ballot, CBallot: p.cballot, Leader: p.claimsLead(), MaxDelivered: p.maxDelivered, Linf: p.linf[p.g]}
	for _, q := range p.topo.Members(p.g) {
		if q != p.id {
			p.send(q, hb)
		}
	}
}

// onHeartbeat records a member's progress. The leader uses it to catch
// lagging members up (re-sending DELIVERs, or its state to a member that
// missed the recovery) and to compute the group's delivered floor.
func (p *Process) onHeartbeat(from wire.ProcID, hb *wire.Heartbeat) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g || from == p.id {
		return p.rejects.Reject("wrong_sender", "HEARTBEAT from p%d outside group %d", from, p.g)
	}
	if err := p.checkPromise("HEARTBEAT", hb.B, hb.CBallot); err != nil {
		return err
	}
	i := p.topo.MemberIndex(from)
	pr := &p.peers[i]
	if pr.heardHB && pr.maxDelivered == hb.MaxDelivered && p.stalled(hb.MaxDelivered) {
		pr.stuckReports++
	} else {
		pr.stuckReports = 0
	}
	pr.heardHB = true
	pr.cballot = hb.CBallot
	pr.ballot = hb.B
	pr.claimsLead = hb.Leader && hb.B.Leader() == from
	// The latest report, not the highest: links are FIFO, so a member's
	// reports arrive in order, and one that lost its disk and rejoined
	// reports less than before (a delayed report of its old incarnation
	// precedes its new ones). The highest would have the leader catch it
	// up along a chain it no longer has, for ever.
	pr.maxDelivered = hb.MaxDelivered
	pr.rejoining = false
	p.raiseLinf(p.g, hb.Linf)
	if p.status != Leader {
		return nil
	}
	switch {
	case hb.CBallot.Less(p.cballot) && !p.ballot.Less(hb.B):
		// It missed this ballot's NEW_STATE: send the current state (unless
		// a large one is still on its way, sendState).
		if (!pr.stateSent || p.ticks >= pr.stateAt+uint64(p.cfg.ElectionTicks)/2) && p.ticks >= pr.stateBusy {
			pr.stateSent, pr.stateAt = true, p.ticks
			p.sendState(i, p.statePages(p.snapshot()))
		}
	case hb.CBallot == p.cballot && p.stalled(hb.MaxDelivered):
		// Behind what it should have had for a while: DELIVERs were lost
		// (not merely in flight). Re-send them with their payloads.
		if !pr.caughtUp || p.ticks >= pr.catchAt+2 {
			p.catchUp(i, pr.stuckReports >= snapshotReports)
		}
	}
	return nil
}

// catchUpTicks is how long a DELIVER may take to reach a member before
// its leader takes it for lost.
const catchUpTicks = 4

// snapshotReports is how many heartbeats in a row must report the same
// delivery as the one before them, each stalled, before a leader that
// cannot re-send what follows it sends a SNAPSHOT instead (catchUp).
const snapshotReports = 3

// stalled reports whether a member whose heartbeat reports its last
// delivery at is below what this process had delivered catchUpTicks ago:
// the DELIVERs up to there were sent long enough ago to have arrived, so
// some were lost. The leader uses it to catch members up, every member to
// judge whether a member is behind (peerBehind).
//
// The rule before this one took a member whose two last heartbeats
// reported the same delivery for stalled. Under load that was routine: a
// group delivers in bursts (a message that commits releases those its
// delivery rule held behind it), a member heard between two bursts
// reports no progress though nothing was lost, and the leader, a burst
// ahead, re-sent DELIVERs already in flight, or, once collection had
// passed them, a SNAPSHOT of its whole delivered prefix and session table
// (built on its loop). On real processes at 90 clients each leader ran
// 13-15 catch-ups a second (1 in 36 s with this rule), and SNAPSHOTs took
// 3.6% of a leader's CPU.
func (p *Process) stalled(at wire.Timestamp) bool {
	if p.ticks < catchUpTicks {
		return false
	}
	return at.Less(p.deliveredAt[(p.ticks-catchUpTicks)%uint64(len(p.deliveredAt))])
}

// catchUp re-sends, with payloads, the DELIVERs that follow member i's
// last reported delivery, along this incarnation's delivery chain: at most
// CatchUpBatch of them and MaxMsgBytes in all per round (at least one), so
// a member far behind is caught up over rounds instead of by a burst the
// size of the backlog. A member whose last delivery is no link of the
// chain, or whose next delivery was collected (the floor passed it), gets
// a SNAPSHOT instead (transfer.go), if snapshot is set.
//
// The heartbeat path sets it only once snapshotReports heartbeats in a
// row reported the same stalled delivery. A member that was merely slow (a
// compaction, or its process descheduled, for longer than catchUpTicks)
// sends, when it resumes, a heartbeat reporting where it stopped, before
// it steps the DELIVERs queued behind it; with the floor past that point
// the leader sent it its whole delivered prefix and session table, built
// on the leader's loop, which it then ignored, having caught up from its
// queue: on real processes at 90 shared workers, 15 and 18 SNAPSHOTs in
// 45 s from the two loaded leaders, none installed. Its next heartbeats
// report progress. A member that did lose DELIVERs reports the same
// delivery on every heartbeat, and gets its SNAPSHOT at its third stalled
// report instead of its first; the quorum orders and delivers meanwhile.
// A new leader's catch-ups (recovery) send it at once.
func (p *Process) catchUp(i int, snapshot bool) {
	pr := &p.peers[i]
	q := p.topo.Members(p.g)[i]
	if q == p.id || !pr.maxDelivered.Less(p.maxDelivered) {
		return
	}
	pr.caughtUp, pr.catchAt = true, p.ticks
	k := sort.Search(len(p.dlog), func(j int) bool { return pr.maxDelivered.Less(p.dlog[j].gts) })
	if k == len(p.dlog) || p.dlog[k].prev != pr.maxDelivered || p.dlog[k].r.dropped {
		if snapshot {
			p.sendSnapshot(i)
		}
		return
	}
	prev := pr.maxDelivered
	for n, bytes := 0, 0; k < len(p.dlog) && n < p.cfg.CatchUpBatch; k, n = k+1, n+1 {
		e := p.dlog[k]
		r := e.r
		if r.dropped {
			break // collected: the next round sends a SNAPSHOT
		}
		m := r.m
		d := &wire.Deliver{ID: r.m.ID, B: p.cballot, LTS: r.lts, GTS: r.gts, Prev: prev, Linf: p.linf[p.g], M: &m}
		size := wire.Size(d)
		if n > 0 && bytes+size > p.cfg.MaxMsgBytes {
			break
		}
		bytes += size
		p.send(q, d)
		prev = e.gts
	}
	p.cov.CatchUps++
}

// updateGroupLinf (leader) raises the group's delivered floor to the
// highest timestamp a quorum of its members delivered (this leader
// included): garbage collection waits for a quorum, not for every member,
// and a member the floor passes is caught up by a SNAPSHOT (transfer.go);
// with Config.CollectAfterAll it waits for every member. A member that
// rejoins after losing its disk is not counted: what it
// reported before is gone.
func (p *Process) updateGroupLinf() {
	ds := make([]wire.Timestamp, 0, len(p.peers))
	for i := range p.peers {
		switch {
		case i == p.gi:
			ds = append(ds, p.maxDelivered)
		case !p.peers[i].rejoining:
			ds = append(ds, p.peers[i].maxDelivered)
		}
	}
	q := p.topo.Quorum(p.g)
	if p.cfg.CollectAfterAll {
		q = len(p.peers)
	}
	if len(ds) < q {
		return
	}
	p.raiseLinf(p.g, amcast.FloorOf(ds, q))
}

// FollowersMakeQuorum reports whether the other members of the process's
// group make a quorum without it, and its failure detector suspects none
// of them. A leader for which they do can let its own acknowledgements
// wait for a later sync (node/pipeline.go): its followers' acks make the
// quorums.
func (p *Process) FollowersMakeQuorum() bool {
	ms := p.topo.Members(p.g)
	if len(ms)-1 < p.topo.Quorum(p.g) {
		return false
	}
	for i, q := range ms {
		if i != p.gi && p.cfg.Detector.Suspected(q, p.ticks) {
			return false
		}
	}
	return true
}

// checkLeadership runs the failure detector's verdicts: a leader that lost
// touch with a quorum steps down (so a partitioned leader cannot keep the
// group waiting); the designated successor of a suspected leader starts a
// ballot; a candidate that has not won in time retries higher.
func (p *Process) checkLeadership() {
	det := p.cfg.Detector
	heard := 1
	for i, q := range p.topo.Members(p.g) {
		if i != p.gi && !det.Suspected(q, p.ticks) {
			heard++
		}
	}
	quorum := heard >= p.topo.Quorum(p.g)
	et := uint64(p.cfg.ElectionTicks)
	if p.retiring && p.status != Leader {
		return // departing: it never starts a ballot (handover.go)
	}
	switch {
	case p.status == Leader:
		if !quorum {
			p.stepDown()
			return
		}
		// A member that joined a higher ballot whose candidate then died,
		// or gave the ballot up (a candidate behind its group's floor,
		// transfer.go), can accept neither that ballot's state nor this
		// leader's (its promise is higher). Re-establish leadership above
		// that ballot so it rejoins. (Swarm seed 302706 with collection by
		// a quorum and hand-overs: a candidate alive but behind gave its
		// ballot up; the leader below it waited for it to be suspected,
		// the other member for the leader as the next successor: the
		// group stalled.)
		if p.started && p.ticks < p.lastStart+et {
			return
		}
		for i := range p.peers {
			pr := &p.peers[i]
			if i != p.gi && pr.heardHB && p.ballot.Less(pr.ballot) && pr.ballot.Leader() != p.id &&
				(det.Suspected(pr.ballot.Leader(), p.ticks) || p.gaveUp(pr.ballot)) {
				p.startBallotAbove(pr.ballot)
				return
			}
		}
		return
	case p.cand != nil:
		if p.ticks >= p.cand.start+2*et && quorum {
			p.startBallot() // candidate timeout: retry with a higher ballot
		}
		return
	}
	if !quorum || (p.started && p.ticks < p.lastStart+et) || p.behind() {
		return // a member below the floor cannot lead (transfer.go)
	}
	// The group's current ballot as far as this process can tell: its own,
	// or a higher one its peers' heartbeats show (it may have missed a
	// recovery and not yet received the new leader's state).
	cur := p.ballot
	for i := range p.peers {
		if pr := &p.peers[i]; i != p.gi && pr.heardHB && cur.Less(pr.ballot) {
			cur = pr.ballot
		}
	}
	L := cur.Leader()
	if L == p.id {
		// It led this ballot before a restart or a step-down. Listen for one
		// election timeout first: if the group moved on, its leader's
		// heartbeat shows it and that leader sends its state (no needless
		// leader change, H6.1). A candidate that gave its ballot up as
		// behind does not start again: the next successor takes over.
		if p.ticks >= et && !p.someoneLeadsHigher() && !p.behindAcked() {
			p.startBallot()
		}
		return
	}
	li := p.topo.MemberIndex(L)
	dead := det.Suspected(L, p.ticks) || p.peers[li].rejoining ||
		p.gaveUp(cur) || p.forgot(cur, et) ||
		(p.status == Recovering && p.ticks >= p.joinedAt+3*et)
	if !dead {
		return
	}
	// The designated successor: the first member after L, in group order,
	// that this process does not suspect.
	ms := p.topo.Members(p.g)
	for k := 1; k < len(ms); k++ {
		q := ms[(li+k)%len(ms)]
		if q == p.id {
			p.startBallotAbove(cur)
			return
		}
		qi := p.topo.MemberIndex(q)
		// A member whose last heartbeat shows a ballot of its own that it
		// no longer claims gave it up (a candidate behind the floor,
		// transfer.go): it will not start another, so it is passed over.
		own := p.peers[qi].ballot.Leader() == q && p.gaveUp(p.peers[qi].ballot)
		if !det.Suspected(q, p.ticks) && !p.peerBehind(qi) && !p.peers[qi].rejoining && !own {
			return
		}
	}
}

// gaveUp reports whether ballot b's own leader, by its last heartbeat,
// is in b but neither leads nor establishes it: b will never be
// established (checkLeadership).
func (p *Process) gaveUp(b wire.Ballot) bool {
	if b.Leader() == p.id {
		return false
	}
	lp := &p.peers[p.topo.MemberIndex(b.Leader())]
	return lp.heardHB && lp.ballot == b && !lp.claimsLead
}

// forgot reports whether ballot b's own leader has shown a ballot below b
// in every heartbeat for a whole election timeout (et ticks): it lost b
// (the ballot's record torn off by a crash, or its disk lost, after
// members had promised b), so it will never establish b, nor, being below
// it, give it up as gaveUp sees. A candidate's heartbeats show b within a
// tick of its start (it persists b before asking for promises; links are
// FIFO), so the timeout only spares a successor the race between a
// promise's heartbeat and the candidate's. (Swarm seed 506430: g1's
// candidate restarted below its ballot; the member that had promised it
// waited for the next successor, and that successor, hearing the
// candidate alive, waited for it: the group stalled for good.)
func (p *Process) forgot(b wire.Ballot, et uint64) bool {
	lp := &p.peers[p.topo.MemberIndex(b.Leader())]
	if b.Leader() == p.id || !lp.heardHB || !lp.ballot.Less(b) {
		p.forgotB = wire.Ballot{}
		return false
	}
	// Timed from the first tick of an unbroken run of ticks that saw it
	// (checkLeadership runs every tick, but returns before this when the
	// process leads, is a candidate or is behind): a stale start would
	// count ticks in which nobody looked.
	if p.forgotB != b || p.forgotSeen+1 != p.ticks {
		p.forgotB, p.forgotAt = b, p.ticks
	}
	p.forgotSeen = p.ticks
	return p.ticks >= p.forgotAt+et
}

// someoneLeadsHigher reports whether a live member claims to lead a ballot
// above this process's.
func (p *Process) someoneLeadsHigher() bool {
	for i, q := range p.topo.Members(p.g) {
		pr := &p.peers[i]
		if i != p.gi && pr.heardHB && pr.claimsLead && p.ballot.Less(pr.ballot) && !p.cfg.Detector.Suspected(q, p.ticks) {
			return true
		}
	}
	return false
}

// remulticastBatch bounds the messages one process re-multicasts per round.
const remulticastBatch = 8

// remulticast is H12: a message known here that has made no progress for
// RetryTicks is sent again as MULTICAST to every member of its destination
// groups, so a leader (new or old) proposes or re-sends it.
func (p *Process) remulticast() {
	// The leader retries first; followers wait longer, staggered by their
	// position, so one stuck message does not make every member of every
	// destination group re-multicast it at once.
	rt := uint64(p.cfg.RetryTicks)
	if p.status == Recovering {
		return
	}
	if p.status != Leader {
		rt *= uint64(2 + p.gi)
	}
	// Only the first few stuck messages in timestamp order are retried:
	// messages behind a stuck one are blocked by it (the delivery rule), not
	// lost, and retrying them all would be a storm.
	type stuckMsg struct {
		key wire.Timestamp
		id  wire.MsgID
	}
	var stuck []stuckMsg
	for id, r := range p.recs {
		// COMMITTED messages wait for the delivery rule (their blockers are
		// retried) or, at a follower, for the leader's DELIVER (catch-up
		// re-sends those). What can block a group is a message not yet
		// committed, the lowest local timestamp first (START ones, never
		// proposed by this group, lowest of all).
		if r.known && !r.issued && r.phase != wire.PhaseCommitted && p.ticks >= r.since+rt {
			stuck = append(stuck, stuckMsg{r.lts, id})
		}
	}
	sort.Slice(stuck, func(i, j int) bool {
		if stuck[i].key != stuck[j].key {
			return stuck[i].key.Less(stuck[j].key)
		}
		return stuck[i].id.Less(stuck[j].id)
	})
	if len(stuck) > remulticastBatch {
		stuck = stuck[:remulticastBatch]
	}
	for _, sm := range stuck {
		id := sm.id
		r := p.recs[id]
		r.since = p.ticks
		p.cov.Remulticasts++
		mc := &wire.Multicast{M: r.m}
		for _, g := range r.m.Dest {
			p.sendGroup(g, mc)
		}
	}
}
