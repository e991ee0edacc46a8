package sim

import "testing"

// TestSwarmBatches: swarm seeds run with batches (Config.Batch, as nodes
// send) pass every checker, and batches really travel in them: a leader's
// retries and heartbeats of one tick, a delivery chain and its next
// ACCEPTs, a recovery's pages and catch-ups leave one Ready together; the
// faults (loss, partitions, crashes, torn crashes) then strike batches
// whole.
func TestSwarmBatches(t *testing.T) {
	batches, inside := 0, 0
	for seed := uint64(1); seed <= 12; seed++ {
		cfg := SwarmConfig("wbcast", seed)
		cfg.Batch = true
		r := RunSwarmConfig(cfg)
		if r.Violations() > 0 {
			t.Fatalf("seed %d: %s", seed, r.Failure())
		}
		batches += r.Stats.ByKind["BATCH"]
		inside += r.Stats.ByKind["ACCEPT"] + r.Stats.ByKind["DELIVER"]
	}
	t.Logf("%d batches sent; %d ACCEPTs and DELIVERs in all", batches, inside)
	if batches == 0 {
		t.Fatal("12 swarm seeds with batching on sent no batch")
	}
}
