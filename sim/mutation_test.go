package sim

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/internal/check"
)

// mutationSeeds is the table of TestMutationsCaught: for each knob that
// breaks WbCast on purpose (wbcast.Mutation), the number of swarm seeds,
// from seed 1 on, within which the swarm must catch it. Measured with
// WEFT_MUTATION_SEEDS=300 (TestMutationCatchRates) in Dec 2026: the first
// catching seed and the share of seeds 1..300 that catch each knob are in
// the comments; the bound leaves room for changes to the protocol or the
// swarm that move the first catching seed.
var mutationSeeds = []struct {
	knob  wbcast.Mutation
	seeds int
}{
	{wbcast.MutSkipDeliveryBlock, 10},   // first seed 1; 93% of seeds
	{wbcast.MutSkipAcceptClock, 40},     // first seed 6; 33%
	{wbcast.MutMixAckVectors, 10},       // first seed 1; 68%
	{wbcast.MutSendBeforePersist, 40},   // first seed 2; 27%
	{wbcast.MutDeliverBeforeCommit, 10}, // first seed 1; 58%
	{wbcast.MutMergeAllCBallots, 60},    // first seed 6; 18%
	{wbcast.MutAckWhileRecovering, 40},  // first seed 6; 35%
	{wbcast.MutForgetDone, 10},          // first seed 1; 45%
	{wbcast.MutFreshRetryLTS, 10},       // first seed 1; 88%
}

// mutantSwarm is swarm seed seed (SwarmConfig) with every WbCast replica
// running with knob k.
func mutantSwarm(k wbcast.Mutation, seed uint64) Config {
	cfg := SwarmConfig("wbcast", seed)
	if k != 0 {
		cfg.Spec = wbcastSpec(func(c *wbcast.Config) { c.Mutation = k })
	}
	return cfg
}

var invariantTag = regexp.MustCompile(`\((INV-[0-9]+)\)`)

// caughtBy says how the swarm caught a failing seed: an own-invariant
// panic of the protocol (with the invariant it names), the message budget
// exhausted (a livelock or retry storm), another run error (a refused
// message), and the kinds of the checkers' violations (termination counts
// those of every live replica as well as of quorums: a stall).
func caughtBy(r *SweepResult) string {
	var parts []string
	switch {
	case r.Err == nil:
	case errors.Is(r.Err, ErrBudget):
		parts = append(parts, "budget")
	case strings.Contains(r.Err.Error(), "panic"):
		tag := "panic"
		if m := invariantTag.FindStringSubmatch(r.Err.Error()); m != nil {
			tag += " " + m[1]
		}
		parts = append(parts, tag)
	default:
		parts = append(parts, "error")
	}
	var kinds []string
	for _, k := range []string{check.KindValidity, check.KindIntegrity, check.KindOrder, check.KindGTS, check.KindAgreement, check.KindTermination} {
		n := 0
		if r.Quorum != nil {
			n = r.Quorum.Count(k)
		}
		if k == check.KindTermination {
			n += r.liveTermination()
		}
		if n > 0 {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) > 0 {
		parts = append(parts, "checker "+strings.Join(kinds, ","))
	}
	return strings.Join(parts, "; ")
}

// TestMutationsCaught proves that the swarm catches a broken WbCast: for
// every knob of wbcast.Mutation, running swarm seeds 1, 2, 3, ... with the
// knob set fails (a checker violation, an own-invariant panic, a stall or
// an exhausted message budget: any failure RunSwarm reports) within the
// number of seeds mutationSeeds states. The seeds that caught a knob pass
// with no knob, so the knob and not the seed is what failed.
func TestMutationsCaught(t *testing.T) {
	if len(mutationSeeds) != len(wbcast.Mutations) {
		t.Fatalf("mutationSeeds has %d knobs, wbcast has %d", len(mutationSeeds), len(wbcast.Mutations))
	}
	t.Logf("%-22s %6s %6s  %s", "knob", "seed", "bound", "caught by")
	catching := map[uint64]bool{}
	for _, row := range mutationSeeds {
		caught := false
		for seed := uint64(1); seed <= uint64(row.seeds); seed++ {
			r := RunSwarmConfig(mutantSwarm(row.knob, seed))
			if r.Violations() == 0 {
				continue
			}
			t.Logf("%-22s %6d %6d  %s", row.knob, seed, row.seeds, caughtBy(r))
			catching[seed] = true
			caught = true
			break
		}
		if !caught {
			t.Errorf("%s: not caught by swarm seeds 1..%d", row.knob, row.seeds)
		}
	}
	for seed := range catching {
		if r := RunSwarm("wbcast", seed); r.Violations() > 0 {
			t.Errorf("seed %d fails with no knob: %s", seed, r.Failure())
		}
	}
}

// TestMutationCatchRates measures the table of mutationSeeds: for every
// knob, how many of WEFT_MUTATION_SEEDS swarm seeds (from 1) catch it, the
// first one, and how. Skipped unless WEFT_MUTATION_SEEDS is set (300
// seeds of all knobs take a few minutes); WEFT_MUTATION_KNOB limits it to
// the knobs whose name contains it.
func TestMutationCatchRates(t *testing.T) {
	s := os.Getenv("WEFT_MUTATION_SEEDS")
	if s == "" {
		t.Skip("set WEFT_MUTATION_SEEDS to measure")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("WEFT_MUTATION_SEEDS=%q", s)
	}
	only := os.Getenv("WEFT_MUTATION_KNOB")
	for _, k := range wbcast.Mutations {
		if !strings.Contains(k.String(), only) {
			continue
		}
		first, caught := uint64(0), 0
		how := map[string]int{}
		for seed := uint64(1); seed <= uint64(n); seed++ {
			r := RunSwarmConfig(mutantSwarm(k, seed))
			if r.Violations() == 0 {
				continue
			}
			if first == 0 {
				first = seed
			}
			caught++
			how[caughtBy(r)]++
		}
		t.Logf("%-22s first seed %4d, caught by %3d of %d seeds (%.0f%%): %s", k, first, caught, n, 100*float64(caught)/float64(n), fmt.Sprint(how))
	}
}
