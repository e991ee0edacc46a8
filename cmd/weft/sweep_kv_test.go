package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/kvsim"
)

// TestSimSweepKV: the kv sweep runs both workloads per seed, prints their
// totals as JSON, and refuses what it cannot do.
func TestSimSweepKV(t *testing.T) {
	out, errOut, err := runSplit(t, "sim", "sweep", "--service", "kv", "--seeds", "2", "--seed-start", "5", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, out, errOut)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if s["service"] != "kv" || s["seeds"] != 2.0 || s["seed_start"] != 5.0 || s["violations"] != 0.0 || s["valid"] != true {
		t.Fatalf("summary %v", s)
	}
	for _, k := range []string{"linearizability_operations_checked", "transfers_committed", "transfers_aborted", "full_reads", "votes_sent", "votes_lost", "votes_pulled"} {
		if n, ok := s[k].(float64); !ok || n == 0 {
			t.Errorf("%s: %v", k, s[k])
		}
	}
	if !strings.Contains(errOut, "sweep kv on wbcast: 2/2 seeds, 0 violations") {
		t.Fatalf("progress: %q", errOut)
	}
	for _, args := range [][]string{
		{"sim", "sweep", "--service", "redis"},
		{"sim", "sweep", "--service", "kv", "--forged-clients"},
		{"sim", "sweep", "--service", "kv", "--protocol", "paxos"},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestKVSweepVerdict: a kv sweep's failing seeds are named with the
// command that replays one; a clean sweep of 20 seeds or more that never
// reached a fact its checks need is invalid.
func TestKVSweepVerdict(t *testing.T) {
	agg := &kvsim.Summary{Protocol: "wbcast"}
	for seed := uint64(25); seed >= 1; seed-- {
		r := &kvsim.SeedResult{Seed: seed, KV: kvsim.KVFigures{Checked: 1, Unknown: 1, Installs: 1},
			Bank: kvsim.BankFigures{Committed: 1, Aborted: 1, FullReads: 1, VotesLost: 1, VotesPulled: 1}}
		if seed == 17 || seed == 4 {
			r.BankErr = errors.New("the total changed")
		}
		agg.Add(r)
	}
	err := kvSweepVerdict(agg)
	if err == nil || !strings.Contains(err.Error(), "2 violations in 2 seeds: failing seeds 4 17") ||
		!strings.Contains(err.Error(), "weft sim sweep --service kv --protocol wbcast --seeds 1 --seed-start 4") {
		t.Fatalf("verdict: %v", err)
	}
	var out bytes.Buffer
	printKVSweep(&out, agg, 1, time.Second, 2)
	if !strings.Contains(out.String(), "seed 17: bank: the total changed") {
		t.Fatalf("summary:\n%s", out.String())
	}
	agg.Failures, agg.Violations = nil, 0
	if err := kvSweepVerdict(agg); err != nil {
		t.Fatalf("clean sweep: %v", err)
	}
	agg.KV.Unknown = 0
	if err := kvSweepVerdict(agg); err == nil || !strings.Contains(err.Error(), "INVALID") || !strings.Contains(err.Error(), "unknown outcome") {
		t.Fatalf("coverage verdict: %v", err)
	}
}
