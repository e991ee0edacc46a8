package amcast

import (
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// Detector judges the liveness of the members of a process's group. It is
// told when a member was heard from and asked whether a member is
// suspected, with time in the process's ticks. Implementations must be
// deterministic; the default is a fixed timeout (NewTimeoutDetector). A
// real node plugs in gossip's phi-accrual detector behind this interface.
type Detector interface {
	// Heard records a message from p at tick now.
	Heard(p wire.ProcID, now uint64)
	// Suspected reports whether p is suspected at tick now.
	Suspected(p wire.ProcID, now uint64) bool
}

// TimeoutDetector suspects a member not heard from for more than Timeout
// ticks. Members never heard from count as heard at tick 0, so a process
// that just started gives its peers one timeout to show up.
type TimeoutDetector struct {
	Timeout uint64
	last    map[wire.ProcID]uint64
}

// NewTimeoutDetector returns a detector with the given timeout in ticks.
func NewTimeoutDetector(timeout uint64) *TimeoutDetector {
	return &TimeoutDetector{Timeout: timeout, last: map[wire.ProcID]uint64{}}
}

// Heard implements Detector.
func (d *TimeoutDetector) Heard(p wire.ProcID, now uint64) { d.last[p] = now }

// Suspected implements Detector.
func (d *TimeoutDetector) Suspected(p wire.ProcID, now uint64) bool {
	return now > d.last[p]+d.Timeout
}

// SilentFor reports whether p has not been heard from for more than
// ticks ticks (Suspected with another timeout).
func (d *TimeoutDetector) SilentFor(p wire.ProcID, now, ticks uint64) bool {
	return now > d.last[p]+ticks
}

// IntDefault is an integer Config field: zero takes Default, a negative
// value is an error naming the field.
type IntDefault struct {
	V       *int
	Default int
	Name    string
}

// ReplicaDefaults is the common part of the protocols' Config checks: id
// must be a replica of topo, and each field takes its default when zero.
// Errors start with pkg ("wbcast", "paxos").
func ReplicaDefaults(pkg string, topo *Topology, id wire.ProcID, fields ...IntDefault) error {
	if topo == nil {
		return fmt.Errorf("%s: Config.Topology is nil", pkg)
	}
	if !topo.IsReplica(id) {
		return fmt.Errorf("%s: process %d is not a replica of the topology", pkg, id)
	}
	for _, f := range fields {
		if *f.V == 0 {
			*f.V = f.Default
		}
		if *f.V < 0 {
			return fmt.Errorf("%s: Config.%s must be positive, got %d", pkg, f.Name, *f.V)
		}
	}
	return nil
}
