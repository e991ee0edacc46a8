package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func runGossip(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c := simGossipCmd()
	var out, errOut bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&errOut)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), err
}

func TestSimGossipIdealJSON(t *testing.T) {
	out, err := runGossip(t, "--nodes", "1000", "--mode", "pushpull", "--runs", "20", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, k := range []string{"mode", "nodes", "runs", "mean", "min", "max", "rounds"} {
		if _, ok := res[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	if m := res["mean"].(float64); m < 8.05 || m > 10.05 {
		t.Errorf("push-pull at 1000 nodes: mean %v, seed table 9.05", m)
	}
	again, _ := runGossip(t, "--nodes", "1000", "--mode", "pushpull", "--runs", "20", "--format", "json")
	if again != out {
		t.Error("same seed, different output")
	}
}

func TestSimGossipTable(t *testing.T) {
	out, err := runGossip(t, "--nodes", "300", "--mode", "push", "--runs", "3", "--seed", "9")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "push") || !strings.Contains(out, "rounds per run:") {
		t.Fatalf("table:\n%s", out)
	}
	if _, err := runGossip(t, "--mode", "flood"); err == nil {
		t.Error("unknown mode accepted")
	}
	if _, err := runGossip(t, "--format", "xml"); err == nil {
		t.Error("unknown format accepted")
	}
}

func TestSimGossipFull(t *testing.T) {
	out, err := runGossip(t, "--nodes", "60", "--mode", "full", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, k := range []string{"mode", "nodes", "runs", "mean", "min", "max", "bytes_per_node_round",
		"detect_all_seconds", "detect_all_rounds", "ideal_pushpull_mean", "per_run"} {
		if _, ok := res[k]; !ok {
			t.Errorf("no %q in %s", k, out)
		}
	}
	if res["runs"].(float64) != 1 {
		t.Errorf("full mode default runs %v, want 1", res["runs"])
	}
	table, err := runGossip(t, "--nodes", "60", "--mode", "full")
	if err != nil || !strings.Contains(table, "crash detection") || !strings.Contains(table, "B/node/round") {
		t.Fatalf("%v\n%s", err, table)
	}
}

// TestSimGossipLossy: --loss, --jitter and --leave reach the simulator and
// its report; values it cannot model are refused.
func TestSimGossipLossy(t *testing.T) {
	out, err := runGossip(t, "--nodes", "60", "--mode", "full", "--profile", "lan", "--loss", "0.1", "--jitter", "50ms")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"loss 0.1, delay 1-5 ms + jitter 0-50 ms", "direct probes in groups of 3, timeout 0.6s", "p99", "false convictions 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	out, err = runGossip(t, "--nodes", "60", "--mode", "full", "--profile", "lan", "--leave", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || res["leave"] != true || res["left_p50_seconds"] == nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, bad := range [][]string{{"--loss", "1"}, {"--loss", "-0.5"}, {"--jitter", "1s", "--profile", "lan"}, {"--group-size", "-1"}} {
		if _, err := runGossip(t, append([]string{"--nodes", "20", "--mode", "full"}, bad...)...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
