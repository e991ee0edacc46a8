package amcast

import "github.com/weft-dev/weft/wire"

// Store is a process's durable state: the image of every record the process
// persisted (Ready.Persist), applied in order. A driver keeps one Store per
// process across crashes and restores the process from it; whatever the
// process had not persisted is lost. Stores compact as they apply (garbage
// collection records drop state), so their size follows the protocol's
// retained state, not the length of the run.
type Store interface {
	Apply(rec wire.Message) error
}

// Coverage counts protocol events that fault sweeps must reach to be
// meaningful. Counters are cumulative for one incarnation of a process.
type Coverage struct {
	BallotsStarted         int // NEW_LEADER sent (recovery attempts)
	LeaderChanges          int // recoveries completed (became leader of a new ballot)
	RecoveriesWithAccepted int // recoveries whose merged state held an ACCEPTED, undelivered message
	Retried                int // messages re-sent by a new leader (H10.4)
	Remulticasts           int // liveness re-multicasts (H12)
	CatchUps               int // DELIVERs re-sent to lagging followers
	Collected              int // messages garbage-collected
	SessionsExpired        int // idle client sessions forgotten
	Snapshots              int // SNAPSHOTs sent to members the floor passed (state transfer)
	Installs               int // SNAPSHOTs installed
	Rejoins                int // members that lost their disk and rejoined
	BallotsAbandoned       int // candidates below their group's floor that gave up their ballot
	HandOvers              int // ballots started on a leader's HANDOVER (planned departures)
}

// Add accumulates o into c.
func (c *Coverage) Add(o Coverage) {
	c.BallotsStarted += o.BallotsStarted
	c.LeaderChanges += o.LeaderChanges
	c.RecoveriesWithAccepted += o.RecoveriesWithAccepted
	c.Retried += o.Retried
	c.Remulticasts += o.Remulticasts
	c.CatchUps += o.CatchUps
	c.Collected += o.Collected
	c.SessionsExpired += o.SessionsExpired
	c.Snapshots += o.Snapshots
	c.Installs += o.Installs
	c.Rejoins += o.Rejoins
	c.BallotsAbandoned += o.BallotsAbandoned
	c.HandOvers += o.HandOvers
}

// HandOverer is implemented by machines whose leader can hand its
// leadership over to another member on request, without an election
// timeout (a planned departure: `weft leave`, SIGTERM; issue #13).
type HandOverer interface {
	// HandOver asks another member of the leader's group to take over
	// and returns the member asked; an error if this process does not
	// lead or no member can take over.
	HandOver() (wire.ProcID, error)
	// HandedOver reports whether the hand-over is done: this process
	// follows a ballot another member established after it.
	HandedOver() bool
	// Retire marks the process as departing for good: it never leads
	// again (it starts no ballot and takes no hand-over).
	Retire()
}

// Observable is implemented by fault-tolerant machines so drivers can
// observe roles, memory and coverage without reaching into protocol state.
type Observable interface {
	// IsLeader reports whether the process currently leads its group.
	IsLeader() bool
	// Retained returns the number of messages the process holds in memory.
	Retained() int
	// Coverage returns this incarnation's counters.
	Coverage() Coverage
}
