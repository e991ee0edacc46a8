package main

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/weft-dev/weft/kv"
)

// kvBenchOut is `weft bench kv -o json`'s output, rows as maps.
type kvBenchOut struct {
	KV  []map[string]any `json:"kv"`
	Raw []map[string]any `json:"raw"`
}

// TestBenchKV runs a tiny `weft bench kv` (WbCast and FT-Skeen, 1 replica
// per group, 2 clients, no transactions and half transactions, a 1s
// window) as processes and checks its JSON: a raw row per protocol, a kv
// row per protocol and transaction fraction, every kind of operation
// completed, transactions committed, the ratio is the kv row's throughput
// over its protocol's raw row's, and FT-Skeen, which serves no read
// index, ran ordered gets and says why. It asserts what was measured,
// never how fast.
func TestBenchKV(t *testing.T) {
	exe := buildWeft(t)
	var res kvBenchOut
	out, stderr := runJSON(t, exe, &res, "bench", "kv", "--protocols", "wbcast,ftskeen", "--replicas", "1", "--clients", "2", "--client-procs", "1",
		"--txn-fraction", "0,0.5", "--keys", "300", "--warmup", "200ms", "--window", "1s", "-o", "json")
	if len(res.Raw) != 2 || len(res.KV) != 4 {
		t.Fatalf("%d raw rows and %d kv rows, want 2 and 4:\n%s", len(res.Raw), len(res.KV), out)
	}
	for j, r := range res.KV {
		i, p := j%2, j/2 // transaction fraction, protocol
		proto, reads := []string{"wbcast", "ftskeen"}[p], []string{"linearizable", "ordered"}[p]
		raw, _ := res.Raw[p]["throughput_per_s"].(float64)
		if raw <= 0 || res.Raw[p]["protocol"] != proto || res.Raw[p]["groups_per_msg"] != 1.0 || res.Raw[p]["clients"] != 2.0 {
			t.Errorf("raw row %d: %v", p, res.Raw[p])
		}
		if note, _ := r["reads_note"].(string); (p == 1) != (note != "") {
			t.Errorf("kv row %d (%s): reads_note %q", j, proto, note)
		}
		for _, k := range []string{"protocol", "durability", "reads", "keys", "dist", "value_bytes", "txn_fraction", "clients", "window_s",
			"completed", "errors", "throughput_per_s", "read", "update", "txn", "txn_committed", "txn_aborted", "txn_committed_per_s",
			"server_cores", "client_cores", "total_cpu_us_per_msg", "raw_throughput_per_s", "raw_ratio"} {
			if _, ok := r[k]; !ok {
				t.Errorf("kv row %d lacks %q", j, k)
			}
		}
		want := map[string]any{"protocol": proto, "durability": "fsync", "reads": reads, "keys": 300.0, "dist": "zipfian",
			"value_bytes": 64.0, "txn_fraction": []float64{0, 0.5}[i], "clients": 2.0, "window_s": 1.0, "raw_throughput_per_s": raw}
		for k, v := range want {
			if r[k] != v {
				t.Errorf("kv row %d: %s = %v, want %v", j, k, r[k], v)
			}
		}
		n, _ := r["completed"].(float64)
		if n < 1 || r["throughput_per_s"] != n/1.0 || r["raw_ratio"] != n/raw {
			t.Errorf("kv row %d: %v completed, throughput %v, ratio %v (raw %v): want some operations, throughput = completed / window, ratio = throughput / raw",
				j, n, r["throughput_per_s"], r["raw_ratio"], raw)
		}
		kinds := []string{"read", "update"}
		if i == 1 {
			kinds = append(kinds, "txn")
		}
		sum := 0.0
		for _, k := range []string{"read", "update", "txn"} {
			m, _ := r[k].(map[string]any)
			c, _ := m["completed"].(float64)
			sum += c
			p50, p99 := m["p50_ms"].(float64), m["p99_ms"].(float64)
			switch {
			case strings.Contains(strings.Join(kinds, " "), k) && (c < 1 || p50 <= 0 || p99 < p50):
				t.Errorf("kv row %d: %s: %v: want some completed, 0 < p50 <= p99", j, k, m)
			case k == "txn" && i == 0 && c != 0:
				t.Errorf("kv row %d (no transactions): %v transactions", j, c)
			}
		}
		if sum != n {
			t.Errorf("kv row %d: the kinds count %v operations, the row %v", j, sum, n)
		}
		if i == 1 && (r["txn_committed"].(float64) < 1 || r["txn_aborted"] != 0.0) {
			t.Errorf("kv row %d: %v transactions committed, %v aborted: want some committed and none aborted (the condition's key was loaded)",
				j, r["txn_committed"], r["txn_aborted"])
		}
	}
	if strings.Count(stderr, "loaded 300 keys") != 2 {
		t.Errorf("no load progress on stderr:\n%s", stderr)
	}
}

// TestBenchKVSharedClients runs `weft bench kv --shared-clients 1`
// (WbCast, 1 replica per group, 3 workers sharing one client, half
// transactions, no raw rows, a 1s window): a shared client waits for
// every shard's answer (AllGroups) for the workers' gets, puts and 2-shard
// transactions alike, without an error, and the row reports 1 client in
// use. Never how fast.
func TestBenchKVSharedClients(t *testing.T) {
	exe := buildWeft(t)
	var res kvBenchOut
	out, _ := runJSON(t, exe, &res, "bench", "kv", "--protocols", "wbcast", "--replicas", "1", "--clients", "3", "--client-procs", "1",
		"--shared-clients", "1", "--txn-fraction", "0.5", "--raw=false", "--keys", "300", "--warmup", "200ms", "--window", "1s", "-o", "json")
	if len(res.Raw) != 0 || len(res.KV) != 1 {
		t.Fatalf("%d raw rows and %d kv rows, want 0 and 1:\n%s", len(res.Raw), len(res.KV), out)
	}
	r := res.KV[0]
	want := map[string]any{"clients": 3.0, "client_procs": 1.0, "shared_clients": 1.0, "client_conns": 1.0, "errors": 0.0, "txn_aborted": 0.0}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("%s = %v, want %v", k, r[k], v)
		}
	}
	for _, k := range []string{"read", "update", "txn"} {
		if m, _ := r[k].(map[string]any); m["completed"].(float64) < 1 {
			t.Errorf("%s: %v: want some completed", k, m)
		}
	}
	if r["txn_committed"].(float64) < 1 {
		t.Errorf("%v transactions committed, want some", r["txn_committed"])
	}
}

// TestBenchKVBadFlags: every bad value is refused before anything starts,
// with an error naming the flag.
func TestBenchKVBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--txn-fraction", "1.5"}, "--txn-fraction"},
		{[]string{"--txn-fraction", "-0.1"}, "--txn-fraction"},
		{[]string{"--txn-fraction", "NaN"}, "--txn-fraction"},
		{[]string{"--txn-fraction", "tenth"}, "--txn-fraction"},
		{[]string{"--keys", "1"}, "--keys"},
		{[]string{"--keys", "2000000"}, "--keys"},
		{[]string{"--dist", "pareto"}, "--dist"},
		{[]string{"--value", "-1"}, "--value"},
		{[]string{"--value", "65537"}, "--value"},
		{[]string{"--reads", "stale"}, "--reads"},
		{[]string{"--clients", "0"}, "--clients"},
		{[]string{"--shared-clients", "-1"}, "--shared-clients"},
		{[]string{"--protocols", "paxos"}, "--protocols"},
		{[]string{"--durability", "tmpfs"}, "--durability"},
	} {
		_, err := execCmd(benchCmd, append([]string{"kv"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench kv %v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}

// TestBenchKVKeys: the draws stay in the key space; zipfian favours the low
// ranks (key 0 drawn about 1/zeta(n) of the time, more than key 1, and
// the first tenth of the keys more than the rest), uniform does not; a
// transaction's partner key is always on another shard.
func TestBenchKVKeys(t *testing.T) {
	const n, draws = 1000, 200000
	for _, dist := range []string{"zipfian", "uniform"} {
		g, err := newKVKeys(&kvMixSpec{Keys: n, Dist: dist}, 3)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, 8))
		count := make([]int, n)
		for range draws {
			i := g.next(rng)
			if i < 0 || i >= n {
				t.Fatalf("%s: drew %d of %d keys", dist, i, n)
			}
			count[i]++
			j := g.partner(i, rng)
			if j < 0 || j >= n || kv.Shard(kvKey(i), 3) == kv.Shard(kvKey(j), 3) {
				t.Fatalf("%s: partner %d of key %d: want another shard's key", dist, j, i)
			}
		}
		low := 0
		for _, c := range count[:n/10] {
			low += c
		}
		switch dist {
		case "zipfian":
			if f := float64(count[0]) / draws; f < 0.8/g.zetan || f > 1.2/g.zetan || count[1] >= count[0] || low < draws/2 {
				t.Errorf("zipfian: key 0 drawn %.3f of the time (1/zeta %.3f), key 1 %d times, the first tenth %d of %d",
					f, 1/g.zetan, count[1], low, draws)
			}
		case "uniform":
			if low < draws/20 || low > draws*3/20 {
				t.Errorf("uniform: the first tenth of the keys drawn %d times of %d", low, draws)
			}
		}
	}
	if _, err := newKVKeys(&kvMixSpec{Keys: 1, Dist: "uniform"}, 3); err == nil {
		t.Error("1 key: no error")
	}
}

// TestBenchKVTable: the table has a line per row with the ratio, and a
// note for a protocol whose gets fell back to ordered ones.
func TestBenchKVTable(t *testing.T) {
	o := &kvBenchOptions{mix: kvMixSpec{Keys: 100, Dist: "zipfian", Value: 64}}
	rows := []kvBenchRow{
		{Protocol: "wbcast", Replicas: 3, FaultTolerant: true, Durability: "fsync", Reads: "linearizable", TxnFraction: 0.1, Clients: 32,
			Throughput: 3000, TxnCommittedPerS: 300, Read: kvKindRow{Completed: 1, P50ms: 1, P99ms: 2}, RawThroughput: 4000, RawRatio: 0.75},
		{Protocol: "ftskeen", Replicas: 3, FaultTolerant: true, Durability: "fsync", Reads: "ordered", ReadsNote: "no read index", Clients: 32,
			Throughput: 2000},
	}
	var b bytes.Buffer
	writeKVBenchTable(&b, rows, o)
	out := b.String()
	for _, want := range []string{"zipfian 0.99", "ops/s", "txn/s", "raw/s", "ratio",
		"linearizable   10      32", "1.00/2.00ms", "4000", "0.750", "ordered†", "† ftskeen: no read index"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\nwbcast ") != 1 || strings.Count(out, "\nftskeen ") != 1 {
		t.Errorf("want one line per row:\n%s", out)
	}
}
