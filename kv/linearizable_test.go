package kv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/internal/kvcheck"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/wire"
)

// TestLinearizable runs weft-kv on an in-process cluster (2 shards x 3
// replicas, real TCP), with concurrent clients doing single-key operations
// on a few keys of both shards, stops the leader of shard 0 halfway
// (failover) and checks the history with porcupine.
func TestLinearizable(t *testing.T) {
	const shards, replicas, clients, opsPer = 2, 3, 6, 60
	kc := startKV(t, shards, replicas)
	topo, nodes := kc.topo, kc.nodes
	keys := []string{"a", "b", "c", "d"}
	h := kvcheck.NewHistory(historyBytes)
	start := h.Start()
	var wg sync.WaitGroup
	half := make(chan struct{})
	var halfOnce sync.Once
	for c := range clients {
		k := kc.client(t, shards)
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(c), 1))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i := range opsPer {
				if c == 0 && i == opsPer/2 {
					halfOnce.Do(func() { close(half) })
				}
				in := kvcheck.Input{Key: keys[r.IntN(len(keys))], Value: fmt.Sprintf("%d.%d", c, i)}
				var out kvcheck.Output
				call := h.Now()
				var err error
				switch r.IntN(4) {
				case 0:
					in.Op = kv.OpGet
					var v []byte
					v, out.OK, err = k.Get(ctx, in.Key)
					out.Value = string(v)
				case 1:
					in.Op = kv.OpPut
					err = k.Put(ctx, in.Key, []byte(in.Value))
				case 2:
					in.Op = kv.OpDelete
					out.OK, err = k.Delete(ctx, in.Key)
				default:
					in.Op = kv.OpCAS
					// Compare with what this client last saw, or "absent".
					var expect []byte
					if r.IntN(2) == 0 {
						expect = []byte(fmt.Sprintf("%d.%d", r.IntN(clients), r.IntN(max(i, 1))))
						in.Expect, in.ExpectPresent = string(expect), true
					}
					var cur []byte
					out.OK, cur, out.Present, err = k.CompareAndSet(ctx, in.Key, expect, []byte(in.Value))
					out.Value = string(cur)
				}
				if !record(t, h, c, i, in, out, call, err) {
					return
				}
			}
		})
	}
	<-half
	for _, p := range topo.Members(0) {
		if nodes[p].Status().Leader {
			nodes[p].Close()
			t.Logf("stopped p%d, the leader of shard 0, at %v", p, time.Since(start).Round(time.Millisecond))
			break
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	res, info, err := h.Check(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations by %d clients in %v: %v", h.Len(), clients, time.Since(start).Round(time.Millisecond), res)
	if res != porcupine.Ok {
		path := filepath.Join(os.TempDir(), "weft-kv-linearizability.html")
		if kvcheck.Visualize(info, path) == nil {
			t.Logf("visualisation: %s", path)
		}
		t.Fatalf("history is not linearizable (%v)", res)
	}
}

// record records client c's operation i, called at call and returning
// now, in h; an operation that failed (err) is a test error instead, and
// record reports false.
func record(t *testing.T, h *kvcheck.History, c, i int, in kvcheck.Input, out kvcheck.Output, call int64, err error) bool {
	if err != nil {
		t.Errorf("client %d op %d %s: %v", c, i, in.Op, err)
		return false
	}
	h.Add(c, in, out, call)
	return true
}

// historyBytes bounds the in-process tests' histories (a few hundred
// operations of short values).
const historyBytes = 4 << 20

// kvCluster is weft-kv on in-process nodes (real TCP on loopback).
type kvCluster struct {
	t      testing.TB
	topo   *amcast.Topology
	shards int
	dir    string
	peers  map[wire.ProcID]string
	nodes  map[wire.ProcID]*node.Node
}

func startKV(t testing.TB, shards, replicas int) *kvCluster {
	t.Helper()
	topo, err := amcast.NewTopology(shards, replicas)
	if err != nil {
		t.Fatal(err)
	}
	c := &kvCluster{t: t, topo: topo, shards: shards, dir: t.TempDir(), peers: map[wire.ProcID]string{}, nodes: map[wire.ProcID]*node.Node{}}
	lns := map[wire.ProcID]net.Listener{}
	for p := range wire.ProcID(topo.NumReplicas()) {
		if lns[p], err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		c.peers[p] = lns[p].Addr().String()
	}
	for p := range wire.ProcID(topo.NumReplicas()) {
		c.start(p, lns[p])
	}
	return c
}

// start starts node p on ln, or (ln nil) on its address again, from its
// data directory.
func (c *kvCluster) start(p wire.ProcID, ln net.Listener) {
	t := c.t
	t.Helper()
	var err error
	for i := 0; ln == nil; i++ { // the port may linger for a moment after Close
		if ln, err = net.Listen("tcp", c.peers[p]); err != nil && i == 50 {
			t.Fatal(err)
		}
		if ln == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
	g, _ := c.topo.GroupOf(p)
	st, err := kv.NewStore(g, c.shards)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(node.Config{Cluster: "kv", ID: p, Topology: c.topo, Peers: c.peers, Listener: ln,
		DataDir: filepath.Join(c.dir, fmt.Sprint("n", p)), StateMachine: st, CompactBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[p] = n
	t.Cleanup(func() { n.Close() })
}

// client returns a kv client that believes the cluster has shards shards.
func (c *kvCluster) client(t testing.TB, shards int) *kv.Client {
	t.Helper()
	cl, err := client.New(client.Config{Cluster: "kv", Topology: c.topo, Nodes: c.peers, AllGroups: true, RetryTicks: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	k, err := kv.NewClient(cl, shards)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestClientErrorsAndLimits: on a real cluster, a value at the limit goes
// through and comes back whole; past the limits the client refuses before
// sending; a client whose shard count differs from the cluster's is told
// so (ErrWrongShard).
func TestClientErrorsAndLimits(t *testing.T) {
	c := startKV(t, 2, 3)
	k := c.client(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := strings.Repeat("k", kv.MaxKeyBytes)
	big := bytes.Repeat([]byte("v"), kv.MaxValueBytes)
	if err := k.Put(ctx, key, big); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := k.Get(ctx, key); err != nil || !ok || !bytes.Equal(v, big) {
		t.Fatalf("get of the largest value: %d bytes, found %v, %v", len(v), ok, err)
	}
	if ok, _, _, err := k.CompareAndSet(ctx, key, big, big[1:]); err != nil || !ok {
		t.Fatalf("cas with two values at the limit: %v %v", ok, err)
	}
	if err := k.Put(ctx, key+"k", nil); !errors.Is(err, kv.ErrKeyTooLarge) {
		t.Fatalf("key over the limit: %v", err)
	}
	if err := k.Put(ctx, "a", append(big, 'v')); !errors.Is(err, kv.ErrValueTooLarge) {
		t.Fatalf("value over the limit: %v", err)
	}
	if _, _, err := k.Get(ctx, ""); !errors.Is(err, kv.ErrEmptyKey) {
		t.Fatalf("empty key: %v", err)
	}
	// A client that thinks there is 1 shard sends a key of shard 1 to
	// shard 0.
	wrong := c.client(t, 1) // every key on shard 0
	var other string
	for i := 0; ; i++ {
		if other = fmt.Sprint("w", i); kv.Shard(other, 2) == 1 {
			break
		}
	}
	if err := wrong.Put(ctx, other, []byte("x")); !errors.Is(err, kv.ErrWrongShard) {
		t.Fatalf("wrong shard layout: %v", err)
	}
	if _, err := kv.NewClient(nil, 0); !errors.Is(err, kv.ErrUnknownShard) {
		t.Fatalf("0 shards: %v", err)
	}
}
