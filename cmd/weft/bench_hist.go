package main

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
	"unsafe"
)

// A bench client process keeps its latencies as histograms, not as a list
// of every one: a ten-minute run at 30,000 operations/s would otherwise
// hold (and send back as JSON) 18 million numbers. A histogram's size does
// not depend on the run's length (issue #14: everything bounded, the bench
// included).

// latSubBits: 2^latSubBits sub-buckets per power of two of microseconds,
// so a bucket is at most 1/128 of its latency wide (a quantile, reported
// at its bucket's middle, is within 0.4% of the exact one), and below
// 128 µs a bucket is one microsecond.
const latSubBits = 7

// latBuckets is the size of a latHist: up to 2^40 µs (12 days).
const latBuckets = 41 << latSubBits

// latHist is a log-linear latency histogram: small, mergeable, and its
// buckets counted with atomic adds so one process's workers share one.
type latHist []uint32

func newLatHist() latHist { return make(latHist, latBuckets) }

// latBucket is the bucket of a latency in nanoseconds.
func latBucket(ns int64) int {
	us := uint64(max(ns/1000, 1))
	e := bits.Len64(us) - 1 // us in [2^e, 2^(e+1))
	var sub uint64
	if e >= latSubBits {
		sub = us >> (e - latSubBits)
	} else {
		sub = us << (latSubBits - e)
	}
	return min(e<<latSubBits+int(sub&(1<<latSubBits-1)), latBuckets-1)
}

// latLow is the lowest latency of bucket i, and latWidth its width, in
// nanoseconds.
func latLow(i int) int64 {
	e, sub := i>>latSubBits, uint64(i&(1<<latSubBits-1))
	var us uint64
	if e >= latSubBits {
		us = uint64(1)<<e | sub<<(e-latSubBits)
	} else {
		us = uint64(1)<<e | sub>>(latSubBits-e) // the inverse of latBucket's shift
	}
	return int64(us) * 1000
}

func latWidth(i int) int64 {
	return 1000 << max(i>>latSubBits-latSubBits, 0)
}

// add counts a latency; safe for concurrent use.
func (h latHist) add(ns int64) { atomic.AddUint32(&h[latBucket(ns)], 1) }

// merge adds o's counts to h (not concurrently with add).
func (h latHist) merge(o latHist) {
	for i := range min(len(h), len(o)) {
		h[i] += o[i]
	}
}

func (h latHist) count() (n uint64) {
	for _, c := range h {
		n += uint64(c)
	}
	return n
}

// quantile is the middle of the bucket holding quantile q (rank
// ⌊q·n⌋ of n, 0-based, as the bench's rows always counted it).
func (h latHist) quantile(q float64) time.Duration {
	n := h.count()
	if n == 0 {
		return 0
	}
	rank := min(uint64(q*float64(n)), n-1)
	var seen uint64
	for i, c := range h {
		seen += uint64(c)
		if seen > rank {
			return time.Duration(latLow(i) + latWidth(i)/2)
		}
	}
	return time.Duration(latLow(len(h)-1) + latWidth(len(h)-1)/2)
}

// MarshalJSON writes only the buckets in use, as [index, count] pairs.
func (h latHist) MarshalJSON() ([]byte, error) {
	pairs := [][2]uint64{}
	for i, c := range h {
		if c != 0 {
			pairs = append(pairs, [2]uint64{uint64(i), uint64(c)})
		}
	}
	return json.Marshal(pairs)
}

// UnmarshalJSON reads MarshalJSON's pairs, refusing an index out of range
// or repeated.
func (h *latHist) UnmarshalJSON(b []byte) error {
	var pairs [][2]uint64
	if err := json.Unmarshal(b, &pairs); err != nil {
		return err
	}
	out := newLatHist()
	for _, p := range pairs {
		if p[0] >= latBuckets || p[1] > 1<<32-1 || out[p[0]] != 0 {
			return fmt.Errorf("latency histogram: bad bucket [%d, %d]", p[0], p[1])
		}
		out[p[0]] = uint32(p[1])
	}
	*h = out
	return nil
}

// latKind is one operation kind's latencies: the histogram and the exact
// largest.
//
// MaxNs comes first and the struct's size is a multiple of 8 on every
// platform: add updates it with 64-bit atomics, which 32-bit platforms
// allow only on 8-aligned words, and latKinds live in slices.
type latKind struct {
	MaxNs int64   `json:"max_ns"`
	Hist  latHist `json:"hist"`
	_     [(8 - unsafe.Sizeof(latHist(nil))%8) % 8]byte
}

func newLatKind() latKind { return latKind{Hist: newLatHist()} }

// add counts a latency; safe for concurrent use.
func (k *latKind) add(ns int64) {
	k.Hist.add(ns)
	for {
		m := atomic.LoadInt64(&k.MaxNs)
		if ns <= m || atomic.CompareAndSwapInt64(&k.MaxNs, m, ns) {
			return
		}
	}
}

// merge adds o to k (not concurrently with add).
func (k *latKind) merge(o latKind) {
	if k.Hist == nil {
		k.Hist = newLatHist()
	}
	k.Hist.merge(o.Hist)
	k.MaxNs = max(k.MaxNs, o.MaxNs)
}

func (k latKind) count() int { return int(k.Hist.count()) }

// pctMs is quantile q in milliseconds (q = 1: the exact largest; 0
// without any).
func (k latKind) pctMs(q float64) float64 {
	if q >= 1 {
		return float64(k.MaxNs) / 1e6
	}
	return min(float64(k.Hist.quantile(q)), float64(k.MaxNs)) / 1e6
}
