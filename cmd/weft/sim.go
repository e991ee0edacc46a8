package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/sim"
)

func simCmd() *cobra.Command {
	c := &cobra.Command{Use: "sim", Short: "Run protocols in the deterministic simulator"}
	c.AddCommand(simRunCmd(), simLatencyCmd(), simCostCmd(), simSweepCmd(), simFailoverCmd(), simGCCmd(), simGossipCmd())
	return c
}

// parseDest parses "K" (exactly K groups) or "A-B" (uniform in [A,B]).
func parseDest(s string, groups int) (lo, hi int, err error) {
	if s == "" {
		return 1, groups, nil
	}
	a, b, isRange := strings.Cut(s, "-")
	lo, err = strconv.Atoi(a)
	if err != nil {
		return 0, 0, fmt.Errorf("--dest %q: want K or A-B", s)
	}
	hi = lo
	if isRange {
		if hi, err = strconv.Atoi(b); err != nil {
			return 0, 0, fmt.Errorf("--dest %q: want K or A-B", s)
		}
	}
	if lo < 1 || hi < lo || hi > groups {
		return 0, 0, fmt.Errorf("--dest %q: sizes must satisfy 1 <= A <= B <= groups (%d)", s, groups)
	}
	return lo, hi, nil
}

func simRunCmd() *cobra.Command {
	var (
		protocol, delay, dest, mode, historyFile, faults string
		groups, replicas, messages, clients              int
		payload                                          int
		interval                                         float64
		seed                                             uint64
		format                                           string
	)
	c := &cobra.Command{
		Use:   "run",
		Short: "Simulate one workload, check the history, print a summary",
		Long: `Simulate one workload on virtual time and check the resulting history
(validity, integrity, ordering, gts agreement, termination). Latencies are in
message delays (δ). Exits non-zero when a checker fails.

With --faults swarm the whole configuration (shape, workload, delays and
fault profile) is drawn from --seed exactly as "weft sim sweep" draws it, so
a failing sweep seed replays byte-identically; the shape and workload flags
cannot be combined with it.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var cfg sim.Config
			switch faults {
			case "none":
				if !cmd.Flags().Changed("replicas") && protocol == "skeen" {
					replicas = 1
				}
				lo, hi, err := parseDest(dest, groups)
				if err != nil {
					return err
				}
				dm, err := sim.ParseDelay(delay)
				if err != nil {
					return err
				}
				wm, err := parseMode(mode)
				if err != nil {
					return err
				}
				cfg = sim.Config{
					Protocol: protocol, Groups: groups, Replicas: replicas, Seed: seed, Delay: dm,
					Workload: sim.Workload{Messages: messages, Clients: clients, Mode: wm, DestMin: lo, DestMax: hi, PayloadSize: payload},
				}
				cfg.Workload.Interval = int64(interval * 1000)
			case "swarm":
				for _, f := range []string{"groups", "replicas", "messages", "clients", "dest", "delay", "mode", "interval", "payload"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("--%s cannot be combined with --faults swarm: the seed draws the whole configuration", f)
					}
				}
				if _, err := sim.LookupProtocol(protocol); err != nil {
					return err
				}
				cfg = sim.SwarmConfig(protocol, seed)
			default:
				return fmt.Errorf("--faults %q: want none or swarm", faults)
			}
			start := time.Now()
			res, runErr := sim.Run(cfg)
			simWall := time.Since(start)
			if res != nil && historyFile != "" {
				if err := writeHistory(historyFile, res.History); err != nil {
					return err
				}
			}
			if runErr != nil {
				if res != nil && cfg.Faults.Enabled() {
					printSwarmProfile(cmd.OutOrStdout(), res)
				}
				return runErr
			}
			w := cmd.OutOrStdout()
			if !cfg.Faults.Enabled() {
				rep := check.Check(res.History, check.Options{Termination: check.TermAll})
				checkWall := time.Since(start) - simWall
				if format == outJSON {
					if err := printJSON(w, runSummaryOf(res, rep.Total, -1, simWall, checkWall)); err != nil {
						return err
					}
					if !rep.OK() {
						return fmt.Errorf("seed %d: %d checker violations", seed, rep.Total)
					}
					return nil
				}
				printRun(w, res, simWall, checkWall)
				if !rep.OK() {
					fmt.Fprintf(w, "checkers: FAILED\n%s\n", rep.Error())
					return fmt.Errorf("seed %d: %d checker violations", seed, rep.Total)
				}
				fmt.Fprintln(w, "checkers: ok (validity, integrity, order, gts, termination: every replica)")
				return nil
			}
			quorum, live := sim.FaultChecks(res)
			checkWall := time.Since(start) - simWall
			if format == outJSON {
				liveN := live.Count(check.KindTermination)
				if err := printJSON(w, runSummaryOf(res, quorum.Total, liveN, simWall, checkWall)); err != nil {
					return err
				}
				if !quorum.OK() || liveN > 0 {
					return fmt.Errorf("seed %d: %d checker violations", seed, quorum.Total+liveN)
				}
				return nil
			}
			printSwarmProfile(w, res)
			printRun(w, res, simWall, checkWall)
			printFaultRun(w, res)
			ok := true
			if !quorum.OK() {
				ok = false
				fmt.Fprintf(w, "checkers (termination by a quorum, agreement, safety): FAILED\n%s\n", quorum.Error())
			} else {
				fmt.Fprintln(w, "checkers: ok (validity, integrity, order, gts, agreement, termination: a quorum of every destination group)")
			}
			if n := live.Count(check.KindTermination); n > 0 {
				ok = false
				fmt.Fprintf(w, "termination at every live replica: FAILED (%d messages)\n", n)
			} else {
				fmt.Fprintln(w, "termination at every live replica: ok")
			}
			if !ok {
				return fmt.Errorf("seed %d: %d checker violations", seed, quorum.Total+live.Count(check.KindTermination))
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&protocol, "protocol", "wbcast", "protocol: skeen|wbcast")
	f.IntVar(&groups, "groups", 3, "number of groups")
	f.IntVar(&replicas, "replicas", 3, "replicas per group (skeen: 1)")
	f.IntVar(&messages, "messages", 1000, "number of multicasts")
	f.StringVar(&dest, "dest", "", "destination groups per message: K, or A-B uniform (default 1-groups)")
	f.StringVar(&delay, "delay", "uniform", "link delay model: fixed (δ) | uniform (0,δ] | heavy (Pareto)")
	f.StringVar(&mode, "mode", "closed", "workload: closed (one outstanding per client) | open | solo")
	f.IntVar(&clients, "clients", 8, "client processes")
	f.Float64Var(&interval, "interval", 1, "open loop: mean inter-arrival per client, in δ")
	f.IntVar(&payload, "payload", 16, "payload bytes")
	f.Uint64Var(&seed, "seed", 1, "PRNG seed (same seed, same history)")
	f.StringVar(&historyFile, "history", "", "write the history as JSON lines to this file (also when the run fails)")
	f.StringVar(&faults, "faults", "none", "fault injection: none | swarm (one sweep seed: configuration and faults drawn from --seed)")
	addOutput(c, &format, "")
	return c
}

// runSummary is sim run's summary as JSON (-o json).
type runSummary struct {
	Protocol           string             `json:"protocol"`
	Groups             int                `json:"groups"`
	Replicas           int                `json:"replicas"`
	Clients            int                `json:"clients"`
	DestMin            int                `json:"dest_min"`
	DestMax            int                `json:"dest_max"`
	Delay              string             `json:"delay"`
	Seed               uint64             `json:"seed"`
	Faults             bool               `json:"faults"`
	Multicasts         int                `json:"multicasts"`
	Deliveries         int                `json:"deliveries"`
	Messages           int                `json:"protocol_messages"`
	Bytes              int64              `json:"protocol_bytes"`
	VirtualTimeDelta   float64            `json:"virtual_time_delta"`
	LatencyFirst       sim.LatencySummary `json:"latency_first_per_group_delta"`
	LatencyFollowers   sim.LatencySummary `json:"latency_followers_delta"`
	Violations         int                `json:"violations"`
	LiveTermination    *int               `json:"live_termination_violations,omitempty"` // with faults
	SimulateWallSecond float64            `json:"simulate_wall_seconds"`
	CheckWallSeconds   float64            `json:"check_wall_seconds"`
}

// runSummaryOf summarizes a run; live < 0: no liveness check (no faults).
func runSummaryOf(res *sim.Result, violations, live int, simWall, checkWall time.Duration) runSummary {
	cfg, st := res.Config, res.Stats
	s := runSummary{Protocol: cfg.Protocol, Groups: cfg.Groups, Replicas: cfg.Replicas, Clients: cfg.Workload.Clients,
		DestMin: cfg.Workload.DestMin, DestMax: cfg.Workload.DestMax, Delay: fmt.Sprint(cfg.Delay), Seed: cfg.Seed,
		Faults: cfg.Faults.Enabled(), Multicasts: int(st.Multicasts), Deliveries: int(st.Deliveries), Messages: int(st.Messages),
		Bytes: int64(st.Bytes), VirtualTimeDelta: float64(st.VirtualTime) / float64(cfg.Delta),
		LatencyFirst: sim.Summarize(st.LeaderLat, cfg.Delta), LatencyFollowers: sim.Summarize(st.FollowerLat, cfg.Delta),
		Violations: violations, SimulateWallSecond: simWall.Seconds(), CheckWallSeconds: checkWall.Seconds()}
	if live >= 0 {
		s.LiveTermination = &live
	}
	return s
}

// printSwarmProfile prints every parameter drawn from the seed (the VOPR
// practice), so a failure report is self-contained.
func printSwarmProfile(w io.Writer, res *sim.Result) {
	cfg := res.Config
	wl := cfg.Workload
	fmt.Fprintf(w, "swarm seed %d: %s  groups %d x %d replicas  clients %d  open loop, %d messages every %.2fδ per client  dest %d-%d  delay %s\n",
		cfg.Seed, cfg.Protocol, cfg.Groups, cfg.Replicas, wl.Clients, wl.Messages, float64(wl.Interval)/float64(cfg.Delta), wl.DestMin, wl.DestMax, cfg.Delay)
	fmt.Fprintf(w, "fault profile: %s\n", cfg.Faults.Describe(cfg.Delta))
}

func printFaultRun(w io.Writer, res *sim.Result) {
	st := res.Stats
	D := float64(res.Config.Delta)
	fmt.Fprintf(w, "faults: %s\n", res.Faults)
	fmt.Fprintf(w, "messages lost: %d to partitions, %d to link resets, %d at crashed replicas\n", st.LostPartition, st.LostReset, st.LostDown)
	cv := res.Coverage
	fmt.Fprintf(w, "leader changes %d (per group %v)  coverage: ballots %d, recoveries %d (%d with an ACCEPTED message), retried %d, re-multicasts %d, catch-ups %d, collected %d\n",
		res.LeaderChanges, res.GroupLeaderChanges, cv.BallotsStarted, cv.LeaderChanges, cv.RecoveriesWithAccepted, cv.Retried, cv.Remulticasts, cv.CatchUps, cv.Collected)
	gst := res.Config.Faults.GST
	end := "not converged"
	if res.Converged {
		end = "converged"
	}
	fmt.Fprintf(w, "GST %.0fδ  last delivery %.1fδ (GST+%.1fδ)  end %.1fδ (%s)  down for good %v\n",
		float64(gst)/D, float64(res.LastDelivery)/D, float64(max(res.LastDelivery-gst, 0))/D, float64(st.VirtualTime)/D, end, res.Down)
}

func parseMode(s string) (sim.Mode, error) {
	switch s {
	case "closed":
		return sim.ClosedLoop, nil
	case "open":
		return sim.OpenLoop, nil
	case "solo":
		return sim.Solo, nil
	}
	return 0, fmt.Errorf("--mode %q: want closed, open or solo", s)
}

func writeHistory(path string, h *check.History) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := check.WriteJSONL(w, h); err != nil {
		f.Close()
		return fmt.Errorf("writing history %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing history %s: %w", path, err)
	}
	return f.Close()
}

func printRun(w io.Writer, res *sim.Result, simWall, checkWall time.Duration) {
	cfg, st := res.Config, res.Stats
	D := cfg.Delta
	fmt.Fprintf(w, "protocol %s  groups %d x %d replicas  clients %d  dest %d-%d  delay %s  seed %d\n",
		cfg.Protocol, cfg.Groups, cfg.Replicas, cfg.Workload.Clients, cfg.Workload.DestMin, cfg.Workload.DestMax, cfg.Delay, cfg.Seed)
	fmt.Fprintf(w, "multicasts %d  deliveries %d  protocol messages %d (%.1f per multicast, %d bytes)  virtual time %.1fδ\n",
		st.Multicasts, st.Deliveries, st.Messages, float64(st.Messages)/float64(max(st.Multicasts, 1)), st.Bytes, float64(st.VirtualTime)/float64(D))
	l, fl := sim.Summarize(st.LeaderLat, D), sim.Summarize(st.FollowerLat, D)
	fmt.Fprintf(w, "latency (δ)          samples      p50      p99      max\n")
	fmt.Fprintf(w, "  first per group  %9d %8.2f %8.2f %8.2f\n", l.N, l.P50, l.P99, l.Max)
	if fl.N > 0 {
		fmt.Fprintf(w, "  followers        %9d %8.2f %8.2f %8.2f\n", fl.N, fl.P50, fl.P99, fl.Max)
	} else {
		fmt.Fprintf(w, "  followers        %9s\n", "-")
	}
	fmt.Fprintf(w, "wall time %.2fs simulate + %.2fs check  (%.0f protocol messages/s simulated)\n",
		simWall.Seconds(), checkWall.Seconds(), float64(st.Messages)/simWall.Seconds())
}
