package node

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

// sumSM is a test state machine: a running sum of the payloads' first
// bytes, and the list of the messages applied (part of the state, in its
// snapshots), so an entry applied twice, or lost, across a restart shows in
// the state itself. The result of an entry is the sum after it.
type sumSM struct {
	mu    sync.Mutex
	sum   uint64
	ids   []wire.MsgID
	after []uint64 // the sum after each of ids: its result
}

func (s *sumSM) Apply(batch []rsm.Entry) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(batch))
	for i, e := range batch {
		s.sum += uint64(e.Payload[0])
		s.ids = append(s.ids, e.ID)
		s.after = append(s.after, s.sum)
		out[i] = binary.BigEndian.AppendUint64(nil, s.sum)
	}
	return out, nil
}

func (s *sumSM) Snapshot(w io.Writer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := binary.BigEndian.AppendUint64(nil, s.sum)
	b = binary.BigEndian.AppendUint64(b, uint64(len(s.ids)))
	for i, id := range s.ids {
		b = binary.BigEndian.AppendUint32(b, uint32(id.Client))
		b = binary.BigEndian.AppendUint64(b, id.Session.Hi)
		b = binary.BigEndian.AppendUint64(b, id.Session.Lo)
		b = binary.BigEndian.AppendUint64(b, id.Seq)
		b = append(b, id.Digest[:]...)
		b = binary.BigEndian.AppendUint64(b, s.after[i])
	}
	_, err := w.Write(b)
	return err
}

func (s *sumSM) Restore(r io.Reader) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b [52]byte
	if _, err := io.ReadFull(r, b[:16]); err != nil {
		return err
	}
	s.sum = binary.BigEndian.Uint64(b[:8])
	s.ids = make([]wire.MsgID, binary.BigEndian.Uint64(b[8:16]))
	s.after = make([]uint64, len(s.ids))
	for i := range s.ids {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return err
		}
		sess := wire.SessionID{Hi: binary.BigEndian.Uint64(b[4:12]), Lo: binary.BigEndian.Uint64(b[12:20])}
		s.ids[i] = wire.MsgID{Client: wire.ProcID(binary.BigEndian.Uint32(b[:4])), Session: sess, Seq: binary.BigEndian.Uint64(b[20:28])}
		copy(s.ids[i].Digest[:], b[28:44])
		s.after[i] = binary.BigEndian.Uint64(b[44:])
	}
	return nil
}

// serviceCluster starts a cluster whose nodes run sumSM, each node's log
// the current incarnation's in the map.
func serviceCluster(t *testing.T, groups, replicas int, compact int64, protocol ...string) (*cluster, map[wire.ProcID]*sumSM) {
	sms := map[wire.ProcID]*sumSM{}
	var mu sync.Mutex
	c := newCluster(t, groups, replicas, func(cfg *Config) {
		cfg.CompactBytes = compact
		if len(protocol) > 0 {
			cfg.Protocol = protocol[0]
		}
		mu.Lock()
		defer mu.Unlock()
		sms[cfg.ID] = &sumSM{} // each incarnation its own, restored from the data directory
		cfg.StateMachine = sms[cfg.ID]
	})
	return c, sms
}

// TestServiceResults: every destination group's result reaches the client
// (AllGroups), and it is that group's state after the message.
func TestServiceResults(t *testing.T) {
	c, _ := serviceCluster(t, 2, 3, 0)
	cl := c.clientWith(func(cfg *client.Config) { cfg.AllGroups = true })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := map[wire.GroupID]uint64{}
	for i := range 30 {
		dest := []wire.GroupID{wire.GroupID(i % 2)}
		if i%3 == 0 {
			dest = []wire.GroupID{0, 1}
		}
		v := byte(i%7 + 1)
		res, err := cl.Multicast(ctx, dest, []byte{v})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Results) != len(dest) {
			t.Fatalf("message %d to %v: %d results", i, dest, len(res.Results))
		}
		for _, g := range dest {
			want[g] += uint64(v)
			r, ok := res.Of(g)
			if !ok || len(r) != 8 || binary.BigEndian.Uint64(r) != want[g] {
				t.Fatalf("message %d: group %d result %x (ok %v), want sum %d", i, g, r, ok, want[g])
			}
		}
	}
}

// TestServiceRestartExactlyOnce stops a follower and then the leader while
// clients multicast, restarts them from their data directories (the
// state machine's snapshot, written at compactions, and the log above
// it), and checks that every replica applied every message exactly once,
// in the same order, to the same state. FT-Skeen's log snapshot keeps
// deliveries without their payloads: the state machine's snapshot must
// cover them.
func TestServiceRestartExactlyOnce(t *testing.T) {
	for _, proto := range []string{ProtocolWbCast, ProtocolFTSkeen} {
		t.Run(proto, func(t *testing.T) { testServiceRestart(t, proto) })
	}
}

func testServiceRestart(t *testing.T, proto string) {
	c, logs := serviceCluster(t, 1, 3, 4<<10, proto)
	cl := c.client()
	one := func(int) []wire.GroupID { return []wire.GroupID{0} }
	multicast(t, cl, 150, 6, one)
	old, ok := c.leader(0)
	if !ok {
		t.Fatal("no leader")
	}
	follower := (old + 1) % 3
	c.stop(follower)
	multicast(t, cl, 100, 6, one)
	c.restart(follower)
	if st := c.nodes[follower].Status().Service; st == nil || st.Applied <= uint64(st.Replayed) {
		t.Fatalf("follower restarted without the state machine's snapshot: %+v", st)
	}
	c.stop(old)
	multicast(t, cl, 100, 6, one)
	c.restart(old)
	multicast(t, cl, 50, 6, one)
	const total = 400
	deadline := time.Now().Add(15 * time.Second)
	for {
		done := true
		for _, n := range c.nodes {
			if st := n.Status().Service; st == nil || st.Applied < total {
				done = false
			}
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replicas did not apply every message")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ref *sumSM
	for p := range wire.ProcID(3) {
		st := c.nodes[p].Status()
		t.Logf("p%d: applied %d (replayed %d at its last start) gts %s, snapshots %d, compactions %d", p, st.Service.Applied,
			st.Service.Replayed, st.Service.AppliedGTS, st.Stats.ServiceSnapshots, st.Stats.Compactions)
		if st.Service.Applied != total {
			t.Errorf("p%d applied %d, want %d", p, st.Service.Applied, total)
		}
		sm := logs[p]
		sm.mu.Lock()
		seen := map[wire.MsgID]bool{}
		for _, id := range sm.ids {
			if seen[id] {
				t.Errorf("p%d's state applied %s twice", p, id)
			}
			seen[id] = true
		}
		if len(seen) != total || len(sm.ids) != total {
			t.Errorf("p%d's state holds %d messages (%d distinct), want %d", p, len(sm.ids), len(seen), total)
		}
		if ref == nil {
			ref = sm
		} else if sm.sum != ref.sum || !slices.Equal(sm.ids, ref.ids) {
			t.Errorf("p%d's state (sum %d) differs from p0's (sum %d)", p, sm.sum, ref.sum)
		}
		sm.mu.Unlock()
	}
}

// TestServiceAllGroupsFailover: messages to both groups complete with both
// groups' results (AllGroups) while the leader of group 1, which is not
// the designated replier of these messages, is stopped: the new leader
// answers the clients' retries of messages it applied (handleRetry).
func TestServiceAllGroupsFailover(t *testing.T) {
	c, _ := serviceCluster(t, 2, 3, 0)
	cl := c.clientWith(func(cfg *client.Config) { cfg.AllGroups = true })
	both := func(int) []wire.GroupID { return []wire.GroupID{0, 1} }
	multicast(t, cl, 40, 4, both)
	old, ok := c.leader(1)
	if !ok {
		t.Fatal("no leader in group 1")
	}
	done := make(chan []client.Result)
	go func() { done <- multicast(t, cl, 200, 8, both) }()
	time.Sleep(30 * time.Millisecond)
	c.stop(old)
	res := <-done
	for _, r := range res {
		for _, g := range []wire.GroupID{0, 1} {
			if v, ok := r.Of(g); !ok || len(v) != 8 {
				t.Fatalf("message %s: group %d result %x (held %v)", r.ID, g, v, ok)
			}
		}
	}
	if nl, ok := c.leader(1); !ok || nl == old {
		t.Fatalf("group 1 has no new leader (%d, %v)", nl, ok)
	}
	t.Logf("%d messages to both groups completed with both results across the failover of p%d (client retries %d)", len(res), old, cl.Retries())
}

// TestServiceRefusesUnreachableState: a node that delivered without a
// state machine and is restarted with one cannot rebuild the state (the
// deliveries before its log's compaction are gone): it refuses to start,
// saying why, instead of running a state that skipped deliveries.
func TestServiceRefusesUnreachableState(t *testing.T) {
	withSM := false
	c := newCluster(t, 1, 3, func(cfg *Config) {
		cfg.CompactBytes = 4 << 10
		if withSM {
			cfg.StateMachine = &sumSM{}
		}
	})
	multicast(t, c.client(), 200, 4, func(int) []wire.GroupID { return []wire.GroupID{0} })
	c.stop(2)
	withSM = true
	cfg := Config{Cluster: "test", ID: 2, Topology: c.topo, Peers: c.addrs, Listen: "127.0.0.1:0", DataDir: c.dirs[2]}
	c.tune(&cfg)
	n, err := New(cfg)
	if err == nil {
		n.Close()
		t.Fatal("a node restarted with a state machine that cannot reach its log's last delivery started")
	}
	if !strings.Contains(err.Error(), "does not reach the log's last delivery") {
		t.Fatalf("error %v", err)
	}
	t.Log(err)
}

// TestServicePowerLoss cuts the power of a whole group (one crashable
// filesystem: every unsynced write lost at once) under load, after
// compactions wrote state machine snapshots, and restarts it: every
// replica's state holds each message once, in the same order, every
// acknowledged message is in it, and each acknowledged result is the state
// at that message's place in the order.
func TestServicePowerLoss(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var mu sync.Mutex
	sms := map[wire.ProcID]*sumSM{}
	c := newCluster(t, 1, 3, func(cfg *Config) {
		cfg.FS = mem
		cfg.CompactBytes = 2 << 10
		mu.Lock()
		sms[cfg.ID] = &sumSM{}
		cfg.StateMachine = sms[cfg.ID]
		mu.Unlock()
	})
	c.fsys = func(wire.ProcID) vfs.FS { return mem }
	start := time.Now()
	cl := c.client()
	acked := map[wire.MsgID]uint64{} // id -> the sum the client was told
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			for ctx.Err() == nil {
				res, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte{byte(i + 1)})
				if err != nil {
					continue
				}
				r, ok := res.Of(0)
				if !ok || len(r) != 8 {
					t.Errorf("%s: result %x (held %v)", res.ID, r, ok)
					continue
				}
				mu.Lock()
				acked[res.ID] = binary.BigEndian.Uint64(r)
				mu.Unlock()
			}
		})
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		snaps := true
		for _, nd := range c.nodes {
			snaps = snaps && nd.Status().Stats.ServiceSnapshots > 0
		}
		if n >= 60 && snaps {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d acknowledged, snapshots everywhere %v", n, snaps)
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	must := maps.Clone(acked)
	mu.Unlock()
	// The leader applied deliveries, and answered, before their records
	// were durable (pipeline.go): the power loss tests that too.
	early := uint64(0)
	for _, nd := range c.nodes {
		early += nd.Status().Stats.AppliedBeforeSync
	}
	if early == 0 {
		t.Fatal("no delivery applied before its records were durable")
	}
	t.Logf("power loss after %v (%d deliveries applied before durable)", time.Since(start).Round(time.Millisecond), early)
	survivor := mem.CrashClone(rand.New(rand.NewPCG(1, 0xc4a5)))
	cancel()
	wg.Wait()
	for p := range wire.ProcID(3) {
		c.stop(p)
	}
	mem = survivor
	for p := range wire.ProcID(3) {
		c.restart(p)
	}
	for p := range wire.ProcID(3) {
		if st := c.nodes[p].Status().Service; st.Applied <= uint64(st.Replayed) {
			t.Errorf("p%d restarted without its state machine snapshot: %+v", p, st)
		}
	}
	t.Logf("restarted after %v", time.Since(start).Round(time.Millisecond))
	multicast(t, cl, 20, 4, func(int) []wire.GroupID { return []wire.GroupID{0} })
	t.Logf("delivering again after %v", time.Since(start).Round(time.Millisecond))
	deadline = time.Now().Add(15 * time.Second)
	for {
		a := [3]uint64{}
		for p := range wire.ProcID(3) {
			a[p] = c.nodes[p].Status().Service.Applied
		}
		if a[0] == a[1] && a[1] == a[2] && c.nodes[0].Status().Service.AppliedGTS == c.nodes[0].Status().MaxDelivered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas did not converge: applied %v", a)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ref := sms[0]
	ref.mu.Lock()
	defer ref.mu.Unlock()
	pos := map[wire.MsgID]int{}
	for i, id := range ref.ids {
		if _, dup := pos[id]; dup {
			t.Fatalf("p0's state holds %s twice", id)
		}
		pos[id] = i
	}
	for p := wire.ProcID(1); p < 3; p++ {
		sm := sms[p]
		sm.mu.Lock()
		if !slices.Equal(sm.ids, ref.ids) || sm.sum != ref.sum {
			t.Errorf("p%d's state (%d messages, sum %d) differs from p0's (%d, %d)", p, len(sm.ids), sm.sum, len(ref.ids), ref.sum)
		}
		sm.mu.Unlock()
	}
	// Each acknowledged result is the state at the message's place in the
	// order: the sum after it.
	for id, sum := range must {
		i, ok := pos[id]
		switch {
		case !ok:
			t.Errorf("acknowledged %s is not in the state after the power loss", id)
		case ref.after[i] != sum:
			t.Errorf("%s: the client was told sum %d, the state has %d after it", id, sum, ref.after[i])
		}
	}
	t.Logf("%d acknowledged before the power loss; %d messages in every replica's state after it", len(must), len(ref.ids))
}

// bigSM answers every entry with a result of its payload's first byte
// times 8 KiB: a payload of 0x80 (1 MiB) is one byte over a MaxResult of
// 1 MiB - 1.
type bigSM struct{}

func (bigSM) Apply(batch []rsm.Entry) ([][]byte, error) {
	out := make([][]byte, len(batch))
	for i, e := range batch {
		out[i] = make([]byte, int(e.Payload[0])<<13)
	}
	return out, nil
}
func (bigSM) Snapshot(io.Writer) error { return nil }
func (bigSM) Restore(io.Reader) error  { return nil }

// TestServiceResultBound drives the result bound end to end: a result at
// rsm.Config.MaxResult reaches the client whole; one byte over it stops
// every node of the group with rsm.ErrResultTooLarge (the state machine is
// wrong, and every replica is wrong alike).
func TestServiceResultBound(t *testing.T) {
	const limit = 1<<20 - 1
	c := newCluster(t, 1, 3, func(cfg *Config) {
		cfg.StateMachine = bigSM{}
		cfg.RSM = rsm.Config{MaxResult: limit}
	})
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte{0x7f})
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := res.Of(0); !ok || len(r) != 0x7f<<13 {
		t.Fatalf("result of %d bytes (held %v), want %d", len(r), ok, 0x7f<<13)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if _, err := cl.Multicast(ctx2, []wire.GroupID{0}, []byte{0x80}); err == nil {
		t.Fatal("a result over the bound reached the client")
	}
	for p, n := range c.nodes {
		select {
		case <-n.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("p%d did not stop", p)
		}
		if err := n.Err(); !errors.Is(err, rsm.ErrResultTooLarge) || !errors.Is(err, errServiceFailed) {
			t.Fatalf("p%d stopped with %v", p, err)
		}
	}
}
