package rskeen

import "github.com/weft-dev/weft/amcast/internal/paxos"

// Skeen-level knobs of paxos.Mutation (test only: each breaks one rule on
// purpose so that tests can prove the swarm catches it; never set outside
// tests). ftskeen and fastcast re-export the ones that apply to them.
const (
	// MutSkipDeliveryBlocking: Skeen's delivery rule delivers the
	// committed message with the smallest global timestamp without waiting
	// for the pending messages whose local timestamp is at or below it
	// (spec §8.2, FastCast F5): a message that commits later with a
	// smaller global timestamp is then delivered out of order.
	MutSkipDeliveryBlocking paxos.Mutation = paxos.MutPaxosEnd << iota
	// MutSkipFinalClock (FT-Skeen, FastCast): executing FINAL(m, gts) does
	// not raise the clock to gts, so a later ASSIGN can choose a local
	// timestamp below the global timestamp of a message already delivered.
	MutSkipFinalClock
	// MutFastPathMismatch (FastCast): m commits on the first FINAL executed
	// after its ASSIGN, with that FINAL's value, even when it differs from
	// the maximum of the hard timestamps (the fast path taken when soft !=
	// hard).
	MutFastPathMismatch
	// MutStaleAssignTS (FastCast): executing ASSIGN(m, s) keeps the
	// predicted timestamp s even when it is not above the clock (a deposed
	// leader's stale prediction adopted by a later ballot), instead of
	// clock+1 (F4).
	MutStaleAssignTS
)

// Has reports whether the replica runs with knob k.
func (c *Core) Has(k paxos.Mutation) bool { return c.mut.Has(k) }
