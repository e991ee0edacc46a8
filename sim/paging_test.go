package sim

import (
	"runtime/debug"
	"testing"

	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/wire"
)

// largeStateConfig: one group of three. p2 is partitioned from the other
// two from the start, and collection waits for every member
// (wbcast.Config.CollectAfterAll; by default a quorum suffices and p2
// would get a SNAPSHOT), so nothing is garbage-collected and p0 and p1
// retain every one of n messages of payload bytes. Once the workload is done the leader p0
// crashes and restarts: a new leader must be elected from states of n
// messages. Then the partition heals and p2 must be caught up.
func largeStateConfig(n, payload int, spec *ProtocolSpec) Config {
	const delta = 1000
	clients := 1000
	done := int64(n/clients*4+50) * delta // the closed loop takes about 4δ a round
	crash, heal := done, done+50*delta
	return Config{
		Spec: spec, Groups: 1, Replicas: 3, Seed: 1, Delta: delta, Delay: DelayFixed,
		MaxTime:   heal + int64(n/30+2000)*delta, // catch-up: at least 256 messages per 3 ticks
		StallTime: 500 * delta,
		Workload:  Workload{Messages: n, Clients: clients, Mode: ClosedLoop, PayloadSize: payload},
		Faults: Faults{Script: []Fault{
			{At: 0, Kind: FaultPartition, From: []wire.ProcID{2}, To: []wire.ProcID{0, 1}, For: heal},
			{At: crash, Kind: FaultCrash, Proc: 0},
			{At: crash + 3*delta, Kind: FaultRestart, Proc: 0},
		}},
	}
}

// runLargeState runs largeStateConfig and checks what the scenario claims:
// every message retained, a new leader after the crash, recovery and
// catch-up in pages, p2 caught up (convergence), the checkers clean.
func runLargeState(t *testing.T, n, payload int, wcfg wbcast.Config, checkRestore bool) {
	t.Helper()
	cfg := largeStateConfig(n, payload, wbcastSpec(func(c *wbcast.Config) {
		c.MaxMsgBytes, c.MaxStatePages, c.CatchUpBatch = wcfg.MaxMsgBytes, wcfg.MaxStatePages, wcfg.CatchUpBatch
		c.CollectAfterAll = true
	}))
	cfg.CheckRestore = checkRestore
	cfg.Pipeline = cfg.Pipeline && !checkRestore // CheckRestore compares the durable store after every Ready
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckResult(res); err != nil {
		t.Fatal(err)
	}
	crash := cfg.Faults.Script[1].At
	elected := false
	for _, ev := range res.LeaderEvents {
		elected = elected || ev.T > crash
	}
	budget := wbcast.DefaultMaxMsgBytes
	if wcfg.MaxMsgBytes != 0 {
		budget = wcfg.MaxMsgBytes
	}
	// Each page and each catch-up round carries at most budget bytes.
	minPages := n * payload / budget
	lastIssue := int64(0)
	for _, ev := range res.History.Events {
		if ev.Ev == "multicast" {
			lastIssue = max(lastIssue, ev.T)
		}
	}
	t.Logf("%d messages of %d bytes, budget %d: last multicast at %.0fδ, crash at %.0fδ; converged=%v at %.0fδ, peak retained %d, leader changes %d, NEW_LEADER_ACK %d, NEW_STATE %d, DELIVER %d, catch-up rounds and SNAPSHOT pages %d; %d messages, %.1f MB",
		n, payload, budget, float64(lastIssue)/float64(cfg.Delta), float64(crash)/float64(cfg.Delta), res.Converged,
		float64(res.Stats.VirtualTime)/float64(cfg.Delta), res.PeakRetained, res.LeaderChanges,
		res.Stats.ByKind["NEW_LEADER_ACK"], res.Stats.ByKind["NEW_STATE"], res.Stats.ByKind["DELIVER"], res.Coverage.CatchUps+res.Stats.ByKind["SNAPSHOT"],
		res.Stats.Messages, float64(res.Stats.Bytes)/1e6)
	switch {
	case !res.Converged:
		t.Fatal("p2 was not caught up (no convergence)")
	case res.PeakRetained < n:
		t.Fatalf("peak retained %d, want every one of %d messages (nothing collected while p2 is cut off)", res.PeakRetained, n)
	case !elected:
		t.Fatalf("no leader elected after the crash at %d: %v", crash, res.LeaderEvents)
	case res.Stats.ByKind["NEW_LEADER_ACK"] < minPages:
		t.Fatalf("%d NEW_LEADER_ACKs: the state was not sent in pages (want at least %d)", res.Stats.ByKind["NEW_LEADER_ACK"], minPages)
	case res.Stats.ByKind["NEW_STATE"] < 2*minPages:
		t.Fatalf("%d NEW_STATEs: the state was not sent in pages to both members (want at least %d)", res.Stats.ByKind["NEW_STATE"], 2*minPages)
	case res.Coverage.CatchUps < minPages && res.Stats.ByKind["SNAPSHOT"] == 0:
		// p2 is caught up by DELIVERs along the new leader's chain, or by a
		// SNAPSHOT in pages when that chain starts after p2's last delivery
		// (a leader that restarted), whose pages SnapshotPages bounds: either
		// way in budget-sized pieces (the simulator refuses larger frames).
		t.Fatalf("%d catch-up rounds and %d SNAPSHOT pages: not bounded by the byte budget (want at least %d)", res.Coverage.CatchUps, res.Stats.ByKind["SNAPSHOT"], minPages)
	}
}

// TestRecoveryLargeState is issue #10's scenario: 100,000 retained messages
// of 1 KiB, about 100 MiB of state per member, far past the 4 MiB frame
// cap the simulator enforces (ErrFrame). Recovery and catch-up go through
// in pages of at most 1 MiB.
func TestRecoveryLargeState(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 messages of 1 KiB")
	}
	// A catch-up batch far above what fits the budget: the byte bound
	// decides how many DELIVERs a round carries (about 1,000 of 1 KiB).
	// The replicas hold about 600 MB (payloads in three processes and their
	// stores); cap the heap's growth above that so the test stays near 1 GB.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(900 << 20))
	runLargeState(t, 100_000, 1024, wbcast.Config{CatchUpBatch: 1 << 14}, false)
}

// TestRecoverySmallPages runs the scenario with pages of 1 KiB (a few
// messages each), so every state takes hundreds of pages, and checks after
// every Ready that a replica restored from its records (REC_NEW_STATE in
// pages) equals the live one.
func TestRecoverySmallPages(t *testing.T) {
	runLargeState(t, 600, 100, wbcast.Config{MaxMsgBytes: wbcast.MinMaxMsgBytes, MaxStatePages: 4096}, true)
}

// TestSwarmSmallPages runs swarm seeds of WbCast with a 1 KiB budget: its
// states (hundreds of small messages) go in many pages through crashes,
// torn crashes (REC_NEW_STATE sets cut short), partitions and link resets
// (gaps), and the checkers must pass.
func TestSwarmSmallPages(t *testing.T) {
	spec := wbcastSpec(func(c *wbcast.Config) { c.MaxMsgBytes, c.MaxStatePages = wbcast.MinMaxMsgBytes, 1<<12 })
	pages := 0
	for seed := uint64(1); seed <= 20; seed++ {
		cfg := SwarmConfig("wbcast", seed)
		cfg.Spec = spec
		r := RunSwarmConfig(cfg)
		if msg := r.Failure(); msg != "" {
			t.Fatalf("seed %d with 1 KiB pages: %s", seed, msg)
		}
		pages += r.Stats.ByKind["NEW_LEADER_ACK"] + r.Stats.ByKind["NEW_STATE"]
	}
	t.Logf("%d NEW_LEADER_ACK and NEW_STATE pages", pages)
}
