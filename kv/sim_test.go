package kv_test

import (
	"errors"
	"testing"

	"github.com/weft-dev/weft/internal/kvcheck"
	"github.com/weft-dev/weft/internal/kvsim"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/sim"
)

// TestSimKV drives weft-kv's state machine at every replica of swarm runs
// (crashes, torn writes, partitions, link resets, delay spikes, disk loss;
// a replica that installs a SNAPSHOT takes its state from the rsm snapshot
// of a member of its shard that applied at least that far, as a node does)
// with a workload of single-key commands on a few hot keys, each
// multicast to its key's shard, and checks that every replica of a shard
// applied a prefix of the same sequence with the same results, that every
// replica still up at the end applied all of it and holds the same state,
// and that the clients' history is linearizable (porcupine) (kvsim.RunKV).
func TestSimKV(t *testing.T) {
	var all kvsim.KVFigures
	seeds := swarmSeeds(t, 50, func(cfg sim.Config) error {
		fig, err := kvsim.RunKV(cfg, kvsim.KVOptions{})
		all.Add(fig)
		return err
	})
	t.Logf("%d seeds: %d commands; linearizable: %d operations on %d keys, %d of unknown outcome (%d gets of unknown outcome left out); %d state transfers",
		seeds, all.Commands, all.Checked, all.Keys, all.Unknown, all.UnknownGets, all.Installs)
	if all.Checked+all.UnknownGets != all.Commands {
		t.Fatalf("%d commands, but %d operations checked and %d gets left out", all.Commands, all.Checked, all.UnknownGets)
	}
	if all.Checked == 0 || all.Unknown == 0 || all.Installs == 0 && !testing.Short() {
		t.Fatal("the workload did not exercise replies, operations of unknown outcome and state transfers")
	}
}

// swarmSeeds runs run on WbCast's swarm seeds 1..n (8 with -short), and
// returns how many it ran.
func swarmSeeds(t *testing.T, n int, run func(sim.Config) error) int {
	t.Helper()
	if testing.Short() {
		n = 8
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		if err := run(sim.SwarmConfig("wbcast", seed)); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	return n
}

// staleGets is a deliberately broken reply path: a get is answered from
// the current state of the shard's replica that applied least (a replica
// answering from a stale state), not with the replier's result for it.
// Every replica still applies the same commands with the same results,
// so only the linearizability check can see it.
func staleGets(r *kvsim.Reply) (kvcheck.Output, bool) {
	out, ok, err := r.Outcome()
	if err != nil || r.Cmd.Op != kv.OpGet {
		return out, ok
	}
	stale := r.Replier
	for _, rp := range r.Shard {
		if rp.Driver.Applied().Less(stale.Driver.Applied()) {
			stale = rp
		}
	}
	v, found := stale.Store.Get(r.Cmd.Key)
	return kvcheck.Output{OK: found, Value: string(v)}, true
}

// TestSimKVCatchesStaleReads: porcupine reports the history Illegal
// within a few seeds when gets are answered from a stale replica.
func TestSimKVCatchesStaleReads(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		_, err := kvsim.RunKV(sim.SwarmConfig("wbcast", seed), kvsim.KVOptions{Answer: staleGets})
		if err == nil {
			continue
		}
		if !errors.Is(err, kvsim.ErrNotLinearizable) {
			t.Fatalf("seed %d: %v, want porcupine's verdict", seed, err)
		}
		t.Logf("caught at seed %d: %v", seed, err)
		return
	}
	t.Fatal("stale gets not caught in 10 seeds")
}
