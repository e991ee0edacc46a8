package sim

import "slices"

// LatencySummary is a latency distribution in δ.
type LatencySummary struct {
	N             int
	P50, P99, Max float64
}

// Summarize turns latencies in virtual units into a summary in δ. It sorts
// lat in place.
func Summarize(lat []int64, delta int64) LatencySummary {
	if len(lat) == 0 {
		return LatencySummary{}
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		i := int(q*float64(len(lat))+0.5) - 1
		i = min(max(i, 0), len(lat)-1)
		return float64(lat[i]) / float64(delta)
	}
	return LatencySummary{N: len(lat), P50: at(0.50), P99: at(0.99), Max: float64(lat[len(lat)-1]) / float64(delta)}
}
