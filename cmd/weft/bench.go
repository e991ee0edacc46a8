package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/config"
)

// benchRow is one configuration's result in `weft bench`: one rung of the
// client ladder of one protocol, durability mode and destination count.
type benchRow struct {
	Protocol      string `json:"protocol"`
	Replicas      int    `json:"replicas_per_group"`
	FaultTolerant bool   `json:"fault_tolerant"`
	// Durability is "fsync" (the WAL is fsynced before anything depending
	// on it is sent), "nofsync" (unsafe_no_fsync) or "none" (Skeen keeps
	// nothing).
	Durability   string  `json:"durability"`
	Dest         string  `json:"dest"` // uniform or home
	GroupsPerMsg int     `json:"groups_per_msg"`
	Clients      int     `json:"clients"`
	ClientProcs  int     `json:"client_procs"`
	WindowS      float64 `json:"window_s"`
	// Completed counts the messages sent and answered inside the window.
	Completed  int     `json:"completed"`
	Errors     int     `json:"errors"`
	Throughput float64 `json:"throughput_per_s"`
	P50ms      float64 `json:"p50_ms"`
	P90ms      float64 `json:"p90_ms"`
	P99ms      float64 `json:"p99_ms"`
	P999ms     float64 `json:"p999_ms"`
	MaxMs      float64 `json:"max_ms"`
	benchModel
	benchCPU
	// Timeline is the window in --interval slices (bench_timeline.go).
	Timeline []benchInterval `json:"timeline,omitempty"`
}

// benchModel is a rung's client model (embedded in the rows of weft
// bench and weft bench kv).
type benchModel struct {
	// SharedClients is --shared-clients: 0 when every worker was its own
	// client, else how many clients each client process's workers shared.
	SharedClients int `json:"shared_clients"`
	// ClientConns counts the clients in use over all client processes,
	// each its own id, session and connection to every node: Clients when
	// every worker was its own.
	ClientConns int `json:"client_conns"`
}

// benchCPU is a rung's resource use in its window, from /proc (embedded
// in the rows of weft bench and weft bench kv; "op" is a multicast in
// the one, a kv operation in the other).
type benchCPU struct {
	// Cores used in the window (CPU seconds per second) by the agents and
	// by the client processes.
	ServerCores float64 `json:"server_cores"`
	ClientCores float64 `json:"client_cores"`
	// CPU per operation completed in the window, in µs.
	ServerCPUus float64 `json:"server_cpu_us_per_msg"`
	ClientCPUus float64 `json:"client_cpu_us_per_msg"`
	TotalCPUus  float64 `json:"total_cpu_us_per_msg"`
	// Read- and write-type system calls per operation (/proc/<pid>/io
	// syscr+syscw, plus the socket reads made with recvmsg, which it
	// leaves out; fsync, epoll and futex calls are not in it), and
	// context switches per operation (/proc/<pid>/task/*/status), over
	// agents and clients.
	ServerRWSyscalls  float64 `json:"server_rw_syscalls_per_msg"`
	ClientRWSyscalls  float64 `json:"client_rw_syscalls_per_msg"`
	ServerCtxSwitches float64 `json:"server_ctx_switches_per_msg"`
	ClientCtxSwitches float64 `json:"client_ctx_switches_per_msg"`
	// The agents' Readies (loop passes that stepped something) and WAL
	// syncs (each an fdatasync unless unsafe_no_fsync) per operation,
	// from their status: how many operations a pass and a sync carry.
	ServerReadies float64 `json:"server_readies_per_msg"`
	ServerSyncs   float64 `json:"server_wal_syncs_per_msg"`
	// ServerRawSyncPauses counts, over the agents and the window, the
	// WAL syncs slow enough (over 20 ms) to pause the raw syncs
	// (wal.Options.RawSync): a count, not a rate; a slow disk's mark.
	ServerRawSyncPauses uint64 `json:"server_raw_sync_pauses"`
	// ServerBallots and ServerLeaderChanges count, over the agents and the
	// window, the ballots started and won: in this failure-free benchmark,
	// leaders replaced because a member suspected them under load (a
	// loop or gossip held up past election_ticks), which the row's tail
	// latency shows. The table names the rows that had any.
	ServerBallots       uint64 `json:"server_ballots_started"`
	ServerLeaderChanges uint64 `json:"server_leader_changes"`
	// ServerLoopStalls counts, over the agents and the window, the ticks
	// an agent's loop handled more than 5 ticks late (node/stall.go): its
	// loop did not run meanwhile, which the row's tail latency shows.
	ServerLoopStalls uint64 `json:"server_loop_stalls"`
}

// benchOptions are weft bench's flags.
type benchOptions struct {
	format, plot, dest, dir  string
	cpuProfile               string
	warmup, window, interval time.Duration
	clients, perMsg          []int
	clientProcs, payload     int
	sharedClients            int // client.Clients per client process the workers share (0: one per worker)
	replicas                 int
	protocols, durability    []string
	seed                     uint64
	sessionLease             time.Duration // the agents' session_lease (0: the sample's)
}

func benchCmd() *cobra.Command {
	var o benchOptions
	c := &cobra.Command{
		Use:   "bench",
		Short: "Benchmark real loopback clusters: throughput, latency and CPU over a ladder of closed-loop clients",
		Long: `For each protocol (--protocols) and durability mode (--durability), starts
3 groups of replicas as separate weft agent processes on loopback with an
operator's settings (the sample configuration's defaults), then for each
number of destination groups (--groups-per-msg) and each rung of the client
ladder (--clients) runs that many closed-loop clients for a warm-up and a
measurement window. Only messages sent and answered inside the window
count; latency is measured at each client worker, from the call to
Multicast to its return. The workers are spread over --client-procs client
processes. By default every worker is its own client (own id, session and
connections: one connection per client thread, as the papers' clients);
with --shared-clients N the workers of each client process share N clients
instead (worker i uses client i mod N, many multicasts in flight on each),
as an application shares one client among its threads; each client keeps
every worker it carries in flight (its MaxInFlight, and the agents'
client_share, are raised to that number when it is above 64).
CPU (cores used by the agents and by the clients, CPU µs per multicast),
read/write system calls and context switches per multicast come from /proc.

WbCast, FT-Skeen and FastCast run --replicas replicas per group (default
3); Skeen is not fault tolerant and runs 1 replica per group, persisting
nothing (the lower bound, not a like-for-like competitor).
--durability fsync is the normal fsync'd WAL; nofsync sets unsafe_no_fsync
(benchmarks only: docs/operations.md). Prints one row per rung (-o json:
every field); --plot FILE.svg draws p50 and p99 against throughput per
configuration. Progress goes to stderr. weft bench kv measures weft-kv
on the same clusters.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, o) },
	}
	addOutput(c, &o.format, "format")
	addBenchFlags(c, &o, slices.Clone(config.Protocols), []int{1, 32, 90, 180})
	f := c.Flags()
	f.DurationVar(&o.interval, "interval", 0, "also report each row's window in slices of this length (throughput, latency, agents' memory; e.g. --window 10m --interval 1m)")
	f.StringVar(&o.dest, "dest", "uniform", "destinations: uniform (groups drawn at random) or home (the worker's home group plus a rotating neighbour)")
	f.IntSliceVar(&o.perMsg, "groups-per-msg", []int{1, 2}, "destination groups per message (one set of rows each)")
	f.IntVar(&o.payload, "payload", 64, "payload bytes")
	f.StringVar(&o.plot, "plot", "", "write the throughput-latency curves to this SVG file")
	c.AddCommand(benchKVCmd())
	return c
}

// addBenchFlags adds the flags weft bench and weft bench kv share: the
// clusters, the client ladder, the timing.
func addBenchFlags(c *cobra.Command, o *benchOptions, protocols []string, clients []int) {
	f := c.Flags()
	f.IntSliceVar(&o.clients, "clients", clients, "the client ladder: closed-loop clients of each row")
	f.DurationVar(&o.warmup, "warmup", 3*time.Second, "warm-up before each measurement window")
	f.DurationVar(&o.window, "window", 15*time.Second, "measurement window of each row")
	f.IntVar(&o.clientProcs, "client-procs", 2, "client processes the workers are spread over (at most one per worker)")
	f.IntVar(&o.sharedClients, "shared-clients", 0, "the client model: 0 (default), every worker its own client (own id, session and connection to every node: "+
		"one connection per client thread, as the papers' clients); N, the workers of each client process share N clients, "+
		"worker i using client i mod N (one client, many requests in flight, as applications use a client library). "+
		"Named for what is shared: a client, with its connection to every node, not one connection")
	f.StringSliceVar(&o.durability, "durability", []string{"fsync"}, "durability modes: fsync (the WAL is fsynced) and/or nofsync (unsafe_no_fsync)")
	f.IntVar(&o.replicas, "replicas", 3, "replicas per group of the fault-tolerant protocols (skeen always runs 1)")
	f.StringSliceVar(&o.protocols, "protocols", protocols, "protocols to run")
	f.StringVar(&o.dir, "dir", "", "working directory of the clusters, kept (default: a temporary one, each cluster's files removed once its rows are done)")
	f.StringVar(&o.cpuProfile, "cpu-profile", "", "write each agent's CPU profile (the whole run of its cluster) to this directory: PROTOCOL-MODE[-SERVICE]-nodeN.pprof, and each client process's (its window) as PROTOCOL-MODE[-SERVICE]-gK-cN-clientI.pprof")
	f.Uint64Var(&o.seed, "seed", 0, "seed of the draws (default: from the clock)")
	f.DurationVar(&o.sessionLease, "session-lease", 0, "the agents' session_lease: how long they remember a collected message id (default: the configuration's default, 1m)")
}

func (o *benchOptions) validate() error {
	for _, p := range o.protocols {
		if !slices.Contains(config.Protocols, p) {
			return fmt.Errorf("--protocols: unknown protocol %q (want some of %s)", p, strings.Join(config.Protocols, ","))
		}
	}
	for _, d := range o.durability {
		if d != "fsync" && d != "nofsync" {
			return fmt.Errorf("--durability: unknown mode %q (want fsync and/or nofsync)", d)
		}
	}
	for _, n := range o.clients {
		if n < 1 || n > 2000 {
			return fmt.Errorf("--clients: %d: want 1 to 2000 clients per row", n)
		}
	}
	for _, k := range o.perMsg {
		if k < 1 || k > 3 {
			return fmt.Errorf("--groups-per-msg: %d: want 1 to 3 (there are 3 groups)", k)
		}
	}
	switch {
	case len(o.protocols) == 0 || len(o.durability) == 0 || len(o.clients) == 0 || len(o.perMsg) == 0:
		return errors.New("bench: --protocols, --durability, --clients and --groups-per-msg need at least one value each")
	case o.dest != "uniform" && o.dest != "home":
		return fmt.Errorf("--dest %q: want uniform or home", o.dest)
	case o.window < 100*time.Millisecond || o.warmup < 0:
		return fmt.Errorf("--window %v / --warmup %v: want a window of at least 100ms and a warm-up of at least 0", o.window, o.warmup)
	case o.interval < 0 || (o.interval > 0 && (o.interval < 100*time.Millisecond || o.window%o.interval != 0 || o.window/o.interval > 1000)):
		return fmt.Errorf("--interval %v: want at least 100ms, dividing --window %v into at most 1000 slices", o.interval, o.window)
	case o.clientProcs < 1:
		return fmt.Errorf("--client-procs %d: want at least 1", o.clientProcs)
	case o.sharedClients < 0:
		return fmt.Errorf("--shared-clients %d: want 0 (every worker its own client) or the clients each client process's workers share (1 or more)", o.sharedClients)
	case o.replicas < 1 || o.replicas > 7:
		return fmt.Errorf("--replicas %d: want 1 to 7", o.replicas)
	case o.payload < 0 || o.payload > 1<<20:
		return fmt.Errorf("--payload %d: want 0 to 1 MiB", o.payload)
	}
	return nil
}

func runBench(cmd *cobra.Command, o benchOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	e, done, err := newBenchEnv(cmd, &o)
	if err != nil {
		return err
	}
	defer done()
	var rows []benchRow
	for _, c := range o.configs() {
		cl, err := e.startCluster(c, "")
		if err != nil {
			return err
		}
		for _, k := range o.perMsg {
			for _, n := range o.clients {
				row, err := e.multicastRow(cl, c, o.dest, k, o.payload, n)
				if err != nil {
					cl.stop()
					return err
				}
				rows = append(rows, row)
			}
		}
		if err := e.retire(cl); err != nil {
			return err
		}
	}
	if o.format == outJSON {
		b, _ := json.MarshalIndent(rows, "", "  ")
		fmt.Fprintln(cmd.OutOrStdout(), string(b))
	} else {
		writeBenchTable(cmd.OutOrStdout(), rows, o)
		writeTimeline(cmd.OutOrStdout(), rows)
	}
	if o.plot != "" {
		if err := os.WriteFile(o.plot, benchSVG(rows), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// multicastRow runs one rung of raw multicasts on cl: n closed-loop
// clients, k destination groups per message drawn by dest, payload bytes.
func (e *benchEnv) multicastRow(cl *benchCluster, c benchConfig, dest string, k, payload, n int) (benchRow, error) {
	o := e.o
	row := benchRow{Protocol: c.protocol, Replicas: c.replicas, FaultTolerant: c.protocol != "skeen", Durability: c.mode, Dest: dest,
		GroupsPerMsg: k, Clients: n, ClientProcs: min(o.clientProcs, n), WindowS: o.window.Seconds()}
	row.benchModel = o.model(n, row.ClientProcs)
	run, err := e.runProcs(cl, n, row.ClientProcs, benchClientSpec{Dest: dest, PerMsg: k, Payload: payload})
	if err != nil {
		return row, fmt.Errorf("bench %s (%s), %d group(s) per message, %d clients: %w", c.protocol, c.mode, k, n, err)
	}
	lat, errs := run.kind(0)
	if o.interval > 0 {
		var hists []latHist
		for _, res := range run.results {
			for i, h := range res.Intervals {
				if i == len(hists) {
					hists = append(hists, newLatHist())
				}
				hists[i].merge(h)
			}
		}
		row.Timeline = timeline(hists, o.interval, run.rss, run.sliceCPU)
	}
	row.Completed, row.Errors = lat.count(), errs
	row.Throughput = float64(row.Completed) / o.window.Seconds()
	row.P50ms, row.P90ms, row.P99ms, row.P999ms, row.MaxMs = lat.pctMs(0.5), lat.pctMs(0.9), lat.pctMs(0.99), lat.pctMs(0.999), lat.pctMs(1)
	row.benchCPU = run.cpu(row.Completed)
	fmt.Fprintf(os.Stderr, "   %d group(s)/msg, %3d clients (%d conns): %8.0f/s  p50 %.2fms  p99 %.2fms  cores: agents %.2f clients %.2f\n",
		k, n, row.ClientConns, row.Throughput, row.P50ms, row.P99ms, row.ServerCores, row.ClientCores)
	return row, nil
}

// model is the client model of a rung of n workers over procs processes.
func (o *benchOptions) model(n, procs int) benchModel {
	return benchModel{SharedClients: o.sharedClients, ClientConns: clientConns(n, procs, o.sharedClients)}
}

// writeBenchTable prints one line per row.
func writeBenchTable(w io.Writer, rows []benchRow, o benchOptions) {
	fmt.Fprintf(w, "3 groups on loopback, closed-loop clients (%s destinations), %d-byte payloads, %v warm-up, %v window per row\n",
		o.dest, o.payload, o.warmup, o.window)
	fmt.Fprintf(w, "%-9s %4s %-8s %4s %7s %5s %12s %8s %8s %8s %6s %6s %8s %7s %7s %8s\n",
		"protocol", "reps", "durable", "dest", "clients", "conns", "multicasts/s", "p50", "p99", "p99.9", "srv", "cli", "cpu/msg", "rw/msg", "cs/msg", "sync/msg")
	notFT := false
	for _, r := range rows {
		rep := fmt.Sprint(r.Replicas)
		if !r.FaultTolerant {
			rep += "*"
			notFT = true
		}
		fmt.Fprintf(w, "%-9s %4s %-8s %4d %7d %5d %12.0f %6.2fms %6.2fms %6.2fms %6.2f %6.2f %6.1fµs %7.1f %7.1f %8.2f\n",
			r.Protocol, rep, r.Durability, r.GroupsPerMsg, r.Clients, r.ClientConns, r.Throughput, r.P50ms, r.P99ms, r.P999ms,
			r.ServerCores, r.ClientCores, r.TotalCPUus, r.ServerRWSyscalls+r.ClientRWSyscalls, r.ServerCtxSwitches+r.ClientCtxSwitches, r.ServerSyncs)
	}
	fmt.Fprintln(w, "conns: clients in use, each its own id, session and connection to every node (= clients, one per worker, unless --shared-clients)")
	fmt.Fprintln(w, "srv/cli: cores used by the agents / the client processes; cpu/msg: their CPU per multicast; rw/msg: read+write")
	fmt.Fprintln(w, "system calls per multicast (/proc/<pid>/io, plus socket reads by recvmsg from the transports; fsync, epoll, futex not counted); cs/msg: context switches per multicast;")
	fmt.Fprintln(w, "sync/msg: the agents' WAL syncs per multicast (each an fdatasync with fsync, a plain write with nofsync)")
	if notFT {
		fmt.Fprintln(w, "* skeen is not fault tolerant: 1 replica per group, nothing persisted")
	}
	writeRowNotes(w, rows)
}

// writeRowNotes names the rows in whose window a group changed leader
// (or a member started a ballot: nothing failed in the benchmark, so a
// member suspected a leader that its loop or gossip had held up, and the
// recovery is in the row's latency), then those in whose window an
// agent's loop stalled.
func writeRowNotes(w io.Writer, rows []benchRow) {
	for _, r := range rows {
		if r.ServerBallots > 0 || r.ServerLeaderChanges > 0 {
			fmt.Fprintf(w, "! %s %s, %d group(s)/msg, %d clients: %d leader change(s), %d ballot(s) started in the window (nothing failed: a leader suspected under load)\n",
				r.Protocol, r.Durability, r.GroupsPerMsg, r.Clients, r.ServerLeaderChanges, r.ServerBallots)
		}
	}
	for _, r := range rows {
		if r.ServerLoopStalls > 0 {
			fmt.Fprintf(w, "~ %s %s, %d group(s)/msg, %d clients: %d loop stall(s) in the window (an agent's loop idle for over 5 ticks: its log says how long and why)\n",
				r.Protocol, r.Durability, r.GroupsPerMsg, r.Clients, r.ServerLoopStalls)
		}
	}
}
