package gossipsim

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// seedTable is the gossip seed document's table: mean rounds over 20 runs
// of its own code (Python's random, seeds 0..19).
var seedTable = []struct {
	nodes int
	mode  Mode
	mean  float64
}{
	{1000, Push, 18.1}, {1000, Pull, 13.35}, {1000, PushPull, 9.05},
	{10000, Push, 23.45}, {10000, Pull, 17.9}, {10000, PushPull, 11.7},
}

// TestIdealMatchesSeedTable: 20 runs per configuration, as the seed ran,
// land within one round of its means. (Our PRNG is not Python's, so the
// runs differ; the model is the same: over 400 runs its means are 18.04,
// 13.73, 9.14 at 1,000 nodes and 23.56, 17.45, 11.59 at 10,000, against
// 18.02, 13.73, 9.19 and 23.71, 17.56, 11.64 for the seed's code over 200.)
func TestIdealMatchesSeedTable(t *testing.T) {
	for _, tc := range seedTable {
		res, err := RunIdeal(tc.mode, tc.nodes, 20, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%6d %-8v mean %5.2f (seed %5.2f) min %d max %d", tc.nodes, tc.mode, res.Mean, tc.mean, res.Min, res.Max)
		if math.Abs(res.Mean-tc.mean) > 1 {
			t.Errorf("%d nodes %v: mean %.2f, seed table %.2f", tc.nodes, tc.mode, res.Mean, tc.mean)
		}
	}
}

func TestIdealDeterministic(t *testing.T) {
	a, _ := RunIdeal(PushPull, 500, 10, 42)
	b, _ := RunIdeal(PushPull, 500, 10, 42)
	c, _ := RunIdeal(PushPull, 500, 10, 43)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different results: %v %v", a.Rounds, b.Rounds)
	}
	if reflect.DeepEqual(a.Rounds, c.Rounds) {
		t.Errorf("seeds 42 and 43 gave the same rounds %v", a.Rounds)
	}
}

// TestSpreadRules checks the model on cases with known answers.
func TestSpreadRules(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, m := range []Mode{Push, Pull, PushPull} {
		// Two nodes always contact each other: one round.
		if r := Spread(2, m, rng); r != 1 {
			t.Errorf("%v with 2 nodes: %d rounds", m, r)
		}
		if r := SpreadInRound(2, m, rng); r != 1 {
			t.Errorf("%v in-round with 2 nodes: %d rounds", m, r)
		}
	}
	// Synchronous push at most doubles the informed set per round, so
	// 1,000 nodes need at least ceil(log2 1000) = 10 rounds.
	for i := 0; i < 20; i++ {
		if r := Spread(1000, Push, rng); r < 10 {
			t.Fatalf("push reached 1000 nodes in %d rounds", r)
		}
	}
	// In-round updates are never slower on average than synchronous ones.
	sync, async := 0, 0
	for i := 0; i < 50; i++ {
		sync += Spread(1000, PushPull, rng)
		async += SpreadInRound(1000, PushPull, rng)
	}
	if async >= sync {
		t.Errorf("in-round push-pull %d rounds over 50 runs, synchronous %d", async, sync)
	}
	for _, s := range []string{"push", "pull", "pushpull", "push-pull", "full"} {
		if _, err := ParseMode(s); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseMode("gossip"); err == nil {
		t.Error("unknown mode accepted")
	}
	if _, err := RunIdeal(Full, 10, 1, 1); err == nil {
		t.Error("RunIdeal ran full mode")
	}
}

// TestFull200 runs the real core on 200 nodes: the value reaches everyone
// in about as many rounds as push-pull with in-round updates, the crash
// is convicted by every live node after Cassandra's ~18.4 mean intervals
// of silence, nobody else is convicted, the same seed gives the same
// result, and computing the detection tail from the frozen windows gives
// the same conviction times as simulating it.
func TestFull200(t *testing.T) {
	cfg := FullConfig{Nodes: 200, Runs: 1, Seed: 7}
	res, err := RunFull(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fr := res.PerRun[0]
	out, _ := json.Marshal(res)
	t.Logf("%s", out)
	if math.Abs(res.Mean-res.IdealInRoundMean) > 1.5 {
		t.Errorf("converged in %.0f rounds, in-round push-pull model %.2f", res.Mean, res.IdealInRoundMean)
	}
	if res.Mean > res.IdealPushPullMean+1 {
		t.Errorf("converged in %.0f rounds, slower than synchronous push-pull %.2f", res.Mean, res.IdealPushPullMean)
	}
	// First conviction after ~18.4 x ~1.1 s minus the spread; every node
	// within the 2 s initial window's 36.8 s plus spread.
	if fr.DetectFirstSeconds < 10 || fr.DetectAllSeconds > 50 || fr.DetectMeanSeconds < fr.DetectFirstSeconds {
		t.Errorf("detection first %.1fs mean %.1fs all %.1fs", fr.DetectFirstSeconds, fr.DetectMeanSeconds, fr.DetectAllSeconds)
	}
	if fr.FalseConvictions != 0 {
		t.Errorf("%d false convictions", fr.FalseConvictions)
	}
	// A SYN carries ~200 digests of ~8 bytes; the exchange adds about as
	// much again in deltas and requests.
	if fr.BytesPerNodeRound < 2000 || fr.BytesPerNodeRound > 8000 || fr.MsgsPerNodeRound < 2.9 {
		t.Errorf("%.0f bytes, %.2f messages per node per round", fr.BytesPerNodeRound, fr.MsgsPerNodeRound)
	}
	again, err := RunFull(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res, again) {
		t.Fatal("same seed, different full-mode results")
	}
	// Simulating the detection tail instead of computing it from the
	// frozen windows gives the same convictions at the same instants.
	if fr.ExtrapolatedConvictions == 0 {
		t.Error("no conviction was extrapolated: the test does not compare anything")
	}
	tail := cfg
	tail.SimulateTail = true
	sim, err := RunFull(tail)
	if err != nil {
		t.Fatal(err)
	}
	st := sim.PerRun[0]
	if st.ExtrapolatedConvictions != 0 || st.DetectFirstSeconds != fr.DetectFirstSeconds ||
		st.DetectMeanSeconds != fr.DetectMeanSeconds || st.DetectAllSeconds != fr.DetectAllSeconds ||
		st.ConvergeSeconds != fr.ConvergeSeconds {
		t.Errorf("simulated tail %+v, extrapolated %+v", st, fr)
	}
	t.Logf("simulated %d rounds with the tail, %d without", st.MeasuredRounds, fr.MeasuredRounds)
	cfg.Seed = 8
	other, err := RunFull(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(res.PerRun, other.PerRun) {
		t.Error("seeds 7 and 8 gave identical runs")
	}
}

func TestFullConfigErrors(t *testing.T) {
	for _, c := range []FullConfig{
		{Nodes: 2, Runs: 1},
		{Nodes: 10, Runs: 0},
		{Nodes: 10, Runs: 1, MinDelay: 5, MaxDelay: 1},
		{Nodes: 10, Runs: 1, Loss: 1},
		{Nodes: 10, Runs: 1, Loss: -0.1},
		{Nodes: 10, Runs: 1, Jitter: -1},
		{Nodes: 10, Runs: 1, GroupSize: -1},
		// Cassandra's exchange timeout is 10 s: a 5 s one-way delay
		// makes every reply stale.
		{Nodes: 10, Runs: 1, Jitter: 5 * time.Second},
	} {
		if _, err := RunFull(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	// Delays beyond the round are a network the simulator models.
	if _, err := RunFull(FullConfig{Nodes: 10, Runs: 1, Jitter: 2 * time.Second}); err != nil {
		t.Errorf("2 s of jitter on 1 s rounds: %v", err)
	}
}

// BenchmarkIdealSeedTable reruns the seed's whole table (6 × 20 runs).
func BenchmarkIdealSeedTable(b *testing.B) {
	for b.Loop() {
		for _, tc := range seedTable {
			if _, err := RunIdeal(tc.mode, tc.nodes, 20, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkFull1000 is one full-mode run at 1,000 nodes; it reports the
// CPU cost per node per endpoint per gossip round (the work is N² per
// round), which extrapolates to larger clusters.
func BenchmarkFull1000(b *testing.B) {
	rounds, runs := 0, 0
	for b.Loop() {
		res, err := RunFull(FullConfig{Nodes: 1000, Runs: 1, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		rounds += res.WarmupRounds + res.PerRun[0].MeasuredRounds
		runs++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(rounds)*1e6), "ns/endpoint-round")
	b.ReportMetric(float64(rounds)/float64(runs), "rounds/run")
}
