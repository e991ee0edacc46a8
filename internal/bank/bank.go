// Package bank is a bank workload for weft-kv (issue #12 item 4): accounts
// spread over the shards, transfers between accounts on different shards
// (each a cross-shard transaction whose condition on one shard decides
// the writes on the other), concurrent full-balance reads, and a checker:
// every full-balance read, and a final one after the faults, must see the
// initial total.
//
// A transfer of x from a to b is one transaction: if a holds at least x,
// add -x to a and x to b (kv.CondAtLeast, two kv.WriteAdd). It commits or
// aborts at both shards, so money is never created or destroyed, whatever
// crashes: a transfer whose outcome the client never learned (a timeout,
// kv.ErrResultLost) either applied whole or not at all, and the total is
// the same. A full-balance read is one transaction reading every account
// (no condition: no vote exchange); every shard executes it at the same
// position of the global order, so its values are a consistent cut, whose
// sum must be the initial total.
//
// The workload runs against anything with kv.Client's Txn method, so its
// checker can be shown to catch a broken executor in a unit test.
package bank

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/wire"
)

// Txner runs weft-kv transactions: a *kv.Client, or a fake in tests.
type Txner interface {
	Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error)
}

// Kind is the kind of a transaction the workload runs.
type Kind uint8

// Transaction kinds.
const (
	Transfer Kind = iota
	FullRead
)

// Defaults.
const (
	DefaultAccounts     = 30
	DefaultInitial      = 1000
	DefaultTransfers    = 8
	DefaultReaders      = 2
	DefaultTimeout      = 15 * time.Second
	DefaultMaxLatencies = 1 << 20
)

// Config shapes a Workload. Zero fields take the defaults.
type Config struct {
	// Shards is the number of shards (at least 2: every transfer crosses
	// two).
	Shards int
	// Accounts is the number of accounts, spread evenly over the shards
	// (default 30; at least 2 per shard, at most kv.MaxTxnOps: a
	// full-balance read reads them all in one transaction).
	Accounts int
	// Initial is every account's balance at the start (default 1000).
	Initial int64
	// MaxAmount is the largest transfer (default Initial/2: large enough
	// that some transfers find their source short and abort).
	MaxAmount int64
	// Transfers and Readers are the numbers of closed-loop workers doing
	// transfers (default 8) and full-balance reads (default 2).
	Transfers, Readers int
	// Timeout bounds one transaction (default 15s); past it, its outcome
	// is unknown.
	Timeout time.Duration
	// Seed seeds the workers' choices.
	Seed uint64
	// MaxLatencies bounds the transfer latencies kept for the percentiles
	// (default 2^20, 8 MiB; a uniform sample past it).
	MaxLatencies int
	// OnDone, if set, is called after each of the workers' transactions,
	// from the worker, with the shards it went to, when it was called and
	// when it returned, and its error (the demo times its failover with
	// it).
	OnDone func(kind Kind, shards []wire.GroupID, call, ret time.Time, err error)
}

func (c *Config) defaults() error {
	if c.Accounts == 0 {
		c.Accounts = DefaultAccounts
	}
	if c.Initial == 0 {
		c.Initial = DefaultInitial
	}
	if c.MaxAmount == 0 {
		c.MaxAmount = max(c.Initial/2, 1)
	}
	if c.Transfers == 0 {
		c.Transfers = DefaultTransfers
	}
	if c.Readers == 0 {
		c.Readers = DefaultReaders
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxLatencies == 0 {
		c.MaxLatencies = DefaultMaxLatencies
	}
	switch {
	case c.Shards < 2:
		return fmt.Errorf("bank: %d shards: transfers between shards need at least 2", c.Shards)
	case c.Accounts < 2*c.Shards || c.Accounts > kv.MaxTxnOps:
		return fmt.Errorf("bank: %d accounts on %d shards: want 2 per shard (%d) to %d (one transaction reads them all)", c.Accounts, c.Shards, 2*c.Shards, kv.MaxTxnOps)
	case c.Initial < 0 || c.MaxAmount < 1:
		return fmt.Errorf("bank: initial balance %d, largest transfer %d: want a balance of at least 0 and transfers of at least 1", c.Initial, c.MaxAmount)
	case c.Initial > (1<<62)/int64(c.Accounts):
		return fmt.Errorf("bank: initial balance %d on %d accounts: the total would overflow", c.Initial, c.Accounts)
	case c.Transfers < 0 || c.Readers < 0 || c.Timeout < 0 || c.MaxLatencies < 1:
		return errors.New("bank: negative workers, timeout or latency bound")
	}
	return nil
}

// Accounts returns n account names spread evenly over shards shards (by
// kv.Shard): acct-000, acct-001, ..., skipping names whose shard already
// has its share. byShard lists them per shard.
func Accounts(n, shards int) (names []string, byShard [][]string) {
	byShard = make([][]string, shards)
	for i := 0; len(names) < n; i++ {
		name := fmt.Sprintf("acct-%03d", i)
		g := int(kv.Shard(name, shards))
		// Shard g's share: n/shards, one more for the first n%shards.
		share := n / shards
		if g < n%shards {
			share++
		}
		if len(byShard[g]) < share {
			byShard[g] = append(byShard[g], name)
			names = append(names, name)
		}
	}
	return names, byShard
}

// Workload is a bank workload against one Txner.
type Workload struct {
	cfg      Config
	k        Txner
	accounts []string
	byShard  [][]string
	check    *Checker
	readAll  kv.Txn
	readDest []wire.GroupID

	stop atomic.Bool
	wg   sync.WaitGroup

	mu         sync.Mutex
	committed  int
	aborted    int
	unknown    int
	readErrors int
	lat        *latencies
	lastErr    error // the last error of unknown outcome
}

// New returns a workload of cfg against k; call Init, then Start.
func New(k Txner, cfg Config) (*Workload, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	w := &Workload{cfg: cfg, k: k, lat: newLatencies(cfg.MaxLatencies, cfg.Seed)}
	w.accounts, w.byShard = Accounts(cfg.Accounts, cfg.Shards)
	w.check = NewChecker(w.accounts, w.Total())
	w.readAll = kv.Txn{Reads: w.accounts}
	w.readDest = w.readAll.Shards(cfg.Shards)
	return w, nil
}

// Accounts returns the account names, in the order reads list them.
func (w *Workload) Accounts() []string { return w.accounts }

// Total returns the total every full-balance read must see.
func (w *Workload) Total() int64 { return w.cfg.Initial * int64(w.cfg.Accounts) }

// Checker returns the workload's checker.
func (w *Workload) Checker() *Checker { return w.check }

// Init sets every account to the initial balance, in one transaction of
// puts (it cannot abort: no vote exchange), before any worker starts.
func (w *Workload) Init(ctx context.Context) error {
	t := kv.Txn{Then: make([]kv.Write, len(w.accounts))}
	v := []byte(strconv.FormatInt(w.cfg.Initial, 10))
	for i, a := range w.accounts {
		t.Then[i] = kv.Write{Key: a, Kind: kv.WritePut, Value: v}
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	res, err := w.k.Txn(ctx, t)
	switch {
	case err != nil:
		return fmt.Errorf("bank: setting %d accounts to %d: %w", len(w.accounts), w.cfg.Initial, err)
	case !res.Committed:
		return fmt.Errorf("bank: setting %d accounts to %d: the transaction aborted (failed %v, bad writes %v)", len(w.accounts), w.cfg.Initial, res.Failed, res.BadWrites)
	}
	return nil
}

// Start starts the workers; they run until Stop or ctx ends (which also
// cuts their transactions in flight short: outcome unknown).
func (w *Workload) Start(ctx context.Context) {
	for i := range w.cfg.Transfers {
		w.wg.Go(func() { w.transfers(ctx, uint64(i)) })
	}
	for range w.cfg.Readers {
		w.wg.Go(func() { w.reads(ctx) })
	}
}

// Stop stops the workers and waits for their transactions in flight.
func (w *Workload) Stop() {
	w.stop.Store(true)
	w.wg.Wait()
}

// transfers runs transfers until Stop: x from an account on one shard to
// an account on another, x drawn in 1..MaxAmount.
func (w *Workload) transfers(ctx context.Context, worker uint64) {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, worker))
	for !w.stop.Load() && ctx.Err() == nil {
		from := rng.IntN(w.cfg.Shards)
		to := (from + 1 + rng.IntN(w.cfg.Shards-1)) % w.cfg.Shards
		a := w.byShard[from][rng.IntN(len(w.byShard[from]))]
		b := w.byShard[to][rng.IntN(len(w.byShard[to]))]
		x := 1 + rng.Int64N(w.cfg.MaxAmount)
		t := kv.Txn{
			If:   []kv.Cond{{Key: a, Kind: kv.CondAtLeast, Num: x}},
			Then: []kv.Write{{Key: a, Kind: kv.WriteAdd, Delta: -x}, {Key: b, Kind: kv.WriteAdd, Delta: x}},
		}
		call := time.Now()
		res, err := w.run(ctx, t)
		ret := time.Now()
		w.mu.Lock()
		switch {
		case errors.Is(err, kv.ErrShardsDisagree):
			w.check.Disagreed(err)
		case err != nil:
			w.unknown++
			w.lastErr = err
		case res.Committed:
			w.committed++
			w.lat.add(ret.Sub(call))
		default:
			w.aborted++
			w.lat.add(ret.Sub(call))
		}
		w.mu.Unlock()
		if w.cfg.OnDone != nil {
			w.cfg.OnDone(Transfer, []wire.GroupID{wire.GroupID(from), wire.GroupID(to)}, call, ret, err)
		}
	}
}

// reads runs full-balance reads until Stop, each checked.
func (w *Workload) reads(ctx context.Context) {
	for !w.stop.Load() && ctx.Err() == nil {
		call := time.Now()
		res, err := w.run(ctx, w.readAll)
		ret := time.Now()
		if err != nil {
			w.mu.Lock()
			w.readErrors++
			w.mu.Unlock()
		} else {
			w.check.Observe(res, false)
		}
		if w.cfg.OnDone != nil {
			w.cfg.OnDone(FullRead, w.readDest, call, ret, err)
		}
	}
}

func (w *Workload) run(ctx context.Context, t kv.Txn) (kv.TxnResult, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	return w.k.Txn(ctx, t)
}

// FinalRead takes the final full-balance read, after Stop (and after the
// faults), trying again after an error until ctx ends, and checks it.
func (w *Workload) FinalRead(ctx context.Context) error {
	for {
		res, err := w.run(ctx, w.readAll)
		if err == nil {
			w.check.Observe(res, true)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("bank: the final full-balance read: %w", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stats is what the workload counted.
type Stats struct {
	// Committed and Aborted transfers (aborted: the source held less than
	// the amount); Unknown: transfers whose outcome the client never
	// learned (a timeout, kv.ErrResultLost), applied whole or not at all.
	Committed, Aborted, Unknown int
	// LastUnknown is the last of those errors.
	LastUnknown error
	// P50, P99 and Max are the latencies of the transfers answered
	// (committed or aborted).
	P50, P99, Max time.Duration
	// Reads is the number of full-balance reads checked (the final one
	// included); ReadErrors those that failed (no value to check).
	Reads, ReadErrors int
}

// Stats returns the counts so far.
func (w *Workload) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Stats{Committed: w.committed, Aborted: w.aborted, Unknown: w.unknown, LastUnknown: w.lastErr,
		Max: w.lat.top, Reads: w.check.Result().Reads, ReadErrors: w.readErrors}
	s.P50, s.P99 = w.lat.percentiles()
	return s
}
