package node

import (
	"testing"
	"time"

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
