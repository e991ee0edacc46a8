package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/internal/kvsim"
)

// weft sim sweep --service kv: the swarm sweep with weft-kv on the
// replicas (internal/kvsim). A flag of the sweep rather than a command of its
// own: the seeds, their configurations and faults, --jobs, the progress
// line, the failing seeds named at once and the exit status are the
// sweep's; the service adds its checks and its totals.

// kvSweep runs the kv sweep and prints its summary; it fails on a
// violation or, from sim.MinCoverageSeeds seeds on, a coverage gap.
func kvSweep(cmd *cobra.Command, protocol string, seeds int, start uint64, jobs int, format string) error {
	began := time.Now()
	pr := newProgress(cmd.ErrOrStderr(), seeds, began)
	agg := &kvsim.Summary{Protocol: protocol}
	label := "sweep kv on " + protocol
	eachSeed(seeds, start, jobs, func(seed uint64) *kvsim.SeedResult {
		return kvsim.RunSeed(protocol, seed)
	}, func(done int, r *kvsim.SeedResult) {
		agg.Add(r)
		pr.update(done, sweepStatus{label: label, violations: agg.Violations, failures: agg.Failures})
	})
	pr.done(sweepStatus{label: label, violations: agg.Violations, failures: agg.Failures})
	wall := time.Since(began)
	out := cmd.OutOrStdout()
	if format == outJSON {
		if err := printKVSweepJSON(out, agg, start, wall, jobs); err != nil {
			return err
		}
	} else {
		printKVSweep(out, agg, start, wall, jobs)
	}
	return kvSweepVerdict(agg)
}

func kvReplay(protocol string, seed uint64) string {
	return fmt.Sprintf("weft sim sweep --service kv --protocol %s --seeds 1 --seed-start %d", protocol, seed)
}

func printKVSweep(w io.Writer, agg *kvsim.Summary, start uint64, wall time.Duration, jobs int) {
	kv, b := &agg.KV, &agg.Bank
	fmt.Fprintf(w, "sweep kv on %s: seeds %d..%d (%d seeds, 2 runs each) in %.1fs, %.1f seeds/s on %d jobs\n",
		agg.Protocol, start, start+uint64(agg.Seeds)-1, agg.Seeds, wall.Seconds(), float64(agg.Seeds)/wall.Seconds(), jobs)
	fmt.Fprintf(w, "single-key      %d commands (get, put, delete, compare-and-set) on %d keys (about %d per key, so that they contend); %d state transfers\n",
		kv.Commands, kv.Keys, kvsim.OpsPerKey, kv.Installs)
	fmt.Fprintf(w, "linearizable    %d operations checked with porcupine, %d of unknown outcome (%d gets of unknown outcome left out); porcupine %.1fs in all, longest run %.2fs\n",
		kv.Checked, kv.Unknown, kv.UnknownGets, kv.CheckTime.Seconds(), kv.MaxCheckTime.Seconds())
	fmt.Fprintf(w, "bank            %d transfers committed, %d aborted; %d full-balance reads, each at the initial total; %d state transfers, %d more for votes no pull found\n",
		b.Committed, b.Aborted, b.FullReads, b.Installs, b.Fallbacks)
	fmt.Fprintf(w, "votes           %d sent, %d lost, %d pulled again\n", b.VotesSent, b.VotesLost, b.VotesPulled)
	if gaps := agg.CoverageGaps(); len(gaps) > 0 {
		fmt.Fprintf(w, "sweep INVALID: %s\n", strings.Join(gaps, ", "))
	}
	fmt.Fprintf(w, "violations      %d in %d seeds\n", agg.Violations, len(agg.Failures))
	printFailures(w, agg.Failures, func(seed uint64) string { return kvReplay(agg.Protocol, seed) })
}

type kvSweepJSON struct {
	Service string `json:"service"`
	sweepRunJSON
	Commands     int                `json:"single_key_commands"`
	Checked      int                `json:"linearizability_operations_checked"`
	Unknown      int                `json:"linearizability_unknown_outcome"`
	UnknownGets  int                `json:"linearizability_unknown_gets_left_out"`
	CheckSeconds float64            `json:"porcupine_seconds"`
	MaxCheck     float64            `json:"porcupine_longest_run_seconds"`
	KVInstalls   int                `json:"single_key_state_transfers"`
	Committed    int                `json:"transfers_committed"`
	Aborted      int                `json:"transfers_aborted"`
	FullReads    int                `json:"full_reads"`
	VotesSent    int                `json:"votes_sent"`
	VotesLost    int                `json:"votes_lost"`
	VotesPulled  int                `json:"votes_pulled"`
	BankInstalls int                `json:"bank_state_transfers"`
	Fallbacks    int                `json:"bank_state_transfers_for_votes"`
	Violations   int                `json:"violations"`
	Failures     []sweepFailureJSON `json:"failures"`
	CoverageGaps []string           `json:"coverage_gaps"`
	Valid        bool               `json:"valid"`
}

func printKVSweepJSON(w io.Writer, agg *kvsim.Summary, start uint64, wall time.Duration, jobs int) error {
	kv, b := &agg.KV, &agg.Bank
	out := kvSweepJSON{
		Service: "kv", sweepRunJSON: newSweepRunJSON(agg.Protocol, start, agg.Seeds, wall, jobs),
		Commands: kv.Commands, Checked: kv.Checked, Unknown: kv.Unknown, UnknownGets: kv.UnknownGets,
		CheckSeconds: kv.CheckTime.Seconds(), MaxCheck: kv.MaxCheckTime.Seconds(), KVInstalls: kv.Installs,
		Committed: b.Committed, Aborted: b.Aborted, FullReads: b.FullReads,
		VotesSent: b.VotesSent, VotesLost: b.VotesLost, VotesPulled: b.VotesPulled, BankInstalls: b.Installs, Fallbacks: b.Fallbacks,
		Violations: agg.Violations, Failures: []sweepFailureJSON{}, CoverageGaps: agg.CoverageGaps(),
	}
	if out.CoverageGaps == nil {
		out.CoverageGaps = []string{}
	}
	out.Valid = len(out.CoverageGaps) == 0 && agg.Violations == 0
	for _, f := range agg.Failures {
		out.Failures = append(out.Failures, sweepFailureJSON{Seed: f.Seed, Detail: f.Detail, Replay: kvReplay(agg.Protocol, f.Seed)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// kvSweepVerdict is the kv sweep's exit status.
func kvSweepVerdict(agg *kvsim.Summary) error {
	return verdict(agg.Violations, agg.Failures, agg.CoverageGaps(), func(seed uint64) string { return kvReplay(agg.Protocol, seed) })
}
