package kv_test

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

// replica is one simulated replica's service: the kv store behind an
// rsm.Driver, and what it applied (ids and a chain hash of the results).
type replica struct {
	st      *kv.Store
	d       *rsm.Driver
	applied []wire.MsgID
	results uint64 // FNV chain over every result, in order
}

// TestSimKV drives weft-kv's state machine at every replica of swarm runs
// (crashes, torn writes, partitions, link resets, delay spikes, disk loss;
// a replica that installs a SNAPSHOT takes its state from the rsm snapshot
// of a member of its shard that applied at least that far, as a node does)
// with a workload of
// single-key commands on a few hot keys, each multicast to its key's shard,
// and checks that every replica of a shard applied a prefix of the same
// sequence with the same results, and that every replica still up at the
// end applied all of it and holds the same state.
func TestSimKV(t *testing.T) {
	seeds := 50
	if testing.Short() {
		seeds = 8
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		cfg := sim.SwarmConfig("wbcast", seed)
		cfg.Workload.DestMin, cfg.Workload.DestMax = 1, 1
		runKV(t, cfg)
	}
}

func runKV(t *testing.T, cfg sim.Config) {
	t.Helper()
	shards := cfg.Groups
	topo, err := amcast.NewTopology(cfg.Groups, cfg.Replicas)
	if err != nil {
		t.Fatal(err)
	}
	reps := map[wire.ProcID]*replica{}
	for g := range shards {
		for _, p := range topo.Members(wire.GroupID(g)) {
			st, err := kv.NewStore(wire.GroupID(g), shards)
			if err != nil {
				t.Fatal(err)
			}
			d, err := rsm.NewDriver(st, rsm.Config{})
			if err != nil {
				t.Fatal(err)
			}
			reps[p] = &replica{st: st, d: d}
		}
	}
	// A few keys per shard, so that commands contend.
	keys := make([][]string, shards)
	for i := 0; ; i++ {
		k := fmt.Sprint("k", i)
		if g := kv.Shard(k, shards); len(keys[g]) < 3 {
			keys[g] = append(keys[g], k)
		}
		done := true
		for _, ks := range keys {
			done = done && len(ks) == 3
		}
		if done {
			break
		}
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 7))
	cfg.Payload = func(_ int, dest []wire.GroupID) []byte {
		k := keys[dest[0]][r.IntN(3)]
		v := []byte(fmt.Sprint(r.IntN(4)))
		c := kv.Command{Key: k}
		switch r.IntN(4) {
		case 0:
			c.Op = kv.OpGet
		case 1:
			c.Op, c.Value = kv.OpPut, v
		case 2:
			c.Op = kv.OpDelete
		default:
			c.Op, c.Value = kv.OpCAS, v
			if r.IntN(3) > 0 {
				c.Expect, c.ExpectPresent = []byte(fmt.Sprint(r.IntN(4))), true
			}
		}
		return c.Encode(nil)
	}
	var failed error
	installs := 0
	cfg.OnDeliver = func(p wire.ProcID, d amcast.Delivery) {
		rp := reps[p]
		if d.Install {
			installs++
			if err := installFrom(topo, reps, p, d.GTS); err != nil && failed == nil {
				failed = err
			}
			return
		}
		before := rp.d.Applied()
		if err := rp.d.Apply([]rsm.Entry{rsm.EntryOf(&d.M, d.GTS)}); err != nil && failed == nil {
			failed = err
		}
		res, ok := rp.d.Result(d.M.ID)
		if !ok || rp.d.Applied() == before {
			return // at or below the applied gts (delivered again after a disk loss): not applied again
		}
		rp.applied = append(rp.applied, d.M.ID)
		h := fnv.New64a()
		fmt.Fprintf(h, "%d|%x", rp.results, res)
		rp.results = h.Sum64()
	}
	res, err := sim.Run(cfg)
	if err != nil {
		t.Fatalf("seed %d: %v", cfg.Seed, err)
	}
	if installs > 0 {
		t.Logf("seed %d: %d state transfers", cfg.Seed, installs)
	}
	if failed != nil {
		t.Fatalf("seed %d: %v", cfg.Seed, failed)
	}
	if err := sim.CheckResult(res); err != nil {
		t.Fatal(err)
	}
	if !res.Converged {
		t.Fatalf("seed %d: did not converge", cfg.Seed)
	}
	down := map[wire.ProcID]bool{}
	for _, p := range res.Down {
		down[p] = true
	}
	for g := range shards {
		ms := topo.Members(wire.GroupID(g))
		var ref *replica
		for _, p := range ms {
			if rp := reps[p]; ref == nil || len(rp.applied) > len(ref.applied) {
				ref = rp
			}
		}
		for _, p := range ms {
			rp := reps[p]
			if !slices.Equal(rp.applied, ref.applied[:len(rp.applied)]) {
				i := 0
				for i < len(rp.applied) && rp.applied[i] == ref.applied[i] {
					i++
				}
				t.Fatalf("seed %d: p%d applied a sequence that is not a prefix of its shard's: #%d is %s, the longest's %s (lengths %d, %d)",
					cfg.Seed, p, i+1, rp.applied[i], ref.applied[i], len(rp.applied), len(ref.applied))
			}
			if down[p] {
				continue
			}
			if len(rp.applied) != len(ref.applied) || rp.results != ref.results || rp.st.Digest() != ref.st.Digest() {
				t.Fatalf("seed %d: p%d (up) applied %d with results %x and state %x; its shard's longest %d, %x, %x",
					cfg.Seed, p, len(rp.applied), rp.results, rp.st.Digest(), len(ref.applied), ref.results, ref.st.Digest())
			}
		}
	}
}

// installFrom replaces replica p's service with a copy of the state of the
// member of its shard that applied furthest (at least to point), through
// the driver's streamed snapshot, as a node's state transfer does.
func installFrom(topo *amcast.Topology, reps map[wire.ProcID]*replica, p wire.ProcID, point wire.Timestamp) error {
	g, _ := topo.GroupOf(p)
	var src *replica
	for _, q := range topo.Members(g) {
		if rq := reps[q]; q != p && (src == nil || src.d.Applied().Less(rq.d.Applied())) {
			src = rq
		}
	}
	if src == nil || src.d.Applied().Less(point) {
		return fmt.Errorf("p%d installs a snapshot at %s but no member of its shard applied that far", p, point)
	}
	var buf bytes.Buffer
	if err := src.d.Snapshot(&buf); err != nil {
		return err
	}
	st, err := kv.NewStore(g, topo.NumGroups())
	if err != nil {
		return err
	}
	d, err := rsm.NewDriver(st, rsm.Config{})
	if err != nil {
		return err
	}
	if err := d.Restore(&buf); err != nil {
		return err
	}
	reps[p] = &replica{st: st, d: d, applied: slices.Clone(src.applied), results: src.results}
	return nil
}
