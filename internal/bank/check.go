package bank

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/wire"
)

// maxViolations bounds the violations a Checker keeps (it counts the
// rest): the first ones say what broke, and a broken executor would
// otherwise fill memory with thousands of alike reads.
const maxViolations = 8

// Checker checks full-balance reads: each must see every account, each
// balance a non-negative decimal integer, and their sum the initial
// total. Transfers move money and never create or destroy it, and a
// transfer's debit and credit are one transaction, so a consistent cut of
// the accounts always holds the initial total: a read that sees another
// total saw one half of a transfer without the other (a broken executor,
// or reads that are not a consistent cut). It also records the transfers
// whose shards disagreed on the outcome. It is safe for concurrent use.
type Checker struct {
	accounts []string
	want     int64

	mu         sync.Mutex
	reads      int
	final      bool // a final read was observed and passed
	bad        int  // failed reads and disagreements
	violations []Violation
}

// Violation is one failed observation.
type Violation struct {
	// Read numbers the full-balance read among those observed (from 1); 0
	// for a transfer whose shards disagreed.
	Read  int
	Final bool // the final read, after the workload
	GTS   wire.Timestamp
	// Total is the sum the read saw (of the balances it could parse).
	Total    int64
	Problem  string
	Balances string // "acct-000=1000 acct-003=950 ..."
}

func (v Violation) String() string {
	if v.Read == 0 {
		return v.Problem
	}
	which := fmt.Sprintf("full-balance read %d", v.Read)
	if v.Final {
		which = "the final full-balance read"
	}
	return fmt.Sprintf("%s (gts %s): %s; it saw %s", which, v.GTS, v.Problem, v.Balances)
}

// NewChecker returns a checker of reads of accounts (in the order the
// reads list them) whose balances must sum to total.
func NewChecker(accounts []string, total int64) *Checker {
	return &Checker{accounts: accounts, want: total}
}

// Observe checks the result of a full-balance read (kv.Txn{Reads:
// accounts}); final marks the read taken after the workload. It reports
// whether the read passed.
func (c *Checker) Observe(res kv.TxnResult, final bool) bool {
	problem, total, balances := c.judge(res)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	if problem == "" {
		if final {
			c.final = true
		}
		return true
	}
	c.record(Violation{Read: c.reads, Final: final, GTS: res.GTS, Total: total, Problem: problem, Balances: balances})
	return false
}

// Disagreed records a transfer the shards answered differently
// (kv.ErrShardsDisagree: one committed it, another aborted it).
func (c *Checker) Disagreed(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.record(Violation{Problem: "a transfer's shards disagree on its outcome: " + err.Error()})
}

func (c *Checker) record(v Violation) {
	c.bad++
	if len(c.violations) < maxViolations {
		c.violations = append(c.violations, v)
	}
}

// judge returns what is wrong with a read ("" if nothing), the total it
// saw and its balances, printed.
func (c *Checker) judge(res kv.TxnResult) (problem string, total int64, balances string) {
	if len(res.Reads) != len(c.accounts) {
		return fmt.Sprintf("%d values for %d accounts", len(res.Reads), len(c.accounts)), 0, ""
	}
	var sb strings.Builder
	var problems []string
	for i, rd := range res.Reads {
		if i > 0 {
			sb.WriteByte(' ')
		}
		name := c.accounts[i]
		if !rd.Present {
			fmt.Fprintf(&sb, "%s=absent", name)
			problems = append(problems, name+" absent")
			continue
		}
		fmt.Fprintf(&sb, "%s=%.20s", name, rd.Value)
		n, err := strconv.ParseInt(string(rd.Value), 10, 64)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s is not an integer (%.20q)", name, rd.Value))
			continue
		case n < 0:
			problems = append(problems, fmt.Sprintf("%s is negative (%d)", name, n))
		}
		total += n // a negative balance counts: the total may still be right
	}
	if total != c.want {
		problems = append([]string{fmt.Sprintf("total %d, want %d", total, c.want)}, problems...)
	}
	return strings.Join(problems, ", "), total, sb.String()
}

// Result is a Checker's verdict.
type Result struct {
	// Reads is the number of full-balance reads observed, the final one
	// included.
	Reads int
	// Final: a final read (after the workload) was observed and passed.
	Final bool
	// Failed is the number of failed observations; Violations the first
	// of them (at most 8).
	Failed     int
	Violations []Violation
}

// ErrNoFinalRead: the run ended without a passing final read, so nothing
// says the total survived the faults.
var ErrNoFinalRead = errors.New("bank: no final full-balance read")

// OK reports whether every observation passed and the final read was
// taken.
func (r Result) OK() bool { return r.Failed == 0 && r.Final }

// Err returns nil if r is OK, else an error naming the first violation.
func (r Result) Err() error {
	switch {
	case r.Failed > 0:
		return fmt.Errorf("bank: %d failed observations (%d full-balance reads); the first: %s", r.Failed, r.Reads, r.Violations[0])
	case !r.Final:
		return ErrNoFinalRead
	}
	return nil
}

// Result returns the verdict so far.
func (c *Checker) Result() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Result{Reads: c.reads, Final: c.final, Failed: c.bad, Violations: append([]Violation(nil), c.violations...)}
}
