package kv_test

import (
	"context"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/bank"
)

// TestTxnBankOnCluster: 3 shards x 3 in-process nodes over TCP running the
// bank workload (internal/bank: transfers between accounts of different
// shards, where a condition on the source's shard decides the write on the
// destination's, so the shards exchange votes; full-balance reads), while a
// shard's leader is stopped and restarted mid-run. Every full read, and a
// final one, sees the initial total; every shard agreed on every outcome
// (kv.Client.Txn checks it, the checker fails otherwise).
func TestTxnBankOnCluster(t *testing.T) {
	const shards = 3
	c := startKV(t, shards, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := bank.New(c.client(t, shards), bank.Config{Shards: shards, Accounts: 9, Initial: 100, Transfers: 4, Readers: 2, Timeout: 10 * time.Second, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Init(ctx); err != nil {
		t.Fatal(err)
	}
	w.Start(ctx)
	// Stop shard 1's first replica (its leader at start) mid-run, then
	// restart it from its data directory.
	time.Sleep(300 * time.Millisecond)
	victim := c.topo.Members(1)[0]
	c.nodes[victim].Close()
	time.Sleep(500 * time.Millisecond)
	c.start(victim, nil)
	time.Sleep(500 * time.Millisecond)
	w.Stop()
	if err := w.FinalRead(ctx); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	t.Logf("transfers: %d committed, %d aborted, %d of unknown outcome; %d full reads", st.Committed, st.Aborted, st.Unknown, st.Reads)
	if err := w.Checker().Result().Err(); err != nil {
		t.Fatal(err)
	}
	if st.Committed == 0 || st.Reads == 0 {
		t.Fatal("no transfer committed or no full read completed")
	}
	var cast, in uint64
	for _, n := range c.nodes {
		if s := n.Status().Service; s != nil {
			cast += s.VotesCast
			in += s.VotesIn
		}
	}
	if cast == 0 || in == 0 {
		t.Fatalf("no votes cast (%d) or received (%d): the transfers were not exchanged", cast, in)
	}
}
