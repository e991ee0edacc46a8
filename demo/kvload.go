package demo

// Single-key weft-kv operations on a few hot keys, each recorded with its
// call and return times (internal/kvcheck) for porcupine: the demo's
// linearizability check, and the kv fault tests' (kv_test.go).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/weft-dev/weft/internal/kvcheck"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/wire"
)

const (
	// kvOpTimeout bounds one kv operation: past it the operation's outcome
	// is unknown (recorded as possibly applied). Generous: the client
	// retries through a failover well within it.
	kvOpTimeout = 15 * time.Second
	// kvImpatient is the deadline of an impatient operation (one in
	// kvImpatientOdds): a client that gives up before the reply, so that
	// the history holds operations of unknown outcome that were in fact
	// applied, in flight or lost.
	kvImpatient     = 2 * time.Millisecond
	kvImpatientOdds = 40
	// kvHistoryBytes bounds a run's history (some thousands of operations
	// of short keys and values).
	kvHistoryBytes = 32 << 20
	// kvCheckWithin bounds porcupine's search.
	kvCheckWithin = 60 * time.Second
)

// kvLoad is a kv workload: workers doing single-key operations on keys,
// each recorded in h.
type kvLoad struct {
	ctx  context.Context // ends every operation
	k    *kv.Client
	h    *kvcheck.History
	keys []string
	seed uint64
	// logf reports an operation that failed (outcome unknown), unless it
	// was impatient or ctx ended.
	logf func(format string, args ...any)
	// onWrite, if set, is called after each put, delete or compare-and-set
	// answered, with its key's shard and its call and return times.
	onWrite func(g wire.GroupID, call, ret time.Time)
	stop    atomic.Bool
	wg      sync.WaitGroup
	// ids hands out porcupine client ids: a worker takes a fresh one after
	// an operation of unknown outcome, which stays open for good.
	ids atomic.Int64

	mu     sync.Mutex
	levels map[kv.Consistency]int // successful gets per consistency level
	// longest is the longest a successful operation took: through a
	// failover, the wait for the new leader.
	longest time.Duration
}

// newKVLoad returns a workload of k on keys; start starts it.
func newKVLoad(ctx context.Context, k *kv.Client, keys []string, seed uint64, logf func(string, ...any)) *kvLoad {
	return &kvLoad{ctx: ctx, k: k, h: kvcheck.NewHistory(kvHistoryBytes), keys: keys, seed: seed, logf: logf,
		levels: map[kv.Consistency]int{}}
}

// start starts workers (ids 0 to workers-1).
func (l *kvLoad) start(workers int) {
	l.ids.Store(int64(workers))
	for w := range workers {
		l.wg.Go(func() { l.worker(w) })
	}
}

// hotKeys returns per keys per shard of n shards.
func hotKeys(n, per int) []string {
	var keys []string
	have := make([]int, n)
	for i := 0; len(keys) < n*per; i++ {
		k := fmt.Sprint("hot", i)
		if g := kv.Shard(k, n); have[g] < per {
			have[g]++
			keys = append(keys, k)
		}
	}
	return keys
}

// worker runs operations until l.stop: a put, delete or compare-and-set
// (against the value it last saw, or absence) of a unique value, or a get,
// linearizable (the read index) or ordered (a multicast); one in
// kvImpatientOdds with a deadline too short for its reply.
func (l *kvLoad) worker(w int) {
	r := rand.New(rand.NewPCG(l.seed, uint64(w)))
	id := w
	seen := map[string]*string{} // key -> the value last seen (nil: absent)
	for i := 0; !l.stop.Load(); i++ {
		in := kvcheck.Input{Key: l.keys[r.IntN(len(l.keys))], Value: fmt.Sprintf("%d.%d", w, i)}
		var out kvcheck.Output
		timeout := kvOpTimeout
		if r.IntN(kvImpatientOdds) == 0 {
			timeout = kvImpatient
		}
		ctx, cancel := context.WithTimeout(l.ctx, timeout)
		level := kv.Linearizable
		callAt := time.Now()
		call := l.h.Now()
		var err error
		switch n := r.IntN(20); {
		case n < 6:
			in.Op = kv.OpPut
			err = l.k.Put(ctx, in.Key, []byte(in.Value))
		case n < 8:
			in.Op = kv.OpDelete
			out.OK, err = l.k.Delete(ctx, in.Key)
		case n < 12:
			in.Op = kv.OpCAS
			var expect []byte
			if v := seen[in.Key]; v != nil {
				expect = []byte(*v)
				in.Expect, in.ExpectPresent = *v, true
			}
			var cur []byte
			out.OK, cur, out.Present, err = l.k.CompareAndSet(ctx, in.Key, expect, []byte(in.Value))
			out.Value = string(cur)
		default:
			in.Op = kv.OpGet
			if n >= 17 {
				level = kv.Ordered
			}
			var v []byte
			v, out.OK, err = l.k.Get(ctx, in.Key, level)
			out.Value = string(v)
		}
		cancel()
		if err != nil {
			l.h.Unknown(id, in, call)
			id = int(l.ids.Add(1)) - 1
			if l.ctx.Err() == nil && timeout != kvImpatient { // not the run ending early, nor an impatient client
				l.logf("kv worker %d: %s %s: %v (outcome unknown)", w, in.Op, in.Key, err)
			}
			continue
		}
		l.h.Add(id, in, out, call)
		took := time.Duration(l.h.Now() - call)
		if in.Op != kv.OpGet && l.onWrite != nil {
			l.onWrite(kv.Shard(in.Key, l.k.Shards()), callAt, time.Now())
		}
		l.mu.Lock()
		l.longest = max(l.longest, took)
		l.mu.Unlock()
		switch {
		case in.Op == kv.OpGet && out.OK, in.Op == kv.OpCAS && !out.OK && out.Present:
			v := out.Value
			seen[in.Key] = &v
		case in.Op == kv.OpGet, in.Op == kv.OpDelete, in.Op == kv.OpCAS && !out.OK:
			seen[in.Key] = nil
		default: // a put, or a compare-and-set that set
			v := in.Value
			seen[in.Key] = &v
		}
		if in.Op == kv.OpGet {
			l.mu.Lock()
			l.levels[level]++
			l.mu.Unlock()
		}
	}
}

// end stops the workers and waits for them.
func (l *kvLoad) end() {
	l.stop.Store(true)
	l.wg.Wait()
}

// check checks the history with porcupine (within kvCheckWithin) and
// returns its verdict, with what porcupine found (for kvcheck.Visualize)
// and how long it took; an error if the history overflowed its bound.
func (l *kvLoad) check() (porcupine.CheckResult, porcupine.LinearizationInfo, time.Duration, error) {
	began := time.Now()
	res, info, err := l.h.Check(kvCheckWithin)
	return res, info, time.Since(began), err
}

// describe describes what was recorded: operations per kind, gets per
// consistency level, the longest successful operation.
func (l *kvLoad) describe() string {
	counts := l.h.Counts()
	kinds := make([]string, 0, len(counts))
	for k, n := range counts {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d operations on %d keys (%s; gets: %d linearizable, %d ordered, %d local; longest %v)",
		l.h.Len(), len(l.keys), strings.Join(kinds, ", "), l.levels[kv.Linearizable], l.levels[kv.Ordered], l.levels[kv.Local], l.longest.Round(time.Millisecond))
}
