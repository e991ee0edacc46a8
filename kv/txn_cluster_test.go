package kv_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/kv"
)

// accountsOn returns n account keys spread over the shards (round robin).
func accounts(n, shards int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("acct-%03d", i)
		if int(kv.Shard(k, shards)) == len(out)%shards {
			out = append(out, k)
		}
	}
	return out
}

// TestTxnBankOnCluster: 3 shards x 3 in-process nodes over TCP. Accounts
// on every shard; workers transfer between accounts of different shards
// (a condition on the source's shard decides the write on the
// destination's: the shards exchange votes) while others read every
// balance in one transaction, and a shard's leader is stopped and
// restarted mid-run. Every full read, and the final one, sees the initial
// total; every shard agreed on every outcome (Client.Txn checks it).
func TestTxnBankOnCluster(t *testing.T) {
	const shards, initial = 3, 100
	c := startKV(t, shards, 3)
	k := c.client(t, shards)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	accts := accounts(9, shards)
	for _, a := range accts {
		if err := k.Put(ctx, a, []byte(strconv.Itoa(initial))); err != nil {
			t.Fatal(err)
		}
	}
	total := func(r kv.TxnResult) (int, error) {
		sum := 0
		for i, v := range r.Reads {
			n, err := strconv.Atoi(string(v.Value))
			if err != nil || !v.Present {
				return 0, fmt.Errorf("account %s: %q present=%v", accts[i], v.Value, v.Present)
			}
			sum += n
		}
		return sum, nil
	}
	var committed, aborted, unknown, reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range 60 {
				a := r.IntN(len(accts))
				b := (a + 1 + r.IntN(shards-1)) % len(accts) // another shard: accounts alternate shards
				if kv.Shard(accts[a], shards) == kv.Shard(accts[b], shards) {
					errs <- fmt.Errorf("accounts %s and %s on one shard", accts[a], accts[b])
					return
				}
				x := int64(1 + r.IntN(60))
				res, err := k.Txn(ctx, kv.Txn{
					If:   []kv.Cond{{Key: accts[a], Kind: kv.CondAtLeast, Num: x}},
					Then: []kv.Write{{Key: accts[a], Kind: kv.WriteAdd, Delta: -x}, {Key: accts[b], Kind: kv.WriteAdd, Delta: x}},
				})
				switch {
				case errors.Is(err, kv.ErrShardsDisagree):
					errs <- err
					return
				case err != nil:
					unknown.Add(1)
				case res.Committed:
					committed.Add(1)
				default:
					aborted.Add(1)
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				res, err := k.Txn(ctx, kv.Txn{Reads: accts})
				if err != nil {
					continue
				}
				if sum, err := total(res); err != nil || sum != initial*len(accts) {
					errs <- fmt.Errorf("a full read at %s: total %d (%v), want %d", res.GTS, sum, err, initial*len(accts))
					return
				}
				reads.Add(1)
			}
		}()
	}
	// Stop shard 1's first replica (its leader at start) mid-run, then
	// restart it from its data directory.
	time.Sleep(300 * time.Millisecond)
	victim := c.topo.Members(1)[0]
	c.nodes[victim].Close()
	time.Sleep(500 * time.Millisecond)
	c.start(victim, nil)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	res, err := k.Txn(ctx, kv.Txn{Reads: accts})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := total(res); err != nil || sum != initial*len(accts) {
		t.Fatalf("final total %d (%v), want %d", sum, err, initial*len(accts))
	}
	t.Logf("transfers: %d committed, %d aborted, %d of unknown outcome; %d full reads, all at total %d",
		committed.Load(), aborted.Load(), unknown.Load(), reads.Load(), initial*len(accts))
	if committed.Load() == 0 || reads.Load() == 0 {
		t.Fatal("no transfer committed or no full read completed")
	}
	var cast, in uint64
	for _, n := range c.nodes {
		if st := n.Status().Service; st != nil {
			cast += st.VotesCast
			in += st.VotesIn
		}
	}
	if cast == 0 || in == 0 {
		t.Fatalf("no votes cast (%d) or received (%d): the transfers were not exchanged", cast, in)
	}
}
