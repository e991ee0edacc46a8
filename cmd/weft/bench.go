package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/demo"
)

// benchRow is one configuration's result in `weft bench`.
type benchRow struct {
	Protocol      string  `json:"protocol"`
	Replicas      int     `json:"replicas_per_group"`
	FaultTolerant bool    `json:"fault_tolerant"`
	Dest          int     `json:"dest_groups"`
	Clients       int     `json:"clients"`
	Throughput    float64 `json:"throughput_per_s"`
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	Completed     int     `json:"completed"`
	Check         string  `json:"check"`
}

func benchCmd() *cobra.Command {
	var (
		format    string
		duration  time.Duration
		clients   int
		payload   int
		replicas  int
		dests     []int
		protocols []string
	)
	c := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark real loopback clusters of every protocol: throughput and latency per destination-set size",
		Long: `For each protocol (--protocols; default all four), starts 3 groups of
replicas as separate weft agent processes on loopback (fsync'd WAL), runs
closed-loop clients multicasting to 1 and then 2 destination groups, and
prints one table with the throughput and latency (p50/p99) of each
configuration, side by side, after checking every delivery. WbCast,
FT-Skeen and FastCast run --replicas replicas per group (default 3); Skeen
is not fault tolerant and runs 1 replica per group, persisting nothing (it
is the table's lower bound, not a like-for-like competitor). Progress goes
to stderr.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, p := range protocols {
				if !slices.Contains(config.Protocols, p) {
					return fmt.Errorf("--protocols: unknown protocol %q (want some of %s)", p, strings.Join(config.Protocols, ","))
				}
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer cancel()
			var rows []benchRow
			failed := 0
			for _, p := range protocols {
				r := replicas
				ft := p != "skeen"
				if !ft {
					r = 1
				}
				for _, k := range dests {
					fmt.Fprintf(os.Stderr, "== bench: %s, 3 groups x %d replicas, %d destination group(s), %d clients, %s\n", p, r, k, clients, duration)
					sum, err := demo.Run(ctx, demo.Options{Protocol: p, Duration: duration, Replicas: r, Clients: clients,
						Payload: payload, DestGroups: k, KillGroup: -1, Out: os.Stderr})
					if err != nil && !errors.Is(err, demo.ErrCheckFailed) {
						return fmt.Errorf("bench %s, %d destination group(s): %w", p, k, err)
					}
					verdict := "PASS"
					if err != nil {
						verdict = "FAIL"
						failed++
					}
					rows = append(rows, benchRow{Protocol: p, Replicas: r, FaultTolerant: ft, Dest: k, Clients: clients,
						Throughput: sum.Throughput, P50ms: float64(sum.P50.Microseconds()) / 1000,
						P99ms: float64(sum.P99.Microseconds()) / 1000, Completed: sum.Completed, Check: verdict})
				}
			}
			if format == "json" {
				b, _ := json.MarshalIndent(rows, "", "  ")
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
			} else {
				writeBenchTable(cmd.OutOrStdout(), rows, duration, payload)
			}
			if failed > 0 {
				return fmt.Errorf("bench: %d configuration(s) failed their check", failed)
			}
			return nil
		},
	}
	addOutput(c, &format, "format")
	c.Flags().DurationVar(&duration, "duration", 10*time.Second, "workload length per configuration")
	c.Flags().IntVar(&clients, "clients", 32, "closed-loop clients")
	c.Flags().IntVar(&payload, "payload", 64, "payload bytes")
	c.Flags().IntVar(&replicas, "replicas", 3, "replicas per group of the fault-tolerant protocols (skeen always runs 1)")
	c.Flags().IntSliceVar(&dests, "dest", []int{1, 2}, "destination-set sizes to run")
	c.Flags().StringSliceVar(&protocols, "protocols", slices.Clone(config.Protocols), "protocols to run")
	return c
}

// writeBenchTable prints the rows side by side, one line per protocol and
// destination-set size.
func writeBenchTable(w io.Writer, rows []benchRow, duration time.Duration, payload int) {
	clients := 0
	if len(rows) > 0 {
		clients = rows[0].Clients
	}
	fmt.Fprintf(w, "3 groups on loopback, %d closed-loop clients, %d-byte payloads, %s per row\n", clients, payload, duration)
	fmt.Fprintf(w, "%-9s %8s %5s %14s %9s %9s  %s\n", "protocol", "replicas", "dest", "multicasts/s", "p50", "p99", "check")
	notFT := false
	for _, r := range rows {
		rep := fmt.Sprint(r.Replicas)
		if !r.FaultTolerant {
			rep += "*"
			notFT = true
		}
		fmt.Fprintf(w, "%-9s %8s %5d %14.0f %7.2fms %7.2fms  %s\n", r.Protocol, rep, r.Dest, r.Throughput, r.P50ms, r.P99ms, r.Check)
	}
	if notFT {
		fmt.Fprintln(w, "* skeen is not fault tolerant: 1 replica per group, nothing persisted (no WAL fsync)")
	}
}
