package demo

// The demo's weft-kv workload (Options.Workload "kv", the default; issue
// #12 item 5): a bank of accounts over the shards, with cross-shard
// transfers and full-balance reads whose total must never change
// (internal/bank), and single-key operations on a few hot keys checked
// with porcupine (kvload.go), while a shard's leader is killed and
// restarted.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/internal/bank"
	"github.com/weft-dev/weft/internal/kvcheck"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/wire"
)

// kvHotKeysPerShard is how many hot keys of each shard the single-key
// workers share: few, so that their operations collide.
const kvHotKeysPerShard = 2

// kvUnknownLines is how many operations of unknown outcome the demo
// prints.
const kvUnknownLines = 5

// kvFinalWithin bounds the bank's final read (retried through errors).
const kvFinalWithin = 20 * time.Second

// KVSummary is what the weft-kv workload measured and checked.
type KVSummary struct {
	Shards, Accounts            int
	Transfers, Readers, Workers int // workers: transfers, full-balance reads, single-key operations
	// Bank holds the transfers' counts and latencies and the number of
	// full-balance reads; Balance the checker's verdict on them.
	Bank    bank.Stats
	Balance bank.Result
	Total   int64 // every read's expected total
	// CommittedPerSec and AbortedPerSec are transfers per second of the
	// workload.
	CommittedPerSec, AbortedPerSec float64
	// Linearizable is porcupine's verdict on the single-key operations
	// (LinErr: the check could not run), over Ops operations on Keys keys,
	// in LinTook; Visualization is its HTML page when the verdict is not
	// Ok.
	Linearizable porcupine.CheckResult
	LinErr       error
	Ops, Keys    int
	// Unknown counts the operations of unknown outcome in the history;
	// LinearizableGets and OrderedGets the gets served by the read index
	// and by a multicast.
	Unknown                       int
	LinearizableGets, OrderedGets int
	LinTook                       time.Duration
	Visualization                 string
}

// kvWorkload runs the bank and the single-key workers.
type kvWorkload struct {
	r    *run
	k    *kv.Client
	bank *bank.Workload
	load *kvLoad
	keys []string
	// progress line state
	lastDone, lastOps int
	unknownLines      atomic.Int64 // logUnknown's calls (from the kv workers)
}

// newKVWorkload connects the bank to the cluster through cl and sets
// every account's initial balance.
func (r *run) newKVWorkload(ctx context.Context, cl *client.Client) (*kvWorkload, error) {
	k, err := kv.NewClient(cl, r.opt.Groups)
	if err != nil {
		return nil, err
	}
	w := &kvWorkload{r: r, k: k, keys: hotKeys(r.opt.Groups, kvHotKeysPerShard)}
	w.bank, err = bank.New(k, bank.Config{Shards: r.opt.Groups, Accounts: r.opt.Accounts, Transfers: r.opt.Clients,
		Seed: r.opt.Seed, Timeout: kvOpTimeout, OnDone: w.onTxn})
	if err != nil {
		return nil, err
	}
	if err := w.bank.Init(ctx); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	r.printf("bank: %d accounts on %d shards set to %s each (one transaction); total %s", r.opt.Accounts, r.opt.Groups,
		commas(bank.DefaultInitial), commas(int(w.bank.Total())))
	return w, nil
}

// logUnknown prints the first kvUnknownLines single-key operations of
// unknown outcome (the summary counts them all): a failover can make
// dozens, and the progress would drown in them.
func (w *kvWorkload) logUnknown(format string, args ...any) {
	switch n := w.unknownLines.Add(1); {
	case n <= kvUnknownLines:
		w.r.printf(format, args...)
	case n == kvUnknownLines+1:
		w.r.printf("(further single-key operations of unknown outcome are counted in the summary)")
	}
}

// onTxn feeds the failover's figures with the transfers answered.
func (w *kvWorkload) onTxn(kind bank.Kind, shards []wire.GroupID, call, ret time.Time, err error) {
	if kind != bank.Transfer || err != nil {
		return
	}
	w.r.mu.Lock()
	w.r.observeLocked(shards, call, ret)
	w.r.mu.Unlock()
}

func (w *kvWorkload) start(ctx context.Context) {
	w.bank.Start(ctx)
	// Another stream of the seed than the bank's workers.
	w.load = newKVLoad(ctx, w.k, w.keys, w.r.opt.Seed^0x6b76, w.logUnknown)
	w.load.onWrite = func(g wire.GroupID, call, ret time.Time) {
		w.r.mu.Lock()
		w.r.observeLocked([]wire.GroupID{g}, call, ret)
		w.r.mu.Unlock()
	}
	w.load.start(w.r.opt.KVWorkers)
}

func (w *kvWorkload) progress() string {
	s := w.bank.Stats()
	done, ops := s.Committed+s.Aborted, w.load.h.Len()
	line := fmt.Sprintf("transfers %s (+%s/s, %s aborted)  balance reads %s  kv ops %s (+%s/s)",
		commas(done), commas(done-w.lastDone), commas(s.Aborted), commas(s.Reads), commas(ops), commas(ops-w.lastOps))
	w.lastDone, w.lastOps = done, ops
	return line
}

// stop stops both kinds of workers at once, then waits for each.
func (w *kvWorkload) stop() {
	w.load.stop.Store(true)
	w.bank.Stop()
	w.load.end()
}

// final takes the bank's final full-balance read, after the restart.
func (w *kvWorkload) final(ctx context.Context) {
	if st := w.bank.Stats(); st.Unknown > 0 {
		w.r.printf("%d transfers of unknown outcome (applied whole or not at all); the last: %v", st.Unknown, st.LastUnknown)
	}
	ctx, cancel := context.WithTimeout(ctx, kvFinalWithin)
	defer cancel()
	if err := w.bank.FinalRead(ctx); err != nil {
		w.r.printf("%v", err)
	}
}

// summarize checks the single-key history with porcupine and gathers the
// bank's figures; it passes if the total never changed (final read
// included) and the history is linearizable.
func (w *kvWorkload) summarize(sum *Summary) bool {
	opt := w.r.opt
	st := w.bank.Stats()
	ks := &KVSummary{Shards: opt.Groups, Accounts: opt.Accounts, Transfers: opt.Clients, Readers: bank.DefaultReaders, Workers: opt.KVWorkers,
		Bank: st, Balance: w.bank.Checker().Result(), Total: w.bank.Total(),
		CommittedPerSec: float64(st.Committed) / opt.Duration.Seconds(), AbortedPerSec: float64(st.Aborted) / opt.Duration.Seconds(),
		Ops: w.load.h.Len(), Keys: len(w.keys)}
	for kind, n := range w.load.h.Counts() {
		// A get of unknown outcome is left out of the history (kvcheck).
		if strings.HasPrefix(kind, "unknown ") && !strings.HasSuffix(kind, "(left out)") {
			ks.Unknown += n
		}
	}
	w.load.mu.Lock()
	ks.LinearizableGets, ks.OrderedGets = w.load.levels[kv.Linearizable], w.load.levels[kv.Ordered]
	w.load.mu.Unlock()
	var info porcupine.LinearizationInfo
	ks.Linearizable, info, ks.LinTook, ks.LinErr = w.load.check()
	if ks.LinErr == nil && ks.Linearizable != porcupine.Ok {
		path := filepath.Join(w.r.dir, "porcupine.html")
		if err := kvcheck.Visualize(info, path); err == nil {
			ks.Visualization = path
		}
	}
	sum.KV = ks
	sum.Completed = st.Committed + st.Aborted
	sum.Throughput = ks.CommittedPerSec + ks.AbortedPerSec
	sum.P50, sum.P99, sum.Max = st.P50, st.P99, st.Max
	return ks.Balance.OK() && ks.LinErr == nil && ks.Linearizable == porcupine.Ok
}

// printKVSummary prints the kv workload's summary lines (the caller holds
// r.outMu and prints the failover and the delivery check around them).
func (r *run) printKVSummary(s *Summary) {
	out, ks := r.opt.Out, s.KV
	fmt.Fprintf(out, "== summary: weft-kv, %d shards x %d replicas, %v workload: %d accounts (%d transfer workers, %d full-balance readers), %d single-key workers on %d hot keys\n",
		ks.Shards, r.opt.Replicas, r.opt.Duration, ks.Accounts, ks.Transfers, ks.Readers, ks.Workers, ks.Keys)
	b := ks.Bank
	fmt.Fprintf(out, "txns        %s committed/s, %s aborted/s: %s transfers between shards committed, %s aborted (source short), %s of unknown outcome; %s full-balance reads\n",
		commas(int(ks.CommittedPerSec+0.5)), commas(int(ks.AbortedPerSec+0.5)), commas(b.Committed), commas(b.Aborted), commas(b.Unknown), commas(b.Reads))
	fmt.Fprintf(out, "latency     transfers p50 %s  p99 %s  max %s\n", fmtDur(b.P50), fmtDur(b.P99), fmtDur(b.Max))
}

// printKVVerdicts prints the bank's and porcupine's verdicts (the caller
// holds r.outMu).
func (r *run) printKVVerdicts(s *Summary) {
	out, ks := r.opt.Out, s.KV
	bal := ks.Balance
	switch err := bal.Err(); {
	case err == nil:
		fmt.Fprintf(out, "total balance constant: PASS (%s full-balance reads of %d accounts, the last after the workload, each %s)\n",
			commas(bal.Reads), ks.Accounts, commas(int(ks.Total)))
	case errors.Is(err, bank.ErrNoFinalRead):
		fmt.Fprintf(out, "total balance constant: FAIL: no final full-balance read after the workload (%s reads before it passed)\n", commas(bal.Reads))
	default:
		fmt.Fprintf(out, "total balance constant: FAIL: %d of %s observations wrong\n", bal.Failed, commas(bal.Reads))
		for _, v := range bal.Violations[:min(len(bal.Violations), 3)] {
			fmt.Fprintf(out, "  %s\n", v)
		}
	}
	verdict := "PASS"
	if ks.LinErr != nil || ks.Linearizable != porcupine.Ok {
		verdict = "FAIL"
	}
	detail := fmt.Sprintf("porcupine: %s in %s", ks.Linearizable, fmtDur(ks.LinTook))
	switch {
	case ks.LinErr != nil:
		detail = ks.LinErr.Error()
	case ks.Visualization != "":
		detail += ", its visualisation: " + ks.Visualization
	}
	fmt.Fprintf(out, "linearizable: %s (%s; %s single-key operations on %d hot keys, %s of unknown outcome; gets: %s linearizable, %s ordered)\n",
		verdict, detail, commas(ks.Ops), ks.Keys, commas(ks.Unknown), commas(ks.LinearizableGets), commas(ks.OrderedGets))
}
