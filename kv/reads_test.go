package kv_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/weft-dev/weft/internal/kvcheck"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/wire"
)

// TestReadIndexLinearizable runs one shard of three replicas (real TCP)
// with concurrent clients doing puts and gets on two keys, the gets
// through the leader's read index (kv.Linearizable) and a few ordered
// ones, while the leader is stopped and later restarted from its data
// directory, and then the new leader stopped too; the history is checked
// with porcupine. Local gets run alongside and must never go back in
// position at one replica. The read index's own unit tests
// (amcast/wbcast/readindex_test.go) show a leader that serves reads
// without its quorum round returns stale values once deposed.
func TestReadIndexLinearizable(t *testing.T) {
	const clients, opsPer = 6, 90
	kc := startKV(t, 1, 3)
	keys := []string{"x", "y"}
	h := kvcheck.NewHistory(historyBytes)
	start := h.Start()
	var mu sync.Mutex
	var readErrs, localReads int
	var wg sync.WaitGroup
	third, twoThirds := make(chan struct{}), make(chan struct{})
	for c := range clients {
		k := kc.client(t, 1)
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 2))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			lastLocal := map[wire.ProcID]wire.Timestamp{}
			for i := range opsPer {
				if c == 0 && i == opsPer/3 {
					close(third)
				}
				if c == 0 && i == 2*opsPer/3 {
					close(twoThirds)
				}
				in := kvcheck.Input{Key: keys[r.IntN(len(keys))], Value: fmt.Sprintf("%d.%d", c, i)}
				var out kvcheck.Output
				call := h.Now()
				var err error
				switch n := r.IntN(10); {
				case n < 4:
					in.Op = kv.OpPut
					err = k.Put(ctx, in.Key, []byte(in.Value))
				case n == 4:
					// A local read: not in the history (it may be stale),
					// but its position never goes back at one replica.
					rd, lerr := k.ReadAt(ctx, in.Key, kv.Local)
					if lerr == nil {
						if rd.Index.Less(lastLocal[rd.Node]) {
							t.Errorf("client %d: a local read at p%d at %s after one at %s", c, rd.Node, rd.Index, lastLocal[rd.Node])
						}
						lastLocal[rd.Node] = rd.Index
						mu.Lock()
						localReads++
						mu.Unlock()
					}
					continue
				default:
					in.Op = kv.OpGet
					level := kv.Linearizable
					if n == 5 {
						level = kv.Ordered
					}
					var v []byte
					v, out.OK, err = k.Get(ctx, in.Key, level)
					out.Value = string(v)
					if err != nil && !errors.Is(err, context.DeadlineExceeded) {
						// A failed read has no effect: leave it out.
						mu.Lock()
						readErrs++
						mu.Unlock()
						t.Logf("client %d get %d: %v", c, i, err)
						continue
					}
				}
				if !record(t, h, c, i, in, out, call, err) {
					return
				}
			}
		})
	}
	leader := func() wire.ProcID {
		for {
			for _, p := range kc.topo.Members(0) {
				if n := kc.nodes[p]; n != nil && n.Status().Leader {
					return p
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	served := uint64(0)
	stop := func(p wire.ProcID) {
		served += kc.nodes[p].Status().Stats.Reads.Linearizable
		kc.nodes[p].Close()
		delete(kc.nodes, p)
		t.Logf("stopped p%d, the leader, at %v", p, time.Since(start).Round(time.Millisecond))
	}
	<-third
	first := leader()
	stop(first)
	<-twoThirds
	kc.start(first, nil)
	t.Logf("restarted p%d at %v", first, time.Since(start).Round(time.Millisecond))
	stop(leader())
	wg.Wait()
	for _, n := range kc.nodes {
		served += n.Status().Stats.Reads.Linearizable
	}
	if t.Failed() {
		return
	}
	if served == 0 {
		t.Fatal("no get was served through a read index")
	}
	res, _, err := h.Check(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations (%d reads served through read indexes by the nodes still counted, %d local reads, %d failed reads retried by nobody) in %v: %v",
		h.Len(), served, localReads, readErrs, time.Since(start).Round(time.Millisecond), res)
	if res != porcupine.Ok {
		t.Fatalf("history is not linearizable (%v)", res)
	}
}
