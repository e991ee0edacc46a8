package sim

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/check"
)

// TestSwarmConfigRanges: the drawn configurations stay in the profile's
// ranges, vary across seeds, and are a function of the seed.
func TestSwarmConfigRanges(t *testing.T) {
	kinds := map[string]int{}
	for seed := uint64(1); seed <= 300; seed++ {
		cfg := SwarmConfig("wbcast", seed)
		w := cfg.Workload
		if cfg.Groups < 2 || cfg.Groups > 4 || (cfg.Replicas != 3 && cfg.Replicas != 5) || w.Clients < 1 || w.Clients > 4 ||
			w.Messages < 100 || w.Messages > 400 || w.DestMax != cfg.Groups || cfg.Faults.GST <= 0 || cfg.Faults.Conv <= 0 {
			t.Fatalf("seed %d: out of range: %+v", seed, cfg)
		}
		again := SwarmConfig("wbcast", seed)
		if cfg.Faults.Describe(cfg.Delta) != again.Faults.Describe(again.Delta) || cfg.Groups != again.Groups {
			t.Fatalf("seed %d: two draws differ", seed)
		}
		f := cfg.Faults
		for k, v := range map[string]int64{"crash": f.CrashEvery, "partition": f.PartitionEvery, "reset": f.ResetEvery, "spike": f.SpikeEvery} {
			if v > 0 {
				kinds[k]++
			}
		}
		if f.TornProb > 0 {
			kinds["torn"]++
		}
		if f.PermanentProb > 0 {
			kinds["permanent"]++
		}
		kinds[fmt.Sprintf("%dx%d", cfg.Groups, cfg.Replicas)]++
	}
	for _, k := range []string{"crash", "partition", "reset", "spike", "torn", "permanent", "2x3", "4x5"} {
		if kinds[k] == 0 || kinds[k] == 300 && k != "crash" {
			t.Errorf("%s in %d of 300 seeds: want some, not all", k, kinds[k])
		}
	}
	if sk := SwarmConfig("skeen", 1); sk.Replicas != 1 || sk.Faults.CrashEvery != 0 || sk.Faults.PartitionEvery != 0 || sk.Faults.ResetEvery != 0 {
		t.Fatalf("skeen (not crash tolerant) swarm: %+v", sk.Faults)
	}
}

// TestSwarmDeterministic: a swarm seed replays byte-identically, crash and
// restart events included.
func TestSwarmDeterministic(t *testing.T) {
	found := 0
	for seed := uint64(1); seed <= 40 && found < 3; seed++ {
		cfg := SwarmConfig("wbcast", seed)
		if cfg.Faults.CrashEvery == 0 {
			continue
		}
		a, b := swarmHistory(t, cfg), swarmHistory(t, cfg)
		if !bytes.Equal(a, b) {
			t.Fatalf("seed %d: same seed, different histories", seed)
		}
		if !bytes.Contains(a, []byte(`{"ev":"crash"`)) {
			continue
		}
		if !bytes.Contains(a, []byte(`{"ev":"restart"`)) {
			t.Logf("seed %d: crashes but no restart before the end", seed)
		}
		found++
	}
	if found == 0 {
		t.Fatal("no swarm seed in 1..40 crashed a replica")
	}
}

// swarmHistory runs cfg and returns its history as JSON lines, also when
// the run failed (a protocol panic still leaves the history up to it).
func swarmHistory(t *testing.T, cfg Config) []byte {
	t.Helper()
	res, err := Run(cfg)
	if res == nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := check.WriteJSONL(&buf, res.History); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		fmt.Fprintf(&buf, "error: %v\n", err)
	}
	return buf.Bytes()
}

// TestSwarmDelaySpikesOnly: faults that only delay messages (delay spikes,
// healed at GST, on top of delays of at most δ) lose nothing, so every
// protocol must pass every check, with termination at every replica, and
// converge. (The heavy-tailed model is left out: its delays stay up to 50δ
// after GST, beyond a fixed election timeout of 10 ticks; see the swarm.)
func TestSwarmDelaySpikesOnly(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	for _, p := range Protocols {
		spikes := 0
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			cfg := SwarmConfig(p, seed)
			f := &cfg.Faults
			f.CrashEvery, f.PartitionEvery, f.ResetEvery = 0, 0, 0
			if cfg.Delay == DelayHeavy {
				cfg.Delay = DelayModel(seed % 2) // fixed or uniform
			}
			if f.SpikeEvery == 0 {
				f.SpikeEvery = f.GST / 4
			}
			res, err := Run(cfg)
			if err != nil {
				t.Fatalf("%s seed %d: %v", p, seed, err)
			}
			if err := CheckResult(res); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if !res.Converged || res.Stats.Multicasts != cfg.Workload.Messages {
				t.Fatalf("%s seed %d: converged %v, %d of %d multicasts", p, seed, res.Converged, res.Stats.Multicasts, cfg.Workload.Messages)
			}
			if q, _ := FaultChecks(res); q.Deliveries == 0 {
				t.Fatalf("%s seed %d: no deliveries", p, seed)
			}
			spikes += res.Faults.Spikes
		}
		if spikes < seeds {
			t.Fatalf("%s: only %d spikes in %d seeds", p, spikes, seeds)
		}
	}
}

// TestSweepSkeen: Skeen's swarm (spikes only: Skeen tolerates no other
// fault) passes; the summary adds up.
func TestSweepSkeen(t *testing.T) {
	calls := 0
	agg, err := Sweep("skeen", 30, 100, func(done int, agg *SweepSummary) {
		calls++
		if done != agg.Seeds {
			t.Fatalf("progress %d, summary %d", done, agg.Seeds)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 30 || agg.Seeds != 30 || agg.Violations != 0 || agg.Converged != 30 || agg.Multicasts < 30*100 || agg.MultiGroup == 0 || agg.Faults.Spikes == 0 {
		t.Fatalf("summary %+v", agg)
	}
	// Skeen has no leaders to change nor recoveries: its sweep only needs
	// multicasts to 2+ groups. A crash-tolerant protocol's needs a leader
	// change and a recovery while ACCEPTED, and WbCast's (the one with a
	// disk-loss path and hand-overs) a state transfer, a rejoin and a
	// hand-over too.
	if gaps := agg.CoverageGaps(); len(gaps) != 0 {
		t.Fatalf("coverage gaps %v", gaps)
	}
	agg.Protocol = "wbcast"
	if gaps := agg.CoverageGaps(); len(gaps) != 5 {
		t.Fatalf("coverage gaps %v", gaps)
	}
	if _, err := Sweep("paxos", 1, 1, nil); err == nil {
		t.Fatal("unknown protocol accepted")
	}
}

// TestSweepSummaryFailures: failing seeds are kept in seed order and a
// panic or run error counts as a violation.
func TestSweepSummaryFailures(t *testing.T) {
	var agg SweepSummary
	for _, seed := range []uint64{9, 3, 5} {
		agg.Add(&SweepResult{Seed: seed, Config: Config{Protocol: "x", Delta: 1000}, Err: fmt.Errorf("boom %d", seed)})
	}
	agg.Add(&SweepResult{Seed: 4, Config: Config{Protocol: "x", Delta: 1000}, GSTToLast: 3000})
	if agg.Violations != 3 || len(agg.Failures) != 3 || agg.Failures[0].Seed != 3 || agg.Failures[2].Seed != 9 || agg.Failures[1].Detail != "boom 5" {
		t.Fatalf("%+v", agg)
	}
	if l := agg.GSTLatency(); l.Max != 3 || l.N != 4 {
		t.Fatalf("GST latency %+v", l)
	}
}

// sweepSeeds is the size of TestSwarmSweep: WEFT_SWEEP_SEEDS, else 2000
// (200 with -short).
func sweepSeeds(t *testing.T) int {
	if s := os.Getenv("WEFT_SWEEP_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("WEFT_SWEEP_SEEDS=%q", s)
		}
		return n
	}
	if testing.Short() {
		return 200
	}
	return 2000
}

// TestSwarmSweep is the CI swarm (testing.md T2): WbCast under crashes,
// torn crashes, partitions (one-way ones too), link resets and delay
// spikes, then the GST liveness phase; zero violations required, and the
// coverage facts must be reached. Seeds run in parallel on GOMAXPROCS
// workers. Replay a failing seed with
//
//	weft sim run --protocol wbcast --faults swarm --seed S --history h.jsonl
func TestSwarmSweep(t *testing.T) {
	const protocol = "wbcast"
	seeds := sweepSeeds(t)
	// A broken protocol fails fast: no new seed starts after maxFailing
	// failing ones.
	const maxFailing = 20
	start := time.Now()
	var (
		mu      sync.Mutex
		agg     SweepSummary
		failing int
		wg      sync.WaitGroup
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
				if r.Violations() > 0 {
					failing++
				}
				mu.Unlock()
			}
		}()
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		mu.Lock()
		stop := failing >= maxFailing
		mu.Unlock()
		if stop {
			break
		}
		next <- seed
	}
	close(next)
	wg.Wait()
	el := time.Since(start)
	l := agg.GSTLatency()
	t.Logf("%d seeds in %.1fs (%.1f seeds/s on %d workers): %.0fδ simulated, %d multicasts (%d to 2+ groups), %d deliveries; %v; leader changes %d (in %d of %d groups), recoveries with ACCEPTED %d; GST->last delivery p50 %.1fδ p99 %.1fδ max %.1fδ; converged %d",
		agg.Seeds, el.Seconds(), float64(agg.Seeds)/el.Seconds(), runtime.GOMAXPROCS(0), float64(agg.SimTime)/float64(agg.Delta),
		agg.Multicasts, agg.MultiGroup, agg.Deliveries, agg.Faults, agg.LeaderChanges, agg.GroupsWithLeaderChange, agg.Groups, agg.Coverage.RecoveriesWithAccepted, l.P50, l.P99, l.Max, agg.Converged)
	if agg.Violations > 0 {
		var sb strings.Builder
		for i, f := range agg.Failures {
			if i == 5 {
				fmt.Fprintf(&sb, "... and %d more failing seeds\n", len(agg.Failures)-5)
				break
			}
			fmt.Fprintf(&sb, "seed %d: %s\n  replay: weft sim run --protocol %s --faults swarm --seed %d --history h.jsonl\n", f.Seed, f.Detail, protocol, f.Seed)
		}
		t.Fatalf("%d violations in %d of %d seeds run (stopping after %d failing seeds):\n%s", agg.Violations, len(agg.Failures), agg.Seeds, maxFailing, sb.String())
	}
	if gaps := agg.CoverageGaps(); len(gaps) > 0 {
		t.Fatalf("sweep INVALID: %s", strings.Join(gaps, ", "))
	}
}
