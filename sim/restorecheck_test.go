package sim

import (
	"fmt"
	"testing"
)

// TestCheckRestore (issue #10 item 4): in WbCast runs without faults and in
// 200 swarm runs with crashes, restarts, partitions and torn writes, after
// every Ready of every replica a replica rebuilt by Restore from what it
// persisted so far agrees with the live one on the durable state
// (wbcast.CompareRestored defines the agreement). It caught Restore
// rebuilding own-group ACCEPTs that adopt had dropped (H9.3) in the second
// run below and in 185 of the 200 swarm seeds. The swarm runs keep their
// faults but at most 20 multicasts each (the check costs about 10x the run;
// 200 seeds take about 6 s of CPU); -short runs 20 seeds.
func TestCheckRestore(t *testing.T) {
	for _, cfg := range []Config{
		{Protocol: "wbcast", Groups: 2, Replicas: 3, Seed: 1, Workload: Workload{Messages: 100, Clients: 3, DestMin: 1, DestMax: 2}},
		{Protocol: "wbcast", Groups: 3, Replicas: 5, Seed: 2, Delay: DelayHeavy, Workload: Workload{Messages: 100, Clients: 4, Mode: OpenLoop, Interval: 500, DestMin: 1, DestMax: 3}},
	} {
		cfg.CheckRestore, cfg.Pipeline = true, false // it compares the durable store after every Ready
		res, err := Run(cfg)
		if err != nil {
			t.Fatalf("%d groups x %d, seed %d: %v", cfg.Groups, cfg.Replicas, cfg.Seed, err)
		}
		if err := CheckResult(res); err != nil {
			t.Fatal(err)
		}
	}
	seeds, parts := uint64(200), uint64(4)
	if testing.Short() {
		seeds = 20
	}
	for part := uint64(0); part < parts; part++ {
		t.Run(fmt.Sprintf("swarm-%d", part), func(t *testing.T) {
			t.Parallel()
			for seed := 1 + part; seed <= seeds; seed += parts {
				cfg := SwarmConfig("wbcast", seed)
				cfg.CheckRestore, cfg.Pipeline = true, false // it compares the durable store after every Ready
				cfg.Workload.Messages = min(cfg.Workload.Messages, 20)
				res, err := Run(cfg)
				if err != nil {
					t.Fatalf("swarm seed %d: %v", seed, err)
				}
				if err := CheckResult(res); err != nil {
					t.Fatalf("swarm seed %d: %v", seed, err)
				}
			}
		})
	}
}
