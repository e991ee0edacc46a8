package phi

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// MaxArenaWindow is the largest WindowSize an Arena supports.
const MaxArenaWindow = 1<<15 - 1

// Arena holds the windows of many endpoints for one Detector configuration
// in flat, pointer-free arrays, addressed by index 0..Len()-1. It is the
// form for callers that keep very many windows (a gossip node's view of a
// large cluster; a simulator holding every node's view): 16 bytes per
// window plus 2 bytes per sample, allocated up front, against about 48
// bytes plus 4 per sample for a Window, and nothing for the garbage
// collector to scan.
//
// Samples are stored as 16-bit multiples of Resolution: the smallest power
// of ten microseconds for which 65535 units cover the longest interval kept
// (max of InitialInterval and MaxInterval), e.g. 100 µs for Cassandra's
// 2 s. Intervals are rounded to the nearest unit, so a mean differs from a
// Window's by at most half a unit; otherwise the rules are the Window's
// (seeded with InitialInterval, intervals above MaxInterval or negative
// ignored, phi = PhiFactor * silence / mean).
type Arena struct {
	size      int
	res       int64 // nanoseconds per unit
	initial   uint16
	maxIv     int64
	threshold float64
	invRes    float64 // 1 / res
	heads     []head
	ring      []uint16 // size samples per window
}

// head is a window's fixed part (16 bytes: what Report and Convict touch
// together sits in one cache line).
type head struct {
	last int64  // time of the last arrival
	sum  uint32 // sum of the window's samples, in units
	pos  uint16 // < size: samples held (= next slot); >= size: full, next slot pos-size
}

// NewArena returns an empty arena for d's configuration, or an error if
// its WindowSize exceeds MaxArenaWindow.
func (d *Detector) NewArena() (*Arena, error) {
	c := d.cfg
	if c.WindowSize > MaxArenaWindow {
		return nil, fmt.Errorf("phi: window size %d exceeds the arena limit %d", c.WindowSize, MaxArenaWindow)
	}
	longest := max(c.InitialInterval, c.MaxInterval)
	res := time.Microsecond
	for res*math.MaxUint16 < longest {
		res *= 10
	}
	a := &Arena{size: c.WindowSize, res: int64(res), maxIv: int64(c.MaxInterval), threshold: c.Threshold,
		invRes: 1 / float64(res)}
	a.initial = a.quantize(int64(c.InitialInterval))
	return a, nil
}

// Resolution returns the unit in which samples are stored.
func (a *Arena) Resolution() time.Duration { return time.Duration(a.res) }

func (a *Arena) quantize(iv int64) uint16 {
	// 0 <= iv <= max(InitialInterval, MaxInterval) <= 65535 units: a
	// float multiply rounds as well as a division, faster.
	return uint16(min(float64(iv)*a.invRes+0.5, math.MaxUint16))
}

// Len returns the number of windows.
func (a *Arena) Len() int { return len(a.heads) }

// Resize makes the arena hold n windows: new ones are empty, windows at
// n and beyond are dropped.
func (a *Arena) Resize(n int) {
	if n <= len(a.heads) {
		a.heads, a.ring = a.heads[:n], a.ring[:n*a.size]
		return
	}
	a.heads = grow(a.heads, n)
	a.ring = grow(a.ring, n*a.size)
}

// grow extends s to length n with zeros.
func grow[T any](s []T, n int) []T {
	old := len(s)
	s = slices.Grow(s, n-old)[:n]
	clear(s[old:])
	return s
}

// Move copies window src over window dst; src is unchanged.
func (a *Arena) Move(dst, src int) {
	if dst == src {
		return
	}
	a.heads[dst] = a.heads[src]
	copy(a.ring[dst*a.size:(dst+1)*a.size], a.ring[src*a.size:(src+1)*a.size])
}

// Clear empties window i.
func (a *Arena) Clear(i int) { a.heads[i] = head{} }

// Samples returns the number of samples in window i.
func (a *Arena) Samples(i int) int { return min(int(a.heads[i].pos), a.size) }

// Last returns the time of window i's last arrival and whether it had one.
func (a *Arena) Last(i int) (int64, bool) { return a.heads[i].last, a.heads[i].pos > 0 }

// Mean returns window i's mean interval, or 0 if it is empty.
func (a *Arena) Mean(i int) time.Duration {
	n := a.Samples(i)
	if n == 0 {
		return 0
	}
	return time.Duration(int64(a.heads[i].sum) * a.res / int64(n))
}

func (a *Arena) push(h *head, i int, q uint16) {
	p := int(h.pos)
	slot := p
	if p >= a.size {
		slot = p - a.size
	}
	k := i*a.size + slot
	if p >= a.size {
		h.sum -= uint32(a.ring[k])
	}
	a.ring[k] = q
	h.sum += uint32(q)
	p++
	if p == 2*a.size {
		p = a.size
	}
	h.pos = uint16(p)
}

// Report records an arrival for window i at now, with Detector.Report's
// rules.
func (a *Arena) Report(i int, now int64) {
	h := &a.heads[i]
	if h.pos == 0 {
		a.push(h, i, a.initial)
	} else if iv := now - h.last; iv >= 0 && iv <= a.maxIv {
		a.push(h, i, a.quantize(iv))
	}
	h.last = now
}

// Phi returns window i's scaled phi at now (0 if empty or now is not after
// the last arrival, +Inf if the mean is 0).
func (a *Arena) Phi(i int, now int64) float64 {
	n := a.Samples(i)
	if n == 0 {
		return 0
	}
	h := &a.heads[i]
	t := now - h.last
	if t <= 0 {
		return 0
	}
	if h.sum == 0 {
		return math.Inf(1)
	}
	mean := float64(h.sum) * float64(a.res) / float64(n)
	return PhiFactor * float64(t) / mean
}

// Convict reports whether window i's phi at now exceeds the threshold
// (ignoring the guards, like Detector.Convict). It is exactly
// Phi(i, now) > threshold, so a caller can predict it from Phi.
func (a *Arena) Convict(i int, now int64) bool { return a.Phi(i, now) > a.threshold }
