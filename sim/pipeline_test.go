package sim

import (
	"testing"

	"github.com/weft-dev/weft/wire"
)

// TestSendBeforeSyncCaught proves the swarm checks the argument of
// wbcast/pipeline.go: a torn crash lets the messages a node sends before
// its sync leave, so a node that sent every message before its records
// were durable (acknowledgements included: promises of state it may then
// lose) is caught, while the real rule (ACCEPT, DELIVER, HEARTBEAT only)
// passes the same seeds. It was caught at seed 34; since a leader sends a
// SNAPSHOT from a heartbeat only at a member's third stalled report of the
// same delivery (wbcast catchUp, snapshotReports), the seeds run
// differently and the first catch is at seed 73.
func TestSendBeforeSyncCaught(t *testing.T) {
	const seeds = 150
	caught := uint64(0)
	for seed := uint64(1); seed <= seeds && caught == 0; seed++ {
		cfg := tornHeavy(seed)
		cfg.Spec = wbcastSpec(nil)
		cfg.Spec.SendsBeforeSync = func(wire.Message) bool { return true }
		if r := RunSwarmConfig(cfg); r.Violations() > 0 {
			caught = seed
			t.Logf("every message sent before the sync: caught at seed %d: %s", seed, r.Failure())
		}
	}
	if caught == 0 {
		t.Fatalf("sending every message before the sync was not caught in %d seeds with torn crashes", seeds)
	}
	for seed := uint64(1); seed <= caught; seed++ {
		cfg := tornHeavy(seed)
		if r := RunSwarmConfig(cfg); r.Violations() > 0 {
			t.Fatalf("seed %d with wbcast.SendsBeforeSync: %s", seed, r.Failure())
		}
	}
}

// tornHeavy is swarm seed seed with frequent crashes of followers, every
// one torn, so that a crash often strikes between a Ready's messages and
// its records.
func tornHeavy(seed uint64) Config {
	cfg := SwarmConfig("wbcast", seed)
	cfg.Faults.CrashEvery = 3 * cfg.Delta
	cfg.Faults.DownFor = 2 * cfg.Delta
	cfg.Faults.TornProb = 1
	cfg.Faults.LeaderBias = 0.2
	cfg.Faults.DiskLossProb = 0
	return cfg
}
