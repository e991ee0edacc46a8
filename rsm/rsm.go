// Package rsm is weft's state-machine API: what a replicated service built on
// atomic multicast implements (StateMachine), and the deterministic piece
// that feeds it deliveries (Driver), which the real node and the simulator
// both drive. The contract is in docs/rsm.md; in short:
//
//   - Apply is called with deliveries in delivery order (increasing global
//     timestamp at this replica), in batches, exactly once per delivery
//     across crashes and restarts: the Driver remembers the highest gts it
//     applied and skips anything at or below it.
//   - The applied gts is part of every snapshot: the Driver writes it (with
//     the results it still holds for clients) in front of the application's
//     own stream, in one atomic file (the node's job). On restart the node
//     restores the snapshot and replays the deliveries its write-ahead log
//     holds above the snapshot's gts; the node never cuts its log below the
//     application's last snapshot.
//   - Snapshot and Restore stream (io.Writer, io.Reader): the state is
//     never held in memory twice.
//   - Every replica of a group applies the same deliveries in the same
//     order, so Apply must be deterministic: the same state and batch give
//     the same results and the same next state at every replica. No clock,
//     randomness or I/O that can differ between replicas.
//
// Why this shape (dragonboat's IStateMachine, etcd's apply loop): a batch
// Apply lets an application amortise its own work per Ready (the node
// hands over one Ready's deliveries at a time, already group-committed);
// one result per entry is what travels back to the client; streaming
// snapshots keep a large state out of memory. The Driver, not the
// application, tracks the applied gts and the client results, so an
// application cannot get exactly-once wrong.
//
// The package is a protocol core in the purity sense (purity_test.go): no
// goroutines, clocks, files or network; the node does the I/O.
package rsm

import (
	"errors"
	"io"

	"github.com/weft-dev/weft/wire"
)

// Entry is one delivery handed to the state machine.
type Entry struct {
	// ID is the message's id: the client, its session and sequence number.
	ID wire.MsgID
	// Dest is the message's destination groups (increasing).
	Dest []wire.GroupID
	// Payload is the application's command. The state machine must not
	// keep a reference to it past Apply unless it copies it.
	Payload []byte
	// GTS is the message's global timestamp: the same at every replica of
	// every destination group, and increasing along the deliveries of a
	// replica.
	GTS wire.Timestamp
	// Floor is the client's floor (wire.AppMsg.Floor): every message of
	// the session up to it was answered. The Driver uses it to forget
	// results; applications may ignore it.
	Floor uint64
	// Votes, for an entry an Exchanger gave voters, holds every voter's
	// vote in Dest's order (this group's own included; nil for a group
	// that does not vote): the input the other groups' states give it
	// (exchange.go). Nil for an entry without voters.
	Votes [][]byte
}

// EntryOf returns the Entry for message m delivered with global timestamp
// gts.
func EntryOf(m *wire.AppMsg, gts wire.Timestamp) Entry {
	return Entry{ID: m.ID, Dest: m.Dest, Payload: m.Payload, GTS: gts, Floor: m.Floor}
}

// StateMachine is a replicated service's state, applied at every replica of
// a group (docs/rsm.md has the full contract).
type StateMachine interface {
	// Apply applies batch, in order, and returns one result per entry (nil
	// is an empty result). An application-level failure of one command (a
	// failed compare-and-set, a missing key) is a result, not an error: an
	// error means the state machine cannot go on (its state is undefined),
	// and the node stops; it restarts from the last snapshot and replays.
	// Each result is at most the Driver's MaxResult bytes.
	Apply(batch []Entry) ([][]byte, error)
	// Snapshot writes the state, as of the last entry applied, to w. It is
	// called between two Applies (a delivery boundary), on the goroutine
	// that calls Apply.
	Snapshot(w io.Writer) error
	// Restore replaces the state by one Snapshot wrote. It is called
	// before any Apply, or not at all (an empty state).
	Restore(r io.Reader) error
}

// ErrResultTooLarge is returned (wrapped) by Driver.Apply when the state
// machine returned a result over Config.MaxResult: a result must fit in a
// DELIVERED reply.
var ErrResultTooLarge = errors.New("rsm: result too large")

// ErrBadSnapshot is returned (wrapped) by Driver.Restore for a snapshot that
// is not one Driver.Snapshot wrote, or that is truncated or corrupt.
var ErrBadSnapshot = errors.New("rsm: bad snapshot")
