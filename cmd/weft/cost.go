package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/sim"
)

func simCostCmd() *cobra.Command {
	var (
		format    string
		seed      uint64
		protocols []string
		dests     []int
		o         sim.CostOptions
	)
	c := &cobra.Command{
		Use:   "cost",
		Short: "Messages and bytes per multicast, and the highest load sustained under a CPU cost model",
		Long: `For each protocol and destination-set size: the protocol messages and bytes
per multicast without contention (the client's MULTICASTs and the reply
included, heartbeats counted apart), the most messages one replica handles
per multicast, and the highest open-loop load (multicasts/s) sustained before
the mean latency climbs to --climb times its light-load value.

Cost model: 1 virtual unit = 1 µs, δ = --delta-us µs on every link; every
message a replica handles costs it --service-us µs of CPU, handled one at a
time in arrival order (sim.Config.ServiceTime); sending, ticks, clients and
messages to self are free. Load: Poisson arrivals from --clients clients,
each multicast to exactly D of --groups groups. See docs/latency.md.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Seed = seed
			start := time.Now()
			var rows []*sim.CostRow
			for _, p := range protocols {
				for _, d := range dests {
					row, err := sim.MeasureCost(p, d, o)
					if err != nil {
						return fmt.Errorf("%s, %d group(s): %w", p, d, err)
					}
					rows = append(rows, row)
				}
			}
			printCost(cmd.OutOrStdout(), format, rows)
			if format == "table" {
				fmt.Fprintf(cmd.OutOrStdout(), "(seed %d, %.1fs)\n", seed, time.Since(start).Seconds())
			}
			return nil
		},
	}
	f := c.Flags()
	addOutput(c, &format, "format")
	f.Uint64Var(&seed, "seed", 1, "PRNG seed")
	f.StringSliceVar(&protocols, "protocols", []string{"skeen", "ftskeen", "fastcast", "wbcast"}, "protocols to measure")
	f.IntSliceVar(&dests, "dests", []int{1, 2, 4}, "destination-set sizes")
	f.IntVar(&o.Groups, "groups", 4, "groups")
	f.Int64Var(&o.Delta, "delta-us", 1000, "one message delay δ, in µs")
	f.Int64Var(&o.ServiceUS, "service-us", 10, "CPU µs a replica spends per message handled")
	f.IntVar(&o.Messages, "messages", 1000, "multicasts per load point, at least")
	f.Int64Var(&o.Duration, "duration", 200, "δ of arrivals per load point, at least")
	f.IntVar(&o.MaxMsgs, "max-messages", 20000, "multicasts per load point, at most")
	f.IntVar(&o.Clients, "clients", 32, "open-loop clients")
	f.Float64Var(&o.Climb, "climb", 2, "latency may climb to this many times its light-load value")
	return c
}

type costJSON struct {
	Protocol           string             `json:"protocol"`
	Dest               int                `json:"dest_groups"`
	Groups             int                `json:"groups"`
	Replicas           int                `json:"replicas"`
	Messages           float64            `json:"messages_per_multicast"`
	Bytes              float64            `json:"bytes_per_multicast"`
	ByKind             map[string]float64 `json:"messages_by_kind"`
	HeartbeatsPerDelta float64            `json:"heartbeats_per_replica_per_delta"`
	Busiest            float64            `json:"busiest_replica_messages_per_multicast"`
	Capacity           float64            `json:"busiest_replica_capacity_per_s"`
	LightLatency       float64            `json:"light_latency_delta"`
	MaxLoad            float64            `json:"max_load_per_s"`
	LatencyAtMax       float64            `json:"latency_at_max_load_delta"`
	ServiceUS          int64              `json:"service_us"`
	DeltaUS            int64              `json:"delta_us"`
}

func r1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }

func printCost(w io.Writer, format string, rows []*sim.CostRow) {
	if format == "json" {
		out := []costJSON{}
		for _, r := range rows {
			j := costJSON{Protocol: r.Protocol, Dest: r.Dest, Groups: r.Groups, Replicas: r.Replicas,
				Messages: r1(r.Messages), Bytes: r1(r.Bytes), ByKind: map[string]float64{},
				HeartbeatsPerDelta: r1(r.HeartbeatsPerDelta), Busiest: r1(r.Busiest), Capacity: float64(int64(r.Capacity)),
				LightLatency: round2(r.LightLatency), MaxLoad: float64(int64(r.MaxLoad)), LatencyAtMax: round2(r.LatencyAtMax),
				ServiceUS: r.Options.ServiceUS, DeltaUS: r.Options.Delta}
			for k, v := range r.ByKind {
				j.ByKind[k] = round2(v)
			}
			out = append(out, j)
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(w, string(b))
		return
	}
	if len(rows) == 0 {
		return
	}
	o := rows[0].Options
	fmt.Fprintf(w, "%d groups; CPU %d µs per message handled; δ = %d µs; loads in multicasts/s\n", o.Groups, o.ServiceUS, o.Delta)
	fmt.Fprintf(w, "%-9s %4s %4s | %8s %8s %8s | %9s %9s | %8s %9s %8s\n",
		"protocol", "dest", "reps", "msgs/mc", "bytes/mc", "busiest", "capacity", "max load", "lat (δ)", "at max", "hb/δ")
	for _, r := range rows {
		fmt.Fprintf(w, "%-9s %4d %4d | %8.1f %8.0f %8.1f | %9.0f %9.0f | %8.2f %9.2f %8.1f\n",
			r.Protocol, r.Dest, r.Replicas, r.Messages, r.Bytes, r.Busiest, r.Capacity, r.MaxLoad, r.LightLatency, r.LatencyAtMax, r.HeartbeatsPerDelta)
	}
	fmt.Fprintln(w, "(msgs/mc, bytes/mc: per multicast without contention, heartbeats apart; busiest: messages one replica handles per")
	fmt.Fprintln(w, " multicast; capacity: 1e6/(busiest x CPU µs); max load: highest offered load whose mean latency stays within")
	fmt.Fprintf(w, " %.0fx the light-load latency over the last quarter of %dδ of arrivals (at most %d multicasts); lat: mean first\n", o.Climb, o.Duration, o.MaxMsgs)
	fmt.Fprintln(w, " delivery per group at light load; hb/δ: heartbeats per replica per δ)")
	var kinds []string
	for _, r := range rows {
		var parts []string
		for _, k := range r.SortedKinds() {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, r.ByKind[k]))
		}
		kinds = append(kinds, fmt.Sprintf("  %-9s %d: %s", r.Protocol, r.Dest, strings.Join(parts, ", ")))
	}
	fmt.Fprintln(w, "messages per multicast by kind:")
	fmt.Fprintln(w, strings.Join(kinds, "\n"))
}
