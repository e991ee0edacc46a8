// Package phi is Cassandra's phi-accrual failure detector (CASSANDRA-2597) as
// pure values: no clock, no goroutines, no maps. The caller supplies every
// instant as int64 nanoseconds of its own clock (a virtual clock in the
// simulator, the wall clock in a real node) and keeps one Window per
// monitored endpoint; a Detector holds the configuration and the guards that
// decide whether convictions are allowed at all.
//
// The model is Cassandra's exponential one, not Akka's normal one:
//
//	phi = PhiFactor * (now - last arrival) / mean(inter-arrival window)
//
// with PhiFactor = 1/ln 10, so an endpoint is convicted when it has been
// silent for more than Threshold * ln 10 (≈ 18.42 for the default 8) mean
// inter-arrival times. The window keeps the last WindowSize intervals; the
// first arrival seeds it with InitialInterval (erring high avoids flapping
// while the real mean is unknown), and intervals longer than MaxInterval are
// ignored, so a long partition does not teach the detector to wait longer.
//
// Two guards suppress convictions when the fault is more likely local:
//
//   - Local pause: if more than MaxLocalPause passed between two status
//     checks, the caller's own loop stalled (GC, VM pause, overload); every
//     endpoint looks silent for the length of the stall. No conviction at
//     that check, nor at any check within MaxLocalPause after it.
//   - Backlog: if the caller still has inbound gossip waiting and has not
//     processed any for more than BacklogWindow, its view is stale rather
//     than its peers dead; that check convicts nobody. (Cassandra sleeps
//     100 ms and re-checks; a pure machine cannot sleep, so it skips the
//     round and the next round re-checks.)
package phi

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// PhiFactor scales Cassandra's raw phi (silence / mean) so that the
// historical threshold of 8 keeps its meaning: 1/ln 10 ≈ 0.434.
const PhiFactor = 1 / math.Ln10

// maxSample is the largest interval a window can hold: samples are stored
// as uint32 microseconds (4 bytes each, which matters with a 1000-sample
// window per endpoint per node).
const maxSample = time.Duration(math.MaxUint32) * time.Microsecond

// Config configures a Detector. Defaults returns Cassandra's values.
type Config struct {
	// Threshold is the phi above which an endpoint is convicted.
	// Cassandra: 8 (validated there to 5..16; raise to 10-12 on noisy
	// clouds).
	Threshold float64
	// WindowSize is the number of inter-arrival intervals kept per
	// endpoint. Cassandra: 1000. Memory is 4 bytes per sample, allocated as
	// samples arrive.
	WindowSize int
	// InitialInterval seeds an empty window on the first arrival.
	// Cassandra: 2 s, twice the gossip interval.
	InitialInterval time.Duration
	// MaxInterval is the longest interval recorded; longer ones are
	// ignored. Cassandra: equal to the initial value, 2 s.
	MaxInterval time.Duration
	// MaxLocalPause is the local-pause guard: a gap between two checks
	// longer than this suppresses convictions for this long. Cassandra:
	// 5 s. Zero disables the guard.
	MaxLocalPause time.Duration
	// BacklogWindow is the backlog guard: with inbound gossip still queued
	// and none processed for longer than this, a check convicts nobody.
	// Cassandra: 1 s. Zero disables the guard.
	BacklogWindow time.Duration
}

// Defaults returns Cassandra's failure-detector settings for its 1 s gossip
// interval.
func Defaults() Config {
	return Config{
		Threshold:       8,
		WindowSize:      1000,
		InitialInterval: 2 * time.Second,
		MaxInterval:     2 * time.Second,
		MaxLocalPause:   5 * time.Second,
		BacklogWindow:   time.Second,
	}
}

// Validate reports the first invalid setting.
func (c *Config) Validate() error {
	switch {
	case !(c.Threshold > 0) || math.IsInf(c.Threshold, 0):
		return fmt.Errorf("phi: threshold %v must be positive and finite", c.Threshold)
	case c.WindowSize < 1 || c.WindowSize > 1<<20:
		return fmt.Errorf("phi: window size %d out of range 1..%d", c.WindowSize, 1<<20)
	case c.InitialInterval <= 0 || c.InitialInterval > maxSample:
		return fmt.Errorf("phi: initial interval %v out of range (0, %v]", c.InitialInterval, maxSample)
	case c.MaxInterval <= 0 || c.MaxInterval > maxSample:
		return fmt.Errorf("phi: max interval %v out of range (0, %v]", c.MaxInterval, maxSample)
	case c.MaxLocalPause < 0:
		return errors.New("phi: negative max local pause")
	case c.BacklogWindow < 0:
		return errors.New("phi: negative backlog window")
	}
	return nil
}

// Window is the arrival history of one endpoint. The zero value is an empty
// window. It is about 48 bytes plus 4 bytes per sample, and it is only
// meaningful together with the Detector that fills it.
type Window struct {
	last int64    // time of the last arrival
	sum  uint64   // sum of ring, in microseconds
	ring []uint32 // inter-arrival samples, microseconds; grows to WindowSize
	next int32    // once full, the slot to overwrite next
}

// Len returns the number of samples in the window (0 before the first
// arrival).
func (w *Window) Len() int { return len(w.ring) }

// Last returns the time of the last arrival and whether there was one.
func (w *Window) Last() (int64, bool) { return w.last, len(w.ring) > 0 }

// Mean returns the mean inter-arrival interval, or 0 for an empty window.
func (w *Window) Mean() time.Duration {
	if len(w.ring) == 0 {
		return 0
	}
	return time.Duration(w.sum*1000) / time.Duration(len(w.ring))
}

// Reset empties the window, keeping its memory for reuse.
func (w *Window) Reset() {
	w.last, w.sum, w.ring, w.next = 0, 0, w.ring[:0], 0
}

// Release empties the window and frees its memory.
func (w *Window) Release() { *w = Window{} }

func (w *Window) push(us uint32, size int) {
	if len(w.ring) < size {
		w.ring = append(w.ring, us)
		w.sum += uint64(us)
		return
	}
	w.sum -= uint64(w.ring[w.next])
	w.ring[w.next] = us
	w.sum += uint64(us)
	if w.next++; int(w.next) >= len(w.ring) {
		w.next = 0
	}
}

// Verdict is the outcome of a Detector's guard check.
type Verdict uint8

// Verdicts of Check.
const (
	// Allow: convictions are allowed at this check.
	Allow Verdict = iota
	// LocalPause: the local loop stalled; no convictions.
	LocalPause
	// Backlog: inbound gossip is queued and stale; no convictions.
	Backlog
)

func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case LocalPause:
		return "local-pause"
	case Backlog:
		return "backlog"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Detector applies one configuration to any number of Windows and keeps the
// guard state of one local loop. It is not safe for concurrent use.
type Detector struct {
	cfg       Config
	checked   bool  // Check was called before
	lastCheck int64 // time of the previous Check
	paused    bool  // a local pause was seen
	pauseAt   int64 // time of the check that saw it
}

// New returns a Detector, or an error for an invalid configuration.
func New(cfg Config) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Detector{cfg: cfg}, nil
}

// Config returns the detector's configuration.
func (d *Detector) Config() Config { return d.cfg }

// Report records an arrival (heartbeat progress) for w at now. The first
// arrival seeds the window with InitialInterval; later ones add now minus
// the previous arrival unless it exceeds MaxInterval or is negative (the
// caller's clock stepped back), which is ignored. Either way now becomes
// the last arrival.
func (d *Detector) Report(w *Window, now int64) {
	if len(w.ring) == 0 {
		w.push(uint32(d.cfg.InitialInterval/time.Microsecond), d.cfg.WindowSize)
	} else if iv := now - w.last; iv >= 0 && iv <= int64(d.cfg.MaxInterval) {
		w.push(uint32(iv/int64(time.Microsecond)), d.cfg.WindowSize)
	}
	w.last = now
}

// Phi returns the scaled phi of w at now: PhiFactor * (now - last) / mean.
// It is 0 for an empty window or when now is not after the last arrival,
// and +Inf when the mean is 0 and time has passed.
func (d *Detector) Phi(w *Window, now int64) float64 {
	if len(w.ring) == 0 {
		return 0
	}
	t := now - w.last
	if t <= 0 {
		return 0
	}
	if w.sum == 0 {
		return math.Inf(1)
	}
	mean := float64(w.sum) * 1000 / float64(len(w.ring)) // nanoseconds
	return PhiFactor * float64(t) / mean
}

// Convict reports whether w's phi at now exceeds the threshold. It ignores
// the guards: call Check once per status check and convict only when it
// returns Allow.
func (d *Detector) Convict(w *Window, now int64) bool {
	return d.Phi(w, now) > d.cfg.Threshold
}

// Check runs the guards. Call it exactly once per status check (gossip
// round), before convicting anyone, with the number of inbound messages
// still queued and the time the last one was processed (0 if never). It
// returns Allow when convictions may proceed.
func (d *Detector) Check(now int64, backlog int, lastProcessed int64) Verdict {
	first := !d.checked
	gap := now - d.lastCheck
	d.checked, d.lastCheck = true, now
	if p := int64(d.cfg.MaxLocalPause); p > 0 {
		if !first && gap > p {
			d.paused, d.pauseAt = true, now
			return LocalPause
		}
		if d.paused && now-d.pauseAt < p {
			return LocalPause
		}
	}
	if b := int64(d.cfg.BacklogWindow); b > 0 && backlog > 0 && now-lastProcessed > b {
		return Backlog
	}
	return Allow
}
