package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/weft-dev/weft/internal/bank"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/kv"
)

func TestOptionsAreChecked(t *testing.T) {
	for _, opt := range []Options{
		{Exe: "x", Duration: time.Second},
		{Exe: "x", Groups: 9, Replicas: 9},
		{Exe: "x", Clients: -1},
		{Exe: "x", KillGroup: 3},
		{Exe: "x", Workload: "bank"},
		{Exe: "x", Groups: 1},                  // kv: transfers need 2 shards
		{Exe: "x", Accounts: 5},                // kv: 2 per shard
		{Exe: "x", Accounts: kv.MaxTxnOps + 1}, // kv: one read reads them all
		{Exe: "x", Service: "none"},            // kv needs service kv
		{Exe: "x", KVWorkers: -1},              // kv
		{Exe: "x", Workload: WorkloadMulticast, Groups: 9, Replicas: 9},
	} {
		// defaults is Run's check (Run itself would fail later on the
		// missing binary "x", whatever the options).
		if err := opt.defaults(); err == nil {
			t.Errorf("Run(%+v) accepts bad options", opt)
		}
	}
	// The multicast demo still runs on one group, and any service.
	opt := Options{Exe: "x", Workload: WorkloadMulticast, Groups: 1}
	if err := opt.defaults(); err != nil || opt.Service != "" {
		t.Errorf("multicast on 1 group: %v (service %q)", err, opt.Service)
	}
	opt = Options{Exe: "x"}
	if err := opt.defaults(); err != nil || opt.Workload != WorkloadKV || opt.Service != "kv" || opt.Accounts != bank.DefaultAccounts {
		t.Errorf("defaults: %v, workload %q, service %q, %d accounts: want kv, kv, %d", err, opt.Workload, opt.Service, opt.Accounts, bank.DefaultAccounts)
	}
}

func TestFormatting(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{0: "-", 500 * time.Microsecond: "500µs", 7250 * time.Microsecond: "7.2ms",
		42 * time.Millisecond: "42ms", 1500 * time.Millisecond: "1.50s"} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
	lat := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if pct(lat, 0.5) != 6 || pct(lat, 0.99) != 10 || pct(nil, 0.5) != 0 {
		t.Errorf("pct: %v %v", pct(lat, 0.5), pct(lat, 0.99))
	}
}

// TestDemoSummaryVerdicts: the kv summary says PASS only for a run whose
// checks passed, and names the offending read when the total changed.
func TestDemoSummaryVerdicts(t *testing.T) {
	accounts := []string{"acct-000", "acct-001"}
	read := func(a, b string) kv.TxnResult {
		return kv.TxnResult{Reads: []kv.ReadValue{{Value: []byte(a), Present: true}, {Value: []byte(b), Present: true}}}
	}
	good := bank.NewChecker(accounts, 200)
	good.Observe(read("150", "50"), false)
	good.Observe(read("100", "100"), true)
	bad := bank.NewChecker(accounts, 200)
	bad.Observe(read("150", "40"), false)
	bad.Observe(read("100", "100"), true)
	noFinal := bank.NewChecker(accounts, 200)
	noFinal.Observe(read("100", "100"), false)
	for _, tc := range []struct {
		name    string
		balance bank.Result
		lin     porcupine.CheckResult
		want    []string
	}{
		{"pass", good.Result(), porcupine.Ok, []string{"total balance constant: PASS (2 full-balance reads", "linearizable: PASS (porcupine: Ok", "check       PASS"}},
		{"wrong total", bad.Result(), porcupine.Ok, []string{"total balance constant: FAIL", "full-balance read 1 (gts", "total 190, want 200", "acct-000=150 acct-001=40", "linearizable: PASS"}},
		{"no final read", noFinal.Result(), porcupine.Ok, []string{"total balance constant: FAIL: no final full-balance read"}},
		{"not linearizable", good.Result(), porcupine.Illegal, []string{"total balance constant: PASS", "linearizable: FAIL (porcupine: Illegal"}},
	} {
		var out bytes.Buffer
		r := &run{opt: Options{Out: &out, Groups: 2, Replicas: 3, Duration: 10 * time.Second, Workload: WorkloadKV}}
		s := &Summary{KilledGroup: -1, Report: &check.Report{}, KV: &KVSummary{Shards: 2, Accounts: 2, Total: 200,
			Bank: bank.Stats{Committed: 10, Aborted: 2, Reads: tc.balance.Reads}, Balance: tc.balance, Linearizable: tc.lin, Ops: 7, Keys: 4}}
		r.printSummary(s)
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: the summary lacks %q:\n%s", tc.name, w, out.String())
			}
		}
	}
}

// TestDemoKV runs the demo as weft demo does by default, shorter: weft-kv
// on 3 shards x 3 agent processes, the bank and the single-key workers,
// g0's leader SIGKILLed and restarted; every check must pass, with work
// done in each.
func TestDemoKV(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: skipped with -short")
	}
	var out bytes.Buffer
	sum, err := Run(context.Background(), Options{Exe: weftBinary(t), Duration: 6 * time.Second, Clients: 8, Out: &out})
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	ks := sum.KV
	if ks == nil {
		t.Fatal("no kv summary")
	}
	switch {
	case !ks.Balance.OK() || !ks.Balance.Final || ks.Balance.Reads == 0:
		t.Errorf("balance: %+v", ks.Balance)
	case ks.Bank.Committed == 0:
		t.Errorf("no transfer committed: %+v", ks.Bank)
	case ks.Linearizable != porcupine.Ok || ks.Ops == 0:
		t.Errorf("linearizable: %v over %d operations", ks.Linearizable, ks.Ops)
	case sum.ElectedAfter == 0 || sum.DeliveringAfter == 0 || sum.RejoinedAfter == 0:
		t.Errorf("failover: elected after %v, writes resumed after %v, rejoined after %v", sum.ElectedAfter, sum.DeliveringAfter, sum.RejoinedAfter)
	case !sum.Report.OK() || sum.Multicasts == 0:
		t.Errorf("delivery check: %s over %d multicasts", sum.Report.Error(), sum.Multicasts)
	}
	for _, want := range []string{"txns ", "writes resumed after", "rejoined after", "total balance constant: PASS", "linearizable: PASS", "check       PASS", "0 violations"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}
