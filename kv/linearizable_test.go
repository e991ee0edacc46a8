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
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/wire"
)

// kvInput and kvOutput are a single-key operation and its outcome, as the
// porcupine model sees them.
type kvInput struct {
	op            kv.Op
	key, value    string
	expect        string
	expectPresent bool
}

type kvOutput struct {
	ok      bool // get: found; del: existed; cas: set
	value   string
	present bool // cas failure: the key exists
}

// kvState is one key's value (porcupine partitions the history by key).
type kvState struct {
	present bool
	value   string
}

// kvModel is weft-kv's sequential specification, per key.
var kvModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(kvInput).key
			if by[k] == nil {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return kvState{} },
	Step: func(st, in, out any) (bool, any) {
		s, i, o := st.(kvState), in.(kvInput), out.(kvOutput)
		switch i.op {
		case kv.OpGet:
			return o.ok == s.present && (!s.present || o.value == s.value), s
		case kv.OpPut:
			return true, kvState{present: true, value: i.value}
		case kv.OpDelete:
			return o.ok == s.present, kvState{}
		default:
			match := s.present == i.expectPresent && (!s.present || s.value == i.expect)
			if match {
				return o.ok, kvState{present: true, value: i.value}
			}
			return !o.ok && o.present == s.present && (!s.present || o.value == s.value), s
		}
	},
	Equal: func(a, b any) bool { return a.(kvState) == b.(kvState) },
	DescribeOperation: func(in, out any) string {
		i, o := in.(kvInput), out.(kvOutput)
		return fmt.Sprintf("%s(%s, %q, expect %q/%v) -> %+v", i.op, i.key, i.value, i.expect, i.expectPresent, o)
	},
}

// TestModelRefuses: the model is not vacuous: a read of a value never
// written, and a compare-and-set that succeeds against another value, are
// not linearizable.
func TestModelRefuses(t *testing.T) {
	put := porcupine.Operation{ClientId: 0, Input: kvInput{op: kv.OpPut, key: "k", value: "a"}, Call: 0, Output: kvOutput{}, Return: 10}
	for _, bad := range []porcupine.Operation{
		{ClientId: 1, Input: kvInput{op: kv.OpGet, key: "k"}, Call: 20, Output: kvOutput{ok: true, value: "b"}, Return: 30},
		{ClientId: 1, Input: kvInput{op: kv.OpGet, key: "k"}, Call: 20, Output: kvOutput{}, Return: 30},
		{ClientId: 1, Input: kvInput{op: kv.OpCAS, key: "k", expect: "z", expectPresent: true, value: "c"}, Call: 20, Output: kvOutput{ok: true}, Return: 30},
	} {
		if porcupine.CheckOperations(kvModel, []porcupine.Operation{put, bad}) {
			t.Errorf("linearizable: %s", kvModel.DescribeOperation(bad.Input, bad.Output))
		}
	}
	good := porcupine.Operation{ClientId: 1, Input: kvInput{op: kv.OpGet, key: "k"}, Call: 5, Output: kvOutput{}, Return: 30}
	if !porcupine.CheckOperations(kvModel, []porcupine.Operation{put, good}) {
		t.Error("a read concurrent with the put that misses it is linearizable")
	}
}

// TestLinearizable runs weft-kv on an in-process cluster (2 shards x 3
// replicas, real TCP), with concurrent clients doing single-key operations
// on a few keys of both shards, stops the leader of shard 0 halfway
// (failover) and checks the history with porcupine.
func TestLinearizable(t *testing.T) {
	const shards, replicas, clients, opsPer = 2, 3, 6, 60
	kc := startKV(t, shards, replicas)
	topo, nodes := kc.topo, kc.nodes
	keys := []string{"a", "b", "c", "d"}
	h := &kvHistory{start: time.Now()}
	start := h.start
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
				in := kvInput{key: keys[r.IntN(len(keys))], value: fmt.Sprintf("%d.%d", c, i)}
				var out kvOutput
				call := h.now()
				var err error
				switch r.IntN(4) {
				case 0:
					in.op = kv.OpGet
					var v []byte
					v, out.ok, err = k.Get(ctx, in.key)
					out.value = string(v)
				case 1:
					in.op = kv.OpPut
					err = k.Put(ctx, in.key, []byte(in.value))
				case 2:
					in.op = kv.OpDelete
					out.ok, err = k.Delete(ctx, in.key)
				default:
					in.op = kv.OpCAS
					// Compare with what this client last saw, or "absent".
					var expect []byte
					if r.IntN(2) == 0 {
						expect = []byte(fmt.Sprintf("%d.%d", r.IntN(clients), r.IntN(max(i, 1))))
						in.expect, in.expectPresent = string(expect), true
					}
					var cur []byte
					out.ok, cur, out.present, err = k.CompareAndSet(ctx, in.key, expect, []byte(in.value))
					out.value = string(cur)
				}
				if !h.add(t, c, i, in, out, call, err) {
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
	res, info := porcupine.CheckOperationsVerbose(kvModel, h.ops, 10*time.Second)
	t.Logf("%d operations by %d clients in %v: %v", len(h.ops), clients, time.Since(start).Round(time.Millisecond), res)
	if res != porcupine.Ok {
		path := filepath.Join(os.TempDir(), "weft-kv-linearizability.html")
		if f, err := os.Create(path); err == nil {
			porcupine.Visualize(kvModel, info, f)
			f.Close()
			t.Logf("visualisation: %s", path)
		}
		t.Fatalf("history is not linearizable (%v)", res)
	}
}

// kvHistory collects the operations of concurrent clients for porcupine,
// timed from start.
type kvHistory struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func (h *kvHistory) now() int64 { return time.Since(h.start).Nanoseconds() }

// add records client c's operation i, called at call and returning now;
// an operation that failed (err) is a test error instead, and add reports
// false.
func (h *kvHistory) add(t *testing.T, c, i int, in kvInput, out kvOutput, call int64, err error) bool {
	ret := h.now()
	if err != nil {
		t.Errorf("client %d op %d %s: %v", c, i, in.op, err)
		return false
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
	return true
}

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
