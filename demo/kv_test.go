package demo

// weft-kv under faults, in real processes (issue #12 item 4): agents with
// service = "kv", concurrent kv clients doing single-key operations on a
// few hot keys of every shard while leaders are killed, partitioned and
// stopped and a follower loses its disk; every operation is recorded with
// its call and return times (internal/kvcheck) and each key's history is checked
// with porcupine. A variant reads from a partitioned replica with
// consistency Local and shows the check catches the stale reads. Nothing
// is timed. Skipped with -short.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/internal/bank"
	"github.com/weft-dev/weft/internal/kvcheck"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/wire"
)

// kvTest is a kvLoad on a test cluster.
type kvTest struct {
	*kvLoad
	c *cluster
}

// startKVLoad connects a kv client to c (its multicasts in the checked
// history, Optional: an operation that times out is given up on) and
// starts workers on keys.
func (c *cluster) startKVLoad(workers int, keys []string) *kvTest {
	c.t.Helper()
	l := &kvTest{kvLoad: newKVLoad(c.ctx, c.kvClient(), keys, c.r.opt.Seed, c.logf), c: c}
	l.start(workers)
	return l
}

// kvClient returns a kv client of the agents, closed at the end of the
// test.
func (c *cluster) kvClient() *kv.Client {
	c.t.Helper()
	cfg := c.clientConfig(true)
	cfg.AllGroups = true // a kv node answers from every destination group
	cl, err := client.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	k, err := kv.NewClient(cl, c.r.topo.NumGroups())
	if err != nil {
		c.t.Fatal(err)
	}
	return k
}

// progress waits until n more operations are recorded.
func (l *kvTest) progress(n int) {
	l.c.t.Helper()
	from := l.h.Len()
	l.c.waitFor(fmt.Sprintf("%d more kv operations", n), progressAfter, func(map[wire.ProcID]node.Status) bool {
		return l.h.Len() >= from+n
	})
}

// check checks the history with porcupine and returns its verdict, after
// logging what was recorded (and, for a verdict other than Ok, where
// porcupine's visualisation is).
func (l *kvTest) check(name string) porcupine.CheckResult {
	t := l.c.t
	t.Helper()
	res, info, took, err := l.kvLoad.check()
	if err != nil {
		t.Fatal(err)
	}
	l.c.logf("kv history: %s; porcupine: %v in %v", l.describe(), res, took.Round(time.Millisecond))
	if res != porcupine.Ok {
		path := filepath.Join(os.TempDir(), "weft-"+name+".html")
		if err := kvcheck.Visualize(info, path); err == nil {
			l.c.logf("porcupine's visualisation: %s", path)
		}
	}
	return res
}

// TestKVLinearizableUnderFaults: weft-kv on 3 shards x 3 replicas of
// `weft agent` (service = "kv"), 8 kv workers on 2 hot keys per shard and
// 2 raw multicast clients, while g0's leader is SIGKILLed and restarted
// from its WAL, g1's leader is partitioned from its followers and healed,
// g2's leader is stopped with SIGTERM (a hand-over) and restarted, and a
// follower of g0 loses its data directory and rejoins with --rejoin (one
// kv operation in 40 gives up after 2ms: writes of unknown outcome, which
// the history holds as possibly applied). Every key's history must be
// linearizable, and the multicast history must
// pass the harness's checks (finish). Beside them the bank workload runs
// (internal/bank: transfers between accounts on different shards, each a
// cross-shard transaction whose shards exchange votes, and full-balance
// reads): every full read, and a final one after the faults, sees the
// initial total.
func TestKVLinearizableUnderFaults(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 3, Replicas: 3, Clients: 2, Service: config.ServiceKV})
	l := c.startKVLoad(8, hotKeys(3, 2))
	b, err := bank.New(c.kvClient(), bank.Config{Shards: 3, Accounts: 12, Transfers: 4, Readers: 1, Timeout: 5 * time.Second, Seed: c.r.opt.Seed})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Init(c.ctx); err != nil {
		t.Fatal(err)
	}
	b.Start(c.ctx)
	l.progress(200)

	// A crash of g0's leader.
	l0 := c.leader(0)
	c.kill(l0.ID)
	c.waitNewLeader(0, l0)
	l.progress(150)
	c.restart(l0.ID)
	c.waitRejoin(l0.ID)

	// g1's leader partitioned from its followers, then healed.
	l1 := c.leader(1)
	followers := c.members(1, l1.ID)
	c.cut([]wire.ProcID{l1.ID}, followers)
	c.waitNewLeader(1, l1)
	l.progress(150)
	c.healAll()
	c.waitRejoin(l1.ID)

	// A planned stop of g2's leader: it hands its leadership over.
	l2 := c.leader(2)
	c.terminate(l2.ID)
	c.waitNewLeader(2, l2)
	l.progress(150)
	c.restart(l2.ID)
	c.waitRejoin(l2.ID)

	// A follower of g0 loses its disk and rejoins.
	f := c.follower(0)
	c.kill(f.ID)
	c.wipe(f.ID)
	c.refuseThenRejoin(f.ID)
	l.progress(200)

	l.end()
	b.Stop()
	if err := b.FinalRead(c.ctx); err != nil {
		t.Errorf("the bank's final read: %v", err)
	}
	st := b.Stats()
	c.logf("bank: %+v", st)
	if err := b.Checker().Result().Err(); err != nil {
		t.Errorf("the bank's total: %v", err)
	}
	if st.Committed == 0 {
		t.Error("no transfer committed")
	}
	c.finish()
	if res := l.check("kv-faults"); res != porcupine.Ok {
		t.Errorf("the kv history is not linearizable (%v)", res)
	}
	if n := l.h.Counts()["get"]; n == 0 || l.levels[kv.Linearizable] == 0 || l.levels[kv.Ordered] == 0 {
		t.Errorf("gets: %d recorded, %d linearizable, %d ordered: the run did not exercise both read paths", n, l.levels[kv.Linearizable], l.levels[kv.Ordered])
	}
}

// TestKVLocalReadsCaught shows the check can fail in this setting: on one
// shard of 3 agents under the same workload, a follower is partitioned
// from its group; a put is acknowledged (by the leader and the other
// follower), then the key is read with consistency Local from the
// partitioned follower, which still holds the old value, and the read is
// recorded as if it were linearizable. The workload's history must be
// linearizable without the local reads, and not with them.
func TestKVLocalReadsCaught(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 1, Replicas: 3, Clients: 2, Service: config.ServiceKV})
	// The workers use two keys; the stale reads a third, which only this
	// test's own puts write: no concurrent write can excuse a read.
	keys := hotKeys(1, 3)
	l := c.startKVLoad(4, keys[1:])
	l.progress(50)

	f := c.follower(0)
	ctx, cancel := context.WithTimeout(c.ctx, kvOpTimeout)
	defer cancel()
	in := kvcheck.Input{Op: kv.OpPut, Key: keys[0], Value: "before-cut"}
	call := l.h.Now()
	_, gts, err := l.k.DoAt(ctx, kv.Command{Op: kv.OpPut, Key: in.Key, Value: []byte(in.Value)}, kv.Ordered)
	if err != nil {
		t.Fatal(err)
	}
	l.h.Add(int(l.ids.Add(1))-1, in, kvcheck.Output{}, call)
	c.waitFor(fmt.Sprintf("p%d to apply the put at %s", f.ID, gts), progressAfter, func(sts map[wire.ProcID]node.Status) bool {
		return gts.LessEq(sts[f.ID].MaxDelivered)
	})
	c.cut([]wire.ProcID{f.ID}, c.members(0, f.ID))
	const reads = 3
	var locals []porcupine.Operation // recorded after the workload's check
	stale := 0
	for i := range reads {
		in := kvcheck.Input{Op: kv.OpPut, Key: keys[0], Value: fmt.Sprint("after-cut.", i)}
		call := l.h.Now()
		if err := l.k.Put(ctx, in.Key, []byte(in.Value)); err != nil {
			t.Fatal(err)
		}
		l.h.Add(int(l.ids.Add(1))-1, in, kvcheck.Output{}, call)
		// Local reads go to a random member: read until p_f answers.
		for {
			call := l.h.Now()
			rd, err := l.k.ReadAt(ctx, in.Key, kv.Local)
			if err != nil {
				t.Fatal(err)
			}
			if rd.Node != f.ID {
				continue
			}
			locals = append(locals, porcupine.Operation{ClientId: int(l.ids.Add(1)) - 1, Input: kvcheck.Input{Op: kv.OpGet, Key: in.Key},
				Call: call, Output: kvcheck.Output{OK: rd.Present, Value: string(rd.Value)}, Return: l.h.Now()})
			if string(rd.Value) != in.Value {
				stale++
			}
			c.logf("local read of %s at p%d (cut off): %q (present %v) at %s, after the put of %q was acknowledged", in.Key, f.ID, rd.Value, rd.Present, rd.Index, in.Value)
			break
		}
	}
	l.progress(50)
	l.end()
	if stale == 0 {
		t.Fatalf("p%d, cut off from its group, served no stale local read", f.ID)
	}
	if res := l.check("kv-local-reads-without"); res != porcupine.Ok {
		t.Fatalf("porcupine: %v without the local reads, want Ok", res)
	}
	for _, op := range locals {
		l.h.AddAt(op.ClientId, op.Input.(kvcheck.Input), op.Output.(kvcheck.Output), op.Call, op.Return)
	}
	l.mu.Lock()
	l.levels[kv.Local] += len(locals)
	l.mu.Unlock()
	if res := l.check("kv-local-reads"); res != porcupine.Illegal {
		t.Errorf("porcupine: %v with %d stale local reads from a partitioned replica recorded as linearizable, want a violation (Illegal)", res, stale)
	}
	c.healAll()
	c.waitRejoin(f.ID)
	c.finish()
}
