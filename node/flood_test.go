package node

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/wire"
)

// TestClientFlood floods a 3-group cluster (3 x 3 in-process nodes on
// real loopback TCP) with clients sending at full speed: floodClients
// clients of floodWorkers goroutines each, no think time, each goroutine
// sending its next message as soon as the last one is answered or shed.
// Meanwhile a well-behaved client sends goodMessages messages to all three
// groups, one at a time. It checks:
//
//   - no election: every node's ballot is the same after the flood as
//     before (the peer inbox is served first; client traffic cannot delay
//     heartbeats);
//   - the flood's clients are told to back off: ErrOverloaded at least once;
//   - the well-behaved client is served: all its messages complete, and it
//     is never shed (its share of the client inbox is never full, and the
//     flood's shares, 4 x 32, never fill the inbox's 1,024 messages);
//   - memory stays bounded: every inbox's peak bytes are within its budget,
//     and the heap in use (sampled at every well-behaved completion) stays
//     under heapBound;
//   - the history (every client's multicasts, every node's deliveries)
//     passes the safety checkers.
//
// Run it alone, with its figures, with
//
//	go test ./node -run TestClientFlood -v
func TestClientFlood(t *testing.T) {
	const (
		floodClients  = 4
		floodWorkers  = 128 // per client: 4 times its share of a client inbox
		clientShare   = 32
		goodMessages  = 12
		inboxBytes    = 4 << 20
		clientInbox   = 1 << 20
		peerQueue     = 1 << 20
		heapBound     = 256 << 20
		floodPayload  = 64
		clientInboxSz = 1024
	)
	c := newCluster(t, 3, 3, func(cfg *Config) {
		cfg.InboxBytes, cfg.ClientInboxBytes, cfg.PeerQueueBytes = inboxBytes, clientInbox, peerQueue
		cfg.ClientInboxSize, cfg.ClientShare = clientInboxSz, clientShare
	})
	good := c.client()
	all := []wire.GroupID{0, 1, 2}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // failure guard
	defer cancel()
	if _, err := good.Multicast(ctx, all, []byte("warm up")); err != nil {
		t.Fatal(err)
	}
	ballots := func() map[wire.ProcID]wire.Ballot {
		out := map[wire.ProcID]wire.Ballot{}
		for p, n := range c.nodes {
			out[p] = n.Status().Ballot
		}
		return out
	}
	before := ballots()

	// The flood.
	var offered, shed, served atomic.Int64
	floodCtx, stopFlood := context.WithCancel(ctx)
	var flood sync.WaitGroup
	for i := range floodClients {
		cl, err := client.New(client.Config{Cluster: "test", Topology: c.topo, Nodes: c.addrs,
			OnMulticast: c.recordMulticast})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		for w := range floodWorkers {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(w)))
			flood.Go(func() {
				payload := make([]byte, floodPayload)
				for floodCtx.Err() == nil {
					g := wire.GroupID(rng.IntN(3))
					dest := []wire.GroupID{g}
					if rng.IntN(2) == 0 {
						dest = append(dest, (g+1)%3)
					}
					offered.Add(1)
					_, err := cl.Multicast(floodCtx, dest, payload)
					switch {
					case err == nil:
						served.Add(1)
					case errors.Is(err, client.ErrOverloaded):
						shed.Add(1)
					case floodCtx.Err() != nil:
					default:
						t.Errorf("flood multicast: %v", err)
						return
					}
				}
			})
		}
	}

	// The well-behaved client, one message at a time, while the flood runs.
	start := time.Now()
	var heapPeak uint64
	var ms runtime.MemStats
	goodShed := 0
	for i := 0; i < goodMessages; {
		_, err := good.Multicast(ctx, all, []byte("good"))
		if errors.Is(err, client.ErrOverloaded) {
			goodShed++
			time.Sleep(5 * time.Millisecond) // back off, as ErrOverloaded asks
			continue
		}
		if err != nil {
			t.Fatalf("well-behaved multicast %d: %v", i, err)
		}
		i++
		runtime.ReadMemStats(&ms)
		heapPeak = max(heapPeak, ms.HeapInuse)
	}
	took := time.Since(start)
	stopFlood()
	flood.Wait()
	after := ballots()

	var peerPeak, clientPeak int64
	var shedFull, shedShare, steps uint64
	for _, n := range c.nodes {
		_, pp := n.inbox.budget.load()
		_, cp := n.clients.budget.load()
		peerPeak, clientPeak = max(peerPeak, pp), max(clientPeak, cp)
		shedFull += n.clientShed.Load()
		shedShare += n.clientShedShare.Load()
		st := n.Status().Stats
		steps += st.ClientSteps
	}
	secs := took.Seconds()
	t.Logf("flood: %d clients x %d goroutines for %.1fs: offered %d (%.0f/s), shed %d (%.0f/s), served %d (%.0f/s)",
		floodClients, floodWorkers, secs, offered.Load(), float64(offered.Load())/secs, shed.Load(), float64(shed.Load())/secs,
		served.Load(), float64(served.Load())/secs)
	t.Logf("nodes: shed %d with the client inbox full, %d at a client's share; stepped %d client messages", shedFull, shedShare, steps)
	t.Logf("well-behaved client: %d messages to 3 groups completed (%.0f ms each on average), shed %d times",
		goodMessages, 1000*secs/goodMessages, goodShed)
	t.Logf("memory: peak peer inbox %d bytes (budget %d), peak client inbox %d bytes (budget %d), peak heap in use %.1f MiB (bound %d MiB)",
		peerPeak, inboxBytes, clientPeak, clientInbox, float64(heapPeak)/(1<<20), heapBound>>20)
	for p, b := range before {
		if after[p] != b {
			t.Errorf("node %d: ballot %s before the flood, %s after: an election happened", p, b, after[p])
		}
	}
	if shed.Load() == 0 {
		t.Error("the flood's clients were never told they overload the cluster")
	}
	if goodShed != 0 {
		t.Errorf("the well-behaved client was shed %d times", goodShed)
	}
	if peerPeak > inboxBytes+wire.DefaultMaxFrame || clientPeak > clientInbox+wire.DefaultMaxFrame {
		t.Errorf("inbox peaks %d and %d bytes over their budgets %d and %d", peerPeak, clientPeak, inboxBytes, clientInbox)
	}
	if heapPeak > heapBound {
		t.Errorf("heap in use peaked at %d bytes, bound %d", heapPeak, heapBound)
	}
	rep := check.Check(c.history(t), check.Options{Termination: check.TermNone})
	if !rep.OK() {
		t.Fatal(rep.Error())
	}
	t.Log(rep.Error())
}
