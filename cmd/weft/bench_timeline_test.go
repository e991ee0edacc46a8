package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestLatHist: every latency falls in a bucket whose lower bound is at
// most the latency and within 1/16 of it (the histogram's resolution), and
// quantiles of a sample match the sorted sample's within that resolution.
func TestLatHist(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := newLatHist()
	var all []int64
	for range 20000 {
		ns := int64(1000 + rng.ExpFloat64()*3e6)
		if rng.IntN(50) == 0 {
			ns = int64(rng.IntN(5000)) // under a few µs
		}
		all = append(all, ns)
		h.add(ns)
		lo := latLow(latBucket(ns))
		if us := max(ns/1000, 1) * 1000; lo > us || float64(us-lo) > float64(us)/16+1000 {
			t.Fatalf("%dns in bucket %d with lower bound %dns", ns, latBucket(ns), lo)
		}
	}
	if h.count() != 20000 {
		t.Fatalf("count %d", h.count())
	}
	slices.Sort(all)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		want := time.Duration(all[int(q*float64(len(all)-1))])
		got := h.quantile(q)
		if got > want || float64(want-got) > float64(want)/16+1000 {
			t.Errorf("q%.2f: histogram %v, sample %v", q, got, want)
		}
	}
	o := newLatHist()
	o.merge(h)
	o.merge(h)
	if o.count() != 40000 || o.quantile(0.5) != h.quantile(0.5) {
		t.Errorf("merged: count %d, median %v (want %v)", o.count(), o.quantile(0.5), h.quantile(0.5))
	}
	if newLatHist().quantile(0.5) != 0 {
		t.Error("empty histogram's median is not 0")
	}
}
