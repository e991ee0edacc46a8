package kv_test

import (
	"context"
	"testing"

	"github.com/weft-dev/weft/kv"
)

// BenchmarkGet compares a get's latency at each consistency level on one
// shard of three replicas over loopback TCP, one get at a time:
// Linearizable through the leader's read index (a round trip to the leader
// and one from it to a quorum), Ordered through a multicast (ordered with
// the writes: a quorum's fsync), Local at a replica as is.
//
//	go test ./kv -run '^$' -bench BenchmarkGet -benchtime 2000x
func BenchmarkGet(b *testing.B) {
	k, ctx := benchShard(b)
	for _, level := range []kv.Consistency{kv.Linearizable, kv.Ordered, kv.Local} {
		b.Run(level.String(), func(b *testing.B) {
			for b.Loop() {
				if v, ok, err := k.Get(ctx, "k", level); err != nil || !ok || string(v) != "v" {
					b.Fatalf("get: %q %v %v", v, ok, err)
				}
			}
		})
	}
}

// BenchmarkGetParallel is BenchmarkGet with 16 gets in flight per CPU
// (one client): ns/op is the inverse of throughput. Concurrent gets share
// read-index rounds (one round covers every read that arrived before it
// left the leader).
//
//	go test ./kv -run '^$' -bench BenchmarkGetParallel -benchtime 5000x
func BenchmarkGetParallel(b *testing.B) {
	k, ctx := benchShard(b)
	for _, level := range []kv.Consistency{kv.Linearizable, kv.Ordered, kv.Local} {
		b.Run(level.String(), func(b *testing.B) {
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if v, ok, err := k.Get(ctx, "k", level); err != nil || !ok || string(v) != "v" {
						b.Errorf("get: %q %v %v", v, ok, err)
						return
					}
				}
			})
		})
	}
}

// benchShard starts one shard of 3 replicas holding k = v and returns a
// client of it.
func benchShard(b *testing.B) (*kv.Client, context.Context) {
	kc := startKV(b, 1, 3)
	k := kc.client(b, 1)
	ctx := context.Background()
	if err := k.Put(ctx, "k", []byte("v")); err != nil {
		b.Fatal(err)
	}
	return k, ctx
}
