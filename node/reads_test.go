package node

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// querySM is sumSM answering queries: any query returns the sum.
type querySM struct{ *sumSM }

func (s querySM) Query(q []byte) ([]byte, error) {
	if string(q) == "fail" {
		return nil, errors.New("no such query")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return binary.BigEndian.AppendUint64(nil, s.sum), nil
}

// readCluster starts groups x replicas nodes running querySM (tune may
// adjust their configuration further).
func readCluster(t *testing.T, groups, replicas int, tune func(*Config)) *cluster {
	return newCluster(t, groups, replicas, func(cfg *Config) {
		cfg.StateMachine = querySM{&sumSM{}}
		if tune != nil {
			tune(cfg)
		}
	})
}

// rawReader is a client connection that sends READs as it likes (another
// client's id included) and collects the replies.
type rawReader struct {
	tr      *transport.Transport
	id      wire.ProcID
	seq     uint64
	replies chan *wire.ReadReply
}

func newRawReader(t *testing.T, c *cluster, id wire.ProcID) *rawReader {
	t.Helper()
	r := &rawReader{id: id, replies: make(chan *wire.ReadReply, 1024)}
	var err error
	r.tr, err = transport.New(transport.Config{ClusterName: "test", Self: id, Role: transport.RoleClient, Peers: c.addrs,
		Handler: func(_ wire.ProcID, m wire.Message) {
			if rr, ok := m.(*wire.ReadReply); ok {
				r.replies <- rr
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.tr.Close() })
	return r
}

// send sends a READ in the name of client as (0: its own id).
func (r *rawReader) send(t *testing.T, to wire.ProcID, g wire.GroupID, mode wire.ReadMode, query string, as wire.ProcID) wire.MsgID {
	t.Helper()
	if as == 0 {
		as = r.id
	}
	r.seq++
	id := wire.MsgID{Client: as, Session: wire.Session(1), Seq: r.seq}
	if err := r.tr.Send(to, &wire.Read{ID: id, G: g, Mode: mode, Query: []byte(query)}); err != nil {
		t.Fatal(err)
	}
	return id
}

func (r *rawReader) reply(t *testing.T) *wire.ReadReply {
	t.Helper()
	select {
	case rr := <-r.replies:
		return rr
	case <-time.After(20 * time.Second): // failure guard only
		t.Fatal("no READ_REPLY")
		return nil
	}
}

// TestReadServes: a linearizable READ at the leader returns the state
// after every acknowledged write, at the leader's applied position; at a
// follower it is answered NOT_LEADER naming the leader; a local READ at a
// follower is answered from its state; a READ of another group, a failing
// query and a READ in another client's name are refused (the last one
// unanswered and counted).
func TestReadServes(t *testing.T) {
	c := readCluster(t, 2, 3, nil)
	cl := c.client()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var want uint64
	for i := range 10 {
		if _, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte{byte(i + 1)}); err != nil {
			t.Fatal(err)
		}
		want += uint64(i + 1)
	}
	r := newRawReader(t, c, 1000)
	r.send(t, 0, 0, wire.ReadLinearizable, "sum", 0)
	rr := r.reply(t)
	if rr.Status != wire.ReadOK || binary.BigEndian.Uint64(rr.Result) != want || rr.Index != c.nodes[0].Status().MaxDelivered {
		t.Fatalf("linearizable read at the leader: %s (sum %x), want sum %d at %s", wire.Describe(rr), rr.Result, want, c.nodes[0].Status().MaxDelivered)
	}
	r.send(t, 1, 0, wire.ReadLinearizable, "sum", 0)
	if rr := r.reply(t); rr.Status != wire.ReadNotLeader || rr.Leader != 0 {
		t.Fatalf("linearizable read at a follower: %s, want NOT_LEADER naming p0", wire.Describe(rr))
	}
	r.send(t, 2, 0, wire.ReadLocal, "sum", 0)
	if rr := r.reply(t); rr.Status != wire.ReadOK || binary.BigEndian.Uint64(rr.Result) > want {
		t.Fatalf("local read at a follower: %s", wire.Describe(rr))
	}
	r.send(t, 0, 1, wire.ReadLinearizable, "sum", 0)
	if rr := r.reply(t); rr.Status != wire.ReadFailed || !strings.Contains(rr.Err, "serves group 0") {
		t.Fatalf("read of group 1 at a node of group 0: %s", wire.Describe(rr))
	}
	r.send(t, 0, 0, wire.ReadLinearizable, "fail", 0)
	if rr := r.reply(t); rr.Status != wire.ReadFailed || !strings.Contains(rr.Err, "no such query") {
		t.Fatalf("a failing query: %s", wire.Describe(rr))
	}
	r.send(t, 0, 0, wire.ReadLinearizable, "sum", 2000) // in client 2000's name
	r.send(t, 0, 0, wire.ReadLocal, "sum", 0)
	if rr := r.reply(t); rr.ID.Client != r.id || rr.Status != wire.ReadOK {
		t.Fatalf("after a forged READ: %s, want the next read's answer only", wire.Describe(rr))
	}
	st := c.nodes[0].Status().Stats.Reads
	if st.Refused != 1 || st.Linearizable != 1 || st.Failed != 2 {
		t.Errorf("leader's read stats %+v: want 1 refused, 1 linearizable, 2 failed", st)
	}
	// The Go client does the same through Read, and follows the hint.
	res, err := cl.Read(ctx, 0, []byte("sum"), wire.ReadLinearizable)
	if err != nil || binary.BigEndian.Uint64(res.Result) != want || res.Node != 0 {
		t.Fatalf("client.Read: %+v, %v", res, err)
	}
	if _, err := cl.Read(ctx, 0, []byte("fail"), wire.ReadLocal); !errors.Is(err, client.ErrReadFailed) {
		t.Fatalf("client.Read of a failing query: %v, want ErrReadFailed", err)
	}
}

// TestReadBounds drives the node's read bounds (ReadLimits) to their
// limits with the leader unable to confirm its ballot (its followers are
// stopped, and its election timeout is long): reads past the bound of one
// client, of all clients and of query bytes are answered OVERLOADED, the
// pending ones stay within the bounds, and once they time out they are
// answered NOT_LEADER and the bounds are free again.
func TestReadBounds(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		lim                     ReadLimits
		perA, perB, query, fitA int // reads sent by clients A then B; query size; how many of A's fit
		fitB                    int
	}{
		{"per_client", ReadLimits{MaxPending: 100, MaxPerClient: 3}, 5, 2, 10, 3, 2},
		{"pending", ReadLimits{MaxPending: 4, MaxPerClient: 100}, 3, 3, 10, 3, 1},
		{"bytes", ReadLimits{MaxPending: 100, MaxPerClient: 100, MaxBytes: 35}, 4, 1, 10, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := readCluster(t, 1, 3, func(cfg *Config) {
				cfg.ElectionTicks = 1000 // the leader stays leader without its followers
				cfg.Reads = tc.lim
				cfg.Reads.TimeoutTicks = 100
			})
			cl := c.client()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte{1}); err != nil {
				t.Fatal(err)
			}
			c.stop(1)
			c.stop(2)
			a, b := newRawReader(t, c, 1000), newRawReader(t, c, 1001)
			q := strings.Repeat("q", tc.query)
			for range tc.perA {
				a.send(t, 0, 0, wire.ReadLinearizable, q, 0)
			}
			for range tc.perA - tc.fitA {
				if rr := a.reply(t); rr.Status != wire.ReadOverloaded {
					t.Fatalf("client A's read past the bound: %s, want OVERLOADED", wire.Describe(rr))
				}
			}
			waitUntil(t, 10*time.Second, "A's reads pending", func() bool { return c.nodes[0].Status().Stats.Reads.Pending == tc.fitA })
			for range tc.perB {
				b.send(t, 0, 0, wire.ReadLinearizable, q, 0)
			}
			for range tc.perB - tc.fitB {
				if rr := b.reply(t); rr.Status != wire.ReadOverloaded {
					t.Fatalf("client B's read past the bound: %s, want OVERLOADED", wire.Describe(rr))
				}
			}
			waitUntil(t, 10*time.Second, "B's reads pending", func() bool { return c.nodes[0].Status().Stats.Reads.Pending == tc.fitA+tc.fitB })
			st := c.nodes[0].Status().Stats.Reads
			if st.Overloaded != uint64(tc.perA-tc.fitA+tc.perB-tc.fitB) || (tc.lim.MaxBytes > 0 && st.PendingBytes > tc.lim.MaxBytes) {
				t.Errorf("read stats %+v at the bounds %+v", st, tc.lim)
			}
			// The pending reads time out: NOT_LEADER, and the bounds are free.
			for range tc.fitA {
				if rr := a.reply(t); rr.Status != wire.ReadNotLeader {
					t.Fatalf("a pending read of A: %s, want NOT_LEADER once timed out", wire.Describe(rr))
				}
			}
			for range tc.fitB {
				if rr := b.reply(t); rr.Status != wire.ReadNotLeader {
					t.Fatalf("a pending read of B: %s, want NOT_LEADER once timed out", wire.Describe(rr))
				}
			}
			if st := c.nodes[0].Status().Stats.Reads; st.Pending != 0 || st.PendingBytes != 0 {
				t.Errorf("after the timeouts %d reads (%d bytes) still pending", st.Pending, st.PendingBytes)
			}
		})
	}
}

// TestReadWithoutReadIndex: a protocol without a read index (FT-Skeen)
// refuses linearizable reads, saying to use ordered ones; local reads work.
func TestReadWithoutReadIndex(t *testing.T) {
	c := readCluster(t, 1, 3, func(cfg *Config) { cfg.Protocol = ProtocolFTSkeen })
	r := newRawReader(t, c, 1000)
	r.send(t, 0, 0, wire.ReadLinearizable, "sum", 0)
	if rr := r.reply(t); rr.Status != wire.ReadFailed || !strings.Contains(rr.Err, "no read index") {
		t.Fatalf("linearizable read on FT-Skeen: %s", wire.Describe(rr))
	}
	r.send(t, 1, 0, wire.ReadLocal, "sum", 0)
	if rr := r.reply(t); rr.Status != wire.ReadOK {
		t.Fatalf("local read on FT-Skeen: %s", wire.Describe(rr))
	}
}
