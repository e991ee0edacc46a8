package sim

import (
	"testing"

	"github.com/weft-dev/weft/wire"
)

// TestHoldInSwarm: WbCast swarm seeds with Config.Hold (a replica holds
// its trailing DELIVERs for its next message to the peer or its next
// tick, as a node does) pass every checker, and holding happens: messages
// are held, some ride with a later message and some leave at a tick.
func TestHoldInSwarm(t *testing.T) {
	seeds := uint64(40)
	if testing.Short() {
		seeds = 10
	}
	var held, byTick int
	for seed := uint64(1); seed <= seeds; seed++ {
		cfg := SwarmConfig("wbcast", seed)
		cfg.Hold = true
		r := RunSwarmConfig(cfg)
		if r.Violations() > 0 {
			t.Fatalf("seed %d: %s", seed, r.Failure())
		}
		held += r.Stats.Held
		byTick += r.Stats.HeldByTick
	}
	if held == 0 || byTick == 0 || byTick >= held {
		t.Fatalf("%d seeds: %d messages held, %d of them sent by a tick: holding was not exercised both ways", seeds, held, byTick)
	}
	t.Logf("%d seeds: %d messages held, %d sent by a tick", seeds, held, byTick)
}

// TestHoldCaught: the swarm notices a holder that delays without bound.
// With every message between replicas allowed to wait and ticks sending
// nothing held, replicas only hear each other when a peer's held bytes
// pass amcast.HeldBytes, and a run stalls: a liveness check fails.
func TestHoldCaught(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		cfg := SwarmConfig("wbcast", seed)
		cfg.Hold, cfg.holdForever = true, true
		cfg.Spec = wbcastSpec(nil)
		cfg.Spec.MayWait = func(wire.Message) bool { return true }
		if r := RunSwarmConfig(cfg); r.Violations() > 0 {
			t.Logf("caught at seed %d: %s", seed, r.Failure())
			return
		}
	}
	t.Fatal("a holder that never sends what it holds was not caught in 5 seeds")
}
