package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/kv"
)

// `weft bench kv` (issue #12, "Performance"): weft-kv on the clusters of
// weft bench, a YCSB-A-like mix with a ladder of cross-shard transaction
// fractions, and in the same run the raw multicast benchmark at the same
// client counts, so that the ratio the issue sets a target for is read
// off one output.
//
// It is a subcommand rather than a --service flag of weft bench because
// most of weft bench's own flags (--groups-per-msg, --dest, --payload,
// --plot, --interval) mean nothing for a kv mix, and the mix's flags
// nothing for raw multicasts; the flags they share are the same
// (addBenchFlags).

// kvBenchOptions are weft bench kv's flags.
type kvBenchOptions struct {
	benchOptions
	mix          kvMixSpec // Keys, Dist, Value, Reads; TxnFraction is set per row
	txnFlag      []string  // --txn-fraction as given (pflag prints float defaults as 0.000000)
	txnFractions []float64 // parsed by validate
	raw          bool
}

func benchKVCmd() *cobra.Command {
	var o kvBenchOptions
	c := &cobra.Command{
		Use:   "kv",
		Short: "Benchmark weft-kv on real loopback clusters: a YCSB-A-like mix with cross-shard transactions, against raw multicasts",
		Long: `For each protocol and durability mode, starts 3 shards (groups) of
--replicas agents running weft-kv (service = "kv") on loopback, as weft
bench does, loads the key space (--keys keys, user0 ... userN-1, with
--value-byte values), then for each transaction fraction (--txn-fraction)
and each rung of the client ladder (--clients) runs closed-loop clients, a
warm-up and a measurement window (the clients as in weft bench: one per
worker, or shared by the workers of a client process with --shared-clients). The mix is YCSB workload A's: half the
operations are gets (--reads: linearizable by default, through the shard
leader's read index; a protocol without one gets ordered reads, said in
the output), half are puts, over keys drawn by --dist (zipfian: YCSB's
constant 0.99, key user0 the hottest; or uniform); a fraction
--txn-fraction of the operations are replaced by transactions over two
shards: if key A exists, read A and B and put both (A and B on different
shards, so the shards exchange votes).

Rows: throughput (operations of every kind per second), transactions
committed per second and aborted, p50/p99 of each kind, CPU as in weft
bench. With --raw (default) the same run first measures the raw multicast
benchmark (weft bench, 1 group per message, uniform, --value-byte payloads)
on a cluster of the same protocol and durability without a service, at
each client count, and each kv row gets the ratio of its throughput to
that (issue #12's target: at least 0.70 with 10% transactions).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchKV(cmd, o) },
	}
	addOutput(c, &o.format, "")
	addBenchFlags(c, &o.benchOptions, []string{"wbcast", "ftskeen", "fastcast"}, []int{1, 32, 90})
	f := c.Flags()
	f.StringSliceVar(&o.txnFlag, "txn-fraction", []string{"0", "0.1", "0.5"}, "the transaction ladder: the fraction of operations that are 2-shard transactions (one set of rows each)")
	f.IntVar(&o.mix.Keys, "keys", 10000, "keys in the key space (all loaded before the rows)")
	f.StringVar(&o.mix.Dist, "dist", "zipfian", "key popularity: zipfian (theta 0.99, as YCSB) or uniform")
	f.IntVar(&o.mix.Value, "value", 64, "value bytes (the raw rows' payload too)")
	f.StringVar(&o.mix.Reads, "reads", "linearizable", "consistency of the gets: linearizable (read index), ordered (a multicast) or local")
	f.BoolVar(&o.raw, "raw", true, "also measure the raw multicast benchmark at each client count, and print the ratios")
	return c
}

// maxBenchKeys bounds --keys: each client process computes zeta over the
// key space, and the load puts every key.
const maxBenchKeys = 1_000_000

func (o *kvBenchOptions) validate() error {
	if o.mix.Value < 0 || o.mix.Value > 64<<10 {
		return fmt.Errorf("--value %d: want 0 to 64 KiB", o.mix.Value)
	}
	// The raw rows are weft bench's with these (benchOptions.validate
	// checks the rest of the shared flags).
	o.perMsg, o.dest, o.payload = []int{1}, "uniform", o.mix.Value
	if err := o.benchOptions.validate(); err != nil {
		return err
	}
	if len(o.txnFlag) == 0 {
		return errors.New("--txn-fraction: want at least one fraction")
	}
	o.txnFractions = o.txnFractions[:0]
	for _, a := range o.txnFlag {
		f, err := strconv.ParseFloat(a, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return fmt.Errorf("--txn-fraction %q: want fractions from 0 to 1", a)
		}
		o.txnFractions = append(o.txnFractions, f)
	}
	if o.mix.Keys > maxBenchKeys {
		return fmt.Errorf("--keys %d: want at most %d", o.mix.Keys, maxBenchKeys)
	}
	if _, err := kv.ParseConsistency(o.mix.Reads); err != nil {
		return fmt.Errorf("--reads: %w", err)
	}
	_, err := newKVKeys(&o.mix, 3) // --keys and --dist
	return err
}

// kvKindRow is one operation kind's figures in a row.
type kvKindRow struct {
	Completed  int     `json:"completed"`
	Errors     int     `json:"errors"`
	Throughput float64 `json:"throughput_per_s"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	P999ms     float64 `json:"p999_ms"`
	MaxMs      float64 `json:"max_ms"`
}

// kvBenchRow is one rung of weft bench kv: a protocol, durability mode,
// transaction fraction and client count.
type kvBenchRow struct {
	Protocol      string `json:"protocol"`
	Replicas      int    `json:"replicas_per_group"`
	FaultTolerant bool   `json:"fault_tolerant"`
	Durability    string `json:"durability"`
	// Reads is the consistency the gets ran at; ReadsNote says why it is
	// not the one asked for (a protocol without a read index).
	Reads       string  `json:"reads"`
	ReadsNote   string  `json:"reads_note,omitempty"`
	Keys        int     `json:"keys"`
	Dist        string  `json:"dist"`
	ValueBytes  int     `json:"value_bytes"`
	TxnFraction float64 `json:"txn_fraction"`
	Clients     int     `json:"clients"`
	ClientProcs int     `json:"client_procs"`
	WindowS     float64 `json:"window_s"`
	// Completed, Errors and Throughput count every kind: an operation is
	// a get, a put or a transaction (committed or aborted).
	Completed  int       `json:"completed"`
	Errors     int       `json:"errors"`
	Throughput float64   `json:"throughput_per_s"`
	Read       kvKindRow `json:"read"`
	Update     kvKindRow `json:"update"`
	// Txn counts committed and aborted transactions together.
	Txn              kvKindRow `json:"txn"`
	TxnCommitted     int       `json:"txn_committed"`
	TxnAborted       int       `json:"txn_aborted"`
	TxnCommittedPerS float64   `json:"txn_committed_per_s"`
	benchModel
	// The CPU figures' "msg" is an operation here.
	benchCPU
	// RawThroughput is the raw multicast benchmark's multicasts/s in the
	// same run at the same protocol, durability and clients (0 without
	// --raw); RawRatio is Throughput / RawThroughput.
	RawThroughput float64 `json:"raw_throughput_per_s"`
	RawRatio      float64 `json:"raw_ratio"`
}

// kvBenchOutput is weft bench kv's -o json.
type kvBenchOutput struct {
	KV  []kvBenchRow `json:"kv"`
	Raw []benchRow   `json:"raw"`
}

func runBenchKV(cmd *cobra.Command, o kvBenchOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	e, done, err := newBenchEnv(cmd, &o.benchOptions)
	if err != nil {
		return err
	}
	defer done()
	var out kvBenchOutput
	for _, c := range o.configs() {
		raw := map[int]float64{} // clients -> multicasts/s
		if o.raw {
			cl, err := e.startCluster(c, "")
			if err != nil {
				return err
			}
			for _, n := range o.clients {
				row, err := e.multicastRow(cl, c, "uniform", 1, o.mix.Value, n)
				if err != nil {
					cl.stop()
					return err
				}
				out.Raw = append(out.Raw, row)
				raw[n] = row.Throughput
			}
			if err := e.retire(cl); err != nil {
				return err
			}
		}
		rows, err := e.kvRows(c, &o, raw)
		out.KV = append(out.KV, rows...)
		if err != nil {
			return err
		}
	}
	w := cmd.OutOrStdout()
	if o.format == outJSON {
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(w, string(b))
		return nil
	}
	writeKVBenchTable(w, out.KV, &o)
	if len(out.Raw) > 0 {
		fmt.Fprintln(w, "\nthe raw multicast rows of the ratios:")
		writeBenchTable(w, out.Raw, o.benchOptions)
	}
	return nil
}

// kvRows starts c's kv cluster, loads it and runs its rows.
func (e *benchEnv) kvRows(c benchConfig, o *kvBenchOptions, raw map[int]float64) ([]kvBenchRow, error) {
	cl, err := e.startCluster(c, config.ServiceKV)
	if err != nil {
		return nil, err
	}
	defer cl.stop() // on an error; retire, below, stops it first otherwise (stopping twice is harmless)
	mix := o.mix
	start := time.Now()
	note, err := loadKV(e.ctx, cl, &mix)
	if err != nil {
		return nil, fmt.Errorf("bench kv %s (%s): %w", c.protocol, c.mode, err)
	}
	fmt.Fprintf(os.Stderr, "   loaded %d keys in %v; gets: %s\n", mix.Keys, time.Since(start).Round(time.Millisecond), mix.Reads)
	var rows []kvBenchRow
	for _, f := range o.txnFractions {
		for _, n := range o.clients {
			mix.TxnFraction = f
			row := kvBenchRow{Protocol: c.protocol, Replicas: c.replicas, FaultTolerant: c.protocol != "skeen", Durability: c.mode,
				Reads: mix.Reads, ReadsNote: note, Keys: mix.Keys, Dist: mix.Dist, ValueBytes: mix.Value, TxnFraction: f,
				Clients: n, ClientProcs: min(o.clientProcs, n), WindowS: o.window.Seconds(), RawThroughput: raw[n]}
			row.benchModel = o.model(n, row.ClientProcs)
			spec := mix
			run, err := e.runProcs(cl, n, row.ClientProcs, benchClientSpec{KV: &spec})
			if err != nil {
				return rows, fmt.Errorf("bench kv %s (%s), %g transactions, %d clients: %w", c.protocol, c.mode, f, n, err)
			}
			row.fill(run, o.window)
			fmt.Fprintf(os.Stderr, "   txn %3.0f%%, %3d clients (%d conns): %8.0f ops/s (%d txns committed, %d aborted; %d errors)  p99 get %.2fms put %.2fms txn %.2fms\n",
				100*f, n, row.ClientConns, row.Throughput, row.TxnCommitted, row.TxnAborted, row.Errors, row.Read.P99ms, row.Update.P99ms, row.Txn.P99ms)
			rows = append(rows, row)
		}
	}
	return rows, e.retire(cl)
}

// fill computes the row's figures from its run.
func (r *kvBenchRow) fill(run *benchRun, window time.Duration) {
	kind := func(lat latKind, errs int) kvKindRow {
		n := lat.count()
		return kvKindRow{Completed: n, Errors: errs, Throughput: float64(n) / window.Seconds(),
			P50ms: lat.pctMs(0.5), P99ms: lat.pctMs(0.99), P999ms: lat.pctMs(0.999), MaxMs: lat.pctMs(1)}
	}
	reads, rerr := run.kind(kvRead)
	updates, uerr := run.kind(kvUpdate)
	committed, cerr := run.kind(kvTxn)
	aborted, aerr := run.kind(kvTxnAborted)
	r.Read, r.Update = kind(reads, rerr), kind(updates, uerr)
	r.TxnCommitted, r.TxnAborted = committed.count(), aborted.count()
	r.TxnCommittedPerS = float64(r.TxnCommitted) / window.Seconds()
	committed.merge(aborted)
	r.Txn = kind(committed, cerr+aerr)
	r.Completed = r.Read.Completed + r.Update.Completed + r.Txn.Completed
	r.Errors = r.Read.Errors + r.Update.Errors + r.Txn.Errors
	r.Throughput = float64(r.Completed) / window.Seconds()
	r.benchCPU = run.cpu(r.Completed)
	if r.RawThroughput > 0 {
		r.RawRatio = r.Throughput / r.RawThroughput
	}
}

// kvLoadBatch keys are put by each transaction of the load.
const kvLoadBatch = 64

// loadKV puts every key of m's key space, kvLoadBatch keys per
// transaction with 16 in flight (they have no condition and cannot abort:
// the shards exchange no votes), then reads one back at m.Reads. A
// protocol that serves no read index fails a linearizable get: the rows'
// gets are then ordered (m.Reads is changed), and the returned note says
// why.
func loadKV(ctx context.Context, cl *benchCluster, m *kvMixSpec) (note string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	key, err := config.ReadClusterKey(cl.keyFile)
	if err != nil {
		return "", err
	}
	c, err := client.New(client.Config{Cluster: "weft-bench", ClusterKey: key, Topology: cl.topo, Nodes: cl.nodes, AllGroups: true})
	if err != nil {
		return "", err
	}
	defer c.Close()
	k, err := kv.NewClient(c, cl.topo.NumGroups())
	if err != nil {
		return "", err
	}
	value := []byte(strings.Repeat("v", m.Value))
	batches := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var loadErr error
	for range 16 {
		wg.Go(func() {
			for first := range batches {
				var t kv.Txn
				for i := first; i < min(first+kvLoadBatch, m.Keys); i++ {
					t.Then = append(t.Then, kv.Write{Key: kvKey(i), Kind: kv.WritePut, Value: value})
				}
				r, err := k.Txn(ctx, t)
				if err == nil && !r.Committed {
					err = errors.New("a load transaction aborted")
				}
				if err != nil {
					mu.Lock()
					loadErr = errors.Join(loadErr, fmt.Errorf("loading keys %d..%d: %w", first, first+len(t.Then)-1, err))
					mu.Unlock()
					cancel()
				}
			}
		})
	}
	for first := 0; first < m.Keys && ctx.Err() == nil; first += kvLoadBatch {
		select {
		case batches <- first:
		case <-ctx.Done():
		}
	}
	close(batches)
	wg.Wait()
	if loadErr != nil {
		return "", loadErr
	}
	level, _ := kv.ParseConsistency(m.Reads)
	r, err := k.ReadAt(ctx, kvKey(0), level)
	if level == kv.Linearizable && errors.Is(err, client.ErrReadFailed) {
		note = fmt.Sprintf("linearizable gets failed (%v): the gets are ordered (multicast), linearizable too", err)
		m.Reads = kv.Ordered.String()
		r, err = k.ReadAt(ctx, kvKey(0), kv.Ordered)
	}
	switch {
	case err != nil:
		return "", fmt.Errorf("reading %s back after the load: %w", kvKey(0), err)
	case !r.Present || string(r.Value) != string(value):
		return "", fmt.Errorf("reading %s back after the load: present %v, %d bytes: the load did not take", kvKey(0), r.Present, len(r.Value))
	}
	return note, nil
}

// writeKVBenchTable prints one line per kv row.
func writeKVBenchTable(w io.Writer, rows []kvBenchRow, o *kvBenchOptions) {
	dist := o.mix.Dist
	if dist == "zipfian" {
		dist = fmt.Sprintf("zipfian %.2f", kvZipfTheta)
	}
	fmt.Fprintf(w, "weft-kv, 3 shards on loopback, closed-loop clients: %d keys (%s), %d-byte values; 50%% gets / 50%% puts,\n", o.mix.Keys, dist, o.mix.Value)
	fmt.Fprintf(w, "txn%% of the operations as 2-shard transactions; %v warm-up, %v window per row\n", o.warmup, o.window)
	fmt.Fprintf(w, "%-9s %4s %-8s %-12s %4s %7s %5s %8s %7s %5s %17s %17s %17s %8s %5s %5s %5s %7s\n",
		"protocol", "reps", "durable", "gets", "txn%", "clients", "conns", "ops/s", "txn/s", "abort",
		"get p50/p99", "put p50/p99", "txn p50/p99", "raw/s", "ratio", "srv", "cli", "cpu/op")
	var notes []string
	for _, r := range rows {
		rep := fmt.Sprint(r.Replicas)
		if !r.FaultTolerant {
			rep += "*"
		}
		gets := r.Reads
		if r.ReadsNote != "" {
			gets += "†"
			if n := r.Protocol + ": " + r.ReadsNote; !slices.Contains(notes, n) {
				notes = append(notes, n)
			}
		}
		raw, ratio := "-", "-"
		if r.RawThroughput > 0 {
			raw, ratio = fmt.Sprintf("%.0f", r.RawThroughput), fmt.Sprintf("%.3f", r.RawRatio)
		}
		lat := func(k kvKindRow) string {
			if k.Completed == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f/%.2fms", k.P50ms, k.P99ms)
		}
		fmt.Fprintf(w, "%-9s %4s %-8s %-12s %4.0f %7d %5d %8.0f %7.0f %5d %17s %17s %17s %8s %5s %5.2f %5.2f %5.0fµs\n",
			r.Protocol, rep, r.Durability, gets, 100*r.TxnFraction, r.Clients, r.ClientConns, r.Throughput, r.TxnCommittedPerS, r.TxnAborted,
			lat(r.Read), lat(r.Update), lat(r.Txn), raw, ratio, r.ServerCores, r.ClientCores, r.TotalCPUus)
	}
	fmt.Fprintln(w, "conns: clients in use (as in weft bench: = clients unless --shared-clients); ops/s: gets, puts and transactions per second;")
	fmt.Fprintln(w, "txn/s: transactions committed per second; abort: aborted in the window")
	fmt.Fprintln(w, "raw/s: the raw multicast benchmark in this run (1 group per message, uniform, same payload bytes, same clients);")
	fmt.Fprintln(w, "ratio: ops/s / raw/s (issue #12's target: at least 0.70 at 10% transactions); srv/cli: cores used; cpu/op: CPU per operation")
	for _, n := range notes {
		fmt.Fprintln(w, "† "+n)
	}
	for _, r := range rows {
		if !r.FaultTolerant {
			fmt.Fprintln(w, "* skeen is not fault tolerant: 1 replica per group, nothing persisted")
			break
		}
	}
}
