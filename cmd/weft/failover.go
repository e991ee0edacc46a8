package main

import (
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

func simFailoverCmd() *cobra.Command {
	var (
		runs   int
		seed   uint64
		format string
	)
	c := &cobra.Command{
		Use:   "failover",
		Short: "Measure WbCast leader failover in the simulator: crash to new leader, and to its first delivery",
		Long: `Each run: 3 groups x 3 replicas, 8 closed-loop clients, delays uniform in
(0,δ]; group 0's leader crashes for good at a random time in [40δ, 60δ).
Reports, over the runs, the time from the crash to the election of the new
leader and to its first delivery as leader, in δ and in failure-detector
timeouts. Every run's history is checked.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			st, err := sim.MeasureFailover(runs, seed)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if format == outJSON {
				return printJSON(w, struct {
					FirstSeed uint64 `json:"first_seed"`
					*sim.FailoverStats
				}{seed, st})
			}
			fmt.Fprintf(w, "failover over %d runs (seeds %d..%d), detector timeout %.0fδ\n", st.Runs, seed, seed+uint64(runs)-1, st.DetectorTimeout)
			fmt.Fprintf(w, "%-34s %8s %8s %8s\n", "", "p50", "p99", "max")
			row := func(name string, l sim.LatencySummary) {
				fmt.Fprintf(w, "%-34s %7.1fδ %7.1fδ %7.1fδ\n", name, l.P50, l.P99, l.Max)
				fmt.Fprintf(w, "%-34s %8.2f %8.2f %8.2f\n", "  in detector timeouts", l.P50/st.DetectorTimeout, l.P99/st.DetectorTimeout, l.Max/st.DetectorTimeout)
			}
			row("crash -> new leader elected", st.Elected)
			row("crash -> first delivery by it", st.FirstDelivery)
			fmt.Fprintf(w, "checkers: ok on every run  (wall %.1fs)\n", time.Since(start).Seconds())
			return nil
		},
	}
	c.Flags().IntVar(&runs, "runs", 200, "number of runs (seeds)")
	c.Flags().Uint64Var(&seed, "seed", 1, "first seed")
	addOutput(c, &format, "")
	return c
}

func simGCCmd() *cobra.Command {
	var (
		messages     int
		crashEvery   int64
		seed         uint64
		sessionEvery int
		crashClients bool
		downForGood  int
		gc           gcFlags
		format       string
	)
	c := &cobra.Command{
		Use:   "gc",
		Short: "Show WbCast's garbage collection keeps memory bounded under leader churn",
		Long: `Multicasts --messages messages (3 groups x 3 replicas, destinations of 1-3
groups, 8 closed-loop clients) while a group leader crashes about every
--crash-every δ and restarts ~30δ later, and each client starts a new
session (a client restarted with the same id) every --session-every of its
messages; with --crash-clients (the default) it does so without waiting for
its outstanding message, as a crashed and restarted client would (that
message is given up). With --down-for-good N, replica N crashes at the start and never
comes back: garbage collection needs only a quorum of each group (--gc
quorum, the default), so memory stays bounded without that member; with
--gc all it waits for every member (wbcast.Config.CollectAfterAll) and
memory grows while one is down. Prints the peak number of entries any replica held in memory
(messages, client sessions and the collected ids they remember), leader
changes, the messages collected and the sessions expired. Runs over 200,000 messages skip recording the history (and so
the order checkers) to bound the simulator's own memory; termination is
still checked by the simulator.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			cfg := sim.LeaderChurnConfig(messages, seed, crashEvery)
			cfg.Workload.SessionEvery = sessionEvery
			cfg.Workload.CrashClients = crashClients && sessionEvery > 0
			all, err := gc.all(cmd, cfg.Protocol)
			if err != nil {
				return err
			}
			if all {
				cfg.Spec = collectAllSpec()
			}
			if downForGood >= 0 {
				if downForGood >= cfg.Groups*cfg.Replicas {
					return fmt.Errorf("--down-for-good %d: the run has replicas 0..%d", downForGood, cfg.Groups*cfg.Replicas-1)
				}
				cfg.Faults.Script = append(cfg.Faults.Script, sim.Fault{At: cfg.Delta, Kind: sim.FaultCrash, Proc: wire.ProcID(downForGood), ForGood: true})
			}
			res, err := sim.Run(cfg)
			if err != nil {
				return err
			}
			if err := sim.CheckResult(res); err != nil {
				return err
			}
			if !res.Converged {
				return fmt.Errorf("seed %d: the run did not converge (every multicast delivered at every live replica)", seed)
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			w := cmd.OutOrStdout()
			if format == outJSON {
				return printJSON(w, map[string]any{
					"messages": res.Stats.Multicasts, "deliveries": res.Stats.Deliveries,
					"virtual_time_delta": float64(res.Stats.VirtualTime) / float64(res.Config.Delta),
					"leader_changes":     res.LeaderChanges, "group_leader_changes": res.GroupLeaderChanges,
					"crashes": res.Faults.Crashes, "restarts": res.Faults.Restarts,
					"client_sessions": res.Stats.Sessions + cfg.Workload.Clients, "sessions_expired": res.Coverage.SessionsExpired,
					"client_crashes": cfg.Workload.CrashClients, "given_up": res.Stats.GivenUp,
					"peak_retained": res.PeakRetained, "collected": res.Coverage.Collected,
					"down_for_good": downForGood, "installs": res.Stats.Installs,
					"history_checked": res.History != nil, "wall_seconds": time.Since(start).Seconds(), "heap_inuse_bytes": ms.HeapInuse,
				})
			}
			fmt.Fprintf(w, "messages %d  deliveries %d  virtual time %.0fδ  leader changes %d (per group %v)  crashes %d  restarts %d\n",
				res.Stats.Multicasts, res.Stats.Deliveries, float64(res.Stats.VirtualTime)/float64(res.Config.Delta),
				res.LeaderChanges, res.GroupLeaderChanges, res.Faults.Crashes, res.Faults.Restarts)
			how := "each started once the last one's messages were answered"
			if cfg.Workload.CrashClients {
				how = fmt.Sprintf("each started as by a crashed client: %d messages in flight given up", res.Stats.GivenUp)
			}
			fmt.Fprintf(w, "client sessions %d (%s)  expired %d (summed over replicas)\n", res.Stats.Sessions+cfg.Workload.Clients, how, res.Coverage.SessionsExpired)
			if downForGood >= 0 {
				fmt.Fprintf(w, "replica p%d down for good from 1δ; state transfers (SNAPSHOTs installed) %d\n", downForGood, res.Stats.Installs)
			}
			fmt.Fprintf(w, "peak retained entries at any replica (messages + sessions + collected ids): %d  (%.3f%% of the messages multicast); collected %d\n",
				res.PeakRetained, 100*float64(res.PeakRetained)/float64(res.Stats.Multicasts), res.Coverage.Collected)
			checked := "history checked"
			if res.History == nil {
				checked = "history not recorded; termination at every live replica checked by the simulator"
			}
			fmt.Fprintf(w, "converged: yes (%s)  wall %.1fs  Go heap in use %d MiB\n", checked, time.Since(start).Seconds(), ms.HeapInuse>>20)
			return nil
		},
	}
	c.Flags().IntVar(&messages, "messages", 1000000, "multicasts")
	c.Flags().Int64Var(&crashEvery, "crash-every", 2000, "mean δ between leader crashes")
	c.Flags().Uint64Var(&seed, "seed", 1, "PRNG seed")
	c.Flags().IntVar(&sessionEvery, "session-every", 10, "messages per client session (0: one session per client)")
	c.Flags().BoolVar(&crashClients, "crash-clients", true, "clients start their new session without waiting for their outstanding message (crash and restart)")
	c.Flags().IntVar(&downForGood, "down-for-good", -1, "replica that crashes at the start and never restarts (-1: none)")
	addGCFlags(c, &gc)
	addOutput(c, &format, "")
	return c
}
