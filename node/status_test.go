package node

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// TestStatusFresh: the loop publishes a full status only on its ticks and
// on a change of role or ballot, yet Status reflects every pass before
// the call: with ticks an hour apart, a delivery shows at once.
func TestStatusFresh(t *testing.T) {
	c := newCluster(t, 1, 1, func(cfg *Config) { cfg.Tick = time.Hour })
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		res, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte("fresh"))
		if err != nil {
			t.Fatal(err)
		}
		st := c.nodes[0].Status()
		if st.Stats.Delivered != uint64(i+1) || st.MaxDelivered != res.GTS || st.Stats.Ticks != 0 {
			t.Fatalf("after multicast %d (gts %s): status says %d delivered, max %s, %d ticks", i+1, res.GTS, st.Stats.Delivered, st.MaxDelivered, st.Stats.Ticks)
		}
	}
	// The transport's traffic: the client's 3 multicasts came in frames,
	// read by at least one read each way they could be batched, and the
	// replies went out (a writer counts a frame after its write returns,
	// which the client may see first: wait for it).
	waitFor(t, "3 frames written", func() bool { return c.nodes[0].Status().Transport.FramesOut >= 3 })
	tr := c.nodes[0].Status().Transport
	reads := tr.Reads > 0 && tr.Reads <= 2*tr.FramesIn+8 // each read takes a frame or more, but for a few that find nothing
	if tr.FramesIn < 3 || tr.FramesOut < 3 || tr.Writes == 0 || (runtime.GOOS == "linux" && !reads) {
		t.Fatalf("transport traffic %+v", tr)
	}
}

// TestStatusFromCallback: OnDeliver runs on the loop, which cannot build
// a status then; Status called there returns (no deadlock) the last
// published status, from before the delivery.
func TestStatusFromCallback(t *testing.T) {
	var mu sync.Mutex
	var seen []Status
	var n0 *Node
	c := newCluster(t, 1, 1, func(cfg *Config) {
		cfg.Tick = time.Hour
		cfg.OnDeliver = func(Delivery) {
			st := n0.Status()
			mu.Lock()
			seen = append(seen, st)
			mu.Unlock()
		}
	})
	n0 = c.nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.client().Multicast(ctx, []wire.GroupID{0}, []byte("from the callback")); err != nil {
		t.Fatal(err)
	}
	// The reply leaves before the deliveries are handed out.
	waitFor(t, "OnDeliver", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0].Stats.Delivered != 0 || !seen[0].Leader {
		t.Fatalf("Status from OnDeliver: %+v, want one status of the leader with nothing delivered", seen)
	}
}
