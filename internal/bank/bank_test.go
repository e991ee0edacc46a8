package bank

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/wire"
)

// fakeKV executes transactions one at a time on a map, as weft-kv's shards
// would at one position of the global order. Its faults, for the tests:
// oneShard applies a transfer's writes on the lowest of its shards only
// (the executor bug issue #12 asks the checks to catch); every lostEvery-th
// transfer is applied but answered with kv.ErrResultLost, every
// dropEvery-th is not applied and answered with a deadline error (outcomes
// the client never learns); disagree answers every transfer with
// kv.ErrShardsDisagree.
type fakeKV struct {
	shards    int
	oneShard  bool
	lostEvery int
	dropEvery int
	disagree  bool

	mu        sync.Mutex
	data      map[string][]byte
	transfers int
	gts       uint64
}

func newFake(shards int) *fakeKV { return &fakeKV{shards: shards, data: map[string][]byte{}} }

func (f *fakeKV) Txn(ctx context.Context, t kv.Txn) (kv.TxnResult, error) {
	if err := t.Check(); err != nil {
		return kv.TxnResult{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gts++
	res := kv.TxnResult{GTS: wire.Timestamp{T: f.gts}, Committed: true}
	transfer := len(t.If) > 0
	if transfer {
		f.transfers++
		switch {
		case f.disagree:
			return kv.TxnResult{}, fmt.Errorf("%w: shard 0 says committed=true, shard 1 says false", kv.ErrShardsDisagree)
		case f.dropEvery > 0 && f.transfers%f.dropEvery == 0:
			return kv.TxnResult{}, context.DeadlineExceeded
		}
	}
	for _, k := range t.Reads {
		v, ok := f.data[k]
		res.Reads = append(res.Reads, kv.ReadValue{Value: v, Present: ok})
	}
	for i, c := range t.If {
		n, _ := strconv.ParseInt(string(f.data[c.Key]), 10, 64)
		if n < c.Num {
			res.Committed = false
			res.Failed = append(res.Failed, i)
		}
	}
	if !res.Committed {
		return res, nil
	}
	lowest := t.Shards(f.shards)[0]
	for _, w := range t.Then {
		if f.oneShard && transfer && kv.Shard(w.Key, f.shards) != lowest {
			continue
		}
		switch w.Kind {
		case kv.WritePut:
			f.data[w.Key] = w.Value
		case kv.WriteAdd:
			n, _ := strconv.ParseInt(string(f.data[w.Key]), 10, 64)
			f.data[w.Key] = strconv.AppendInt(nil, n+w.Delta, 10)
		}
	}
	if transfer && f.lostEvery > 0 && f.transfers%f.lostEvery == 0 {
		return kv.TxnResult{}, kv.ErrResultLost
	}
	return res, nil
}

// runBank runs a workload against f until it counted at least n answered
// transfers and n full-balance reads, then stops it and takes the final
// read.
// runBank runs the workload until n transfers ended and n full-balance
// reads were made, and until every extra condition holds.
func runBank(t *testing.T, f *fakeKV, cfg Config, n int, until ...func(Stats, Result) bool) (*Workload, Stats, Result) {
	t.Helper()
	cfg.Shards = f.shards
	w, err := New(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Init(ctx); err != nil {
		t.Fatal(err)
	}
	w.Start(ctx)
	for {
		s, r := w.Stats(), w.Checker().Result()
		done := s.Committed+s.Aborted+s.Unknown+r.Failed >= n && s.Reads >= n
		for _, u := range until {
			done = done && u(s, r)
		}
		if done {
			break
		}
		time.Sleep(time.Millisecond)
	}
	w.Stop()
	if err := w.FinalRead(ctx); err != nil {
		t.Fatal(err)
	}
	return w, w.Stats(), w.Checker().Result()
}

// TestBankPasses: against a correct executor the total never changes, and
// transfers both commit and abort (a source short of the amount).
func TestBankPasses(t *testing.T) {
	_, s, res := runBank(t, newFake(3), Config{Accounts: 9, Initial: 10, MaxAmount: 10, Seed: 1}, 300)
	if !res.OK() || res.Err() != nil {
		t.Fatalf("the checker failed a correct executor: %v", res.Err())
	}
	if s.Committed == 0 || s.Aborted == 0 || s.Unknown != 0 || s.Reads < 300 || !res.Final {
		t.Errorf("stats %+v, result %+v: want commits, aborts, no unknown outcome, 300 reads and the final one", s, res)
	}
	if s.P50 <= 0 || s.P99 < s.P50 || s.Max < s.P99 {
		t.Errorf("latencies p50 %v p99 %v max %v", s.P50, s.P99, s.Max)
	}
}

// TestBankCatchesOneShardWrites: an executor that applies a transfer's
// writes on one of its two shards only creates or destroys money, and
// the full-balance reads see it.
func TestBankCatchesOneShardWrites(t *testing.T) {
	f := newFake(3)
	f.oneShard = true
	// Until more reads failed than are kept: the readers may outrun the
	// transfers (a loaded machine), and the first reads see no transfer.
	_, s, res := runBank(t, f, Config{Accounts: 9, Seed: 2}, 50, func(_ Stats, r Result) bool { return r.Failed > maxViolations })
	if res.OK() || s.Committed == 0 {
		t.Fatalf("the checker passed an executor that writes on one shard only (%d transfers committed)", s.Committed)
	}
	err := res.Err()
	if err == nil || !strings.Contains(err.Error(), "want 9000") || !strings.Contains(err.Error(), "acct-") {
		t.Errorf("error %v: want the wrong total and the offending read's balances", err)
	}
	if len(res.Violations) != maxViolations || res.Failed <= maxViolations {
		t.Errorf("%d violations kept of %d: want the first %d", len(res.Violations), res.Failed, maxViolations)
	}
	if v := res.Violations[len(res.Violations)-1]; v.Read == 0 || v.Final {
		t.Errorf("violation %+v: want a numbered read during the workload", v)
	}
}

// TestBankUnknownOutcomes: transfers whose outcome is unknown, applied or
// not, are counted apart and leave the total alone.
func TestBankUnknownOutcomes(t *testing.T) {
	f := newFake(2)
	f.lostEvery, f.dropEvery = 5, 7
	_, s, res := runBank(t, f, Config{Accounts: 4, Seed: 3}, 200)
	if !res.OK() {
		t.Fatalf("unknown outcomes failed the check: %v", res.Err())
	}
	if s.Unknown == 0 || s.LastUnknown == nil || s.Committed == 0 {
		t.Errorf("stats %+v: want unknown outcomes counted", s)
	}
}

// TestBankDisagreement: a transfer whose shards disagree fails the check.
func TestBankDisagreement(t *testing.T) {
	f := newFake(2)
	f.disagree = true
	_, _, res := runBank(t, f, Config{Accounts: 4, Seed: 4}, 20)
	if err := res.Err(); err == nil || !strings.Contains(err.Error(), "disagree") {
		t.Fatalf("shards that disagree passed the check: %v", err)
	}
}

// TestCheckerReads: each way a read can be wrong is caught, and named.
func TestCheckerReads(t *testing.T) {
	accounts := []string{"a", "b", "c"}
	read := func(vals ...string) kv.TxnResult {
		var r kv.TxnResult
		for _, v := range vals {
			if v == "-" {
				r.Reads = append(r.Reads, kv.ReadValue{})
				continue
			}
			r.Reads = append(r.Reads, kv.ReadValue{Value: []byte(v), Present: true})
		}
		return r
	}
	for _, tc := range []struct {
		res  kv.TxnResult
		want string // "" passes
	}{
		{read("10", "20", "0"), ""},
		{read("10", "20", "1"), "total 31, want 30"},
		{read("10", "25", "-5"), "c is negative (-5)"},
		{read("10", "20", "-"), "c absent"},
		{read("10", "20", "x"), "c is not an integer"},
		{read("10", "20"), "2 values for 3 accounts"},
	} {
		c := NewChecker(accounts, 30)
		ok := c.Observe(tc.res, true)
		res := c.Result()
		if tc.want == "" {
			if !ok || !res.OK() || res.Err() != nil {
				t.Errorf("%+v: refused (%v)", tc.res.Reads, res.Err())
			}
			continue
		}
		if ok || res.OK() || res.Err() == nil || !strings.Contains(res.Err().Error(), tc.want) || !strings.Contains(res.Err().Error(), "final") {
			t.Errorf("%+v: %v, want an error with %q naming the final read", tc.res.Reads, res.Err(), tc.want)
		}
	}
	// Without a final read the run proves nothing about the end.
	c := NewChecker(accounts, 30)
	c.Observe(read("10", "20", "0"), false)
	if res := c.Result(); res.OK() || !errors.Is(res.Err(), ErrNoFinalRead) {
		t.Errorf("no final read: %v, want ErrNoFinalRead", res.Err())
	}
}

// TestLatencySampleBound drives the latency sample to its bound: it keeps
// that many, counts every one, and the maximum stays exact.
func TestLatencySampleBound(t *testing.T) {
	l := newLatencies(16, 1)
	for i := range 10000 {
		l.add(time.Duration(i+1) * time.Microsecond)
	}
	if len(l.sample) != 16 || cap(l.sample) > 32 || l.n != 10000 || l.top != 10000*time.Microsecond {
		t.Fatalf("sample %d (cap %d), n %d, max %v", len(l.sample), cap(l.sample), l.n, l.top)
	}
	// A uniform sample of 1..10000µs: not only the first 16 kept.
	if p50, _ := l.percentiles(); p50 <= 16*time.Microsecond {
		t.Errorf("p50 %v: the sample kept only the first latencies", p50)
	}
}

// TestAccountsSpread: accounts are spread evenly, each on its shard.
func TestAccountsSpread(t *testing.T) {
	names, by := Accounts(31, 3)
	if len(names) != 31 || len(by[0]) != 11 || len(by[1]) != 10 || len(by[2]) != 10 {
		t.Fatalf("%d accounts, per shard %d %d %d", len(names), len(by[0]), len(by[1]), len(by[2]))
	}
	seen := map[string]bool{}
	for g, ns := range by {
		for _, n := range ns {
			if int(kv.Shard(n, 3)) != g || seen[n] {
				t.Errorf("%s on shard %d (its shard is %d), seen before %v", n, g, kv.Shard(n, 3), seen[n])
			}
			seen[n] = true
		}
	}
}

func TestConfigChecked(t *testing.T) {
	for _, cfg := range []Config{
		{Shards: 1},
		{Shards: 3, Accounts: 5},
		{Shards: 3, Accounts: kv.MaxTxnOps + 1},
		{Shards: 2, Initial: -1},
		{Shards: 2, Initial: 1 << 60},
		{Shards: 2, Readers: -1},
	} {
		if _, err := New(newFake(2), cfg); err == nil {
			t.Errorf("New accepted %+v", cfg)
		}
	}
}
