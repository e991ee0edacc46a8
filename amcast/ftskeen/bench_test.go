package ftskeen_test

import (
	"testing"

	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

// steady is the failure-free in-memory run of WbCast's benchmarks
// (amcast/wbcast/bench_test.go) for FTSkeen: 3 groups x 3 replicas, 8
// messages in flight, each to group 0 and, with two destinations, to group
// 1 or 2 in turn; process 0 leads group 0.
func steady(dests int, target wire.ProcID) amcasttest.SteadyOptions {
	return amcasttest.SteadyOptions{Protocol: "ftskeen", Groups: 3, Replicas: 3, Target: target,
		Dests: func(k int) []wire.GroupID {
			if dests == 1 {
				return []wire.GroupID{0}
			}
			return []wire.GroupID{0, wire.GroupID(1 + k%2)}
		}}
}

// go test ./amcast/ftskeen -run '^$' -bench . reports, per multicast, the
// time and allocations of one process's steps alone (see
// amcasttest.BenchSteady).
func BenchmarkFTSkeenLeader1Dest(b *testing.B) {
	amcasttest.BenchSteady(b, sim.NewReplica, steady(1, 0))
}

func BenchmarkFTSkeenLeader2Dest(b *testing.B) {
	amcasttest.BenchSteady(b, sim.NewReplica, steady(2, 0))
}

func BenchmarkFTSkeenFollower1Dest(b *testing.B) {
	amcasttest.BenchSteady(b, sim.NewReplica, steady(1, 1))
}

func BenchmarkFTSkeenFollower2Dest(b *testing.B) {
	amcasttest.BenchSteady(b, sim.NewReplica, steady(2, 1))
}
