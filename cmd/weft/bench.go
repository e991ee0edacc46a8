package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/demo"
)

func benchCmd() *cobra.Command {
	var (
		format   string
		duration time.Duration
		clients  int
		payload  int
		dests    []int
	)
	c := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark a real loopback cluster: throughput and latency per destination-set size",
		Long: `Starts 3 groups x 3 replicas as separate weft agent processes on loopback
(WbCast, fsync'd WAL), runs closed-loop clients multicasting to 1 and then 2
destination groups, and prints throughput and latency (p50/p99) for each,
after checking every delivery. Progress goes to stderr. Only WbCast runs on
real nodes so far; the baselines are simulator-only.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return fmt.Errorf("--format %q: want table or json", format)
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer cancel()
			type row struct {
				Protocol   string  `json:"protocol"`
				Dest       int     `json:"dest_groups"`
				Clients    int     `json:"clients"`
				Throughput float64 `json:"throughput_per_s"`
				P50ms      float64 `json:"p50_ms"`
				P99ms      float64 `json:"p99_ms"`
				Completed  int     `json:"completed"`
				Check      string  `json:"check"`
			}
			var rows []row
			for _, k := range dests {
				fmt.Fprintf(os.Stderr, "== bench: wbcast, %d destination group(s), %d clients, %s\n", k, clients, duration)
				sum, err := demo.Run(ctx, demo.Options{Duration: duration, Clients: clients, Payload: payload,
					DestGroups: k, KillGroup: -1, Out: os.Stderr})
				if err != nil {
					return err
				}
				verdict := "PASS"
				if sum.Report != nil && !sum.Report.OK() {
					verdict = "FAIL"
				}
				rows = append(rows, row{Protocol: "wbcast", Dest: k, Clients: clients, Throughput: sum.Throughput,
					P50ms: float64(sum.P50.Microseconds()) / 1000, P99ms: float64(sum.P99.Microseconds()) / 1000,
					Completed: sum.Completed, Check: verdict})
			}
			w := cmd.OutOrStdout()
			if format == "json" {
				b, _ := json.MarshalIndent(rows, "", "  ")
				fmt.Fprintln(w, string(b))
				return nil
			}
			fmt.Fprintf(w, "%-9s %5s %8s %14s %9s %9s %s\n", "protocol", "dest", "clients", "multicasts/s", "p50", "p99", "check")
			for _, r := range rows {
				fmt.Fprintf(w, "%-9s %5d %8d %14.0f %8.2fms %8.2fms %s\n", r.Protocol, r.Dest, r.Clients, r.Throughput, r.P50ms, r.P99ms, r.Check)
			}
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "table", "output: table|json")
	c.Flags().DurationVar(&duration, "duration", 10*time.Second, "workload length per configuration")
	c.Flags().IntVar(&clients, "clients", 32, "closed-loop clients")
	c.Flags().IntVar(&payload, "payload", 64, "payload bytes")
	c.Flags().IntSliceVar(&dests, "dest", []int{1, 2}, "destination-set sizes to run")
	return c
}
