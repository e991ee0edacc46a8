package wbcast

import (
	"errors"
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// Leadership hand-over (issue #13 item 4: planned departures).
//
// A leader that is about to stop (`weft leave`, SIGTERM) should not make
// its group wait for a failure detector's verdict and an election timeout,
// nor fail the multicasts in flight. HandOver asks the next live member of
// the group, in group order, to take over at once: the leader sends it
// HANDOVER(b), b the ballot it leads, and the member starts a ballot above
// b (H6) without waiting for a suspicion, as the designated successor of a
// suspected leader would.
//
// Safety is that of any election (H6-H10): a ballot started while the old
// leader still runs is what a false suspicion already produces, and
// ballots are totally ordered, so the old leader steps down when the new
// ballot reaches it (H7) and its state enters the new leader's merge like
// any member's. Nothing here decides an order.
//
// Liveness, and why no multicast fails:
//   - Links are FIFO, so every ACCEPT the old leader sent before HANDOVER
//     reached the successor before it; the successor is in its own quorum,
//     so its merged state holds every message the old leader proposed
//     (ACCEPTED, retried with its old local timestamp, P3).
//   - From HandOver on, the old leader proposes nothing new: a client's
//     MULTICAST of a message it does not know yet is held (deferMsg) until
//     it has adopted the new ballot's state, then forwarded to the new
//     leader (forward), which answers the client directly (DELIVERED names
//     the new leader, and the client sends there from then on). A client
//     therefore never waits for its retry timeout.
//   - If the successor does not start a ballot within ElectionTicks (the
//     HANDOVER was lost, or it refused: it is behind the group's floor or
//     not in the leader's ballot), the leader asks the next live member.
//     After handOverTicks without success it gives up and leads on,
//     proposing what it held (the caller sees HandedOver stay false).
//
// The floor. Messages whose ACCEPT_ACKs are on their way when HANDOVER is
// sent still commit at the old leader, which delivers them and sends their
// DELIVERs after HANDOVER. The successor ignores those (it is a candidate
// by then; its recovery delivers them). Were the group's floor raised over
// them (the old leader and a third member delivered them: a quorum), the
// successor would be behind the floor the quorum's NEW_LEADER_ACKs report,
// and give its ballot up (recovery.go): the next member takes over and the
// successor needs a SNAPSHOT (demo.TestPlannedStopHandsOver saw it). So a
// leader that is handing over does not raise the floor (heartbeat): every
// member's floor stays at or below what the old leader had delivered when
// it sent HANDOVER, which FIFO links delivered to the successor first.
// Nothing is collected above it meanwhile, so the quorum's states still
// hold those messages for the merge (TestHandOverInFlightCommit).
//
// A process that handed over keeps forwarding clients' MULTICASTs to the
// leader of its ballot for the rest of its life. A departing one is also
// retired (Retire): it never starts a ballot again and ignores HANDOVERs,
// so two members leaving at once do not hand the group to each other.

// ErrNotLeader is returned by HandOver at a process that does not lead its
// group (or is still establishing its ballot).
var ErrNotLeader = errors.New("wbcast: not the leader of its group")

// handover is a hand-over in progress or done.
type handover struct {
	to    wire.ProcID // the member asked last
	b     wire.Ballot // the ballot handed over
	at    uint64      // tick of the last HANDOVER sent
	start uint64      // tick of HandOver
}

// handOverTicks is how long, in election timeouts, a leader tries to hand
// over before it gives up and leads on.
const handOverTicks = 4

// HandOver asks the next live member of the group to take over this
// leader's ballot at once and returns the member asked. Calling it again
// while the hand-over is under way returns the same member.
func (p *Process) HandOver() (wire.ProcID, error) {
	if p.holding() {
		return p.ho.to, nil
	}
	if p.status != Leader || p.amn != nil {
		return 0, ErrNotLeader
	}
	to, ok := p.successor(p.id)
	if !ok {
		return 0, fmt.Errorf("wbcast: no live member of group %d to hand over to", p.g)
	}
	p.ho = &handover{to: to, b: p.ballot, at: p.ticks, start: p.ticks}
	p.send(to, &wire.HandOver{B: p.ballot})
	return to, nil
}

// HandedOver reports whether this process handed its leadership over and
// the group has since established a ballot led by another member that this
// process joined (it follows that leader).
func (p *Process) HandedOver() bool {
	return p.ho != nil && p.status == Follower && p.cballot == p.ballot && p.ballot.Leader() != p.id && p.ho.b.Less(p.ballot)
}

// Retire implements amcast.HandOverer: this process is departing and
// never leads again.
func (p *Process) Retire() { p.retiring = true }

// successor is the first member after after, in group order, that this
// process does not suspect and that could lead (not behind the group's
// floor, not rejoining after a disk loss).
func (p *Process) successor(after wire.ProcID) (wire.ProcID, bool) {
	ms := p.topo.Members(p.g)
	ai := p.topo.MemberIndex(after)
	for k := 1; k < len(ms); k++ {
		qi := (ai + k) % len(ms)
		q := ms[qi]
		if q == p.id {
			continue
		}
		if !p.cfg.Detector.Suspected(q, p.ticks) && !p.peerBehind(qi) && !p.peers[qi].rejoining {
			return q, true
		}
	}
	return 0, false
}

// tickHandOver re-asks, after ElectionTicks without a new ballot, the next
// live member (the HANDOVER was lost or refused), and gives up after
// handOverTicks election timeouts.
func (p *Process) tickHandOver() {
	ho := p.ho
	et := uint64(p.cfg.ElectionTicks)
	if !p.holding() || p.ticks < ho.at+et {
		return
	}
	if p.ticks >= ho.start+handOverTicks*et {
		p.ho = nil
		p.replayDeferred() // propose what was held
		return
	}
	to, ok := p.successor(ho.to)
	if !ok {
		return // nobody to ask now; try again next tick
	}
	ho.to, ho.at = to, p.ticks
	p.send(to, &wire.HandOver{B: ho.b})
}

// holding reports whether a client's MULTICAST of a message not known here
// is held rather than proposed: this process still leads the ballot it is
// handing over.
func (p *Process) holding() bool {
	return p.ho != nil && p.status == Leader && p.ballot == p.ho.b
}

// forward sends a client's MULTICAST on to the leader this process handed
// over to (see above). It reports whether it did.
func (p *Process) forward(mc *wire.Multicast) bool {
	if !p.HandedOver() {
		return false
	}
	p.send(p.ballot.Leader(), mc)
	return true
}

// onHandOver takes over the sender's leadership: start a ballot above it.
func (p *Process) onHandOver(from wire.ProcID, h *wire.HandOver) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g || h.B.Leader() != from || from == p.id {
		return p.rejects.Reject("wrong_sender", "HANDOVER %s from p%d", h.B, from)
	}
	if h.B != p.ballot || h.B != p.cballot || p.status != Follower || p.behind() || p.retiring {
		// Not the ballot this member follows (a stale request, or it has
		// not adopted that ballot's state yet), or it is behind the
		// group's floor and cannot lead (transfer.go), or it is departing
		// too: ignore it, and the leader asks the next member after
		// ElectionTicks.
		return nil
	}
	p.cov.HandOvers++
	if p.mut(MutHandOverNoRecovery) {
		b := wire.Ballot{N: h.B.N + 1, P: p.id}
		p.stepDown()
		p.ballot, p.cballot = b, b
		p.persist(&wire.RecBallot{Ballot: b, CBallot: b})
		p.becomeLeader()
		return nil
	}
	p.startBallotAbove(h.B)
	return nil
}
