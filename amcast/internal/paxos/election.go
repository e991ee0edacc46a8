package paxos

// Time, heartbeats, catch-up and phase 1 (leader change; see the package
// comment).

import (
	"slices"

	"github.com/weft-dev/weft/wire"
)

// Tick advances the log's time: heartbeats and leader election.
func (l *Log) Tick() {
	l.ticks++
	if l.ticks%uint64(l.cfg.HeartbeatTicks) == 0 {
		hb := &wire.PaxosHeartbeat{B: l.ballot, Leader: l.claimsLead(), Executed: l.executed}
		if l.status == Leader {
			hb.Commit = l.executed
		}
		l.sendOthers(hb)
	}
	l.checkLeadership()
	if l.status == Leader {
		l.resendUndecided()
	}
}

// resendBatch bounds the proposals a leader re-sends per tick.
const resendBatch = 64

// resendUndecided re-sends the proposals not chosen after ElectionTicks/2
// ticks (lost to a partition or a link reset): the members answer with
// their votes again.
func (l *Log) resendUndecided() {
	wait := uint64(max(l.cfg.ElectionTicks/2, 2))
	n := 0
	for s := l.executed; s < l.next && s < uint64(len(l.slots)) && n < resendBatch; s++ {
		sl := &l.slots[s]
		if sl.decided || !sl.has || sl.accB != l.ballot || l.ticks < sl.sentAt+wait {
			continue
		}
		sl.sentAt = l.ticks
		n++
		l.sendOthers(&wire.PaxosAccept{B: l.ballot, Slot: s, Cmd: sl.cmd})
	}
}

func (l *Log) claimsLead() bool { return l.status == Leader || l.status == Candidate }

func (l *Log) onHeartbeat(from wire.ProcID, hb *wire.PaxosHeartbeat) error {
	i, err := l.member(from)
	if err != nil {
		return err
	}
	if err := l.checkBallot("PAXOS_HEARTBEAT", hb.B); err != nil {
		return err
	}
	if (hb.Leader || hb.Commit > 0) && hb.B.Leader() != from {
		return l.checkSender("PAXOS_HEARTBEAT", from, hb.B)
	}
	pr := &l.peers[i]
	pr.heardHB = true
	pr.ballot = hb.B
	pr.claimsLead = hb.Leader && hb.B.Leader() == from
	pr.executed = hb.Executed
	if hb.Commit > 0 && hb.B.Leader() == from {
		// Commit notice: below hb.Commit every slot is chosen, and a value
		// accepted with the leader's ballot is the chosen one.
		for s := l.executed; s < hb.Commit && s < uint64(len(l.slots)); s++ {
			sl := &l.slots[s]
			if sl.decided {
				continue
			}
			if !sl.has || sl.accB != hb.B {
				break
			}
			l.decide(s, sl.cmd)
		}
		l.executeReady()
	}
	if l.status == Leader && hb.Leader && l.ballot.Less(hb.B) && hb.B.Leader() == from {
		l.stepDown() // a higher ballot leads; its 2a will make us join it
	}
	if l.status == Leader {
		switch {
		case hb.Executed >= pr.target:
			pr.target = 0
			if hb.Executed < l.executed {
				pr.target, pr.targetAt = l.executed, l.ticks
			}
		case l.ticks >= pr.targetAt+2:
			l.catchUp(i)
			pr.target, pr.targetAt = l.executed, l.ticks
		}
	}
	return nil
}

// catchUp sends member i the chosen values after its execution point.
func (l *Log) catchUp(i int) {
	pr := &l.peers[i]
	first := pr.executed
	end := min(l.executed, first+uint64(l.cfg.CatchUpBatch))
	if first >= end {
		return
	}
	cmds := make([]wire.Command, 0, end-first)
	for s := first; s < end; s++ {
		cmds = append(cmds, l.slots[s].cmd)
	}
	l.cov.CatchUps++
	l.out.Send(l.id, l.members[i], &wire.PaxosDecided{First: first, Cmds: cmds})
}

// checkLeadership runs the failure detector's verdicts: a leader that lost
// touch with a quorum steps down; a leader that sees a member stuck on a
// higher ballot nobody leads re-establishes itself above it; the designated
// successor of a suspected leader starts a ballot; a candidate that has not
// won in time retries higher.
func (l *Log) checkLeadership() {
	det := l.cfg.Detector
	heard := 1
	for i, q := range l.members {
		if i != l.gi && !det.Suspected(q, l.ticks) {
			heard++
		}
	}
	quorum := heard >= l.quorum
	et := uint64(l.cfg.ElectionTicks)
	// The highest ballot this member knows of, and whether its leader is
	// alive and claims it.
	cur := l.ballot
	for i := range l.peers {
		if pr := &l.peers[i]; i != l.gi && pr.heardHB && cur.Less(pr.ballot) {
			cur = pr.ballot
		}
	}
	L := cur.Leader()
	li := l.cfg.Topology.MemberIndex(L)
	liveClaim := L == l.id && l.claimsLead() && cur == l.ballot ||
		L != l.id && !det.Suspected(L, l.ticks) && !(l.peers[li].heardHB && l.peers[li].ballot == cur && !l.peers[li].claimsLead)
	switch {
	case l.status == Leader:
		if !quorum {
			l.stepDown()
			return
		}
		if cur != l.ballot && !liveClaim && (!l.started || l.ticks >= l.lastStart+et) {
			l.startBallotAbove(cur)
		}
		return
	case l.status == Candidate:
		if l.ticks >= l.cand.start+2*et && quorum {
			l.startBallotAbove(cur)
		}
		return
	}
	if !quorum || (l.started && l.ticks < l.lastStart+et) {
		return
	}
	if L == l.id {
		// It led this ballot before a restart or a step-down: listen for
		// one election timeout first, then take the group back unless
		// someone leads a higher ballot.
		if l.ticks >= et && !l.someoneLeadsHigher() {
			l.startBallotAbove(cur)
		}
		return
	}
	if liveClaim {
		return
	}
	for k := 1; k < len(l.members); k++ {
		q := l.members[(li+k)%len(l.members)]
		if q == l.id {
			l.startBallotAbove(cur)
			return
		}
		if !det.Suspected(q, l.ticks) {
			return
		}
	}
}

func (l *Log) someoneLeadsHigher() bool {
	for i, q := range l.members {
		pr := &l.peers[i]
		if i != l.gi && pr.heardHB && pr.claimsLead && l.ballot.Less(pr.ballot) && !l.cfg.Detector.Suspected(q, l.ticks) {
			return true
		}
	}
	return false
}

// startBallotAbove starts a ballot led by this member, higher than cur and
// than its own.
func (l *Log) startBallotAbove(cur wire.Ballot) {
	b := wire.Ballot{N: max(l.ballot.N, cur.N) + 1, P: l.id}
	if l.status == Leader {
		l.stepDown()
	}
	l.status = Candidate
	l.cand = &candidate{b: b, start: l.ticks, promises: map[wire.ProcID]*wire.PaxosPromise{}}
	l.lastStart, l.started = l.ticks, true
	l.cov.BallotsStarted++
	p := &wire.PaxosPrepare{B: b, From: l.executed}
	l.sendOthers(p)
	l.prepare(l.id, p)
}

func (l *Log) onPrepare(from wire.ProcID, p *wire.PaxosPrepare) error {
	if _, err := l.member(from); err != nil {
		return err
	}
	if err := l.checkSender("PAXOS_PREPARE", from, p.B); err != nil {
		return err
	}
	l.prepare(from, p)
	return nil
}

// prepare joins p's ballot if it is higher and promises it (to itself when
// this member is the candidate).
func (l *Log) prepare(from wire.ProcID, p *wire.PaxosPrepare) {
	if !l.ballot.Less(p.B) {
		return // stale or duplicate
	}
	l.join(p.B)
	pr := &wire.PaxosPromise{B: p.B, Executed: l.executed}
	for s := p.From; s < uint64(len(l.slots)); s++ {
		if sl := &l.slots[s]; sl.has {
			pr.Entries = append(pr.Entries, wire.LogEntry{Slot: s, B: sl.accB, Decided: sl.decided, Cmd: sl.cmd})
		}
	}
	if from == l.id {
		l.promise(l.id, pr)
		return
	}
	l.out.Send(l.id, from, pr)
}

func (l *Log) onPromise(from wire.ProcID, p *wire.PaxosPromise) error {
	if _, err := l.member(from); err != nil {
		return err
	}
	if err := l.checkBallot("PAXOS_PROMISE", p.B); err != nil {
		return err
	}
	for i := range p.Entries {
		e := &p.Entries[i]
		if err := l.checkSlot(e.Slot, 1); err != nil {
			return err
		}
		if !e.Decided {
			// (A decided entry's ballot is meaningless when the value was
			// learned from a catch-up.)
			if err := l.checkBallot("PAXOS_PROMISE entry", e.B); err != nil {
				return err
			}
		}
		if err := l.checkCommand("PAXOS_PROMISE", e.Slot, &e.Cmd, e.Decided); err != nil {
			return err
		}
	}
	l.promise(from, p)
	return nil
}

// promise counts from's promise for the ballot this member is a candidate
// of; a quorum of them makes it lead.
func (l *Log) promise(from wire.ProcID, p *wire.PaxosPromise) {
	c := l.cand
	if c == nil || l.status != Candidate || p.B != c.b || l.ballot != c.b {
		return
	}
	if _, dup := c.promises[from]; dup {
		return
	}
	c.promises[from] = p
	if len(c.promises) < l.quorum {
		return
	}
	l.becomeLeader()
}

// becomeLeader ends phase 1: every slot from the execution point to the
// highest one reported gets the chosen value, the highest-ballot accepted
// value or a no-op, proposed under the new ballot.
func (l *Log) becomeLeader() {
	c := l.cand
	type pick struct {
		e   wire.LogEntry
		set bool
	}
	picks := map[uint64]*pick{}
	top := uint64(len(l.slots))
	senders := make([]wire.ProcID, 0, len(c.promises))
	for q := range c.promises {
		senders = append(senders, q)
	}
	slices.Sort(senders)
	for _, q := range senders {
		for _, e := range c.promises[q].Entries {
			if e.Slot < l.executed {
				continue
			}
			top = max(top, e.Slot+1)
			pk := picks[e.Slot]
			if pk == nil {
				pk = &pick{}
				picks[e.Slot] = pk
			}
			switch {
			case !pk.set:
				pk.e, pk.set = e, true
			case pk.e.Decided:
			case e.Decided || pk.e.B.Less(e.B):
				pk.e = e
			}
		}
	}
	l.status = Leader
	l.cand = nil
	l.cov.LeaderChanges++
	l.next = top
	recovered := false
	executing := l.executing
	l.executing = true // execute after every slot is proposed again
	for s := l.executed; s < top; s++ {
		cmd := wire.Command{Op: wire.CmdNoop}
		if pk := picks[s]; pk != nil && (pk.e.Decided || !l.cfg.Mutation.Has(MutIgnoreAccepted)) {
			cmd = pk.e.Cmd
			if pk.e.Decided && !l.at(s).decided {
				l.decide(s, cmd)
			}
		} else if sl := l.at(s); sl.decided {
			cmd = sl.cmd
		}
		if cmd.Op != wire.CmdNoop && !l.at(s).decided {
			recovered = true
		}
		l.proposeAt(s, cmd)
	}
	l.executing = executing
	if recovered {
		l.cov.RecoveriesWithValues++
	}
	l.host.Lead(true)
	l.executeReady()
}
