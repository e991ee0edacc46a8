package sim

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// baselineSeeds is the size of TestSwarmSweepBaselines per protocol:
// WEFT_BASELINE_SEEDS, else 100 (30 with -short).
func baselineSeeds(t *testing.T) int {
	if s := os.Getenv("WEFT_BASELINE_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("WEFT_BASELINE_SEEDS=%q", s)
		}
		return n
	}
	if testing.Short() {
		return 30
	}
	return 100
}

// TestSwarmSweepBaselines runs the swarm (crashes, torn crashes,
// partitions, link resets, delay spikes, then the GST liveness phase) on
// the replicated-log baselines, FT-Skeen and FastCast: zero violations and
// the coverage facts (leader changes, recoveries with a command in flight).
// Larger sweeps: weft sim sweep --protocol ftskeen --seeds 2000.
func TestSwarmSweepBaselines(t *testing.T) {
	seeds := baselineSeeds(t)
	for _, protocol := range []string{"ftskeen", "fastcast"} {
		t.Run(protocol, func(t *testing.T) {
			var (
				mu  sync.Mutex
				agg SweepSummary
				wg  sync.WaitGroup
			)
			next := make(chan uint64)
			for range runtime.GOMAXPROCS(0) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for seed := range next {
						r := RunSwarm(protocol, seed)
						mu.Lock()
						agg.Add(r)
						mu.Unlock()
					}
				}()
			}
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				next <- seed
			}
			close(next)
			wg.Wait()
			t.Logf("%s: %d seeds, %d multicasts, %d deliveries, leader changes %d, recoveries with a command in flight %d, converged %d",
				protocol, agg.Seeds, agg.Multicasts, agg.Deliveries, agg.LeaderChanges, agg.Coverage.RecoveriesWithAccepted, agg.Converged)
			if agg.Violations > 0 {
				var sb strings.Builder
				for i, f := range agg.Failures {
					if i == 5 {
						break
					}
					sb.WriteString("seed " + strconv.FormatUint(f.Seed, 10) + ": " + f.Detail + "\n  replay: weft sim run --protocol " + protocol + " --faults swarm --seed " + strconv.FormatUint(f.Seed, 10) + "\n")
				}
				t.Fatalf("%d violations in %d seeds:\n%s", agg.Violations, len(agg.Failures), sb.String())
			}
			if gaps := agg.CoverageGaps(); len(gaps) > 0 {
				t.Fatalf("sweep INVALID: %s", strings.Join(gaps, ", "))
			}
		})
	}
}

// baselineRegressionSeeds are swarm seeds that once exposed a bug in a
// baseline; they stay in the suite:
//   - fastcast 134, 201: a deposed leader's ASSIGN, accepted by a minority
//     at a slot beyond a newer leader's FINAL, was adopted by a later
//     ballot with its stale predicted timestamp (out-of-order delivery).
var baselineRegressionSeeds = map[string][]uint64{"fastcast": {134, 201}}

func TestSwarmBaselineRegressionSeeds(t *testing.T) {
	for protocol, seeds := range baselineRegressionSeeds {
		for _, seed := range seeds {
			if r := RunSwarm(protocol, seed); r.Violations() > 0 {
				t.Errorf("%s seed %d: %s", protocol, seed, r.Failure())
			}
		}
	}
}

// TestMeasureCost: the cost measurement counts the protocol messages of a
// multicast exactly and finds a saturation point near the busiest
// replica's capacity.
func TestMeasureCost(t *testing.T) {
	row, err := MeasureCost("wbcast", 2, CostOptions{Seed: 1, Duration: 100, Messages: 500})
	if err != nil {
		t.Fatal(err)
	}
	// Two groups of 3: 2 MULTICAST, 2x5 ACCEPT (each leader to the 5 other
	// members), 2x5 ACCEPT_ACK (each of the 6 members to both leaders,
	// minus the leaders' own), 2x2 DELIVER, 1 DELIVERED.
	if row.Messages != 27 || row.ByKind["ACCEPT"] != 10 || row.ByKind["ACCEPT_ACK"] != 10 {
		t.Fatalf("messages per multicast %.2f (%v), want 27", row.Messages, row.ByKind)
	}
	if row.MaxLoad <= 0 || row.MaxLoad > 1.5*row.Capacity || row.MaxLoad < 0.5*row.Capacity {
		t.Fatalf("max load %.0f/s, capacity %.0f/s", row.MaxLoad, row.Capacity)
	}
	t.Logf("wbcast, 2 groups: %.1f msgs, %.0f bytes, busiest %.1f, capacity %.0f/s, max load %.0f/s", row.Messages, row.Bytes, row.Busiest, row.Capacity, row.MaxLoad)
}
