package main

import (
	"encoding/json"
	"testing"
)

// TestSimCostJSON: weft sim cost reports, per protocol and destination-set
// size, the exact message count of a multicast and a saturation load.
func TestSimCostJSON(t *testing.T) {
	out, err := run(t, "sim", "cost", "--format", "json", "--protocols", "ftskeen,fastcast", "--dests", "2",
		"--messages", "300", "--duration", "30")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// Two groups of 3, two log commands each: FT-Skeen 2 MULTICAST + 2x2x2
	// PAXOS_ACCEPT + 2x2x4 PAXOS_ACCEPTED + 2 PROPOSE + 1 DELIVERED = 29;
	// FastCast replaces PROPOSE with 2 SOFT_TS and 2x3 HARD_TS: 35.
	want := map[string]float64{"ftskeen": 29, "fastcast": 35}
	if len(rows) != 2 {
		t.Fatalf("%d rows\n%s", len(rows), out)
	}
	for _, r := range rows {
		p := r["protocol"].(string)
		if got := r["messages_per_multicast"].(float64); got != want[p] {
			t.Errorf("%s: %.1f messages per multicast, want %.0f", p, got, want[p])
		}
		if r["max_load_per_s"].(float64) <= 0 {
			t.Errorf("%s: no max load: %v", p, r)
		}
	}
}
