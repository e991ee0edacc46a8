package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/storage/wal"
	"github.com/weft-dev/weft/wire"
)

// TestFsyncFailureStopsNode fails one fdatasync of the leader's WAL: the
// node stops with an error saying so, and from the failing sync on it
// sends nothing (its loop's count of messages handed to the transport
// does not move; its transport, once it has written what was queued
// before, writes no frame) and hands out no delivery. The
// rest of the group elects a leader and goes on; the node, restarted on a
// healthy disk, rejoins, and every delivery checks.
func TestFsyncFailureStopsNode(t *testing.T) {
	var armed atomic.Bool
	var n0 *Node
	var delivered atomic.Int64
	type snapshot struct {
		sent, flushed, frames uint64
		delivered             int64
	}
	var at snapshot
	failed := make(chan struct{})
	var once sync.Once
	failSync := vfs.InjectorFunc(func(op vfs.Op, path string) error {
		// A WAL segment (its file keeps the name it was created with,
		// .wal.tmp).
		if op != vfs.OpSync || !armed.Load() || !strings.Contains(filepath.Base(path), ".wal") {
			return nil
		}
		var err error
		once.Do(func() {
			// On the node's loop (the WAL syncs only there): what it had
			// sent and delivered, and what its transport had written or
			// still queued, when the sync failed.
			at = snapshot{sent: n0.stats.Sent, flushed: n0.stats.HeldByTick, frames: n0.TransportStats().FramesOut, delivered: delivered.Load()}
			close(failed)
			err = &fs.PathError{Op: "sync", Path: path, Err: vfs.ErrInjected}
		})
		return err
	})
	first := true
	c := newCluster(t, 1, 3, func(cfg *Config) {
		if cfg.ID != 0 || cfg.DataDir == "" {
			return
		}
		if first { // the restart runs on a healthy disk
			first = false
			cfg.FS = vfs.WithErrors(vfs.OS(), failSync)
			cfg.OnDeliver = func(Delivery) { delivered.Add(1) }
		}
	})
	n0 = c.nodes[0]
	cl := c.client()
	one := func(int) []wire.GroupID { return []wire.GroupID{0} }
	multicast(t, cl, 100, 4, one)
	armed.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 { // load while the sync fails; these may fail or be retried
		wg.Go(func() {
			for ctx.Err() == nil {
				cl.Multicast(ctx, []wire.GroupID{0}, []byte("during the failure"))
			}
		})
	}
	select {
	case <-n0.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("node 0 kept running after its WAL sync failed") // (or the sync never failed)
	}
	<-failed
	err := n0.Err()
	if !errors.Is(err, vfs.ErrInjected) || !errors.Is(err, wal.ErrFailed) || !strings.Contains(err.Error(), "sync") {
		t.Fatalf("node stopped with %v, want the failed sync", err)
	}
	t.Logf("node 0 stopped: %v", err)
	cancel()
	wg.Wait()
	// Its transport drains what was queued before the failed sync; then,
	// while the rest of the group elects a leader and serves 50 multicasts,
	// it writes nothing more.
	quiet := func() (uint64, bool) {
		ts := n0.TransportStats()
		for _, ps := range ts.Peers {
			if ps.Queued > 0 {
				return 0, false
			}
		}
		return ts.FramesOut, ts.ClientQueueBytes == 0
	}
	var drained uint64
	waitFor(t, "node 0's transport to drain", func() bool {
		f1, ok1 := quiet()
		time.Sleep(100 * time.Millisecond)
		f2, ok2 := quiet()
		drained = f2
		return ok1 && ok2 && f1 == f2
	})
	waitFor(t, "a new leader", func() bool { return c.nodes[1].Status().Leader || c.nodes[2].Status().Leader })
	multicast(t, cl, 50, 4, one)
	// The one thing a loop sends as it ends, even on a failed sync, is
	// what it held (lazy.go): DELIVERs of commits that rest on the
	// followers' durable acks, not on this node's records, which a leader
	// may send before its own sync (docs/durability.md). Nothing else.
	st, ts := n0.Status(), n0.TransportStats()
	if sent, flushed := st.Stats.Sent-at.sent, st.Stats.HeldByTick-at.flushed; sent != flushed {
		t.Errorf("the loop sent %d messages after the failed sync, %d of them held before it", sent, flushed)
	}
	if d := delivered.Load(); d != at.delivered {
		t.Errorf("%d deliveries handed out after the failed sync", d-at.delivered)
	}
	if ts.FramesOut != drained {
		t.Errorf("the transport wrote %d frames after it drained", ts.FramesOut-drained)
	}
	t.Logf("at the failed sync: %d sent by the loop, %d frames written; drained at %d frames (%d queued or held before the failure); at the end: %d sent (%d held ones), %d frames",
		at.sent, at.frames, drained, drained-at.frames, st.Stats.Sent, st.Stats.HeldByTick-at.flushed, ts.FramesOut)
	if err := n0.Close(); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("Close = %v, want the error that stopped the node", err)
	}
	delete(c.nodes, 0)
	c.record(check.Event{Ev: check.EvCrash, Proc: 0, T: time.Now().UnixMicro()})
	c.restart(0)
	multicast(t, cl, 50, 4, one)
	c.waitDelivered(t, 200)
	c.waitChecked(t, false)
}

// waitChecked waits until the cluster's history passes every check,
// termination included (some deliveries may still be on their way), and
// fails the test with the last report if it never does. With lost set,
// multicasts no process delivered are left out: a power loss may take
// those a client was never answered for.
func (c *cluster) waitChecked(t *testing.T, lost bool) {
	t.Helper()
	var rep *check.Report
	deadline := time.Now().Add(20 * time.Second)
	for {
		h := c.history(t)
		if lost {
			delivered := map[string]bool{}
			for _, ev := range h.Events {
				if ev.Ev == check.EvDeliver {
					delivered[ev.ID] = true
				}
			}
			h.Events = slices.DeleteFunc(h.Events, func(ev check.Event) bool { return ev.Ev == check.EvMulticast && !delivered[ev.ID] })
		}
		if rep = check.Check(h, check.Options{Termination: check.TermAll}); rep.OK() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(rep.Error())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPowerLossKeepsAcknowledged runs a group whose three nodes keep
// their files on a crashable in-memory filesystem, under load and with
// frequent compactions, then cuts the power of all three at once
// (vfs.MemFS.CrashClone: only what was synced survives, plus torn
// unsynced writes), restarts them on what survived and checks that no
// acknowledged multicast is lost: every multicast a client got its reply
// for, and every delivery a node handed out, before the power loss, is
// delivered at every node after it; and the whole history checks.
func TestPowerLossKeepsAcknowledged(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { testPowerLoss(t, seed) })
	}
}

func testPowerLoss(t *testing.T, seed uint64) {
	// One filesystem for the three nodes (each in its own directory), so
	// that one CrashClone cuts the power of all three at the same instant:
	// a node cloned earlier than the others would go on acting (acking,
	// delivering) on state its clone lacks, which no real crash allows.
	mem := vfs.NewCrashableMem()
	var mu sync.Mutex
	handedOut := map[string]bool{} // ids (as histories name them: MsgID.Full) some node delivered to its application
	acked := map[string]bool{}     // ids a client got its reply for
	c := newCluster(t, 1, 3, func(cfg *Config) {
		if cfg.DataDir == "" {
			return
		}
		cfg.FS = mem
		cfg.CompactBytes = 4 << 10
		cfg.OnDeliver = func(d Delivery) {
			mu.Lock()
			handedOut[d.M.ID.Full()] = true
			mu.Unlock()
		}
	})
	c.fsys = func(wire.ProcID) vfs.FS { return mem }
	cl := c.client()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				res, err := cl.Multicast(ctx, []wire.GroupID{0}, fmt.Appendf(nil, "worker %d", i))
				if err == nil {
					mu.Lock()
					acked[res.ID.Full()] = true
					mu.Unlock()
				}
			}
		})
	}
	waitFor(t, "200 acknowledged multicasts and a compaction everywhere", func() bool {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		for _, nd := range c.nodes {
			if nd.Status().Stats.Compactions == 0 {
				return false
			}
		}
		return n >= 200
	})
	// Power loss, under load. What was acknowledged before it must
	// survive it.
	mu.Lock()
	must := map[string]bool{}
	for id := range acked {
		must[id] = true
	}
	for id := range handedOut {
		must[id] = true
	}
	mu.Unlock()
	survivor := mem.CrashClone(rand.New(rand.NewPCG(seed, 0xc4a5)))
	cancel()
	wg.Wait()
	for p := range wire.ProcID(3) {
		c.stop(p)
	}
	mem = survivor
	pristine := survivor.CrashClone(nil)
	t.Cleanup(func() {
		if t.Failed() {
			for p := range wire.ProcID(3) {
				dumpWAL(t, p, pristine, c.dirs[p])
			}
		}
	})
	for p := range wire.ProcID(3) {
		c.restart(p)
	}
	multicast(t, cl, 30, 4, func(int) []wire.GroupID { return []wire.GroupID{0} })
	var missing []string
	waitFor(t, "every acknowledged multicast delivered everywhere after the power loss", func() bool {
		at := deliveredSets(c.history(t), 3)
		missing = missing[:0]
		for id := range must {
			for p := range 3 {
				if !at[p][id] {
					missing = append(missing, fmt.Sprintf("%s at %d", id, p))
				}
			}
		}
		return len(missing) == 0
	})
	var recovered uint64
	for _, nd := range c.nodes {
		recovered += nd.Status().Stats.Recovered
	}
	t.Logf("%d multicasts acknowledged before the power loss, all delivered everywhere after it; %d deliveries handed over again from the WALs", len(must), recovered)
	c.waitChecked(t, true)
}

// dumpWAL logs what node p's WAL in dir holds (on a failure, to see what
// survived the power loss).
func dumpWAL(t *testing.T, p wire.ProcID, m vfs.FS, dir string) {
	w, err := wal.Open(m, filepath.Join(dir, "wal"), wal.Options{})
	if err != nil {
		t.Logf("node %d: %v", p, err)
		return
	}
	recs, _, err := restoreSnapshot(w)
	idx, _ := w.SnapshotIndex()
	msgs, err2 := w.ReadMessages()
	t.Logf("node %d: snapshot at %d (%v) first %d last %d, %d entries (%v)", p, idx, err, w.FirstIndex(), w.LastIndex(), len(msgs), err2)
	for _, r := range recs {
		if s, ok := r.(*wire.RecSnapshot); ok {
			for i, m := range s.Msgs {
				t.Logf("  node %d snap: %s %s gts %s delivered %v", p, m.M.ID, m.Phase, m.GTS, s.Delivered[i])
			}
			t.Logf("  node %d snap: maxdel %s ballot %s done %v", p, s.MaxDelivered, s.Ballot, s.Done)
		}
	}
	for i, r := range msgs {
		t.Logf("  node %d rec %d: %s", p, w.FirstIndex()+uint64(i), wire.Describe(r))
	}
}
