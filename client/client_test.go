package client_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

func TestClientValidatesAndCloses(t *testing.T) {
	topo, err := amcast.NewTopology(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[wire.ProcID]string{0: "127.0.0.1:1", 1: "127.0.0.1:1"}
	if _, err := client.New(client.Config{Cluster: "c", Topology: topo, Nodes: nodes, ID: 1}); err == nil {
		t.Error("a client with a replica's id was accepted")
	}
	if _, err := client.New(client.Config{Cluster: "c", Topology: topo, Nodes: map[wire.ProcID]string{0: "127.0.0.1:1"}}); err == nil {
		t.Error("a client without every node's address was accepted")
	}
	cl, err := client.New(client.Config{Cluster: "c", Topology: topo, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	if topo.IsReplica(cl.ID()) || cl.ID() == 0 {
		t.Errorf("random id %d", cl.ID())
	}
	ctx := context.Background()
	if _, err := cl.Multicast(ctx, []wire.GroupID{2}, nil); err == nil {
		t.Error("multicast to a group that does not exist succeeded")
	}
	if _, err := cl.Multicast(ctx, nil, nil); err == nil {
		t.Error("multicast without destinations succeeded")
	}
	// Nobody listens: the context ends the wait.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := cl.Multicast(short, []wire.GroupID{0}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("multicast to nobody: %v", err)
	}
	cl.Close()
	if _, err := cl.Multicast(ctx, []wire.GroupID{0}, nil); !errors.Is(err, client.ErrClosed) {
		t.Errorf("multicast after Close: %v", err)
	}
}

// TestCloseAnswersWaiters: Close ends every Multicast and Read still
// waiting for an answer with ErrClosed (they wait on their own reply
// channel and their context only), those waiting with a context that
// never ends included, and those waiting for a slot (MaxInFlight).
func TestCloseAnswersWaiters(t *testing.T) {
	topo, err := amcast.NewTopology(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[wire.ProcID]string{0: "127.0.0.1:1", 1: "127.0.0.1:1"}
	cl, err := client.New(client.Config{Cluster: "c", Topology: topo, Nodes: nodes, MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctxs := []context.Context{context.Background(), t.Context()}
	errs := make(chan error, 8)
	for i := range 4 { // 2 in flight, 2 waiting for a slot
		go func() {
			_, err := cl.Multicast(ctxs[i%2], []wire.GroupID{0}, nil)
			errs <- err
		}()
	}
	for i := range 2 {
		go func() {
			_, err := cl.Read(ctxs[i%2], 1, nil, wire.ReadLinearizable)
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them reach their waits (a late one gets ErrClosed from enter)
	cl.Close()
	for range 6 {
		select {
		case err := <-errs:
			if !errors.Is(err, client.ErrClosed) {
				t.Errorf("a call waiting at Close: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a call still waits after Close")
		}
	}
}

// TestClientFollowsLeaderHints: the initial guess for group 0 is its first
// member; after that member is gone the client finds the new leader
// through retries and then sends to it directly.
func TestClientFollowsLeaderHints(t *testing.T) {
	topo, err := amcast.NewTopology(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[wire.ProcID]string{}
	lns := map[wire.ProcID]net.Listener{}
	for p := range wire.ProcID(3) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[p], addrs[p] = ln, ln.Addr().String()
	}
	nodes := map[wire.ProcID]*node.Node{}
	for p, ln := range lns {
		n, err := node.New(node.Config{Cluster: "c", ID: p, Topology: topo, Peers: addrs, Listener: ln, DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		nodes[p] = n
		t.Cleanup(func() { n.Close() })
	}
	cl, err := client.New(client.Config{Cluster: "c", Topology: topo, Nodes: addrs, RetryTicks: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte("a"))
	if err != nil || res.GTS.IsZero() || res.Leader != 0 || res.ID.Seq != 1 {
		t.Fatalf("first multicast: %+v %v", res, err)
	}
	nodes[0].Close()
	res, err = cl.Multicast(ctx, []wire.GroupID{0}, []byte("b"))
	if err != nil || res.Leader == 0 || res.ID.Seq != 2 {
		t.Fatalf("multicast after the leader stopped: %+v %v", res, err)
	}
	if got := cl.Leaders(); got[0] != res.Leader {
		t.Errorf("leader view %v, want %d", got, res.Leader)
	}
	retries := cl.Retries()
	res, err = cl.Multicast(ctx, []wire.GroupID{0}, []byte("c"))
	if err != nil || cl.Retries() != retries {
		t.Errorf("third multicast: %+v %v, retries %d -> %d (want none: the view is right)", res, err, retries, cl.Retries())
	}
}

// TestClientOverloaded: a leader that sheds a message makes Multicast
// return ErrOverloaded at once (the message is not retried); a follower
// shedding a copy is ignored; the next message is served.
func TestClientOverloaded(t *testing.T) {
	topo, err := amcast.NewTopology(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	var trs [2]atomic.Pointer[transport.Transport]
	var got [2]atomic.Int64 // MULTICASTs received by each fake node
	addrs := map[wire.ProcID]string{}
	for p := range wire.ProcID(2) {
		tr, err := transport.New(transport.Config{ClusterName: "c", Self: p, Listen: "127.0.0.1:0",
			Handler: func(from wire.ProcID, m wire.Message) {
				mc, ok := m.(*wire.Multicast)
				if !ok {
					return
				}
				n := got[p].Add(1)
				// p1 (a follower) sheds everything; the leader p0 sheds
				// the first message, and answers the second only at its
				// third copy, so the client's first retry (to every
				// member) is shed by p1 before.
				if p == 1 || mc.M.ID.Seq == 1 {
					trs[p].Load().Send(from, &wire.Overloaded{ID: mc.M.ID})
					return
				}
				if n < 4 {
					return
				}
				trs[p].Load().Send(from, &wire.Delivered{ID: mc.M.ID, G: 0, GTS: wire.Timestamp{T: mc.M.ID.Seq}, Leader: 0})
			}})
		if err != nil {
			t.Fatal(err)
		}
		trs[p].Store(tr)
		addrs[p] = tr.Addr().String()
		t.Cleanup(func() { tr.Close() })
	}
	cl, err := client.New(client.Config{Cluster: "c", Topology: topo, Nodes: addrs, RetryTicks: 2, ViewTicks: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte("a")); !errors.Is(err, client.ErrOverloaded) {
		t.Fatalf("first multicast: %v, want ErrOverloaded", err)
	}
	res, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte("b"))
	if err != nil || res.ID.Seq != 2 {
		t.Fatalf("second multicast: %+v %v", res, err)
	}
	if cl.Overloaded() != 1 || got[0].Load() != 4 || got[1].Load() < 1 {
		t.Errorf("overloaded %d, leader got %d multicasts, follower %d (want 1, 4 (the shed message is not retried), at least 1)",
			cl.Overloaded(), got[0].Load(), got[1].Load())
	}
}

// TestClientSessionExpired: a message no node answers within the session
// lease makes Multicast return ErrSessionExpired, and the client stops
// sending it; the next message is served as usual.
func TestClientSessionExpired(t *testing.T) {
	topo, err := amcast.NewTopology(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var tr atomic.Pointer[transport.Transport]
	var copies1 atomic.Int64 // copies of seq 1 received
	node, err := transport.New(transport.Config{ClusterName: "c", Self: 0, Listen: "127.0.0.1:0",
		Handler: func(from wire.ProcID, m wire.Message) {
			mc, ok := m.(*wire.Multicast)
			if !ok {
				return
			}
			if mc.M.ID.Seq == 1 {
				copies1.Add(1) // never answered
				return
			}
			tr.Load().Send(from, &wire.Delivered{ID: mc.M.ID, G: 0, GTS: wire.Timestamp{T: mc.M.ID.Seq}, Leader: 0})
		}})
	if err != nil {
		t.Fatal(err)
	}
	tr.Store(node)
	t.Cleanup(func() { node.Close() })
	cl, err := client.New(client.Config{Cluster: "c", Topology: topo, Nodes: map[wire.ProcID]string{0: node.Addr().String()},
		RetryTicks: 2, ViewTicks: -1, SessionLease: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte("a")); !errors.Is(err, client.ErrSessionExpired) {
		t.Fatalf("unanswered multicast: %v, want ErrSessionExpired", err)
	}
	res, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte("b"))
	if err != nil || res.ID.Seq != 2 {
		t.Fatalf("second multicast: %+v %v", res, err)
	}
	// The given-up message is never sent again: its copies stop growing
	// while the client keeps running (it ticks every 10ms).
	n := copies1.Load()
	if n < 2 {
		t.Fatalf("seq 1 was sent %d times before it expired; want its retries", n)
	}
	res, err = cl.Multicast(ctx, []wire.GroupID{0}, []byte("c"))
	if err != nil || res.ID.Seq != 3 || copies1.Load() != n {
		t.Errorf("third multicast %+v %v; seq 1 copies %d -> %d (want none after expiry)", res, err, n, copies1.Load())
	}
}

// TestClientSessionsAre128Bits: every client draws its own 128-bit session
// (both halves random), and a pinned one is kept.
func TestClientSessionsAre128Bits(t *testing.T) {
	topo, err := amcast.NewTopology(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[wire.ProcID]string{0: "127.0.0.1:1"} // never dialled: no message is sent
	seen := map[wire.SessionID]bool{}
	for range 8 {
		cl, err := client.New(client.Config{Cluster: "c", ID: 100, Topology: topo, Nodes: nodes, ViewTicks: -1})
		if err != nil {
			t.Fatal(err)
		}
		s := cl.Session()
		cl.Close()
		// Each half is zero with odds 2^-64: a zero half is a bug.
		if s.Hi == 0 || s.Lo == 0 || seen[s] {
			t.Fatalf("session %s: want both halves drawn, and a new one each time (seen %v)", s, seen)
		}
		seen[s] = true
	}
	pinned := wire.SessionID{Hi: 1, Lo: 2}
	cl, err := client.New(client.Config{Cluster: "c", ID: 100, Topology: topo, Nodes: nodes, ViewTicks: -1, Session: pinned})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if cl.Session() != pinned {
		t.Errorf("pinned session %s became %s", pinned, cl.Session())
	}
}

// TestClientMaxInFlight: a client never has more than MaxInFlight
// multicasts at the nodes; further calls wait for a slot (or their
// context) instead of being sent, and all complete once answers come.
func TestClientMaxInFlight(t *testing.T) {
	topo, err := amcast.NewTopology(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var tr atomic.Pointer[transport.Transport]
	var mu sync.Mutex
	held := map[wire.MsgID]wire.ProcID{} // unanswered, by id (retries dedup)
	peak, release := 0, false
	answer := func(id wire.MsgID, to wire.ProcID) {
		tr.Load().Send(to, &wire.Delivered{ID: id, G: 0, GTS: wire.Timestamp{T: id.Seq}, Leader: 0})
	}
	node, err := transport.New(transport.Config{ClusterName: "c", Self: 0, Listen: "127.0.0.1:0",
		Handler: func(from wire.ProcID, m wire.Message) {
			mc, ok := m.(*wire.Multicast)
			if !ok {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if release {
				answer(mc.M.ID, from)
				return
			}
			held[mc.M.ID] = from
			peak = max(peak, len(held))
		}})
	if err != nil {
		t.Fatal(err)
	}
	tr.Store(node)
	t.Cleanup(func() { node.Close() })
	cl, err := client.New(client.Config{Cluster: "c", Topology: topo, Nodes: map[wire.ProcID]string{0: node.Addr().String()},
		RetryTicks: 1000, ViewTicks: -1, MaxInFlight: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte{byte(i)}); err != nil {
				errs <- err
			}
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("3 multicasts at the node", func() bool { mu.Lock(); defer mu.Unlock(); return len(held) == 3 })
	// A call that finds no slot ends with its context.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if _, err := cl.Multicast(short, []wire.GroupID{0}, []byte("late")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a multicast without a slot: %v, want its context's deadline", err)
	}
	mu.Lock()
	if len(held) != 3 {
		t.Errorf("the node holds %d multicasts, want 3 (MaxInFlight)", len(held))
	}
	release = true
	for id, to := range held {
		answer(id, to)
	}
	mu.Unlock()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("multicast: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if peak != 3 {
		t.Errorf("peak %d multicasts at the node, want 3", peak)
	}
}
