package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/sim/gossipsim"
)

func simGossipCmd() *cobra.Command {
	var (
		mode, format, profile       string
		nodes, runs, window, warmup int
		maxRounds, seeds            int
		seed                        uint64
		gcPercent                   int
		simulateTail, leave         bool
		groupSize                   int
		loss                        float64
		jitter                      time.Duration
	)
	c := &cobra.Command{
		Use:   "gossip",
		Short: "Measure gossip dissemination: idealised push/pull/push-pull, or the real membership core",
		Long: `Idealised modes (push, pull, pushpull) run the gossip seed document's model:
one informed node at round 0; each synchronous round every node contacts one
uniformly random other node; push informs the target, pull informs the
caller, push-pull both. They report the rounds until every node knows.

Full mode runs membership.Node for every node on virtual time, each message
encoded and decoded by the membership codec. Every node starts from the
converged view (Node.Preload), gossips for --warmup rounds, then one node sets
a new LOAD value just before its tick while another (not a seed) crashes at
the same instant. It reports the rounds until every live node holds the
value, the bytes sent per node per round, and the time until every live node
has convicted the crashed one (phi). Once every live node holds the crashed
node's last heartbeat its windows are frozen, and each node's conviction is
computed from its detector (the first of its ticks at which phi exceeds the
threshold) instead of simulating the ~35 more rounds: the times are the same
(--simulate-tail simulates them). --loss drops each message with that
probability and --jitter adds a uniform 0..jitter to each message's 1-5 ms
delay; --leave replaces the crash by a planned departure (Node.Leave) and
reports how long until every node marked it departed. With the lan
profile each node probes the other members of its group (--group-size
consecutive ids) directly and publishes its verdicts; the run then
simulates until the last conviction. Full mode holds N² endpoint records: about
64 bytes each with the default window (6.6 GB at 10,000 nodes).

The same seed gives the same output.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := gossipsim.ParseMode(mode)
			if err != nil {
				return err
			}
			start := time.Now()
			var res *gossipsim.Result
			if m != gossipsim.Full {
				res, err = gossipsim.RunIdeal(m, nodes, runs, seed)
				if err != nil {
					return err
				}
			} else {
				if !cmd.Flags().Changed("runs") {
					runs = 1
				}
				var p membership.Config
				switch profile {
				case "cassandra":
					p = membership.Cassandra()
				case "lan":
					p = membership.LAN()
				case "local":
					p = membership.Local()
				default:
					return fmt.Errorf("--profile %q: want cassandra, lan or local", profile)
				}
				p.FD.WindowSize = window
				// The records are pointer-free and the garbage per round
				// small: a low GC target keeps the peak near the live heap.
				debug.SetGCPercent(gcPercent)
				stderr := cmd.ErrOrStderr()
				res, err = gossipsim.RunFull(gossipsim.FullConfig{
					Nodes: nodes, Runs: runs, Seed: seed, Profile: &p, Seeds: seeds,
					Warmup: warmup, MaxRounds: maxRounds, SimulateTail: simulateTail,
					Loss: loss, Jitter: jitter, Leave: leave, GroupSize: groupSize,
					Progress: func(r int, fr *gossipsim.FullRun) {
						what := fmt.Sprintf("all convicted the crash after %.2fs (p50 %.2fs), %d false convictions", fr.DetectAllSeconds, fr.DetectP50Seconds, fr.FalseConvictions)
						if leave {
							what = fmt.Sprintf("all saw the departure after %.2fs (p50 %.2fs)", fr.LeftAllSeconds, fr.LeftP50Seconds)
						}
						fmt.Fprintf(stderr, "run %d/%d: converged in %d rounds, %s, %.0f B/node/round (%.1fs)\n",
							r+1, runs, fr.ConvergeRounds, what, fr.BytesPerNodeRound, time.Since(start).Seconds())
					},
				})
				if err != nil {
					return err
				}
			}
			wall := time.Since(start)
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			printGossip(cmd.OutOrStdout(), res, wall)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&mode, "mode", "pushpull", "push | pull | pushpull | full")
	f.IntVar(&nodes, "nodes", 1000, "cluster size")
	f.IntVar(&runs, "runs", 20, "independent runs (full mode: default 1)")
	f.Uint64Var(&seed, "seed", 1, "PRNG seed (same seed, same output)")
	addOutput(c, &format, "format")
	f.StringVar(&profile, "profile", "cassandra", "full mode: membership profile (cassandra | lan | local)")
	f.IntVar(&window, "phi-window", 8, "full mode: failure-detector window, samples per endpoint (Cassandra: 1000)")
	f.IntVar(&warmup, "warmup", 0, "full mode: rounds of gossip before the measurement (default phi-window+2)")
	f.IntVar(&seeds, "seeds", 3, "full mode: seed nodes")
	f.IntVar(&maxRounds, "max-rounds", 120, "full mode: give up after this many rounds of measurement")
	f.IntVar(&gcPercent, "gc-percent", 25, "full mode: Go GC target percentage (lower: less memory, more GC)")
	f.Float64Var(&loss, "loss", 0, "full mode: probability that a message is lost (0 <= loss < 1)")
	f.DurationVar(&jitter, "jitter", 0, "full mode: uniform extra delay 0..jitter per message, on top of the 1-5 ms base")
	f.IntVar(&groupSize, "group-size", 3, "full mode: replica group size; with the lan profile the members of a group probe each other")
	f.BoolVar(&leave, "leave", false, "full mode: the node leaves (Node.Leave) instead of crashing; report the time until every node saw it depart")
	f.BoolVar(&simulateTail, "simulate-tail", false, "full mode: simulate gossip until the last conviction instead of computing it from the frozen windows")
	return c
}

func printGossip(w io.Writer, r *gossipsim.Result, wall time.Duration) {
	fmt.Fprintf(w, "%-9s %7s %5s %6s %7s %4s %4s\n", "mode", "nodes", "runs", "seed", "mean", "min", "max")
	fmt.Fprintf(w, "%-9s %7d %5d %6d %7.2f %4d %4d\n", r.Mode, r.Nodes, r.Runs, r.Seed, r.Mean, r.Min, r.Max)
	if fs := r.FullSummary; fs != nil {
		probes := "no direct probes"
		if fs.ProbeTimeoutSeconds > 0 {
			probes = fmt.Sprintf("direct probes in groups of %d, timeout %gs", fs.GroupSize, fs.ProbeTimeoutSeconds)
		}
		fmt.Fprintf(w, "full: membership.Node, %gs rounds, phi threshold %g, window %d, %s, %d seeds, %d warm-up rounds\n",
			fs.IntervalSeconds, fs.PhiThreshold, fs.PhiWindow, probes, fs.Seeds, fs.WarmupRounds)
		fmt.Fprintf(w, "  convergence      %.2f rounds (%.2fs); idealised push-pull %.2f, with in-round updates %.2f\n",
			r.Mean, fs.ConvergeSecondsMean, fs.IdealPushPullMean, fs.IdealInRoundMean)
		fmt.Fprintf(w, "  bandwidth        %.0f B/node/round sent (%.2f messages), largest message %d B\n",
			fs.BytesPerNodeRound, fs.MsgsPerNodeRound, fs.MaxMessageBytes)
		fmt.Fprintf(w, "  network          loss %g, delay %g-%g ms + jitter 0-%g ms; %d messages lost\n",
			fs.Loss, fs.MinDelayMs, fs.MaxDelayMs, fs.JitterMs, fs.LostMessages)
		if fs.Leave {
			fmt.Fprintf(w, "  planned leave    every node saw LEFT: p50 %.2fs, p99 %.2fs, worst run %.2fs; convictions of the leaver %d\n",
				fs.LeftP50Seconds, fs.LeftP99Seconds, fs.LeftAllMax, fs.LeaveConvictions)
		} else {
			fmt.Fprintf(w, "  crash detection  first %.2fs, mean %.2fs, p50 %.2fs, p99 %.2fs, every node %.2fs (%.1f rounds; worst run %.2fs)\n",
				fs.DetectFirstSeconds, fs.DetectMeanSeconds, fs.DetectP50Seconds, fs.DetectP99Seconds, fs.DetectAllSeconds, fs.DetectAllRounds, fs.DetectAllMax)
		}
		fmt.Fprintf(w, "  false convictions %d\n", fs.FalseConvictions)
		rounds, extra := 0, 0
		for _, fr := range fs.PerRun {
			rounds += fr.MeasuredRounds
			extra += fr.ExtrapolatedConvictions
		}
		k := float64(len(fs.PerRun))
		fmt.Fprintf(w, "  simulated %d warm-up + %.1f measured rounds per run; %.0f convictions per run computed from frozen windows\n",
			fs.WarmupRounds, float64(rounds)/k, float64(extra)/k)
	} else {
		var b strings.Builder
		for i, x := range r.Rounds {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprint(&b, x)
		}
		fmt.Fprintf(w, "rounds per run: %s\n", b.String())
	}
	fmt.Fprintf(w, "(%.1fs)\n", wall.Seconds())
}
