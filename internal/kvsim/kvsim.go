// Package kvsim runs weft-kv in the simulator's swarm (issue #12 item 4):
// weft-kv's Store behind an rsm.Driver at every replica of a swarm run
// (crashes, torn writes, partitions, link resets, delay spikes, disk loss,
// leader hand-overs), with two workloads and their checks:
//
//   - RunKV: single-key commands on a few hot keys; every replica of a
//     shard applies a prefix of one sequence with the same results, the
//     replicas up at the end hold the same state, and the clients'
//     history (invocation at the send, response at the reply with the
//     replier's result) is linearizable per key, checked with porcupine;
//   - RunBank: transfers between accounts on different shards (one
//     cross-shard transaction each, the shards' votes exchanged between
//     the replicas' drivers) and full-balance reads; every full read sees
//     the initial total, every shard of a transaction agrees whether it
//     committed, and the shards' replicas end in the same state.
//
// A replica that installs a SNAPSHOT (state transfer) takes its state from
// the rsm snapshot of a member of its shard that received at least that
// far, as a node does. RunSeed runs both workloads on one swarm seed and
// Summary adds seeds up: `weft sim sweep --service kv` and package kv's
// tests use them.
//
// It is a checking harness, not a protocol core (purity_test.go does not
// scan it): it runs porcupine, a third-party checker, and times it with
// the wall clock for its report; the runs themselves are deterministic.
package kvsim

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/wire"
)

// StoreFunc builds the state machine of a replica of shard g among shards,
// and the kv.Store under it whose state the checks read. The default is
// the Store itself; tests pass deliberately broken executors.
type StoreFunc func(g wire.GroupID, shards int) (rsm.StateMachine, *kv.Store, error)

// plainStore is the default StoreFunc.
func plainStore(g wire.GroupID, shards int) (rsm.StateMachine, *kv.Store, error) {
	st, err := kv.NewStore(g, shards)
	return st, st, err
}

// Replica is one simulated replica's service.
type Replica struct {
	Proc   wire.ProcID
	Store  *kv.Store
	Driver *rsm.Driver
	// What RunKV's checks compare: the ids applied, in order, and an FNV
	// chain over their results.
	applied []wire.MsgID
	results uint64
}

// replicas holds every replica of a run's topology.
type replicas struct {
	topo     *amcast.Topology
	newStore StoreFunc
	reps     []*Replica // by ProcID
}

func newReplicas(groups, perGroup int, newStore StoreFunc) (*replicas, error) {
	topo, err := amcast.NewTopology(groups, perGroup)
	if err != nil {
		return nil, err
	}
	if newStore == nil {
		newStore = plainStore
	}
	rs := &replicas{topo: topo, newStore: newStore, reps: make([]*Replica, topo.NumReplicas())}
	for p := range rs.reps {
		g, _ := topo.GroupOf(wire.ProcID(p))
		if rs.reps[p], err = rs.fresh(wire.ProcID(p), g); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// fresh is a replica of g with an empty state. Its driver keeps the votes
// of 64 applied transactions for other replicas' pulls, far fewer than
// the default, so that pulls also miss.
func (rs *replicas) fresh(p wire.ProcID, g wire.GroupID) (*Replica, error) {
	sm, st, err := rs.newStore(g, rs.topo.NumGroups())
	if err != nil {
		return nil, err
	}
	d, err := rsm.NewDriver(sm, rsm.Config{Group: g, VoteCache: 64})
	if err != nil {
		return nil, err
	}
	return &Replica{Proc: p, Store: st, Driver: d}, nil
}

// shard returns the replicas of g, in member order.
func (rs *replicas) shard(g wire.GroupID) []*Replica {
	ms := rs.topo.Members(g)
	out := make([]*Replica, len(ms))
	for i, p := range ms {
		out[i] = rs.reps[p]
	}
	return out
}

// install replaces p's service by a copy of the member of its shard that
// got furthest by reach, at least to point (a node's state transfer). The
// protocol's SNAPSHOT goes by rsm.Driver.Received (the snapshot carries
// the entries held for votes, rsm/exchange.go); the fallback for a vote
// that cannot be pulled by Applied (a member past the entry).
func (rs *replicas) install(p wire.ProcID, point wire.Timestamp, reach func(*rsm.Driver) wire.Timestamp) error {
	g, _ := rs.topo.GroupOf(p)
	var src *Replica
	for _, q := range rs.topo.Members(g) {
		if rq := rs.reps[q]; q != p && (src == nil || reach(src.Driver).Less(reach(rq.Driver))) {
			src = rq
		}
	}
	if src == nil || reach(src.Driver).Less(point) {
		return fmt.Errorf("p%d installs a snapshot at %s but no member of its shard got that far", p, point)
	}
	var buf bytes.Buffer
	if err := src.Driver.Snapshot(&buf); err != nil {
		return fmt.Errorf("snapshot of p%d: %w", src.Proc, err)
	}
	rp, err := rs.fresh(p, g)
	if err != nil {
		return err
	}
	if err := rp.Driver.Restore(&buf); err != nil {
		return fmt.Errorf("p%d restores p%d's snapshot: %w", p, src.Proc, err)
	}
	rp.applied, rp.results = slices.Clone(src.applied), src.results
	rs.reps[p] = rp
	return nil
}

// keysPerShard returns n keys per shard, prefix0, prefix1, ... in order,
// each kept by the first shard short of n that it falls on, and all of
// them in the order they were found.
func keysPerShard(prefix string, n, shards int) (per [][]string, all []string) {
	per = make([][]string, shards)
	for i := 0; len(all) < n*shards; i++ {
		k := fmt.Sprint(prefix, i)
		if g := kv.Shard(k, shards); len(per[g]) < n {
			per[g] = append(per[g], k)
			all = append(all, k)
		}
	}
	return per, all
}

// firstErr keeps the first error of a run's callbacks (the simulator
// calls them and cannot stop on their errors).
type firstErr struct{ err error }

func (f *firstErr) set(err error) {
	if f.err == nil && err != nil {
		f.err = err
	}
}

func (f *firstErr) failf(format string, args ...any) { f.set(fmt.Errorf(format, args...)) }
