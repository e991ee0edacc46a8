package kvsim

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/weft-dev/weft/sim"
)

// SeedResult is the outcome of both workloads on one swarm seed.
type SeedResult struct {
	Seed    uint64
	KV      KVFigures
	Bank    BankFigures
	KVErr   error // RunKV's
	BankErr error // RunBank's
}

// Failed reports whether either workload failed.
func (r *SeedResult) Failed() bool { return r.KVErr != nil || r.BankErr != nil }

// Detail describes what failed ("" if nothing did).
func (r *SeedResult) Detail() string {
	switch {
	case r.KVErr != nil && r.BankErr != nil:
		return fmt.Sprintf("single-key: %v; bank: %v", r.KVErr, r.BankErr)
	case r.KVErr != nil:
		return fmt.Sprintf("single-key: %v", r.KVErr)
	case r.BankErr != nil:
		return fmt.Sprintf("bank: %v", r.BankErr)
	}
	return ""
}

// RunSeed runs both workloads on the swarm configuration of protocol and
// seed (sim.SwarmConfig): RunKV, then RunBank, each on its own run. It
// never panics: a panic in either becomes its error.
func RunSeed(protocol string, seed uint64) *SeedResult {
	r := &SeedResult{Seed: seed}
	r.KV, r.KVErr = guard(func() (KVFigures, error) { return RunKV(sim.SwarmConfig(protocol, seed), KVOptions{}) })
	r.Bank, r.BankErr = guard(func() (BankFigures, error) { return RunBank(sim.SwarmConfig(protocol, seed), BankOptions{}) })
	return r
}

// guard runs f, turning a panic (in the harness or the store; the
// simulator already turns the protocols' into errors) into an error.
func guard[F any](f func() (F, error)) (fig F, err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("panic: %v", x)
		}
	}()
	return f()
}

// Summary adds up the seeds of a sweep.
type Summary struct {
	Protocol string
	Seeds    int
	KV       KVFigures
	Bank     BankFigures
	// Violations counts the failed workloads (up to 2 per seed); Failures
	// lists the failing seeds in seed order (Detail: what failed,
	// single-key or bank or both).
	Violations int
	Failures   []sim.SweepFailure
}

// Add accumulates one seed's result (in any order: the failures are
// kept in seed order).
func (s *Summary) Add(r *SeedResult) {
	s.Seeds++
	s.KV.Add(r.KV)
	s.Bank.Add(r.Bank)
	if !r.Failed() {
		return
	}
	for _, err := range []error{r.KVErr, r.BankErr} {
		if err != nil {
			s.Violations++
		}
	}
	i, _ := slices.BinarySearchFunc(s.Failures, r.Seed, func(f sim.SweepFailure, seed uint64) int { return cmp.Compare(f.Seed, seed) })
	s.Failures = slices.Insert(s.Failures, i, sim.SweepFailure{Seed: r.Seed, Detail: r.Detail()})
}

// CoverageGaps lists what a sweep of at least sim.MinCoverageSeeds seeds
// failed to exercise (then its checks tested little and the sweep is
// invalid): single-key operations checked, some of unknown outcome, and
// a state transfer in the single-key runs; transfers committed and
// aborted, full reads, votes lost and pulled in the bank's. Smaller
// sweeps report none.
func (s *Summary) CoverageGaps() []string {
	if s.Seeds < sim.MinCoverageSeeds {
		return nil
	}
	var gaps []string
	for _, c := range []struct {
		n    int
		what string
	}{
		{s.KV.Checked, "no single-key operation checked"},
		{s.KV.Unknown, "no single-key operation of unknown outcome"},
		{s.KV.Installs, "no state transfer in the single-key runs"},
		{s.Bank.Committed, "no transfer committed"},
		{s.Bank.Aborted, "no transfer aborted"},
		{s.Bank.FullReads, "no full read"},
		{s.Bank.VotesLost, "no vote lost"},
		{s.Bank.VotesPulled, "no vote pulled"},
	} {
		if c.n == 0 {
			gaps = append(gaps, c.what)
		}
	}
	return gaps
}
