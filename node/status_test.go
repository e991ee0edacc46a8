package node

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// TestStatusFresh: the loop publishes a full status only on its ticks and
// on a change of role or ballot, yet Status reflects every pass before
// the call: with ticks an hour apart, a delivery shows at once. From
// OnDeliver (on the loop) Status does not wait for the loop, which is
// busy calling it: it returns the last published status.
func TestStatusFresh(t *testing.T) {
	var mu sync.Mutex
	var inCallback []Status
	var n0 *Node
	c := newCluster(t, 1, 1, func(cfg *Config) {
		cfg.Tick = time.Hour
		cfg.OnDeliver = func(Delivery) {
			mu.Lock()
			defer mu.Unlock()
			inCallback = append(inCallback, n0.Status())
		}
	})
	n0 = c.nodes[0]
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		res, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte("fresh"))
		if err != nil {
			t.Fatal(err)
		}
		st := n0.Status()
		if st.Stats.Delivered != uint64(i+1) || st.MaxDelivered != res.GTS || st.Stats.Ticks != 0 {
			t.Fatalf("after multicast %d (gts %s): status says %d delivered, max %s, %d ticks", i+1, res.GTS, st.Stats.Delivered, st.MaxDelivered, st.Stats.Ticks)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(inCallback) != 3 {
		t.Fatalf("OnDeliver called %d times, want 3", len(inCallback))
	}
	for i, st := range inCallback {
		// The status last published before this delivery: by the test's
		// Status after the previous one (or, for the first, when the
		// node took the lead).
		if st.Stats.Delivered != uint64(i) || !st.Leader {
			t.Errorf("Status from OnDeliver %d: %d delivered, leader %t; want %d and true", i+1, st.Stats.Delivered, st.Leader, i)
		}
	}
}
