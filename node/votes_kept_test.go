package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/wire"
)

// keyOn returns a key of shard s (of n).
func keyOn(s, n int) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("k%d", i)
		if kv.Shard(k, n) == wire.GroupID(s) {
			return k
		}
	}
}

// TestVotesKeptForADownShard: a shard (one replica here: the whole shard)
// delivers a transaction and goes down before the other shard's vote
// reaches it; meanwhile that shard decides more exchanged transactions
// with a third than its vote cache holds (2). Its vote is kept past the
// cache, because the down shard never reported applying the transaction
// (APPLIED, rsm.Driver.NoteApplied), so the shard comes back, pulls it,
// and applies. Before, the vote left the cache and the shard stalled for
// good (nobody in its group could serve it a state past the entry).
func TestVotesKeptForADownShard(t *testing.T) {
	const shards = 3
	var lose atomic.Bool
	lose.Store(true)
	c := newCluster(t, shards, 1, func(cfg *Config) {
		if cfg.Topology == nil {
			return
		}
		grp, _ := cfg.Topology.GroupOf(cfg.ID)
		st, err := kv.NewStore(grp, shards)
		if err != nil {
			t.Fatal(err)
		}
		cfg.StateMachine = st
		cfg.RSM.VoteCache = 2
		// Shard 0's votes do not reach shard 1 (pushed or pulled) while
		// lose is set.
		down := cfg.Topology.Members(1)[0]
		cfg.loseVote = func(to wire.ProcID, v *wire.Vote, _ bool) bool {
			return lose.Load() && to == down && v.G == 0
		}
	})
	cl := c.clientWith(func(cc *client.Config) { cc.AllGroups = true })
	k, err := kv.NewClient(cl, shards)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, s, b := keyOn(0, shards), keyOn(1, shards), keyOn(2, shards)
	if err := k.Put(ctx, a, []byte("100")); err != nil {
		t.Fatal(err)
	}
	p1 := c.topo.Members(1)[0]
	// The transaction to shards 0 and 1: shard 1 delivers it and holds it
	// for shard 0's vote, which it never gets; then it goes down.
	done := txnAsync(ctx, k, transfer(a, s, 10))
	waitFor(t, "shard 1 to hold the transaction", func() bool { return c.nodes[p1].Status().Service.Held > 0 })
	c.stop(p1)
	// Shard 0 decides 6 exchanged transactions with shard 2: 3 times its
	// vote cache.
	for range 6 {
		if res, err := k.Txn(ctx, transfer(a, b, 1)); err != nil || !res.Committed {
			t.Fatalf("transfer to shard 2: %+v %v", res, err)
		}
	}
	if kept := c.nodes[c.topo.Members(0)[0]].Status().Service.VotesKept; kept == 0 {
		t.Fatal("shard 0 kept no vote past its cache for the down shard")
	}
	lose.Store(false)
	c.restart(p1)
	if err := <-done; err != nil {
		t.Fatalf("the transaction held by the down shard: %v", err)
	}
	waitFor(t, "shard 1 to apply it", func() bool {
		st := c.nodes[p1].Status()
		return st.Service.Held == 0 && st.Stats.Votes.Pulls > 0
	})
	res, err := k.Txn(ctx, kv.Txn{Reads: []string{a, s, b}})
	if err != nil || string(res.Reads[0].Value) != "84" || string(res.Reads[1].Value) != "10" || string(res.Reads[2].Value) != "6" {
		t.Fatalf("balances: %+v %v", res, err)
	}
	// Once shard 1 reports what it applied, shard 0 forgets the votes kept
	// for it.
	waitFor(t, "shard 0 to forget the kept votes", func() bool {
		return c.nodes[c.topo.Members(0)[0]].Status().Service.VotesKept == 0
	})
}
