package node

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// TestServiceStateTransfer: a follower is down while its group orders 300
// messages and the two others restart (their delivery chains then start at
// their restarts), then comes back with its data directory (the returning
// member), and a second
// follower loses its data directory and rejoins (--rejoin, the amnesiac
// member). Each is caught up by a SNAPSHOT of the delivered prefix, fetches
// the application state from a member (transfer.go) and ends with the same
// state as the others: every message once, in the same order.
func TestServiceStateTransfer(t *testing.T) {
	rejoin := map[wire.ProcID]bool{}
	sms := map[wire.ProcID]*sumSM{}
	var mu sync.Mutex
	c := newCluster(t, 1, 3, func(cfg *Config) {
		mu.Lock()
		defer mu.Unlock()
		cfg.CompactBytes = 16 << 10
		sms[cfg.ID] = &sumSM{} // each incarnation its own, restored from the data directory
		cfg.StateMachine = sms[cfg.ID]
		cfg.Rejoin = rejoin[cfg.ID]
		// Small send queues: what a peer's transport holds for the member
		// while it is down (8 MiB by default) would otherwise catch it up
		// on reconnection.
		cfg.PeerQueueBytes = 16 << 10
	})
	cl := c.client()
	one := func(int) []wire.GroupID { return []wire.GroupID{0} }
	multicast(t, cl, 50, 4, one)
	leader, ok := c.leader(0)
	if !ok {
		t.Fatal("no leader")
	}
	back, wiped := (leader+1)%3, (leader+2)%3
	c.stop(back)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 300 { // 300 KiB: far more than the leader's send queue to back holds
		payload := append([]byte{byte(i%7 + 1)}, make([]byte, 1<<10)...)
		if _, err := cl.Multicast(ctx, []wire.GroupID{0}, payload); err != nil {
			t.Fatal(err)
		}
	}
	// The other two restart: their delivery chains start again at their
	// last deliveries, so only a snapshot can catch back up, whoever leads
	// (collecting by a quorum, the group may also have collected what back
	// missed).
	for _, p := range []wire.ProcID{leader, wiped} {
		c.stop(p)
		c.restart(p)
	}
	c.restart(back)
	multicast(t, cl, 50, 4, one)
	c.waitApplied(t, sms, 400)

	c.stop(wiped)
	if err := os.RemoveAll(c.dirs[wiped]); err != nil {
		t.Fatal(err)
	}
	rejoin[wiped] = true
	c.restart(wiped)
	multicast(t, cl, 100, 4, one)
	c.waitApplied(t, sms, 500)

	ref := sms[leader]
	ref.mu.Lock()
	defer ref.mu.Unlock()
	for _, p := range []wire.ProcID{back, wiped} {
		st := c.nodes[p].Status()
		t.Logf("p%d: state transfers %d, %d bytes fetched; applied %d; core %+v", p, st.Stats.StateTransfers, st.Stats.TransferBytes,
			st.Service.Applied, st.Coverage)
		if st.Stats.StateTransfers == 0 || st.Coverage.Installs == 0 {
			t.Errorf("p%d caught up without a state transfer", p)
		}
		sm := sms[p]
		sm.mu.Lock()
		if sm.sum != ref.sum || !slices.Equal(sm.ids, ref.ids) {
			t.Errorf("p%d's state (sum %d, %d messages) differs from the leader's (sum %d, %d messages)", p, sm.sum, len(sm.ids), ref.sum, len(ref.ids))
		}
		sm.mu.Unlock()
	}
	if n := len(ref.ids); n != 500 {
		t.Errorf("the leader's state holds %d messages, want 500", n)
	}
	if st := c.nodes[wiped].Status(); st.Coverage.Rejoins == 0 && st.Stats.StateTransfers == 0 {
		t.Errorf("p%d did not rejoin", wiped)
	}
}

// waitApplied waits until every running node's state machine holds want
// messages (sumSM keeps one id per message applied).
func (c *cluster) waitApplied(t *testing.T, sms map[wire.ProcID]*sumSM, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		done := true
		for p := range c.nodes {
			sm := sms[p]
			sm.mu.Lock()
			done = done && len(sm.ids) == want
			sm.mu.Unlock()
		}
		if done {
			return
		}
		if time.Now().After(deadline) {
			for p, n := range c.nodes {
				st := n.Status()
				sm := sms[p]
				sm.mu.Lock()
				t.Logf("p%d: %s maxd %s, state holds %d, transfers %d, core %+v", p, st.Role, st.MaxDelivered, len(sm.ids), st.Stats.StateTransfers, st.Coverage)
				sm.mu.Unlock()
			}
			t.Fatalf("replicas did not reach %d messages", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
