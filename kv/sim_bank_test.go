package kv_test

import (
	"slices"
	"testing"

	"github.com/weft-dev/weft/internal/kvsim"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

// TestSimBank runs the bank in the simulator's swarm over seeds of WbCast
// (issue #12 item 4; kvsim.RunBank): transactions across shards, with the
// shards' votes exchanged between the simulated replicas' drivers, under
// the swarm's faults (crashes, torn writes, partitions, link resets, delay
// spikes, disk loss, leader hand-overs). Every full read must see the
// initial total, every shard of a transaction must agree whether it
// committed, and at the end every shard's replicas hold the same state.
func TestSimBank(t *testing.T) {
	var all kvsim.BankFigures
	seeds := swarmSeeds(t, 40, func(cfg sim.Config) error {
		fig, err := kvsim.RunBank(cfg, kvsim.BankOptions{})
		all.Add(fig)
		return err
	})
	t.Logf("%d seeds: %d transfers committed, %d aborted, %d full reads at the initial total; votes: %d sent, %d lost, %d pulled",
		seeds, all.Committed, all.Aborted, all.FullReads, all.VotesSent, all.VotesLost, all.VotesPulled)
	if all.Committed == 0 || all.Aborted == 0 || all.VotesPulled == 0 || all.FullReads == 0 {
		t.Fatal("the workload did not exercise commits, aborts and pulls")
	}
}

// brokenStore is a deliberately broken executor: at every shard but a
// transaction's first, it treats the transaction as if some shard voted
// no (writesOnOneShard: the writes land on the first shard only), or as if
// every other shard voted yes (ignoreVotes: a shard decides alone).
type brokenStore struct {
	*kv.Store
	shard       wire.GroupID
	ignoreVotes bool
}

func (s *brokenStore) Apply(batch []rsm.Entry) ([][]byte, error) {
	for i := range batch {
		e := &batch[i]
		if e.Votes == nil || e.Dest[0] == s.shard {
			continue
		}
		votes := make([][]byte, len(e.Votes))
		for j := range votes {
			votes[j] = []byte{0}
			if s.ignoreVotes || e.Dest[j] == s.shard {
				votes[j] = []byte{1}
			}
		}
		if s.ignoreVotes {
			votes[slices.Index(e.Dest, s.shard)] = e.Votes[slices.Index(e.Dest, s.shard)]
		}
		e.Votes = votes
	}
	return s.Store.Apply(batch)
}

// TestSimBankCatchesBrokenExecutor: the bank's checks fail within a few
// seeds against each broken executor, with the shards' outcomes compared
// and, without that, by the total alone.
func TestSimBankCatchesBrokenExecutor(t *testing.T) {
	for _, mode := range []struct{ ignore, noOutcome bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		ignore := mode.ignore
		name := map[bool]string{false: "writes on one shard only", true: "a shard ignores the others' votes"}[ignore]
		if mode.noOutcome {
			name += " (the total's checks alone)"
		}
		broken := func(g wire.GroupID, shards int) (rsm.StateMachine, *kv.Store, error) {
			st, err := kv.NewStore(g, shards)
			return &brokenStore{Store: st, shard: g, ignoreVotes: ignore}, st, err
		}
		opt := kvsim.BankOptions{NewStore: broken, NoOutcomeCheck: mode.noOutcome}
		caught := uint64(0)
		for seed := uint64(1); seed <= 20 && caught == 0; seed++ {
			if _, err := kvsim.RunBank(sim.SwarmConfig("wbcast", seed), opt); err != nil {
				caught = seed
				t.Logf("%s: caught at seed %d: %v", name, seed, err)
			}
		}
		if caught == 0 {
			t.Fatalf("%s: not caught in 20 seeds", name)
		}
	}
}
