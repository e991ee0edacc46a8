package sim

import (
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/wire"
)

// TestPipelineInSwarm: swarm seeds of every fault-tolerant protocol with
// Config.Pipeline (a replica steps input while its records sync, and a
// crash loses every unsynced record) pass every checker, and the pipeline
// is exercised: syncs cover several Readys, and crashes strike while
// records wait.
func TestPipelineInSwarm(t *testing.T) {
	seeds := uint64(30)
	if testing.Short() {
		seeds = 8
	}
	for _, proto := range []string{"wbcast", "ftskeen", "fastcast"} {
		var st PipelineStats
		for seed := uint64(1); seed <= seeds; seed++ {
			cfg := SwarmConfig(proto, seed)
			cfg.Pipeline = true
			r := RunSwarmConfig(cfg)
			if r.Violations() > 0 {
				t.Fatalf("%s seed %d: %s", proto, seed, r.Failure())
			}
			st.add(r.Stats.Pipeline)
		}
		if st.Syncs == 0 || st.Readies <= st.Syncs || st.LostUnsynced == 0 {
			t.Fatalf("%s, %d seeds: %+v: the pipeline was not exercised", proto, seeds, st)
		}
		if proto == "wbcast" && (st.AppliedEarly == 0 || st.LostApplied == 0) {
			t.Fatalf("%s, %d seeds: %+v: no delivery applied before durable, or none lost by a crash", proto, seeds, st)
		}
		t.Logf("%s, %d seeds: %+v", proto, seeds, st)
	}
}

// selfAckRun is a run built to expose a leader that counts its own
// acceptance before it is durable (wbcast.MutSelfAckEarly): one group of
// three, p0 leading with a disk slower (20δ a sync, until 6δ) than its
// followers' round trip, and p2 cut off from p0. Client 0's message m
// commits at p0 on its own acceptance and p1's ack; p0's DELIVER reaches
// p1, which delivers m; p0 crashes at 5.5δ, before its sync, and restarts
// at 6δ; p1 is isolated for 200δ, and client 0 from every replica for
// 40δ, so p2 recovers with p0 (neither knows m) and orders client 1's
// message, sent at 10δ, where p1 delivered m.
func selfAckRun(k wbcast.Mutation, pipeline bool) Config {
	const d = 1000
	cfg := Config{Groups: 1, Replicas: 3, Seed: 1, Delta: d, Delay: DelayFixed,
		Workload: Workload{Mode: Script, Clients: 2}, Pipeline: pipeline, MaxTime: 600 * d}
	cfg.Spec = wbcastSpec(func(c *wbcast.Config) { c.Mutation = k })
	cfg.SyncDelay = func(now int64, p wire.ProcID) int64 {
		if p == 0 && now < 6*d {
			return 20 * d
		}
		return 1
	}
	cfg.Workload.Script = []Scripted{{At: 0, Client: 0, Dest: []wire.GroupID{0}}, {At: 10 * d, Client: 1, Dest: []wire.GroupID{0}}}
	p0, p1, p2, c0, c1 := wire.ProcID(0), wire.ProcID(1), wire.ProcID(2), wire.ProcID(3), wire.ProcID(4)
	cfg.Faults.Script = []Fault{
		{At: 0, Kind: FaultPartition, From: []wire.ProcID{p0}, To: []wire.ProcID{p2}, OneWay: true, For: 5*d + 500},
		{At: 5*d + 500, Kind: FaultCrash, Proc: p0},
		{At: 5*d + 500, Kind: FaultPartition, From: []wire.ProcID{p1}, To: []wire.ProcID{p0, p2, c0, c1}, For: 200 * d},
		{At: 5*d + 500, Kind: FaultPartition, From: []wire.ProcID{p0, p2, c0, c1}, To: []wire.ProcID{p1}, For: 200 * d},
		{At: 5*d + 500, Kind: FaultPartition, From: []wire.ProcID{c0}, To: []wire.ProcID{p0, p1, p2}, For: 40 * d},
		{At: 6 * d, Kind: FaultRestart, Proc: p0},
	}
	return cfg
}

// TestSelfAckEarlyCaught: with pipelined storage, the run of selfAckRun
// catches a leader that counts its own ACCEPT_ACK before its acceptance
// is durable (wbcast.MutSelfAckEarly), and passes every checker with the
// rule kept, or without the pipeline (a driver that syncs each Ready
// before it steps more input hides the mutation, as the knob says).
func TestSelfAckEarlyCaught(t *testing.T) {
	r := runSelfAckCases(t, selfAckRun)
	t.Logf("caught by %s", caughtBy(r))
}

// runSelfAckCases runs build's run with the rule kept and pipelined
// storage, and with wbcast.MutSelfAckEarly without and with it: only the
// last may be caught, and must be. It returns that last run.
func runSelfAckCases(t *testing.T, build func(wbcast.Mutation, bool) Config) *SweepResult {
	t.Helper()
	var r *SweepResult
	for _, c := range []struct {
		knob     wbcast.Mutation
		pipeline bool
		caught   bool
	}{
		{0, true, false},
		{wbcast.MutSelfAckEarly, false, false},
		{wbcast.MutSelfAckEarly, true, true},
	} {
		r = RunSwarmConfig(build(c.knob, c.pipeline))
		if got := r.Violations() > 0; got != c.caught {
			t.Fatalf("knob %v, pipeline %v: caught %v (%s), want %v", c.knob, c.pipeline, got, r.Failure(), c.caught)
		}
	}
	return r
}

// earlyApplyRun is selfAckRun with p0's DELIVER to p1 and its answer to
// client 0 cut as well: only p0 delivers m (at 3δ, on its own unsynced
// acceptance and p1's ack), and p0 crashes before its sync. Nothing
// durable shows that delivery; only the check of deliveries applied
// before they were durable (early.go) can see that the run ordered m
// elsewhere.
func earlyApplyRun(k wbcast.Mutation, pipeline bool) Config {
	cfg := selfAckRun(k, pipeline)
	const d = 1000
	p0, p1, c0 := wire.ProcID(0), wire.ProcID(1), wire.ProcID(3)
	cfg.Faults.Script = append(cfg.Faults.Script,
		Fault{At: 2*d + 500, Kind: FaultPartition, From: []wire.ProcID{p0}, To: []wire.ProcID{p1, c0}, OneWay: true, For: 3 * d})
	return cfg
}

// TestEarlyApplyCaught: the run of earlyApplyRun catches
// wbcast.MutSelfAckEarly through the check of deliveries applied before
// they were durable, and through nothing else; the real rule, and the
// mutant without the pipeline, pass it.
func TestEarlyApplyCaught(t *testing.T) {
	r := runSelfAckCases(t, earlyApplyRun)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "before its records were durable") || !r.Quorum.OK() {
		t.Fatalf("caught by something else than the early-apply check: %s", r.Failure())
	}
	if r.Stats.Pipeline.LostApplied == 0 {
		t.Fatalf("no crash took back an applied delivery: %+v", r.Stats.Pipeline)
	}
	t.Logf("caught: %v", r.Err)
}
