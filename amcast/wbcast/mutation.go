package wbcast

import (
	"strings"

	"github.com/weft-dev/weft/wire"
)

// Mutation is a set of test-only knobs (Config.Mutation), each of which
// breaks one rule of WbCast on purpose. They exist to prove that the
// simulator's swarm and checkers catch a broken protocol (issue #10 item 6,
// sim/mutation_test.go): a knob the swarm cannot catch is a blind spot of
// the checkers or of the faults.
//
// Test only: breaks the protocol on purpose; never set outside tests. No
// non-test file outside the packages that define knobs references them
// (TestMutationKnobsOnlyInTests at the module root).
//
// Each knob is a one- or two-line guarded branch at the exact rule it
// breaks; with Mutation == 0 the process is unchanged.
type Mutation uint32

// The knobs, one per broken rule of the spec (../shared/spec/wbcast.md).
const (
	// MutSkipDeliveryBlock breaks H4.3 / P6: the leader delivers the
	// committed message with the smallest gts even when a PROPOSED or
	// ACCEPTED message with a local timestamp at or below it may still
	// commit below it.
	MutSkipDeliveryBlock Mutation = 1 << iota
	// MutSkipAcceptClock breaks H2.11 / P4 / INV-6: a member holding the
	// ACCEPTs of every destination group does not raise its clock to the
	// global timestamp before acking, nor does a process adopting a new
	// leader's state raise it to the adopted gts (adopt's copy of H2.11;
	// without that copy skipping H2.11 is harmless, see
	// sim/mutation_test.go). The raises at commit (H3.7) and delivery stay.
	MutSkipAcceptClock
	// MutMixAckVectors breaks H3.3 / P1 / P18: the leader counts
	// ACCEPT_ACKs towards one quorum whatever ballot vector they carry
	// (only B[own] = cballot is still required), and commits with the gts
	// of the first vector it saw.
	MutMixAckVectors
	// MutSendBeforePersist breaks the Ready contract (records are durable
	// before anything that relies on them leaves the process): every
	// record — the promise (RecBallot), accepted and adopted states,
	// deliveries, collections — is held in memory and queued only at the
	// next Tick, while NEW_LEADER_ACK, ACCEPT_ACK and NEW_STATE_ACK go out
	// and deliveries reach the application at once. A crash in between
	// forgets what was promised or delivered.
	MutSendBeforePersist
	// MutDeliverBeforeCommit breaks H3.4 (P1): the leader commits on a
	// quorum of acks from its own group only, not of every destination
	// group.
	MutDeliverBeforeCommit
	// MutMergeAllCBallots breaks H8.3-H8.4 / P11: the candidate merges the
	// states of every NEW_LEADER_ACK of its quorum, not only those with the
	// highest cballot.
	MutMergeAllCBallots
	// MutAckWhileRecovering breaks H2.1 / H7.3 / P10 / INV-9: a RECOVERING
	// member handles ACCEPTs (and acks them) as if it were a follower of
	// its last adopted ballot, after it has sent its NEW_LEADER_ACK.
	MutAckWhileRecovering
	// MutForgetDone breaks P15: garbage collection drops a delivered
	// message's record without remembering its id in the done set, so a
	// late retry or ACCEPT of it is taken as new.
	MutForgetDone
	// MutFreshRetryLTS breaks P3 / H10.4 / INV-4: a new leader retries its
	// ACCEPTED messages with a fresh local timestamp instead of the one a
	// quorum accepted.
	MutFreshRetryLTS
	// MutEarlyCollect breaks P14 / spec §6: garbage collection drops a
	// delivered message once its own group has delivered it (the group's
	// floor linf), without waiting for the other destination groups.
	MutEarlyCollect
	// MutNoReack breaks P2 / H11: a member that delivered a message does
	// not ack it again when another group's new leader retries its ACCEPT
	// under a higher ballot.
	MutNoReack
	// MutSkipDeliverChain breaks P8 (DELIVERs need FIFO): a follower takes
	// a DELIVER that does not follow its last delivery (Deliver.Prev), so
	// a lost DELIVER is skipped for good instead of caught up.
	MutSkipDeliverChain
	// MutSeqOnlyDedup breaks P15's exactness for reused ids (issue #10
	// item 7, sessions.go): duplicate suppression takes any message of a
	// session whose sequence number was collected here for a late copy,
	// whatever its content (digest), as the contiguous mark did. A client
	// that reuses a sequence number then has its second message dropped at
	// a group that collected the first, while another destination group
	// proposed it and waits for this group's ACCEPT forever. Only an
	// adversarial client exercises it: the swarm catches it with
	// sim.ForgedClients (sim/mutation_test.go).
	MutSeqOnlyDedup
	// MutLeadBehind breaks state transfer's leadership rule (transfer.go):
	// a candidate whose quorum reports a delivered floor above its own last
	// delivery leads anyway, though the members left out of their states
	// what they delivered and collected below that floor.
	MutLeadBehind
	// MutHandOverNoRecovery breaks H6-H10 for hand-overs (handover.go): the
	// member a leader hands over to takes the word of the HANDOVER for the
	// group's state and leads a ballot above it at once, on its own state,
	// without a quorum's NEW_LEADER_ACKs (what the old leader, or any other
	// member, accepted and it did not is lost).
	MutHandOverNoRecovery

	mutEnd // one past the last knob
)

// MutImageSkipsAdopt breaks the process's durable image (image.go), not a
// rule of the spec: an adopted state is left out of it, so a compaction
// would write a snapshot missing what the NEW_STATE record made durable.
// The swarm does not compact, so only CheckRestore's image comparison
// catches it (sim.TestImageFailsCheckRestore); it is not in Mutations.
const MutImageSkipsAdopt = mutEnd

// MutSelfAckEarly breaks the leader's-own-ack rule (pipeline.go), which
// only pipelined storage needs: the leader counts its own ACCEPT_ACK at
// once, within the Step, before its acceptance is durable. A driver that
// syncs each Ready before it steps more input hides it; with pipelined
// storage a commit, and the DELIVER that leaves before the sync, can rest
// on a record a crash then loses. Catching it takes a leader whose disk is
// slower than its followers' round trip, a DELIVER that reaches one
// follower and not the other, a crash within the sync and a recovery
// without that follower: none of swarm seeds 1..100 with sim.Config.Pipeline
// did, so it is not in Mutations, and sim.TestSelfAckEarlyCaught builds
// that run.
const MutSelfAckEarly = mutEnd << 1

// Mutations lists every knob of the spec, in bit order.
var Mutations = func() []Mutation {
	var ms []Mutation
	for k := Mutation(1); k < mutEnd; k <<= 1 {
		ms = append(ms, k)
	}
	return ms
}()

var mutationNames = map[Mutation]string{
	MutSkipDeliveryBlock:   "skip-delivery-block",
	MutSkipAcceptClock:     "skip-accept-clock",
	MutMixAckVectors:       "mix-ack-vectors",
	MutSendBeforePersist:   "send-before-persist",
	MutDeliverBeforeCommit: "deliver-before-commit",
	MutMergeAllCBallots:    "merge-all-cballots",
	MutAckWhileRecovering:  "ack-while-recovering",
	MutForgetDone:          "forget-done",
	MutFreshRetryLTS:       "fresh-retry-lts",
	MutEarlyCollect:        "early-collect",
	MutNoReack:             "no-reack",
	MutSkipDeliverChain:    "skip-deliver-chain",
	MutSeqOnlyDedup:        "seq-only-dedup",
	MutLeadBehind:          "lead-behind",
	MutHandOverNoRecovery:  "handover-no-recovery",
}

// String names the knobs set in m, joined by "+" ("none" for 0).
func (m Mutation) String() string {
	if m == 0 {
		return "none"
	}
	var parts []string
	for _, k := range Mutations {
		if m&k != 0 {
			parts = append(parts, mutationNames[k])
		}
	}
	if m&MutImageSkipsAdopt != 0 {
		parts = append(parts, "image-skips-adopt")
	}
	if m&MutSelfAckEarly != 0 {
		parts = append(parts, "self-ack-early")
	}
	if rest := m &^ (mutEnd - 1) &^ MutImageSkipsAdopt &^ MutSelfAckEarly; rest != 0 {
		parts = append(parts, "unknown")
	}
	return strings.Join(parts, "+")
}

// collected is sessionTable.collected, or under MutSeqOnlyDedup the
// content-blind check.
func (p *Process) collected(id wire.MsgID) bool {
	if p.mut(MutSeqOnlyDedup) {
		if s := p.sess.m[id.Key()]; s != nil {
			seen := false
			s.done.each(func(e doneEntry) { seen = seen || e.q.Seq == id.Seq })
			if seen {
				return true
			}
		}
	}
	return p.sess.collected(id)
}

// mut reports whether knob k is set (always false outside tests).
func (p *Process) mut(k Mutation) bool { return p.cfg.Mutation&k != 0 }

// persist queues a durable record. Under MutSendBeforePersist it is held
// until the next Tick (releaseHeld) while the messages that rely on it go
// out now.
func (p *Process) persist(rec wire.Message) {
	if p.mut(MutSendBeforePersist) {
		p.held = append(p.held, rec)
		return
	}
	p.out.Persist(rec)
}

// deliverDurable persists rec and queues a delivery that takes effect when
// rec is durable. Under MutSendBeforePersist the application gets the
// delivery now and rec is held with the others.
func (p *Process) deliverDurable(m wire.AppMsg, gts wire.Timestamp, rec wire.Message) {
	if p.mut(MutSendBeforePersist) {
		p.out.Deliver(m, gts)
		p.held = append(p.held, rec)
		return
	}
	p.out.DeliverDurable(m, gts, rec)
}

// releaseHeld queues the records MutSendBeforePersist held back.
func (p *Process) releaseHeld() {
	for _, rec := range p.held {
		p.out.Persist(rec)
	}
	p.held = nil
}
