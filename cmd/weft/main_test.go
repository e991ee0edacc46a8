package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/sim"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestSimRunWritesCheckableHistory(t *testing.T) {
	h := filepath.Join(t.TempDir(), "h.jsonl")
	out, err := run(t, "sim", "run", "--protocol", "wbcast", "--messages", "200", "--seed", "42", "--history", h)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "checkers: ok") {
		t.Fatalf("no verdict:\n%s", out)
	}
	f, err := os.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := check.ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	if hist.Config.Protocol != "wbcast" || hist.Config.Seed != 42 || hist.Config.Groups != 3 {
		t.Fatalf("config line: %+v", hist.Config)
	}
	if rep := check.Check(hist, check.Options{Termination: check.TermAll}); !rep.OK() {
		t.Fatal(rep.Error())
	}
	b, _ := os.ReadFile(h)
	first := strings.SplitN(string(b), "\n", 2)[0]
	if first != `{"ev":"config","protocol":"wbcast","groups":3,"replicas":3,"seed":42}` {
		t.Fatalf("first line %s", first)
	}
}

func TestSimRunBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "run", "--protocol", "paxos"},
		{"sim", "run", "--dest", "5"},
		{"sim", "run", "--delay", "slow"},
		{"sim", "run", "--mode", "burst"},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestSimLatencyJSON(t *testing.T) {
	out, err := run(t, "sim", "latency", "--format", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string][4]any{
		"skeen":    {2.0, 4.0, nil, nil},
		"ftskeen":  {6.0, 10.0, 6.0, 10.0},
		"fastcast": {4.0, 6.0, 4.0, 6.0},
		"wbcast":   {3.0, 5.0, 4.0, 6.0},
	}
	for _, r := range rows {
		w := want[r["protocol"].(string)]
		got := [4]any{r["collision_free_leader"], r["failure_free_leader"], r["collision_free_follower"], r["failure_free_follower"]}
		if got != w {
			t.Errorf("%s: got %v want %v", r["protocol"], got, w)
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows", len(rows))
	}
}

// runSplit runs the CLI with stdout and stderr apart.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// TestSimRunSwarmReplays: "sim run --faults swarm --seed S" replays the
// sweep's seed S byte-identically (the history of sim.Run(SwarmConfig)),
// crash and restart events included, and prints the drawn profile.
func TestSimRunSwarmReplays(t *testing.T) {
	dir := t.TempDir()
	crashed := false
	for seed := uint64(1); seed <= 30 && !crashed; seed++ {
		cfg := sim.SwarmConfig("wbcast", seed)
		if cfg.Faults.CrashEvery == 0 {
			continue
		}
		want, _ := sim.Run(cfg)
		if want == nil {
			t.Fatalf("seed %d: no result", seed)
		}
		var wantBuf bytes.Buffer
		if err := check.WriteJSONL(&wantBuf, want.History); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			h := filepath.Join(dir, fmt.Sprintf("s%d-%d.jsonl", seed, i))
			out, _ := run(t, "sim", "run", "--protocol", "wbcast", "--faults", "swarm", "--seed", fmt.Sprint(seed), "--history", h)
			if !strings.Contains(out, fmt.Sprintf("swarm seed %d: wbcast", seed)) || !strings.Contains(out, "fault profile: gst ") {
				t.Fatalf("seed %d: profile not printed:\n%s", seed, out)
			}
			got, err := os.ReadFile(h)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, wantBuf.Bytes()) {
				t.Fatalf("seed %d: the CLI's history differs from the sweep's", seed)
			}
		}
		crashed = bytes.Contains(wantBuf.Bytes(), []byte(`{"ev":"crash"`)) && bytes.Contains(wantBuf.Bytes(), []byte(`{"ev":"restart"`))
	}
	if !crashed {
		t.Fatal("no seed in 1..30 with a crash and a restart")
	}
}

func TestSimRunSwarmBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "run", "--faults", "swarm", "--groups", "2"},
		{"sim", "run", "--faults", "chaos"},
		{"sim", "run", "--faults", "swarm", "--protocol", "paxos"},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestSimSweepSkeen: Skeen's swarm (delay spikes only) passes; the JSON
// summary is complete and the progress goes to stderr.
func TestSimSweepSkeen(t *testing.T) {
	out, errOut, err := runSplit(t, "sim", "sweep", "--protocol", "skeen", "--seeds", "25", "--seed-start", "7", "--format", "json")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s["seeds"] != 25.0 || s["seed_start"] != 7.0 || s["violations"] != 0.0 || s["valid"] != true || s["multicasts_2plus_groups"].(float64) == 0 {
		t.Fatalf("summary %v", s)
	}
	for _, k := range []string{"faults", "leader_changes", "coverage", "gst_to_last_delivery_delta", "simulated_delta", "deliveries", "seeds_per_second"} {
		if _, ok := s[k]; !ok {
			t.Errorf("no %q in the JSON summary", k)
		}
	}
	if !strings.Contains(errOut, "sweep skeen: 25/25 seeds, 0 violations") {
		t.Fatalf("progress: %q", errOut)
	}
	out, _, err = runSplit(t, "sim", "sweep", "--protocol", "skeen", "--seeds", "3")
	if err != nil || !strings.Contains(out, "violations         0 in 0 seeds") || !strings.Contains(out, "GST→last delivery") {
		t.Fatalf("%v\n%s", err, out)
	}
	out, _, err = runSplit(t, "sim", "sweep", "--seeds", "2", "--check-restore")
	if err != nil || !strings.Contains(out, "violations         0 in 0 seeds") {
		t.Fatalf("--check-restore: %v\n%s", err, out)
	}
}

func TestSimSweepBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "sweep", "--protocol", "paxos"},
		{"sim", "sweep", "--seeds", "0"},
		{"sim", "sweep", "--format", "xml"},
		{"sim", "sweep", "--gc", "some"},
		{"sim", "sweep", "--protocol", "skeen", "--gc", "all"},
		{"sim", "sweep", "--quorum-gc", "--gc", "all"},
		{"sim", "sweep", "--protocol", "skeen", "--check-restore"},
		{"sim", "sweep", "--service", "kv", "--check-restore"},
		{"sim", "gc", "--gc", "none"},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestSweepVerdict: failing seeds make the sweep fail, naming them and the
// replay command; so do missing coverage facts from 20 seeds on.
func TestSweepVerdict(t *testing.T) {
	var agg sim.SweepSummary
	agg.Protocol = "wbcast"
	for seed := uint64(1); seed <= 25; seed++ {
		r := &sim.SweepResult{Seed: seed, Config: sim.Config{Protocol: "wbcast", Delta: 1000}}
		r.Stats.MultiGroup, r.LeaderChanges, r.Coverage.RecoveriesWithAccepted = 1, 1, 1
		r.Coverage.Installs, r.Coverage.Rejoins, r.Coverage.HandOvers = 1, 1, 1
		if seed == 4 || seed == 17 {
			r.Err = fmt.Errorf("sim: seed %d: panic: boom", seed)
		}
		agg.Add(r)
	}
	err := sweepVerdict(&agg, sweepTweaks{})
	if err == nil || !strings.Contains(err.Error(), "failing seeds 4 17") ||
		!strings.Contains(err.Error(), "weft sim run --protocol wbcast --faults swarm --seed 4") {
		t.Fatalf("verdict: %v", err)
	}
	if err := sweepVerdict(&agg, sweepTweaks{forged: true, gcAll: true, checkRestore: true}); err == nil ||
		!strings.Contains(err.Error(), "weft sim sweep --protocol wbcast --seeds 1 --seed-start 4 --forged-clients --gc all --check-restore") {
		t.Fatalf("verdict of a tweaked sweep: %v", err)
	}
	var out bytes.Buffer
	printSweep(&out, &agg, 1, time.Second, 2, sweepTweaks{})
	if !strings.Contains(out.String(), "seed 17: sim: seed 17: panic: boom") {
		t.Fatalf("summary:\n%s", out.String())
	}
	agg.Failures, agg.Violations = nil, 0
	if err := sweepVerdict(&agg, sweepTweaks{}); err != nil {
		t.Fatalf("clean sweep: %v", err)
	}
	agg.LeaderChanges = 0
	if err := sweepVerdict(&agg, sweepTweaks{}); err == nil || !strings.Contains(err.Error(), "INVALID") || !strings.Contains(err.Error(), "no leader change") {
		t.Fatalf("coverage verdict: %v", err)
	}
	agg.LeaderChanges, agg.Coverage.Installs = 1, 0
	if err := sweepVerdict(&agg, sweepTweaks{}); err == nil || !strings.Contains(err.Error(), "no state transfer") {
		t.Fatalf("coverage verdict without a state transfer: %v", err)
	}
	agg.Coverage.Installs, agg.Coverage.HandOvers = 1, 0
	if err := sweepVerdict(&agg, sweepTweaks{}); err == nil || !strings.Contains(err.Error(), "no leadership hand-over") {
		t.Fatalf("coverage verdict without a hand-over: %v", err)
	}
}

// TestSimGCModes: with a member down for good, collection by a quorum (the
// default) goes on where collection after every member (--gc all) stops
// at what the dead member delivered; the old --quorum-gc still means the
// default. (The peak of entries held, which counts the collected ids
// sessions remember too, parts only in longer runs: weft sim gc
// --messages 100000, docs/disk-loss.md.)
func TestSimGCModes(t *testing.T) {
	gc := func(args ...string) map[string]any {
		t.Helper()
		out, err := run(t, append([]string{"sim", "gc", "--messages", "3000", "--down-for-good", "2", "-o", "json"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &m); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return m
	}
	quorum, all, old := gc(), gc("--gc", "all"), gc("--quorum-gc")
	q, a := quorum["collected"].(float64), all["collected"].(float64)
	if q < 2*a || quorum["peak_retained"].(float64) > all["peak_retained"].(float64) {
		t.Fatalf("by a quorum: %v collected, peak %v; after every member: %v collected, peak %v",
			q, quorum["peak_retained"], a, all["peak_retained"])
	}
	if old["collected"] != q {
		t.Fatalf("--quorum-gc: %v collected, the default %v", old["collected"], q)
	}
}
