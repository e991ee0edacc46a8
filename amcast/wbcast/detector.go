package wbcast

import "github.com/weft-dev/weft/amcast"

// Detector judges the liveness of the members of a process's group
// (amcast.Detector). Real nodes plug in gossip's phi-accrual verdicts.
type Detector = amcast.Detector

// TimeoutDetector is amcast's fixed-timeout detector, the default.
type TimeoutDetector = amcast.TimeoutDetector

// NewTimeoutDetector returns a detector with the given timeout in ticks.
func NewTimeoutDetector(timeout uint64) *TimeoutDetector { return amcast.NewTimeoutDetector(timeout) }
