package wbcast

import "github.com/weft-dev/weft/wire"

// Detector judges the liveness of the members of a process's group. It is
// told when a member was heard from and asked whether a member is
// suspected, with time in the process's ticks. Implementations must be
// deterministic; the default is a fixed timeout (NewTimeoutDetector). A real
// node plugs in gossip's phi-accrual detector behind this interface.
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
