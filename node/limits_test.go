package node

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// stall blocks n's loop until the returned function is called.
func stall(t *testing.T, n *Node) (release func()) {
	t.Helper()
	gate, entered := make(chan struct{}), make(chan struct{})
	select {
	case n.ctl <- func() { close(entered); <-gate }:
	case <-time.After(10 * time.Second): // failure guard only
		t.Fatal("the node's loop does not take requests")
	}
	<-entered
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return release
}

// TestClientInboxSheds drives the client inbox to each of its bounds (in
// messages, then in bytes) with the leader's loop stalled: exactly what
// fits is queued, every other MULTICAST is shed and its Multicast call
// returns client.ErrOverloaded; once the loop runs again, the queued ones
// complete.
func TestClientInboxSheds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		size    int
		bytes   int64
		share   int
		payload int
		fit     int // messages that fit
	}{
		{"messages", 8, 1 << 20, 64, 10, 8},
		// 1,000-byte payloads encode to a little over 1,000 bytes: 10 of
		// them exceed 10,000 bytes, 9 fit.
		{"bytes", 1000, 10000, 64, 1000, 9},
		{"share", 1000, 1 << 20, 5, 10, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1, 3, func(cfg *Config) {
				cfg.ClientInboxSize, cfg.ClientInboxBytes, cfg.ClientShare = tc.size, tc.bytes, tc.share
				cfg.ElectionTicks = 1000 // the stalled leader stays the leader
			})
			cl, err := client.New(client.Config{Cluster: "test", Topology: c.topo, Nodes: c.addrs, RetryTicks: 100000, ViewTicks: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte("warm up")); err != nil {
				t.Fatal(err)
			}
			leader := c.nodes[0]
			release := stall(t, leader)
			const n = 30
			var overloaded, served atomic.Int64
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					_, err := cl.Multicast(ctx, []wire.GroupID{0}, make([]byte, tc.payload))
					switch {
					case errors.Is(err, client.ErrOverloaded):
						overloaded.Add(1)
					case err == nil:
						served.Add(1)
					default:
						t.Errorf("multicast: %v", err)
					}
				})
			}
			waitUntil(t, 20*time.Second, "every message queued or shed", func() bool { return overloaded.Load() == n-int64(tc.fit) })
			used, peak := leader.clients.budget.load()
			full, share := leader.clientShed.Load(), leader.clientShedShare.Load()
			t.Logf("queued %d (%d bytes, peak %d), shed %d (inbox full) + %d (client's share)", len(leader.clients.ch), used, peak, full, share)
			if tc.share == tc.fit {
				full, share = share, full // the share is the bound driven here
			}
			if len(leader.clients.ch) != tc.fit || peak > tc.bytes || full != uint64(n-tc.fit) || share != 0 {
				t.Errorf("queued %d, want %d; peak %d bytes of %d; shed %d at this bound, %d at the other", len(leader.clients.ch), tc.fit, peak, tc.bytes, full, share)
			}
			release()
			wg.Wait()
			if served.Load() != int64(tc.fit) || cl.Overloaded() != n-tc.fit {
				t.Errorf("served %d, overloaded %d (client counts %d); want %d and %d", served.Load(), overloaded.Load(), cl.Overloaded(), tc.fit, n-tc.fit)
			}
		})
	}
}

// TestPeerInboxBytes stalls a follower's loop while its group keeps
// ordering 1 KiB messages: its peer inbox fills to its byte budget and no
// further (the readers wait), the leader's send queue to it fills to its
// own budget and drops (queue_bytes), and once the follower runs again it
// catches up: the protocol tolerates the loss.
func TestPeerInboxBytes(t *testing.T) {
	const inboxBytes, queueBytes = 64 << 10, 64 << 10
	c := newCluster(t, 1, 3, func(cfg *Config) { cfg.InboxBytes, cfg.PeerQueueBytes = inboxBytes, queueBytes })
	cl := c.client()
	one := func(int) []wire.GroupID { return []wire.GroupID{0} }
	multicast(t, cl, 10, 2, one)
	follower := c.nodes[1]
	release := stall(t, follower)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Until p1's inbox is within 8 KiB of its budget and the leader's
	// queue to p1 drops for want of bytes (failure guard: 100,000
	// messages).
	full := func() bool {
		used, _ := follower.inbox.budget.load()
		return used >= inboxBytes-8<<10 && c.nodes[0].TransportStats().Drops[transport.DropQueueBytes] > 0
	}
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for !full() && sent.Load() < 100000 {
				if _, err := cl.Multicast(ctx, []wire.GroupID{0}, make([]byte, 1024)); err != nil {
					t.Errorf("multicast with a follower stalled: %v", err)
					return
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	used, peak := follower.inbox.budget.load()
	lst := c.nodes[0].TransportStats()
	t.Logf("%d multicasts with p1 stalled: p1 inbox %d bytes (peak %d, budget %d); p0's queue to p1 peak %d bytes, drops %v",
		sent.Load(), used, peak, inboxBytes, lst.Peers[1].PeakBytes, lst.Drops)
	if !full() {
		t.Fatal("100,000 multicasts did not fill p1's inbox and the leader's queue to it")
	}
	if peak > inboxBytes { // every message here is far smaller than the budget
		t.Errorf("p1 inbox peak %d bytes, over its budget %d", peak, inboxBytes)
	}
	if follower.inboxWaits.Load() == 0 {
		t.Error("p1's readers never waited for room in its inbox")
	}
	if p := lst.Peers[1].PeakBytes; p > queueBytes {
		t.Errorf("p0's queue to p1 peaked at %d bytes, budget %d", p, queueBytes)
	}
	release()
	multicast(t, cl, 10, 2, one)
	c.waitDelivered(t, 20+int(sent.Load()))
}

// TestLimitsDefaultsAgree: the defaults config documents for [limits] are
// the node's and the transport's own.
func TestLimitsDefaultsAgree(t *testing.T) {
	for _, d := range []struct {
		name         string
		config, here int64
	}{
		{"inbox_bytes", config.DefaultInboxBytes, DefaultInboxBytes},
		{"peer_queue_bytes", config.DefaultPeerQueueBytes, transport.DefaultQueueBytes},
		{"client_inbox_bytes", config.DefaultClientInboxBytes, DefaultClientInboxBytes},
		{"client_inbox_messages", config.DefaultClientInboxMessages, DefaultClientInboxSize},
		{"client_share", config.DefaultClientShare, DefaultClientShare},
		{"client_queue_bytes", config.DefaultClientQueueBytes, transport.DefaultClientQueueBytes},
		{"max_conns", config.DefaultMaxConns, transport.DefaultMaxConns},
		{"max_conns_per_host", config.DefaultMaxConnsPerHost, transport.DefaultMaxConnsPerHost},
		{"handshake_timeout", int64(config.DefaultHandshakeTimeout), int64(transport.DefaultHandshakeTimeout)},
		{"idle_timeout", int64(config.DefaultIdleTimeout), int64(transport.DefaultIdleTimeout)},
		{"reads_pending", config.DefaultReadsPending, DefaultMaxPendingReads},
		{"reads_per_client", config.DefaultReadsPerClient, DefaultMaxClientReads},
		{"read_bytes", config.DefaultReadBytes, DefaultMaxReadBytes},
		{"held_bytes", config.DefaultHeldBytes, rsm.DefaultMaxPendingBytes},
	} {
		if d.config != d.here {
			t.Errorf("%s: config's default %d, the node's %d", d.name, d.config, d.here)
		}
	}
	if config.MinIdleTimeout < 3*transport.DefaultPingEvery {
		t.Errorf("config's smallest idle_timeout %v is below three pings (%v)", config.MinIdleTimeout, transport.DefaultPingEvery)
	}
}

// TestClientBatchPerPass queues 300 client messages behind a stalled loop:
// once it runs, it steps them at most ClientBatch per pass.
func TestClientBatchPerPass(t *testing.T) {
	const batch = 16
	c := newCluster(t, 1, 3, func(cfg *Config) {
		cfg.ClientBatch, cfg.ClientShare = batch, 1000
		cfg.ElectionTicks = 1000 // the stalled leader stays the leader
	})
	// MaxInFlight -1: the client sends all 300 at once (its own bound,
	// 64 by default, would hold most of them back).
	cl, err := client.New(client.Config{Cluster: "test", Topology: c.topo, Nodes: c.addrs, RetryTicks: 100000, ViewTicks: -1, MaxInFlight: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cl.Multicast(ctx, []wire.GroupID{0}, nil); err != nil {
		t.Fatal(err)
	}
	leader := c.nodes[0]
	release := stall(t, leader)
	var wg sync.WaitGroup
	for range 300 {
		wg.Go(func() {
			if _, err := cl.Multicast(ctx, []wire.GroupID{0}, nil); err != nil {
				t.Errorf("multicast: %v", err)
			}
		})
	}
	waitUntil(t, 20*time.Second, "300 client messages queued", func() bool { return len(leader.clients.ch) == 300 })
	release()
	wg.Wait()
	st := leader.Status().Stats
	t.Logf("client steps %d, most per pass %d (batch %d), most inputs per pass %d", st.ClientSteps, st.MaxClientBatchSeen, batch, st.MaxBatchSeen)
	if st.MaxClientBatchSeen != batch {
		t.Errorf("at most %d client messages per pass, want exactly %d (300 were queued)", st.MaxClientBatchSeen, batch)
	}
}

// TestViewRequestFloodSparesGossip floods a node whose loop is stalled
// with clients' view requests: they are dropped once their own queue is
// full, and gossip frames from the other nodes still get queued.
func TestViewRequestFloodSparesGossip(t *testing.T) {
	c := newCluster(t, 1, 3, gossipTune)
	n := c.nodes[0]
	waitUntil(t, 10*time.Second, "gossip flowing", func() bool { return n.Status().Gossip != nil && n.Status().Gossip.Rounds > 2 })
	release := stall(t, n)
	defer release()
	tr, err := transport.New(transport.Config{ClusterName: "test", Self: 1000, Role: transport.RoleClient,
		Peers: map[wire.ProcID]string{0: c.addrs[0]}, Handler: func(wire.ProcID, wire.Message) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for n.viewDrops.Load() < 100 {
		if err := tr.Send(0, &wire.ViewRequest{}); err != nil && !errors.Is(err, transport.ErrQueueFull) {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
	gossip := len(n.side.ch)
	waitUntil(t, 10*time.Second, "a gossip frame queued after the flood", func() bool { return len(n.side.ch) > gossip })
	if d := n.sideDrops.Load(); d != 0 || len(n.views.ch) != viewQueue {
		t.Errorf("%d gossip frames dropped, %d view requests queued (want 0 and %d)", d, len(n.views.ch), viewQueue)
	}
}
