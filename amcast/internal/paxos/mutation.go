package paxos

// Mutation is a set of test-only knobs, each of which breaks one rule of
// the baselines on purpose (Config.Mutation of paxos, FT-Skeen and
// FastCast) so that tests can prove the swarm's checkers catch a broken
// protocol (issue #10 item 6). Test only: never set outside tests; the
// node and its configuration never set it. The zero value breaks nothing.
//
// The Paxos knobs are here; package rskeen defines the Skeen-level ones
// (same type, higher bits), and ftskeen and fastcast re-export theirs.
type Mutation uint32

// Paxos knobs.
const (
	// MutAcceptLowerBallot: an acceptor accepts (and votes for) a
	// PAXOS_ACCEPT of a ballot below the one it promised, breaking phase
	// 2's "a member that has not promised a higher ballot accepts": a
	// deposed leader can then get a second value chosen at a slot.
	MutAcceptLowerBallot Mutation = 1 << iota
	// MutForgetPromise: a member's promise (REC_BALLOT) is not persisted,
	// so after a restart it joins and accepts ballots below the one it
	// promised (the durability rule of phase 1).
	MutForgetPromise
	// MutIgnoreAccepted: a new leader proposes a no-op at every slot phase
	// 1 found accepted but not known chosen, instead of the value accepted
	// with the highest ballot: a value a quorum chose can be replaced.
	MutIgnoreAccepted

	// MutPaxosEnd is the first bit free for the Skeen-level knobs.
	MutPaxosEnd
)

// Has reports whether m includes every knob of k.
func (m Mutation) Has(k Mutation) bool { return k != 0 && m&k == k }
