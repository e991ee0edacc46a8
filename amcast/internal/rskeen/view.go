package rskeen

import (
	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/internal/paxos"
	"github.com/weft-dev/weft/wire"
)

// View is the read-only face of a Core that a protocol's Process exposes
// (issue #10 item 8): the amcast.Machine and amcast.Observable methods and
// the status getters, and nothing that changes the replica's state behind
// the protocol's back. Processes keep their Core in an unexported field and
// embed a View of it under an unexported alias, so a caller can drive the
// replica (Tick, Ready, Advance) and read it, but not make it Send,
// Persist or Deliver what it never ordered.
type View struct{ c *Core }

// ViewOf returns the read-only view of c.
func ViewOf(c *Core) View { return View{c: c} }

// ID implements amcast.Machine.
func (v View) ID() wire.ProcID { return v.c.ID }

// Tick implements amcast.Machine.
func (v View) Tick() { v.c.Tick() }

// HasReady implements amcast.Machine.
func (v View) HasReady() bool { return v.c.HasReady() }

// Ready implements amcast.Machine.
func (v View) Ready() amcast.Ready { return v.c.Ready() }

// Advance implements amcast.Machine.
func (v View) Advance() { v.c.Advance() }

// IsLeader implements amcast.Observable.
func (v View) IsLeader() bool { return v.c.IsLeader() }

// Retained implements amcast.Observable.
func (v View) Retained() int { return v.c.Retained() }

// Coverage implements amcast.Observable.
func (v View) Coverage() amcast.Coverage { return v.c.Coverage() }

// Rejected implements amcast.RejectCounter: the refused inputs of this
// incarnation, by reason.
func (v View) Rejected() map[string]uint64 { return v.c.Rejected() }

// Status returns the replica's Paxos role.
func (v View) Status() paxos.Status { return v.c.Status() }

// Role returns the replica's Paxos role as a string.
func (v View) Role() string { return v.c.Role() }

// Ballot returns the replica's Paxos ballot (twice: ballot and cballot).
func (v View) Ballot() (wire.Ballot, wire.Ballot) { return v.c.Ballot() }

// MaxDelivered returns the global timestamp of the last delivery.
func (v View) MaxDelivered() wire.Timestamp { return v.c.MaxDelivered() }
