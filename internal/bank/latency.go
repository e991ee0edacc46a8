package bank

import (
	"math/rand/v2"
	"slices"
	"time"
)

// latencies keeps a uniform sample of at most max latencies (reservoir
// sampling, Vitter's algorithm R), so that a long run's memory stays
// bounded while its percentiles stay unbiased; the maximum is exact. Not
// safe for concurrent use (the Workload holds its lock).
type latencies struct {
	max    int
	n      int // latencies added
	sample []time.Duration
	top    time.Duration
	rng    *rand.Rand
}

func newLatencies(max int, seed uint64) *latencies {
	return &latencies{max: max, rng: rand.New(rand.NewPCG(seed, 0x1a7))}
}

func (l *latencies) add(d time.Duration) {
	l.n++
	l.top = max(l.top, d)
	if len(l.sample) < l.max {
		l.sample = append(l.sample, d)
		return
	}
	if j := l.rng.IntN(l.n); j < l.max {
		l.sample[j] = d
	}
}

// percentiles returns the p50 and p99 of the sample (0 without one).
func (l *latencies) percentiles() (p50, p99 time.Duration) {
	if len(l.sample) == 0 {
		return 0, 0
	}
	s := slices.Clone(l.sample)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(int(q*float64(len(s))), len(s)-1)] }
	return at(0.5), at(0.99)
}
