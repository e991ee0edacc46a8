package fastcast

import (
	"github.com/weft-dev/weft/amcast/internal/paxos"
	"github.com/weft-dev/weft/amcast/internal/rskeen"
)

// Mutation is the type of Config.Mutation: test-only knobs that each break
// one rule of FastCast on purpose, to prove the swarm's checkers catch a
// broken protocol. Never set outside tests (the node and its configuration
// never do). See the constants for the rules they break.
type Mutation = paxos.Mutation

// FastCast's knobs.
const (
	MutSkipDeliveryBlocking = rskeen.MutSkipDeliveryBlocking // F5's delivery rule ignores pending messages
	MutSkipFinalClock       = rskeen.MutSkipFinalClock       // FINAL does not raise the clock (F5)
	MutFastPathMismatch     = rskeen.MutFastPathMismatch     // commit on a FINAL whose value is not the hard maximum
	MutStaleAssignTS        = rskeen.MutStaleAssignTS        // ASSIGN keeps a predicted timestamp below the clock (F4)
	MutAcceptLowerBallot    = paxos.MutAcceptLowerBallot     // an acceptor accepts below its promise
	MutForgetPromise        = paxos.MutForgetPromise         // promises are not persisted
	MutIgnoreAccepted       = paxos.MutIgnoreAccepted        // a new leader overwrites accepted values with no-ops
)
