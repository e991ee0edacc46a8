package node

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

// TestLeaderDefersItsSync: with the fsync'd WAL, the leader of a group of
// three defers the sync of the Readys nobody waits on (pipeline.go) and
// its followers never do; every member still delivers every message. In
// a group of one the leader's own ack is its quorum, so it never defers.
func TestLeaderDefersItsSync(t *testing.T) {
	for _, replicas := range []int{3, 1} {
		c := newCluster(t, 1, replicas, nil)
		waitUntil(t, 10*time.Second, "a leader", func() bool { _, ok := c.leader(0); return ok })
		lp, _ := c.leader(0)
		const n = 200
		multicast(t, c.client(), n, 8, func(int) []wire.GroupID { return []wire.GroupID{0} })
		waitUntil(t, 10*time.Second, "every member's deliveries", func() bool {
			for _, nd := range c.nodes {
				if nd.Status().Stats.Delivered < n {
					return false
				}
			}
			return true
		})
		for p, nd := range c.nodes {
			st := nd.Status().Stats
			switch {
			case p == lp && replicas == 3 && st.DeferredSyncs == 0:
				t.Errorf("%d replicas: the leader p%d deferred no sync (%d Readys, %d syncs)", replicas, p, st.Readies, st.Syncs)
			case (p != lp || replicas == 1) && st.DeferredSyncs != 0:
				t.Errorf("%d replicas: p%d (leader p%d) deferred %d syncs", replicas, p, lp, st.DeferredSyncs)
			}
		}
	}
}

// TestServiceLeaderDefersItsSync: a leader running a state machine defers
// its sync too, applying its deliveries and answering with their results
// before their records are durable (applyBeforeSync); its followers never
// do; the results are right, every member applies the same messages in
// the same order, and every member's deliveries log (written at the
// sync) holds them in that order.
func TestServiceLeaderDefersItsSync(t *testing.T) {
	var smu sync.Mutex
	sms := map[wire.ProcID]*sumSM{}
	c := newCluster(t, 1, 3, func(cfg *Config) {
		smu.Lock()
		defer smu.Unlock()
		sms[cfg.ID] = &sumSM{}
		cfg.StateMachine = sms[cfg.ID]
	})
	waitUntil(t, 10*time.Second, "a leader", func() bool { _, ok := c.leader(0); return ok })
	lp, _ := c.leader(0)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	told := map[wire.MsgID]uint64{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for range 25 {
				res, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte{byte(w + 1)})
				if err != nil {
					t.Error(err)
					return
				}
				r, ok := res.Of(0)
				if !ok || len(r) != 8 {
					t.Errorf("%s: result %x", res.ID, r)
					return
				}
				mu.Lock()
				told[res.ID] = binary.BigEndian.Uint64(r)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	waitUntil(t, 10*time.Second, "every member's state and deliveries log", func() bool {
		for _, nd := range c.nodes {
			if st := nd.Status(); st.Service.Applied < 200 || st.Stats.Delivered < 200 {
				return false
			}
		}
		return true
	})
	for p, nd := range c.nodes {
		st := nd.Status().Stats
		switch {
		case p == lp && (st.DeferredSyncs == 0 || st.AppliedBeforeSync == 0):
			t.Errorf("the leader p%d deferred %d syncs and applied %d deliveries before durable", p, st.DeferredSyncs, st.AppliedBeforeSync)
		case p != lp && (st.DeferredSyncs != 0 || st.AppliedBeforeSync != 0):
			t.Errorf("follower p%d deferred %d syncs, applied %d before durable", p, st.DeferredSyncs, st.AppliedBeforeSync)
		}
	}
	ref := sms[lp]
	ref.mu.Lock()
	defer ref.mu.Unlock()
	for id, sum := range told {
		i := slices.Index(ref.ids, id)
		if i < 0 || ref.after[i] != sum {
			t.Fatalf("%s: the client was told sum %d; the leader's state has it at %d", id, sum, i)
		}
	}
	for p, sm := range sms {
		if p != lp {
			sm.mu.Lock()
			same := slices.Equal(sm.ids, ref.ids) && sm.sum == ref.sum
			sm.mu.Unlock()
			if !same {
				t.Errorf("p%d applied other messages than the leader", p)
			}
		}
		// The deliveries log got them at the sync, in the same order.
		h, err := readDeliveryLog(vfs.OS(), c.dlogPath(p))
		if err != nil {
			t.Fatal(err)
		}
		var logged []string
		for _, ev := range h.Events {
			logged = append(logged, ev.ID)
		}
		want := make([]string, len(ref.ids))
		for i, id := range ref.ids {
			want[i] = id.Full()
		}
		if !slices.Equal(logged, want) {
			t.Errorf("p%d's deliveries log holds %d deliveries, not the %d the leader applied in its order", p, len(logged), len(want))
		}
	}
}
