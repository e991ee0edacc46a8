package wbcast

import (
	"bytes"
	"slices"

	"github.com/weft-dev/weft/wire"
)

// Validation of remote input (issue #10 item 1). A peer's or client's claim
// that contradicts what this process knows, or that no correct process can
// make, is refused with a counted reason (amcast.Rejects) before any state
// changes: Step's contract is that a refused input leaves the process as it
// was. Legal but stale or misdirected input is still ignored silently (it is
// what a correct, slow peer sends). The checks here are the ones several
// handlers share; each handler checks its own fields first thing.
//
// Reasons (stable, snake_case; metrics and logs key on them):
//
//	invalid_message            AppMsg malformed (no or unsorted destinations, group out of range)
//	bad_digest                 an id whose digest is not its message's content digest (wire.MsgID.Digest)
//	not_addressed              the message is not addressed to this group
//	not_a_destination          an ACCEPT or ACCEPT_ACK from a group that is not a destination
//	wrong_sender               a sender outside the group the message claims, or not its ballot's leader
//	foreign_ballot             a ballot whose leader is not a member of the group it is for
//	bad_ballot                 a cballot above the ballot (INV-1)
//	dest_mismatch              a known id with another destination set (only past a digest collision: bad_digest comes first)
//	payload_mismatch           a known id with another payload (likewise)
//	bad_timestamp              a timestamp or clock no correct process sends (⊥, wrong group, lts above gts, >= 2^62, ...)
//	bad_ballots                an ACCEPT_ACK ballot vector of the wrong length
//	lts_conflict               two local timestamps for one message under one ballot (INV-2)
//	gts_conflict               one ballot vector (or one commit) with two global timestamps (INV-5, P1)
//	bad_state                  a recovery state entry no correct process sends
//	committed_below_delivered  a state committing, below this process's last delivery, a message it never delivered (INV-8)
//	merge_conflict             two NEW_LEADER_ACKs of one cballot that disagree (INV-4, INV-5)
//	page_mismatch              a page of a paged state whose other fields differ from its first page's (paging.go)
//	state_too_large            a paged state past MaxStatePages pages or MaxMsgBytes x MaxStatePages bytes (paging.go)

// maxClock bounds the time of every timestamp and clock a peer may report.
// A Lamport clock grows by one per proposal, so no correct process comes
// near it; a value above it (forged) would let clock+1 wrap to 0 and the
// process refuse its own next ACCEPT (drainLocal panics on that).
const maxClock = 1 << 62

// Rejected implements amcast.RejectCounter: this incarnation's refused
// inputs by reason.
func (p *Process) Rejected() map[string]uint64 { return p.rejects.Counts() }

// checkMsg checks an application message carried by any protocol message.
func (p *Process) checkMsg(m *wire.AppMsg) error {
	if err := m.Validate(p.topo.NumGroups()); err != nil {
		return p.rejects.Reject("invalid_message", "%v", err)
	}
	if err := m.CheckDigest(); err != nil {
		return p.rejects.Reject("bad_digest", "%v", err)
	}
	if m.DestIndex(p.g) < 0 {
		return p.rejects.Reject("not_addressed", "message %s is not addressed to group %d", m.ID, p.g)
	}
	return nil
}

// checkSame refuses a copy of a known message that differs from the copy
// held (the first copy wins; issue #10: a second copy with another
// destination set used to index r.acc out of range, or land one group's
// ACCEPT in another group's slot).
func (p *Process) checkSame(m *wire.AppMsg, known *wire.AppMsg) error {
	if !slices.Equal(m.Dest, known.Dest) {
		return p.rejects.Reject("dest_mismatch", "%s with destinations %v, known with %v", m.ID, m.Dest, known.Dest)
	}
	if !bytes.Equal(m.Payload, known.Payload) {
		return p.rejects.Reject("payload_mismatch", "%s with a payload of %d bytes that differs from the one held (%d bytes)", m.ID, len(m.Payload), len(known.Payload))
	}
	return nil
}

// checkKnown is checkMsg plus checkSame against this process's record. A
// copy identical to the one held skips checkMsg: the held copy passed it
// when it was learned, so the copy's digest is right and it is addressed
// here. That is the common case (every ACCEPT of a known message, every
// retry), and it spares a SHA-256 of the payload per copy.
//
// It returns m's record, nil if none is held, for the handler to go on
// with: one map lookup of a 48-byte id per message, not one per question
// (a handler asked up to three; map lookups by id were about 6% of a
// loaded agent's CPU in a profile at 180 shared clients, README).
func (p *Process) checkKnown(m *wire.AppMsg) (*record, error) {
	r := p.recs[m.ID]
	if r != nil && r.known && slices.Equal(m.Dest, r.m.Dest) && bytes.Equal(m.Payload, r.m.Payload) {
		return r, nil
	}
	if err := p.checkMsg(m); err != nil {
		return nil, err
	}
	if r != nil && r.known {
		return r, p.checkSame(m, &r.m)
	}
	return r, nil
}

// inGroup reports whether b is led by a member of group g (every ballot of
// g is: the initial one by its first member, later ones by the candidate).
func (p *Process) inGroup(b wire.Ballot, g wire.GroupID) bool {
	bg, ok := p.topo.GroupOf(b.Leader())
	return ok && bg == g
}

// checkBallot refuses a ballot of this group led by a non-member.
func (p *Process) checkBallot(what string, b wire.Ballot) error {
	if !p.inGroup(b, p.g) {
		return p.rejects.Reject("foreign_ballot", "%s ballot %s is not led by a member of group %d", what, b, p.g)
	}
	return nil
}

// checkPromise checks a member's (ballot, cballot) pair: both of this group,
// cballot <= ballot (INV-1).
func (p *Process) checkPromise(what string, b, cb wire.Ballot) error {
	if err := p.checkBallot(what, b); err != nil {
		return err
	}
	if err := p.checkBallot(what, cb); err != nil {
		return err
	}
	if b.Less(cb) {
		return p.rejects.Reject("bad_ballot", "%s with cballot %s above ballot %s (INV-1)", what, cb, b)
	}
	return nil
}

// learnState makes r hold the message of a recovery state entry. The state
// is authoritative (H9.2): a copy held here but not delivered, which
// checkState let through, yields to it with its ACCEPT bookkeeping, which
// was about the other copy.
func (p *Process) learnState(r *record, m *wire.AppMsg) {
	if r.known && !r.issued && (!slices.Equal(r.m.Dest, m.Dest) || !bytes.Equal(r.m.Payload, m.Payload)) {
		r.known, r.nacc, r.ackB, r.ackFrom = false, 0, nil, nil
	}
	p.learn(r, m)
}

// checkClock refuses a clock no correct process can have (maxClock).
func (p *Process) checkClock(what string, clock uint64) error {
	if clock >= maxClock {
		return p.rejects.Reject("bad_timestamp", "%s with clock %d", what, clock)
	}
	return nil
}

// checkLTS refuses a local timestamp that group g's leader cannot have
// proposed: ⊥, or stamped with another group (P7: lts = (clock, g)).
func (p *Process) checkLTS(what string, id wire.MsgID, lts wire.Timestamp, g wire.GroupID) error {
	if lts.T == 0 || lts.T >= maxClock || lts.G != g {
		return p.rejects.Reject("bad_timestamp", "%s %s: local timestamp %s of group %d", what, id, lts, g)
	}
	return nil
}

// checkState checks the message states of a NEW_LEADER_ACK or NEW_STATE
// (sent by snapshot: ACCEPTED or COMMITTED messages addressed to this group,
// each id once, with this group's local timestamp and per-group ACCEPTs
// that fit the destination list).
func (p *Process) checkState(what string, st []wire.MsgState) error {
	seen := make(map[wire.MsgID]bool, len(st))
	for i := range st {
		s := &st[i]
		id := s.M.ID
		if err := p.checkMsg(&s.M); err != nil {
			return err
		}
		if seen[id] {
			return p.rejects.Reject("bad_state", "%s lists %s twice", what, id)
		}
		seen[id] = true
		if r := p.recs[id]; r != nil && r.known && r.issued {
			// Delivered here: the copy delivered is the message. An unissued
			// local copy yields to the state (adopt; H9.2).
			if err := p.checkSame(&s.M, &r.m); err != nil {
				return err
			}
		}
		if s.Phase != wire.PhaseAccepted && s.Phase != wire.PhaseCommitted {
			return p.rejects.Reject("bad_state", "%s lists %s in phase %s", what, id, s.Phase)
		}
		if err := p.checkLTS(what, id, s.LTS, p.g); err != nil {
			return err
		}
		if s.GTS.Less(s.LTS) || s.GTS.T >= maxClock || s.M.DestIndex(s.GTS.G) < 0 {
			return p.rejects.Reject("bad_timestamp", "%s %s: global timestamp %s with local %s and destinations %v", what, id, s.GTS, s.LTS, s.M.Dest)
		}
		if (len(s.Ballots) != 0 || len(s.LTSs) != 0) && (len(s.Ballots) != len(s.M.Dest) || len(s.LTSs) != len(s.M.Dest)) {
			return p.rejects.Reject("bad_state", "%s %s: %d ballots and %d local timestamps for %d destinations", what, id, len(s.Ballots), len(s.LTSs), len(s.M.Dest))
		}
		for j := range s.LTSs {
			if !s.LTSs[j].IsZero() && (s.LTSs[j].G != s.M.Dest[j] || !p.inGroup(s.Ballots[j], s.M.Dest[j])) {
				return p.rejects.Reject("bad_state", "%s %s: ACCEPT of group %d with ballot %s and lts %s", what, id, s.M.Dest[j], s.Ballots[j], s.LTSs[j])
			}
		}
		if s.Phase == wire.PhaseCommitted && s.GTS.LessEq(p.maxDelivered) {
			if r := p.recs[id]; (r != nil && !r.issued) || (r == nil && !p.sess.mayHaveForgotten(id)) {
				// adopt would install it below the delivery point: it can
				// never be delivered here (INV-8).
				return p.rejects.Reject("committed_below_delivered", "%s commits %s at %s, below the last delivery %s, and it was not delivered here", what, id, s.GTS, p.maxDelivered)
			}
		}
	}
	return nil
}

// checkMerge refuses a NEW_LEADER_ACK that disagrees with an ack already
// held. The merge (H8, P11) combines the acks of the highest cballot, which
// correct members never make disagree about a message's destinations,
// payload, local timestamp (INV-4) or committed gts (INV-5); it also takes
// every commit a lower cballot's ack reports (commitsOf), so a committed
// entry must agree with every ack's entry for its message whatever the
// cballot: a commit is decided once, under any ballot, and every later
// ballot's state carries the message it decided (or has delivered it).
func (p *Process) checkMerge(c *candidate, a *wire.NewLeaderAck) error {
	type heldState struct {
		s    *wire.MsgState
		same bool // of a's cballot
	}
	var held map[wire.MsgID][]heldState
	for _, x := range c.acks {
		same := x.CBallot == a.CBallot
		for i := range x.State {
			if held == nil {
				held = map[wire.MsgID][]heldState{}
			}
			id := x.State[i].M.ID
			held[id] = append(held[id], heldState{&x.State[i], same})
		}
	}
	for i := range a.State {
		s := &a.State[i]
		for _, h := range held[s.M.ID] {
			cur := h.s
			committed := s.Phase == wire.PhaseCommitted || cur.Phase == wire.PhaseCommitted
			if !h.same && !committed {
				continue // never merged with each other
			}
			if !slices.Equal(s.M.Dest, cur.M.Dest) {
				return p.rejects.Reject("dest_mismatch", "NEW_LEADER_ACK lists %s with destinations %v, another ack with %v", s.M.ID, s.M.Dest, cur.M.Dest)
			}
			if !bytes.Equal(s.M.Payload, cur.M.Payload) {
				return p.rejects.Reject("payload_mismatch", "NEW_LEADER_ACK lists %s with a payload that differs from another ack's", s.M.ID)
			}
			switch {
			case s.Phase == wire.PhaseCommitted && cur.Phase == wire.PhaseCommitted && s.GTS != cur.GTS:
				return p.rejects.Reject("merge_conflict", "%s committed at %s and at %s (INV-5)", s.M.ID, s.GTS, cur.GTS)
			case h.same && s.Phase == cur.Phase && s.Phase != wire.PhaseCommitted && s.LTS != cur.LTS:
				return p.rejects.Reject("merge_conflict", "%s accepted with local timestamps %s and %s under cballot %s (INV-4)", s.M.ID, s.LTS, cur.LTS, a.CBallot)
			}
		}
	}
	return nil
}
