package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/sim"
)

func simSweepCmd() *cobra.Command {
	var (
		protocol, format, service string
		seeds, jobs               int
		start                     uint64
		forged, checkRestore      bool
		gc                        gcFlags
	)
	c := &cobra.Command{
		Use:   "sweep",
		Short: "Swarm-test a protocol over many seeds with crashes, partitions, resets and delay spikes",
		Long: `Run one swarm simulation per seed (TigerBeetle VOPR style): each seed draws
its shape, workload, delay model and fault profile, runs a fault phase until
GST, then a liveness phase (everything heals, crashed replicas restart except
up to f per group) until convergence or the horizon, and checks the history:
validity, integrity across restarts, order, gts, agreement, termination by a
quorum of every destination group, and termination at every replica up at the
end.

Progress goes to stderr; the summary to stdout. Exits non-zero, naming the
failing seeds and the command that replays one, on any violation or panic
inside a protocol, and, from 20 seeds on, when the sweep never reached a
leader change, a recovery while a message was ACCEPTED, a multicast to
2 or more groups, or (WbCast) a SNAPSHOT installed and a rejoin after a
disk loss (the sweep is then INVALID: its faults tested nothing).

--service kv runs weft-kv on every replica instead, two runs per seed
(package internal/kvsim): single-key commands on hot keys, whose clients' history
porcupine checks for linearizability, and the bank (transfers between
accounts on different shards, full-balance reads); each run also checks
the protocol's history as above, and that the replicas of every shard
applied the same commands with the same results and end in the same state.
From 20 seeds on, a kv sweep whose runs never had an operation of unknown
outcome, a state transfer, a commit, an abort, a full read or a vote lost
and pulled is INVALID.

WbCast collects what a quorum of each group delivered (--gc quorum, the
default; the swarm then counts members behind their group's floor against
its failure budget, sim/budget.go); --gc all makes it wait for every member.

--check-restore (WbCast) also checks, after every Ready of every replica,
that a replica restored from what it persisted agrees with the live one,
and that the durable image the live one keeps itself (what a node compacts
its log to) equals the store its records built (sim.Config.CheckRestore;
a run costs several times more).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seeds < 1 {
				return fmt.Errorf("--seeds must be positive")
			}
			if _, err := sim.LookupProtocol(protocol); err != nil {
				return err
			}
			if jobs < 1 {
				jobs = runtime.GOMAXPROCS(0)
			}
			switch {
			case service == "kv" && (forged || checkRestore || cmd.Flags().Changed("gc") || gc.quorumGC):
				return fmt.Errorf("--service kv: --forged-clients, --check-restore and --gc apply to the protocol's own sweep only")
			case checkRestore && protocol != "wbcast":
				return fmt.Errorf("--check-restore: only wbcast defines what a restored replica must agree on")
			case service == "kv":
				return kvSweep(cmd, protocol, seeds, start, jobs, format)
			case service != "":
				return fmt.Errorf("--service %q: want kv (or none: the protocol alone)", service)
			}
			began := time.Now()
			pr := newProgress(cmd.ErrOrStderr(), seeds, began)
			all, err := gc.all(cmd, protocol)
			if err != nil {
				return err
			}
			tw := sweepTweaks{forged: forged, gcAll: all, checkRestore: checkRestore}
			agg := runSweep(protocol, seeds, start, jobs, tw, pr.update)
			pr.done(sweepStatus{label: "sweep " + protocol, violations: agg.Violations, failures: agg.Failures})
			wall := time.Since(began)
			out := cmd.OutOrStdout()
			if format == "json" {
				if err := printSweepJSON(out, agg, start, wall, jobs, tw); err != nil {
					return err
				}
			} else {
				printSweep(out, agg, start, wall, jobs, tw)
			}
			return sweepVerdict(agg, tw)
		},
	}
	f := c.Flags()
	f.StringVar(&protocol, "protocol", "wbcast", "protocol: skeen|wbcast")
	f.IntVar(&seeds, "seeds", 100, "number of seeds")
	f.Uint64Var(&start, "seed-start", 1, "first seed")
	addOutput(c, &format, "format")
	f.IntVar(&jobs, "jobs", 0, "seeds run in parallel (default GOMAXPROCS)")
	f.StringVar(&service, "service", "", "run a replicated service on the replicas and check it: kv (weft-kv: single-key linearizability with porcupine, and the bank)")
	f.BoolVar(&forged, "forged-clients", false, "an adversary forges the genuine clients' ids to every replica during the fault phase")
	f.BoolVar(&checkRestore, "check-restore", false, "wbcast: after every Ready, check a replica restored from its records and its own durable image against the live one (slower)")
	addGCFlags(c, &gc)
	return c
}

// sweepTweaks change every seed's configuration.
type sweepTweaks struct {
	forged, gcAll, checkRestore bool
}

// runSweep runs the seeds on jobs workers and aggregates the results (the
// aggregate does not depend on the order they finish in).
func runSweep(protocol string, seeds int, start uint64, jobs int, tw sweepTweaks, progress func(int, sweepStatus)) *sim.SweepSummary {
	agg := &sim.SweepSummary{Protocol: protocol}
	eachSeed(seeds, start, jobs, func(seed uint64) *sim.SweepResult {
		cfg := sim.SwarmConfig(protocol, seed)
		if tw.forged {
			sim.ForgedClients(&cfg)
		}
		if tw.gcAll {
			cfg.Spec = collectAllSpec()
		}
		if tw.checkRestore {
			// It compares the durable store with the replica after every
			// Ready, which pipelined storage leaves behind.
			cfg.CheckRestore, cfg.Pipeline = true, false
		}
		return sim.RunSwarmConfig(cfg)
	}, func(done int, r *sim.SweepResult) {
		agg.Add(r)
		progress(done, sweepStatus{label: "sweep " + protocol, violations: agg.Violations, failures: agg.Failures})
	})
	return agg
}

// eachSeed runs seed start, start+1, ... (seeds of them) on jobs workers,
// handing each result to add, with the count done, on the caller's
// goroutine.
func eachSeed[R any](seeds int, start uint64, jobs int, run func(seed uint64) R, add func(done int, r R)) {
	next := make(chan uint64)
	results := make(chan R)
	for range min(jobs, seeds) {
		go func() {
			for seed := range next {
				results <- run(seed)
			}
		}()
	}
	go func() {
		for i := range seeds {
			next <- start + uint64(i)
		}
		close(next)
	}()
	for i := range seeds {
		add(i+1, <-results)
	}
}

// sweepStatus is what the progress line shows of a sweep.
type sweepStatus struct {
	label      string // "sweep wbcast"
	violations int
	failures   []sim.SweepFailure // in seed order
}

// progress reports a sweep's progress on stderr: a line rewritten with \r
// on a terminal, a plain line every few seconds otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	total int
	began time.Time
	last  time.Time
	wrote bool
	every time.Duration
	named map[uint64]bool // failing seeds already named
}

func newProgress(w io.Writer, total int, began time.Time) *progress {
	p := &progress{w: w, total: total, began: began, last: began, every: 5 * time.Second}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty, p.every = true, 200*time.Millisecond
		}
	}
	return p
}

func (p *progress) line(done int, st sweepStatus) string {
	el := time.Since(p.began).Seconds()
	return fmt.Sprintf("%s: %d/%d seeds, %d violations in %d seeds, %.1f seeds/s",
		st.label, done, p.total, st.violations, len(st.failures), float64(done)/max(el, 1e-9))
}

func (p *progress) update(done int, st sweepStatus) {
	// A failing seed is named at once (a long sweep may be stopped before
	// its summary): the failures are kept in seed order, so look for the
	// ones not named yet.
	for _, f := range st.failures {
		if !p.named[f.Seed] {
			if p.named == nil {
				p.named = map[uint64]bool{}
			}
			p.named[f.Seed] = true
			if p.tty && p.wrote {
				fmt.Fprint(p.w, "\r\x1b[K")
			}
			fmt.Fprintf(p.w, "seed %d fails: %s\n", f.Seed, strings.SplitN(f.Detail, "\n", 2)[0])
		}
	}
	now := time.Now()
	if now.Sub(p.last) < p.every && done < p.total {
		return
	}
	p.last = now
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", p.line(done, st))
		p.wrote = true
		return
	}
	if done < p.total {
		fmt.Fprintln(p.w, p.line(done, st))
	}
}

func (p *progress) done(st sweepStatus) {
	if p.tty {
		if p.wrote {
			fmt.Fprintln(p.w)
		}
		return
	}
	fmt.Fprintln(p.w, p.line(p.total, st))
}

// replayCommand replays one failing seed: with the sweep's tweaks (which
// weft sim run does not take), as a one-seed sweep.
func replayCommand(protocol string, seed uint64, tw sweepTweaks) string {
	if tw.forged || tw.gcAll || tw.checkRestore {
		flags := ""
		if tw.forged {
			flags += " --forged-clients"
		}
		if tw.gcAll {
			flags += " --gc all"
		}
		if tw.checkRestore {
			flags += " --check-restore"
		}
		return fmt.Sprintf("weft sim sweep --protocol %s --seeds 1 --seed-start %d%s", protocol, seed, flags)
	}
	return fmt.Sprintf("weft sim run --protocol %s --faults swarm --seed %d --history seed%d.jsonl", protocol, seed, seed)
}

func printSweep(w io.Writer, agg *sim.SweepSummary, start uint64, wall time.Duration, jobs int, tw sweepTweaks) {
	D := float64(max(agg.Delta, 1))
	fmt.Fprintf(w, "sweep %s: seeds %d..%d (%d seeds) in %.1fs, %.1f seeds/s on %d jobs\n",
		agg.Protocol, start, start+uint64(agg.Seeds)-1, agg.Seeds, wall.Seconds(), float64(agg.Seeds)/wall.Seconds(), jobs)
	fmt.Fprintf(w, "simulated time     %.0fδ (%.0fδ per seed)\n", float64(agg.SimTime)/D, float64(agg.SimTime)/D/float64(max(agg.Seeds, 1)))
	fmt.Fprintf(w, "multicasts         %d (%d to 2+ groups)  deliveries %d  protocol messages %d (%d lost to faults)\n",
		agg.Multicasts, agg.MultiGroup, agg.Deliveries, agg.Messages, agg.Lost)
	fmt.Fprintf(w, "faults             %s\n", agg.Faults)
	cv := agg.Coverage
	fmt.Fprintf(w, "leader changes     %d, in %d of %d groups  (protocol coverage: ballots %d, recoveries %d, %d while a message was ACCEPTED, retried %d, re-multicasts %d, catch-ups %d, collected %d)\n",
		agg.LeaderChanges, agg.GroupsWithLeaderChange, agg.Groups, cv.BallotsStarted, cv.LeaderChanges, cv.RecoveriesWithAccepted, cv.Retried, cv.Remulticasts, cv.CatchUps, cv.Collected)
	l := agg.GSTLatency()
	fmt.Fprintf(w, "GST→last delivery  p50 %.1fδ  p99 %.1fδ  max %.1fδ\n", l.P50, l.P99, l.Max)
	fmt.Fprintf(w, "converged          %d of %d seeds before the horizon\n", agg.Converged, agg.Seeds)
	fmt.Fprintf(w, "coverage facts     leader changes %d, recoveries while ACCEPTED %d, multicasts to 2+ groups %d\n",
		agg.LeaderChanges, cv.RecoveriesWithAccepted, agg.MultiGroup)
	fmt.Fprintf(w, "state transfer     snapshots sent %d, installed %d; rejoins after a disk loss %d; candidates behind the floor that gave up %d\n",
		cv.Snapshots, cv.Installs, cv.Rejoins, cv.BallotsAbandoned)
	fmt.Fprintf(w, "hand-overs         %d leaders asked to hand over (planned departures), %d ballots started on request\n",
		agg.Faults.HandOvers, cv.HandOvers)
	if gaps := agg.CoverageGaps(); len(gaps) > 0 {
		fmt.Fprintf(w, "sweep INVALID: %s\n", strings.Join(gaps, ", "))
	} else if agg.Seeds < sim.MinCoverageSeeds {
		fmt.Fprintf(w, "(coverage facts are required from %d seeds on)\n", sim.MinCoverageSeeds)
	}
	fmt.Fprintf(w, "violations         %d in %d seeds\n", agg.Violations, len(agg.Failures))
	printFailures(w, agg.Failures, func(seed uint64) string { return replayCommand(agg.Protocol, seed, tw) })
}

// printFailures lists the first failing seeds with how to replay each.
func printFailures(w io.Writer, failures []sim.SweepFailure, replay func(seed uint64) string) {
	const show = 10
	for i, f := range failures {
		if i == show {
			fmt.Fprintf(w, "... %d more failing seeds\n", len(failures)-show)
			break
		}
		detail, _, _ := strings.Cut(f.Detail, "\n")
		fmt.Fprintf(w, "seed %d: %s\n  replay: %s\n", f.Seed, detail, replay(f.Seed))
	}
}

// sweepRunJSON opens every sweep's JSON summary: what ran, how fast.
type sweepRunJSON struct {
	Protocol       string  `json:"protocol"`
	SeedStart      uint64  `json:"seed_start"`
	Seeds          int     `json:"seeds"`
	WallSeconds    float64 `json:"wall_seconds"`
	SeedsPerSecond float64 `json:"seeds_per_second"`
	Jobs           int     `json:"jobs"`
}

func newSweepRunJSON(protocol string, start uint64, seeds int, wall time.Duration, jobs int) sweepRunJSON {
	return sweepRunJSON{Protocol: protocol, SeedStart: start, Seeds: seeds, WallSeconds: wall.Seconds(),
		SeedsPerSecond: float64(seeds) / wall.Seconds(), Jobs: jobs}
}

type sweepJSON struct {
	sweepRunJSON
	SimulatedDelta         float64            `json:"simulated_delta"`
	Multicasts             int                `json:"multicasts"`
	MultiGroup             int                `json:"multicasts_2plus_groups"`
	Deliveries             int                `json:"deliveries"`
	Messages               int                `json:"messages"`
	Lost                   int                `json:"messages_lost"`
	Faults                 sim.FaultStats     `json:"faults"`
	LeaderChanges          int                `json:"leader_changes"`
	Groups                 int                `json:"groups"`
	GroupsWithLeaderChange int                `json:"groups_with_leader_change"`
	Coverage               amcast.Coverage    `json:"coverage"`
	GSTToLast              sim.LatencySummary `json:"gst_to_last_delivery_delta"`
	Converged              int                `json:"converged"`
	Violations             int                `json:"violations"`
	Failures               []sweepFailureJSON `json:"failures"`
	CoverageGaps           []string           `json:"coverage_gaps"`
	Valid                  bool               `json:"valid"`
}

type sweepFailureJSON struct {
	Seed   uint64 `json:"seed"`
	Detail string `json:"detail"`
	Replay string `json:"replay"`
}

func printSweepJSON(w io.Writer, agg *sim.SweepSummary, start uint64, wall time.Duration, jobs int, tw sweepTweaks) error {
	gaps := agg.CoverageGaps()
	out := sweepJSON{
		sweepRunJSON:   newSweepRunJSON(agg.Protocol, start, agg.Seeds, wall, jobs),
		SimulatedDelta: float64(agg.SimTime) / float64(max(agg.Delta, 1)),
		Multicasts:     agg.Multicasts, MultiGroup: agg.MultiGroup, Deliveries: agg.Deliveries,
		Messages: agg.Messages, Lost: agg.Lost, Faults: agg.Faults, LeaderChanges: agg.LeaderChanges,
		Groups: agg.Groups, GroupsWithLeaderChange: agg.GroupsWithLeaderChange,
		Coverage: agg.Coverage, GSTToLast: agg.GSTLatency(), Converged: agg.Converged,
		Violations: agg.Violations, Failures: []sweepFailureJSON{}, CoverageGaps: gaps,
		Valid: len(gaps) == 0 && agg.Violations == 0,
	}
	if out.CoverageGaps == nil {
		out.CoverageGaps = []string{}
	}
	for _, f := range agg.Failures {
		out.Failures = append(out.Failures, sweepFailureJSON{Seed: f.Seed, Detail: f.Detail, Replay: replayCommand(agg.Protocol, f.Seed, tw)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// sweepVerdict is the sweep's exit status: an error naming the failing
// seeds and how to replay them, or the missing coverage facts.
func sweepVerdict(agg *sim.SweepSummary, tw sweepTweaks) error {
	return verdict(agg.Violations, agg.Failures, agg.CoverageGaps(), func(seed uint64) string { return replayCommand(agg.Protocol, seed, tw) })
}

// verdict is a sweep's exit status from its violations, failing seeds (in
// seed order), how to replay one, and its coverage gaps.
func verdict(violations int, failures []sim.SweepFailure, gaps []string, replay func(seed uint64) string) error {
	var msgs []string
	if n := len(failures); n > 0 {
		var ids []string
		for i, f := range failures {
			if i == 10 {
				ids = append(ids, fmt.Sprintf("... (%d in all)", n))
				break
			}
			ids = append(ids, fmt.Sprint(f.Seed))
		}
		msgs = append(msgs, fmt.Sprintf("%d violations in %d seeds: failing seeds %s; replay one with: %s",
			violations, n, strings.Join(ids, " "), replay(failures[0].Seed)))
	}
	if len(gaps) > 0 {
		msgs = append(msgs, "sweep INVALID (coverage facts not reached): "+strings.Join(gaps, ", "))
	}
	if len(msgs) > 0 {
		return fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	return nil
}
