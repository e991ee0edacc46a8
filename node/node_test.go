package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

// cluster is a set of in-process nodes on loopback.
type cluster struct {
	t     *testing.T
	topo  *amcast.Topology
	addrs map[wire.ProcID]string
	dirs  map[wire.ProcID]string
	nodes map[wire.ProcID]*Node
	tune  func(*Config)
	// protocol is the cluster's protocol (tune's Config.Protocol).
	protocol string

	// fsys, if set, is the filesystem holding node p's deliveries log
	// (default: the real one).
	fsys func(p wire.ProcID) vfs.FS

	mu        sync.Mutex
	events    []check.Event   // multicast, crash and restart events
	abandoned map[string]bool // ids of messages a node shed (client.ErrOverloaded): they need not be delivered
}

// clusterOf maps a client a cluster started to that cluster, so that the
// multicast helper can tell it which messages were shed.
var clusterOf sync.Map // *client.Client → *cluster

func newCluster(t *testing.T, groups, replicas int, tune func(*Config)) *cluster {
	t.Helper()
	topo, err := amcast.NewTopology(groups, replicas)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, topo: topo, addrs: map[wire.ProcID]string{}, dirs: map[wire.ProcID]string{},
		nodes: map[wire.ProcID]*Node{}, tune: tune, protocol: DefaultProtocol}
	if tune != nil {
		var probe Config
		tune(&probe)
		if probe.Protocol != "" {
			c.protocol = probe.Protocol
		}
	}
	lns := map[wire.ProcID]net.Listener{}
	root := t.TempDir()
	for p := range wire.ProcID(topo.NumReplicas()) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[p] = ln
		c.addrs[p] = ln.Addr().String()
		c.dirs[p] = filepath.Join(root, fmt.Sprintf("n%d", p))
	}
	for p, ln := range lns {
		c.start(p, ln)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.Close()
		}
	})
	return c
}

func (c *cluster) start(p wire.ProcID, ln net.Listener) {
	c.t.Helper()
	if ln == nil {
		var err error
		for range 50 { // the port may linger for a moment after Close
			if ln, err = net.Listen("tcp", c.addrs[p]); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			c.t.Fatal(err)
		}
	}
	cfg := Config{Cluster: "test", ID: p, Topology: c.topo, Peers: c.addrs, Listener: ln, DataDir: c.dirs[p],
		DeliveryLog: c.dlogPath(p)}
	if c.tune != nil {
		c.tune(&cfg)
	}
	n, err := New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.nodes[p] = n
}

// dlogPath is node p's deliveries log.
func (c *cluster) dlogPath(p wire.ProcID) string { return filepath.Join(c.dirs[p], "deliveries.jsonl") }

func (c *cluster) stop(p wire.ProcID) {
	c.t.Helper()
	if err := c.nodes[p].Close(); err != nil {
		c.t.Fatal(err)
	}
	delete(c.nodes, p)
	c.record(check.Event{Ev: check.EvCrash, Proc: int(p), T: time.Now().UnixMicro()})
}

func (c *cluster) restart(p wire.ProcID) {
	c.record(check.Event{Ev: check.EvRestart, Proc: int(p), T: time.Now().UnixMicro()})
	c.start(p, nil)
}

func (c *cluster) record(ev check.Event) {
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
}

func (c *cluster) client() *client.Client { return c.clientWith(nil) }

// clientWith starts a client whose configuration mutate may adjust.
func (c *cluster) clientWith(mutate func(*client.Config)) *client.Client {
	c.t.Helper()
	cfg := client.Config{Cluster: "test", Topology: c.topo, Nodes: c.addrs, RetryTicks: 10, OnMulticast: c.recordMulticast}
	if mutate != nil {
		mutate(&cfg)
	}
	cl, err := client.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	clusterOf.Store(cl, c)
	c.t.Cleanup(func() { cl.Close(); clusterOf.Delete(cl) })
	return cl
}

// abandon records that message id was shed (client.ErrOverloaded): the
// client no longer retries it, so the history does not require it to be
// delivered (it still may be, at most once).
func (c *cluster) abandon(id wire.MsgID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.abandoned == nil {
		c.abandoned = map[string]bool{}
	}
	c.abandoned[id.Full()] = true
}

// recordMulticast records a client's multicast event (client.Config.OnMulticast).
func (c *cluster) recordMulticast(m wire.AppMsg, at time.Time) {
	dest := make([]int, len(m.Dest))
	for i, g := range m.Dest {
		dest[i] = int(g)
	}
	c.record(check.Event{Ev: check.EvMulticast, ID: m.ID.Full(), Dest: dest, T: at.UnixMicro()})
}

func (c *cluster) leader(g wire.GroupID) (wire.ProcID, bool) {
	for _, p := range c.topo.Members(g) {
		if n := c.nodes[p]; n != nil && n.Status().Leader {
			return p, true
		}
	}
	return 0, false
}

// multicast sends count messages from workers goroutines, each to the
// groups dest(i) returns, and fails the test on any error or a zero gts.
// A message a node sheds (client.ErrOverloaded) is sent again, as a new
// message, after a back-off.
func multicast(t *testing.T, cl *client.Client, count, workers int, dest func(i int) []wire.GroupID) []client.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var out []client.Result
	var wg sync.WaitGroup
	next := 0
	for range workers {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= count {
					return
				}
				res, err := cl.Multicast(ctx, dest(i), fmt.Appendf(nil, "payload %d", i))
				for backoff := 5 * time.Millisecond; errors.Is(err, client.ErrOverloaded); backoff = min(2*backoff, 200*time.Millisecond) {
					// A node whose loop was held up (a restart's
					// recovery on a loaded machine) sheds what its
					// client inbox cannot hold: back off and send again,
					// as ErrOverloaded asks (a new message: the shed one
					// is abandoned).
					if c, ok := clusterOf.Load(cl); ok {
						c.(*cluster).abandon(res.ID)
					}
					time.Sleep(backoff)
					res, err = cl.Multicast(ctx, dest(i), fmt.Appendf(nil, "payload %d", i))
				}
				if err != nil {
					t.Errorf("multicast %d: %v", i, err)
					return
				}
				if res.GTS.IsZero() {
					t.Errorf("multicast %d: zero gts", i)
				}
				mu.Lock()
				out = append(out, res)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// history merges the recorded events with every node's deliveries log.
func (c *cluster) history(t *testing.T) *check.History {
	t.Helper()
	c.mu.Lock()
	evs := slices.Clone(c.events)
	abandoned := maps.Clone(c.abandoned)
	c.mu.Unlock()
	h := &check.History{Config: check.Config{Protocol: c.protocol, Groups: c.topo.NumGroups(), Replicas: len(c.topo.Groups[0])}}
	for p := range wire.ProcID(c.topo.NumReplicas()) {
		fsys := vfs.OS()
		if c.fsys != nil {
			fsys = c.fsys(p)
		}
		ph, err := readDeliveryLog(fsys, c.dlogPath(p))
		if err != nil {
			t.Fatal(err)
		}
		if ph.Config != h.Config {
			t.Fatalf("node %d log config %+v, want %+v", p, ph.Config, h.Config)
		}
		evs = append(evs, ph.Events...)
	}
	rank := func(ev string) int {
		if ev == check.EvMulticast {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(evs, func(a, b check.Event) int {
		if a.T != b.T {
			return int(a.T - b.T)
		}
		return rank(a.Ev) - rank(b.Ev)
	})
	if len(abandoned) > 0 {
		// A shed message need not be delivered; one that was is checked
		// like any other.
		for _, ev := range evs {
			if ev.Ev == check.EvDeliver {
				delete(abandoned, ev.ID)
			}
		}
		evs = slices.DeleteFunc(evs, func(ev check.Event) bool { return ev.Ev == check.EvMulticast && abandoned[ev.ID] })
	}
	h.Events = evs
	return h
}

// deliveredSets lists the messages each process delivered in h, a state
// transfer (install event at gts P) counting every message its group
// delivered up to P.
func deliveredSets(h *check.History, replicas int) map[int]map[string]bool {
	group := map[int]map[string]check.GTS{} // group -> id -> gts
	at := map[int]map[string]bool{}
	inst := map[int]check.GTS{}
	add := func(m map[int]map[string]bool, p int, id string) {
		if m[p] == nil {
			m[p] = map[string]bool{}
		}
		m[p][id] = true
	}
	for _, ev := range h.Events {
		switch ev.Ev {
		case check.EvDeliver:
			if group[ev.Group] == nil {
				group[ev.Group] = map[string]check.GTS{}
			}
			group[ev.Group][ev.ID] = ev.GTS
			add(at, ev.Proc, ev.ID)
		case check.EvInstall:
			if inst[ev.Proc].Less(ev.GTS) {
				inst[ev.Proc] = ev.GTS
			}
		}
	}
	for p, pt := range inst {
		for id, ts := range group[p/replicas] {
			if !pt.Less(ts) {
				add(at, p, id)
			}
		}
	}
	return at
}

// deliveredPerProc counts each process's deliveries (deliveredSets).
func deliveredPerProc(h *check.History, replicas int) map[int]int {
	per := map[int]int{}
	for p, ids := range deliveredSets(h, replicas) {
		per[p] = len(ids)
	}
	return per
}

// waitAll waits until every node delivered want messages (this
// incarnation's deliveries plus those in its log).
func (c *cluster) waitDelivered(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		per := deliveredPerProc(c.history(t), len(c.topo.Groups[0]))
		ok := true
		for p := range c.topo.NumReplicas() {
			if per[p] < want {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d deliveries everywhere: %v", want, per)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestNodeDeliversAndSurvivesLeaderRestart(t *testing.T) {
	c := newCluster(t, 1, 3, func(cfg *Config) { cfg.CompactBytes = 8 << 10 })
	cl := c.client()
	one := func(int) []wire.GroupID { return []wire.GroupID{0} }

	res := multicast(t, cl, 200, 8, one)
	if len(res) != 200 {
		t.Fatalf("%d results", len(res))
	}
	old, ok := c.leader(0)
	if !ok {
		t.Fatal("no leader")
	}
	c.stop(old)
	start := time.Now()
	res = multicast(t, cl, 100, 8, one)
	t.Logf("100 multicasts after stopping leader %d took %v; new leader view %v", old, time.Since(start), cl.Leaders())
	if nl, ok := c.leader(0); !ok || nl == old {
		t.Fatalf("no new leader (%d, %v)", nl, ok)
	}
	c.restart(old)
	multicast(t, cl, 200, 8, one)
	c.waitDelivered(t, 500)
	for p, n := range c.nodes {
		st := n.Status()
		t.Logf("node %d: %s ballot %s delivered %d recovered %d restored %d compactions %d wal [%d,%d]", p, st.Role, st.Ballot,
			st.Stats.Delivered, st.Stats.Recovered, st.Stats.RestoredRecords, st.Stats.Compactions, st.WALFirst, st.WALLast)
		if st.Stats.Compactions == 0 && p != old {
			t.Errorf("node %d never compacted its log", p)
		}
	}
	if st := c.nodes[old].Status(); st.Stats.RestoredRecords == 0 {
		t.Errorf("restarted node restored nothing")
	}
	// Eight clients at once: some Ready held several messages for one peer,
	// which left as one BATCH (amcast.Coalesce) and was stepped message by
	// message at the other end.
	var batches, batched uint64
	for _, n := range c.nodes {
		st := n.Status()
		batches += st.Stats.Batches
		batched += st.Stats.Batched
	}
	t.Logf("%d batches carried %d messages", batches, batched)
	if batches == 0 || batched < 2*batches {
		t.Errorf("%d batches carrying %d messages: want some, of 2 messages or more", batches, batched)
	}
	rep := check.Check(c.history(t), check.Options{Termination: check.TermAll})
	if !rep.OK() {
		t.Fatal(rep.Error())
	}
	t.Log(rep.Error())
}

func TestNodeTwoGroupsRestartFromSnapshot(t *testing.T) {
	c := newCluster(t, 2, 3, func(cfg *Config) { cfg.CompactBytes = 4 << 10 })
	cl := c.client()
	dest := func(i int) []wire.GroupID {
		switch i % 3 {
		case 0:
			return []wire.GroupID{0}
		case 1:
			return []wire.GroupID{1}
		}
		return []wire.GroupID{0, 1}
	}
	multicast(t, cl, 150, 6, dest)
	// Stop a follower of group 1 and all of group 0 in turn; restart them
	// from their logs.
	c.stop(4)
	multicast(t, cl, 60, 6, dest)
	c.restart(4)
	for _, p := range []wire.ProcID{0, 1, 2} {
		c.stop(p)
	}
	for _, p := range []wire.ProcID{0, 1, 2} {
		c.restart(p)
	}
	for _, p := range []wire.ProcID{0, 1, 2, 4} {
		if st := c.nodes[p].Status(); st.Stats.RestoredSnapshotBytes == 0 {
			t.Errorf("node %d restarted without a snapshot (%d records)", p, st.Stats.RestoredRecords)
		}
	}
	multicast(t, cl, 90, 6, dest)
	c.waitDelivered(t, 200) // each group gets 2/3 of 300
	rep := check.Check(c.history(t), check.Options{Termination: check.TermAll})
	if !rep.OK() {
		t.Fatal(rep.Error())
	}
	t.Log(rep.Error())
}
