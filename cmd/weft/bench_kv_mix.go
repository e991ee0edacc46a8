package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/kv"
)

// The operation mix of `weft bench kv` (bench_kv.go), run by each worker
// of a client process: YCSB workload A's (Cooper et al., SoCC 2010: half
// reads, half updates of one record, over a key space loaded beforehand),
// with a fraction of the operations replaced by transactions over two
// shards.

// kvMixSpec is the mix a client process runs (benchClientSpec.KV).
type kvMixSpec struct {
	Keys        int     `json:"keys"`         // user0 .. user<Keys-1>, all loaded before the rows
	Dist        string  `json:"dist"`         // uniform or zipfian (kvZipfTheta)
	Value       int     `json:"value"`        // bytes of each value written
	TxnFraction float64 `json:"txn_fraction"` // of the operations; the rest are half reads, half updates
	Reads       string  `json:"reads"`        // consistency of the gets (kv.ParseConsistency)
}

// Operation kinds, the indexes of a kv client process's per-kind lists.
const (
	kvRead = iota
	kvUpdate
	kvTxn        // a transaction that committed
	kvTxnAborted // one that aborted (its latency counts with kvTxn's)
)

var kvKinds = []string{"read", "update", "txn", "txn aborted"}

// kvZipfTheta is the skew of --dist zipfian: YCSB's default constant.
const kvZipfTheta = 0.99

// kvKey is the i-th key of the key space.
func kvKey(i int) string { return fmt.Sprintf("user%d", i) }

// kvKeys draws keys' indexes: uniformly, or by a Zipfian law over their
// ranks (key 0 the most frequent) with Gray et al.'s generator ("Quickly
// generating billion-record synthetic databases", SIGMOD 1994), the one
// YCSB uses: constant time per draw once zeta(n) is known. Keys land on
// shards by their hash (kv.Shard), so the hot keys are spread over the
// shards without YCSB's scrambling. Read-only once built: the workers of
// a process share one.
type kvKeys struct {
	n, shards                      int
	zipf                           bool
	zetan, eta, alpha, half1Pow2th float64
}

func newKVKeys(m *kvMixSpec, shards int) (*kvKeys, error) {
	g := &kvKeys{n: m.Keys, shards: shards}
	switch m.Dist {
	case "uniform":
	case "zipfian":
		g.zipf = true
		for i := 1; i <= g.n; i++ {
			g.zetan += 1 / math.Pow(float64(i), kvZipfTheta)
		}
		zeta2 := 1 + math.Pow(0.5, kvZipfTheta)
		g.alpha = 1 / (1 - kvZipfTheta)
		g.eta = (1 - math.Pow(2/float64(g.n), 1-kvZipfTheta)) / (1 - zeta2/g.zetan)
		g.half1Pow2th = math.Pow(0.5, kvZipfTheta)
	default:
		return nil, fmt.Errorf("--dist %q: want uniform or zipfian", m.Dist)
	}
	if g.n < 2 {
		return nil, fmt.Errorf("--keys %d: want at least 2", g.n)
	}
	first := kv.Shard(kvKey(0), shards)
	for i := 1; i < g.n; i++ {
		if kv.Shard(kvKey(i), shards) != first {
			return g, nil
		}
	}
	return nil, fmt.Errorf("--keys %d: every key is on shard %d; a transaction over 2 shards needs more keys", g.n, first)
}

// next draws a key's index.
func (g *kvKeys) next(rng *rand.Rand) int {
	if !g.zipf {
		return rng.IntN(g.n)
	}
	u := rng.Float64()
	switch uz := u * g.zetan; {
	case uz < 1:
		return 0
	case uz < 1+g.half1Pow2th:
		return 1
	}
	return min(int(float64(g.n)*math.Pow(g.eta*u-g.eta+1, g.alpha)), g.n-1)
}

// partner draws a second key for a transaction with key i, on another
// shard: by the same law while the draws land on i's shard (2 in 3 do,
// with 3 shards), then the next key on another shard (newKVKeys checked
// there is one).
func (g *kvKeys) partner(i int, rng *rand.Rand) int {
	s := kv.Shard(kvKey(i), g.shards)
	j := g.next(rng)
	for range 64 {
		if kv.Shard(kvKey(j), g.shards) != s {
			return j
		}
		j = g.next(rng)
	}
	for kv.Shard(kvKey(j), g.shards) == s {
		j = (j + 1) % g.n
	}
	return j
}

// kvOp is one worker's mix over its client (its own, or one the workers
// of its process share: --shared-clients): a get (at the mix's
// consistency), a put, or a transaction that, if its first key exists
// (loaded: it commits unless a shard misbehaves), reads both keys and
// writes both, its condition deciding the writes on the other shard too
// (the shards exchange votes).
func kvOp(cl *client.Client, shards int, m *kvMixSpec, keys *kvKeys, rng *rand.Rand) (benchOp, error) {
	k, err := kv.NewClient(cl, shards)
	if err != nil {
		return nil, err
	}
	level, err := kv.ParseConsistency(m.Reads)
	if err != nil {
		return nil, err
	}
	value := make([]byte, m.Value)
	for i := range value {
		value[i] = byte('a' + rng.IntN(26))
	}
	readBelow := m.TxnFraction + (1-m.TxnFraction)/2
	return func(ctx context.Context, n int) (int, error) {
		if len(value) > 0 {
			value[n%len(value)]++ // every write its own content
		}
		switch u := rng.Float64(); {
		case u < m.TxnFraction:
			i := keys.next(rng)
			k1, k2 := kvKey(i), kvKey(keys.partner(i, rng))
			r, err := k.Txn(ctx, kv.Txn{
				If:    []kv.Cond{{Key: k1, Kind: kv.CondPresent}},
				Reads: []string{k1, k2},
				Then:  []kv.Write{{Key: k1, Kind: kv.WritePut, Value: value}, {Key: k2, Kind: kv.WritePut, Value: value}},
			})
			if err == nil && !r.Committed {
				return kvTxnAborted, nil
			}
			return kvTxn, err
		case u < readBelow:
			_, _, err := k.Get(ctx, kvKey(keys.next(rng)), level)
			return kvRead, err
		default:
			return kvUpdate, k.Put(ctx, kvKey(keys.next(rng)), value)
		}
	}, nil
}
