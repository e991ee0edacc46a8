package membership

import (
	"fmt"
	"time"

	"github.com/weft-dev/weft/wire"
)

// EventKind is the type of an Event.
type EventKind uint8

// Event kinds.
const (
	// EventJoin: an endpoint appeared in the local view (not yet judged
	// up).
	EventJoin EventKind = iota + 1
	// EventAlive: an endpoint showed heartbeat progress and is up.
	EventAlive
	// EventDead: the failure detector convicted an endpoint.
	EventDead
	// EventChanged: an endpoint's app state Key changed to Value.
	EventChanged
	// EventLeft: an endpoint departed; Value is its status (LEFT or
	// REMOVED with expiry). It is down from now on and evicted at expiry.
	EventLeft
	// EventRemoved: an endpoint's record was evicted (expired departure);
	// gossip about it is quarantined. With Node equal to the local id: a
	// newer generation of this node's own record is circulating (it was
	// assassinated); restart it to rejoin.
	EventRemoved
	// EventRestarted: an endpoint came back with a newer Generation; its
	// record was replaced wholesale (re-read all its app states).
	EventRestarted
	// EventLeaveComplete: this node finished announcing its departure
	// and stopped; the driver may shut it down.
	EventLeaveComplete
	// EventAssassinated: an Assassinate completed; Node's record is now
	// REMOVED.
	EventAssassinated
	// EventAssassinateRefused: an Assassinate was abandoned; Value says
	// why (the target showed heartbeat progress: it is alive).
	EventAssassinateRefused
	// EventClusterMismatch: a SYN from Node named cluster Value; it was
	// dropped. Reported once per sender, counted always.
	EventClusterMismatch
	// EventGenerationRejected: gossip about Node carried Generation,
	// more than MaxGenerationAhead beyond the local clock; ignored.
	// Reported once per endpoint, counted always.
	EventGenerationRejected
	// EventStateSizeWarning: the local view grew past StateWarnBytes
	// (Bytes). Re-armed when it falls below 90% of that.
	EventStateSizeWarning
	// EventStateLimit: a new endpoint (Node) was refused because the
	// local view is at MaxStateBytes. Reported once per endpoint.
	EventStateLimit
	// EventClockSkew: Node's clock is Offset ahead of this node's (behind
	// if negative), beyond Config.ClockSkewThreshold (clock.go). Reported
	// when it crosses the threshold, not per exchange.
	EventClockSkew
	// EventClockSkewCleared: Node's offset fell back below 90% of the
	// threshold.
	EventClockSkewCleared
	// EventGenerationAhead: Node's new Generation is Offset ahead of this
	// node's clock, more than ClockSkewThreshold (plus a second): one of
	// the two clocks is off. Accepted all the same; reported once per
	// generation.
	EventGenerationAhead
)

var eventNames = [...]string{
	EventJoin: "join", EventAlive: "alive", EventDead: "dead", EventChanged: "changed",
	EventLeft: "left", EventRemoved: "removed", EventRestarted: "restarted",
	EventLeaveComplete: "leave-complete", EventAssassinated: "assassinated",
	EventAssassinateRefused: "assassinate-refused", EventClusterMismatch: "cluster-mismatch",
	EventGenerationRejected: "generation-rejected", EventStateSizeWarning: "state-size-warning",
	EventStateLimit: "state-limit", EventClockSkew: "clock-skew", EventClockSkewCleared: "clock-skew-cleared",
	EventGenerationAhead: "generation-ahead",
}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is a change in the local view or a report.
type Event struct {
	Kind       EventKind
	Node       wire.ProcID
	Key        Key    // EventChanged
	Value      string // EventChanged: new value; EventLeft: status; EventClusterMismatch: cluster; EventAssassinateRefused: reason
	Generation uint64 // EventRestarted, EventGenerationRejected, EventRemoved (self)
	Bytes      int    // EventStateSizeWarning
	// Offset: EventClockSkew(Cleared): the peer's clock minus this node's;
	// EventGenerationAhead: how far the generation is ahead.
	Offset time.Duration
}

func (e Event) String() string {
	s := fmt.Sprintf("%s %d", e.Kind, e.Node)
	switch e.Kind {
	case EventChanged:
		s += fmt.Sprintf(" %s=%q", e.Key, e.Value)
	case EventLeft, EventClusterMismatch, EventAssassinateRefused:
		s += fmt.Sprintf(" %q", e.Value)
	case EventRestarted, EventGenerationRejected:
		s += fmt.Sprintf(" gen=%d", e.Generation)
	case EventStateSizeWarning:
		s += fmt.Sprintf(" bytes=%d", e.Bytes)
	case EventClockSkew, EventClockSkewCleared:
		s += fmt.Sprintf(" offset=%v", e.Offset)
	case EventGenerationAhead:
		s += fmt.Sprintf(" gen=%d ahead=%v", e.Generation, e.Offset)
	}
	return s
}
