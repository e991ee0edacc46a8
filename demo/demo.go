// Package demo runs weft's one-command local cluster: separate agent
// processes on loopback, a closed-loop client workload, a leader killed
// with SIGKILL and restarted, and every recorded delivery checked.
//
// Run starts Groups x Replicas processes of a weft binary (`EXE agent
// --config FILE`, by default the running executable) with random free
// ports and data in a temporary directory, then:
//
//  1. runs Clients closed-loop clients in this process (each multicasts
//     to one or two random groups and waits for the reply), printing a
//     progress line every second;
//  2. at 30% of Duration, SIGKILLs the leader of group KillGroup (found
//     through the agents' status endpoints) and reports the failover: when
//     a new leader was elected, when the group delivered a message
//     submitted after the kill, and the longest a write to the group
//     waited from the kill on (the write unavailability). With Stop
//     "term" it sends SIGTERM instead: a planned stop, in which the agent
//     hands its leadership to the next member before it exits;
//  3. at 60% of Duration, restarts the killed process, which recovers
//     from its WAL and rejoins its group;
//  4. at Duration, stops submitting, waits for the messages in flight,
//     lets the followers catch up and stops the agents with SIGTERM;
//  5. merges the client's multicast log with every agent's deliveries log
//     into a check.History and runs check.Check with quorum termination
//     (and agreement); it also checks that every gts the client was told
//     is the gts the agents delivered;
//  6. prints a summary (throughput, latency p50/p99, failover, recovery,
//     checker verdict) as its last lines and removes the processes and
//     the directory (the directory is kept if a check fails, or with
//     Keep).
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/internal/bank"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// Options configures Run. Zero fields take the documented defaults.
type Options struct {
	// Exe is the weft binary to run agents with (default: os.Executable).
	Exe string
	// Duration is the length of the workload (default 20s, at least 3s).
	Duration time.Duration
	// Groups and Replicas shape the cluster (default 3 x 3).
	Groups, Replicas int
	// Protocol is the protocol the agents run (default "wbcast"; see
	// config.Protocols; "skeen" needs Replicas = 1 and KillGroup < 0).
	Protocol string
	// Workload is what the clients do: "kv" (the default) runs weft-kv,
	// a bank of accounts with cross-shard transfers and full-balance reads
	// (internal/bank) and single-key operations on a few hot keys checked
	// for linearizability (kvload.go); "multicast" runs raw multicast
	// clients (and any Service).
	Workload string
	// Service is the replicated service the agents run (config key
	// "service"; default "none": they order the workload's messages and
	// apply nothing; "kv" with Workload "kv", the only one it takes). With
	// "kv" every group is a shard of weft-kv, and a multicast workload's
	// raw messages are refused by its state machine, after they are
	// ordered and delivered like any other.
	Service string
	// Clients is the number of concurrent closed-loop clients (default
	// 16): with Workload "kv", the bank's transfer workers.
	Clients int
	// Accounts is the bank's number of accounts (Workload "kv"; default
	// 30, spread over the shards).
	Accounts int
	// KVWorkers is the number of workers doing single-key operations on
	// the hot keys (Workload "kv"; default 4).
	KVWorkers int
	// Payload is the size of each message in bytes (default 64).
	Payload int
	// DestGroups fixes the number of destination groups of every message;
	// 0 draws 1 or 2 at random.
	DestGroups int
	// KillGroup is the group whose leader is killed (default 0); negative
	// kills nobody.
	KillGroup int
	// Stop is how that leader is stopped: "kill" (SIGKILL, the default: a
	// crash, detected by gossip) or "term" (SIGTERM: a planned stop, with
	// a leadership hand-over; docs/operations.md, "Leaving").
	Stop string
	// Tick and ElectionTicks tune the agents (default 10ms and 60: a
	// member silent on the direct link for 600ms is suspected, the
	// backstop behind gossip's verdict).
	Tick          time.Duration
	ElectionTicks int
	// GossipInterval is the agents' gossip round (profile "local"; default
	// 20ms). Gossip's phi-accrual detector convicts a killed leader in
	// about 20 rounds, before the direct timeout.
	GossipInterval time.Duration
	// Dir is the working directory (default: a new temporary directory).
	Dir string
	// Keep keeps the directory at the end.
	Keep bool
	// LogFormat is the agents' log format, "text" (default) or "json"
	// (config log_format).
	LogFormat string
	// HistoryFile, if set, receives the checked history (JSON lines).
	HistoryFile string
	// Seed seeds the workload (default: from the clock).
	Seed uint64
	// Out receives the progress and the summary (default os.Stdout).
	Out io.Writer
	// PeerAddr, if set, gives the address agent from is told to reach
	// agent to at (addr is the address to listens on): tests route each
	// ordered pair of agents through its own fault-injecting proxy. Agents
	// listen on their own address and clients use it.
	PeerAddr func(from, to wire.ProcID, addr string) (string, error)
	// TLS runs every connection over mutual TLS with development
	// certificates (a CA, one certificate per agent, one for the client,
	// written to Dir/tls) instead of the cluster key.
	TLS bool
	// Hold keeps the cluster up after the workload until ctx ends (weft
	// demo --hold: Ctrl-C), so its dashboard stays live; then the agents
	// stop and the checks run as without it.
	Hold bool
}

// Workloads (Options.Workload).
const (
	WorkloadKV        = "kv"
	WorkloadMulticast = "multicast"
)

// How Options.Stop stops a leader.
const (
	StopKill = "kill" // SIGKILL: a crash
	StopTerm = "term" // SIGTERM: a planned stop with a hand-over
)

// ErrCheckFailed is returned by Run when the recorded history fails a
// check.
var ErrCheckFailed = errors.New("demo: check failed")

// Summary is what a run measured.
type Summary struct {
	Elapsed               time.Duration
	Multicasts, Completed int
	Throughput            float64 // completed per second of workload
	P50, P99, Max         time.Duration
	Killed                wire.ProcID
	KilledGroup           int // -1 if nobody was killed
	KilledAt              time.Duration
	NewLeader             wire.ProcID
	Stop                  string        // Options.Stop
	ElectedAfter          time.Duration // 0 if not observed
	DeliveringAfter       time.Duration // 0 if not observed
	// LongestWait is the longest a write to the stopped leader's group
	// waited from the stop on (from the stop for a write in flight then,
	// from its submission for a later one; writes submitted within 2s of
	// the stop): the write unavailability the stop caused.
	LongestWait      time.Duration
	RestartedAt      time.Duration
	RejoinedAfter    time.Duration // 0 if not observed
	RestoredRecords  int
	RestoredSnapshot int // bytes
	Report           *check.Report
	ReplyMismatches  int
	Deliveries       int
	// KV is the weft-kv workload's part (nil with Workload "multicast").
	KV *KVSummary
}

func (o *Options) defaults() error {
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("demo: cannot find the weft binary: %w", err)
		}
		o.Exe = exe
	}
	if o.Duration == 0 {
		o.Duration = 20 * time.Second
	}
	if o.Groups == 0 {
		o.Groups = 3
	}
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.Protocol == "" {
		o.Protocol = config.DefaultProtocol
	}
	if o.Clients == 0 {
		o.Clients = 16
	}
	if o.Payload == 0 {
		o.Payload = 64
	}
	if o.Tick == 0 {
		o.Tick = 10 * time.Millisecond
	}
	if o.ElectionTicks == 0 {
		o.ElectionTicks = 60
	}
	if o.GossipInterval == 0 {
		o.GossipInterval = 20 * time.Millisecond
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
	if o.Stop == "" {
		o.Stop = StopKill
	}
	if o.Workload == "" {
		o.Workload = WorkloadKV
	}
	if o.Workload == WorkloadKV {
		if o.Service == "" {
			o.Service = config.ServiceKV
		}
		if o.Accounts == 0 {
			o.Accounts = bank.DefaultAccounts
		}
		if o.KVWorkers == 0 {
			o.KVWorkers = 4
		}
	}
	switch {
	case o.GossipInterval < config.MinGossipInterval:
		return fmt.Errorf("demo: gossip interval %v is below %v", o.GossipInterval, config.MinGossipInterval)
	case o.Duration < 3*time.Second:
		return fmt.Errorf("demo: --duration %v is below 3s", o.Duration)
	case o.Groups < 1 || o.Replicas < 1 || o.Groups*o.Replicas > 64:
		return fmt.Errorf("demo: %d groups x %d replicas: want at least 1 x 1 and at most 64 processes", o.Groups, o.Replicas)
	case o.Clients < 1 || o.Payload < 0:
		return fmt.Errorf("demo: --clients must be positive")
	case o.Stop != StopKill && o.Stop != StopTerm:
		return fmt.Errorf("demo: --stop %q: want %s or %s", o.Stop, StopKill, StopTerm)
	case o.KillGroup >= o.Groups:
		return fmt.Errorf("demo: --kill-group %d: there are %d groups", o.KillGroup, o.Groups)
	case o.DestGroups < 0 || o.DestGroups > o.Groups:
		return fmt.Errorf("demo: %d destination groups with %d groups", o.DestGroups, o.Groups)
	case o.Workload != WorkloadKV && o.Workload != WorkloadMulticast:
		return fmt.Errorf("demo: --workload %q: want %s or %s", o.Workload, WorkloadKV, WorkloadMulticast)
	case o.Workload == WorkloadKV && o.Service != config.ServiceKV:
		return fmt.Errorf("demo: the kv workload needs service %q, not %q", config.ServiceKV, o.Service)
	case o.Workload == WorkloadKV && o.Groups < 2:
		return fmt.Errorf("demo: the kv workload's transfers cross shards: --groups %d, want at least 2", o.Groups)
	case o.Workload == WorkloadKV && (o.Accounts < 2*o.Groups || o.Accounts > kv.MaxTxnOps):
		return fmt.Errorf("demo: --accounts %d: want 2 per shard (%d) to %d (one transaction reads them all)", o.Accounts, 2*o.Groups, kv.MaxTxnOps)
	case o.KVWorkers < 0:
		return fmt.Errorf("demo: --kv-workers %d is negative", o.KVWorkers)
	}
	return nil
}

type run struct {
	opt    Options
	dir    string
	key    []byte         // the cluster key every agent and client proves
	tls    *transport.TLS // with Options.TLS: the client's certificate
	tlsDir string         // with Options.TLS: the agents' certificates
	topo   *amcast.Topology
	agents []*agent
	hc     *http.Client
	tty    bool

	outMu    sync.Mutex
	progress string // the progress line on screen (tty only)

	mu        sync.Mutex
	statuses  map[wire.ProcID]node.Status
	events    []check.Event // multicast, crash, restart
	lat       []time.Duration
	window    []time.Duration
	completed int
	inflight  int
	failures  int
	replies   map[string]wire.Timestamp
	killTime  time.Time
	killGroup int
	firstBack time.Time // first completion to killGroup of a message submitted after the kill
	longest   time.Duration
}

// Run runs the demo; see the package documentation. It returns the summary
// and ErrCheckFailed if a check failed, or another error if the demo could
// not run.
func Run(ctx context.Context, opt Options) (*Summary, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	r := &run{opt: opt, hc: &http.Client{Timeout: 500 * time.Millisecond},
		statuses: map[wire.ProcID]node.Status{}, replies: map[string]wire.Timestamp{}, killGroup: -1}
	if f, ok := opt.Out.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			r.tty = true
		}
	}
	var err error
	if r.topo, err = amcast.NewTopology(opt.Groups, opt.Replicas); err != nil {
		return nil, err
	}
	r.dir = opt.Dir
	if r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "weft-demo-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	sum, err := r.main(ctx)
	r.stopAll(0)
	switch {
	case errors.Is(err, context.Canceled) && !opt.Keep && opt.Dir == "":
		os.RemoveAll(r.dir) // interrupted: nothing to look at
	case err != nil && !errors.Is(err, ErrCheckFailed):
		r.printf("the cluster's directory stays: %s", r.dir)
	case err == nil && !opt.Keep && opt.Dir == "":
		os.RemoveAll(r.dir)
	}
	return sum, err
}

// printf prints a line, above the progress line on a terminal.
func (r *run) printf(format string, args ...any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	line := fmt.Sprintf(format, args...)
	if r.tty && r.progress != "" {
		fmt.Fprintf(r.opt.Out, "\r\033[K%s\n%s", line, r.progress)
		return
	}
	fmt.Fprintln(r.opt.Out, line)
}

func (r *run) showProgress(line string) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if r.tty {
		r.progress = line
		fmt.Fprintf(r.opt.Out, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(r.opt.Out, line)
}

func (r *run) endProgress() {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if r.tty && r.progress != "" {
		fmt.Fprintln(r.opt.Out)
	}
	r.progress = ""
}

func (r *run) main(ctx context.Context) (*Summary, error) {
	opt := r.opt
	sum := &Summary{KilledGroup: -1}
	if err := r.setup(); err != nil {
		return nil, err
	}
	if opt.Workload == WorkloadKV {
		r.printf("weft demo: weft-kv on %d shards x %d replicas as separate processes on loopback; a bank of %d accounts (%d transfer workers, %d full-balance readers) and %d single-key workers, %v",
			opt.Groups, opt.Replicas, opt.Accounts, opt.Clients, bank.DefaultReaders, opt.KVWorkers, opt.Duration)
	} else {
		r.printf("weft demo: %d groups x %d replicas as separate processes on loopback, %d closed-loop multicast clients, %v",
			opt.Groups, opt.Replicas, opt.Clients, opt.Duration)
	}
	r.printf("data and logs in %s", r.dir)
	for _, a := range r.agents {
		if err := r.start(a); err != nil {
			return nil, err
		}
	}
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	go r.poll(pollCtx)
	startUp := time.Now()
	up := r.waitFor(ctx, 15*time.Second, func(sts map[wire.ProcID]node.Status) bool {
		if len(sts) < len(r.agents) {
			return false
		}
		for g := range r.topo.Groups {
			if _, ok := r.leaderOf(sts, g); !ok {
				return false
			}
		}
		return true
	})
	if !up {
		var b strings.Builder
		sts := r.snapshot()
		for _, a := range r.agents {
			if _, ok := sts[a.id]; !ok {
				fmt.Fprintf(&b, "\n  p%d is not answering; its log ends:\n    %s", a.id, r.tail(a))
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("demo: the cluster did not come up within 15s%s", b.String())
	}
	security := "a cluster key"
	if r.tlsDir != "" {
		security = "mutual TLS, certificates in " + r.tlsDir
	}
	r.printf("cluster up in %v: %d agents (%s), leaders %s", time.Since(startUp).Round(time.Millisecond), len(r.agents), security, r.leaders(r.snapshot()))
	dash := r.dashboardAgent()
	dashURL := "http://" + dash.admin + "/dashboard/"
	live := "live while the agents run, until the checks; --hold keeps it up after the workload"
	if opt.Hold {
		live = "live while the agents run, after the workload too until Ctrl-C"
	}
	r.printf("dashboard   %s (p%d's view of the cluster; %s)", dashURL, dash.id, live)

	// The workload.
	nodes := map[wire.ProcID]string{}
	for _, a := range r.agents {
		st := r.snapshot()[a.id]
		nodes[a.id] = st.Addr
	}
	kvMode := opt.Workload == WorkloadKV
	// A kv client waits for every shard's answer, and may give up on an
	// operation (a deadline): its multicasts are optional for termination.
	cl, err := client.New(r.clientConfig(nodes, kvMode, kvMode))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var wl workload = &mcastWorkload{r: r, cl: cl}
	if kvMode {
		if wl, err = r.newKVWorkload(ctx, cl); err != nil {
			return nil, err
		}
	}
	drainCtx, cancelDrain := context.WithCancel(ctx)
	defer cancelDrain()
	t0 := time.Now()
	wl.start(drainCtx)

	killAt := time.Duration(float64(opt.Duration) * 0.3)
	restartAt := time.Duration(float64(opt.Duration) * 0.6)
	kill := time.NewTimer(killAt)
	restart := time.NewTimer(restartAt)
	end := time.NewTimer(opt.Duration)
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	if opt.KillGroup < 0 {
		kill.Stop()
		restart.Stop()
	}
	var killed *agent
	var oldBallot wire.Ballot
	var watchers sync.WaitGroup
loop:
	for {
		select {
		case <-ctx.Done():
			cancelDrain()
			wl.stop()
			watchers.Wait()
			r.endProgress()
			return nil, ctx.Err()
		case <-progress.C:
			r.showProgress(fmt.Sprintf("[%5.1fs] %s  leaders %s", time.Since(t0).Seconds(), wl.progress(), r.leaders(r.snapshot())))
		case <-kill.C:
			sts := r.snapshot()
			st, ok := r.leaderOf(sts, opt.KillGroup)
			if !ok {
				r.printf("no leader of g%d to kill right now; trying again in 100ms", opt.KillGroup)
				kill.Reset(100 * time.Millisecond)
				continue
			}
			killed = r.agents[st.ID]
			oldBallot = st.Ballot
			sig, signal := os.Signal(os.Kill), "SIGKILL"
			if opt.Stop == StopTerm {
				sig, signal = syscall.SIGTERM, "SIGTERM"
			}
			stopAt := time.Now()
			r.mu.Lock()
			r.killTime, r.killGroup = stopAt, opt.KillGroup
			r.mu.Unlock()
			killed.cmd.Process.Signal(sig)
			<-killed.exited
			now := time.Now()
			r.mu.Lock()
			r.events = append(r.events, check.Event{Ev: check.EvCrash, Proc: int(killed.id), T: now.UnixMicro()})
			r.mu.Unlock()
			sum.Killed, sum.KilledGroup, sum.KilledAt, sum.Stop = killed.id, opt.KillGroup, stopAt.Sub(t0), opt.Stop
			r.printf("stopped p%d (leader of g%d, ballot %s, pid %d) with %s at %.1fs; it exited %v later", killed.id, opt.KillGroup, oldBallot, st.Pid, signal, stopAt.Sub(t0).Seconds(), fmtDur(now.Sub(stopAt)))
			watchers.Go(func() { r.watchFailover(ctx, sum, opt.KillGroup, killed.id, oldBallot, stopAt) })
		case <-restart.C:
			if killed == nil {
				continue
			}
			now := time.Now()
			r.mu.Lock()
			r.events = append(r.events, check.Event{Ev: check.EvRestart, Proc: int(killed.id), T: now.UnixMicro()})
			r.mu.Unlock()
			if err := r.start(killed); err != nil {
				return nil, err
			}
			sum.RestartedAt = now.Sub(t0)
			r.printf("restarted p%d (pid %d) at %.1fs: recovering from its WAL", killed.id, killed.cmd.Process.Pid, now.Sub(t0).Seconds())
			watchers.Go(func() { r.watchRejoin(ctx, sum, killed, now) })
		case <-end.C:
			break loop
		}
	}
	r.printf("[%5.1fs] workload stopped; waiting for the operations in flight", time.Since(t0).Seconds())
	drained := make(chan struct{})
	go func() { wl.stop(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(20 * time.Second):
		r.printf("operations still in flight after 20s; giving up on them")
		cancelDrain()
		<-drained
	}
	sum.Elapsed = time.Since(t0)
	watchers.Wait()
	r.endProgress()
	wl.final(ctx)

	// Let followers catch up, then stop the agents.
	settled := r.waitFor(ctx, 10*time.Second, r.settled())
	if !settled {
		r.printf("the groups did not settle within 10s (checking anyway)")
	}
	r.printMembers(ctx)
	if opt.Hold {
		r.printf("holding the cluster up (--hold): dashboard %s; Ctrl-C stops the agents and runs the checks", dashURL)
		<-ctx.Done()
	}
	stopPoll()
	r.stopAll(5 * time.Second)
	for _, a := range r.agents {
		if a.cmd != nil && a.cmd.ProcessState != nil && !a.cmd.ProcessState.Success() && a != killed {
			r.printf("agent p%d exited with %v; its log ends:\n    %s", a.id, a.cmd.ProcessState, r.tail(a))
		}
	}

	// Check.
	h, err := r.history()
	if err != nil {
		return nil, err
	}
	histPath := filepath.Join(r.dir, "history.jsonl")
	if err := writeHistory(histPath, h); err != nil {
		return nil, err
	}
	if opt.HistoryFile != "" {
		if err := writeHistory(opt.HistoryFile, h); err != nil {
			return nil, err
		}
	}
	sum.Report = check.Check(h, check.Options{Termination: check.TermQuorum})
	sum.ReplyMismatches = r.compareReplies(h)
	sum.Multicasts = sum.Report.Multicasts
	sum.Deliveries = sum.Report.Deliveries
	r.mu.Lock()
	sum.LongestWait = r.longest
	r.mu.Unlock()
	passed := wl.summarize(sum) && sum.Report.OK() && sum.ReplyMismatches == 0
	if opt.Keep || !passed {
		r.printf("the cluster's directory stays: %s", r.dir)
	}
	r.printSummary(sum)
	if !passed {
		return sum, ErrCheckFailed
	}
	return sum, nil
}

// clientConfig configures a client of the agents at nodes, over mutual
// TLS with r.tls, else with r.key, whose multicasts go into the checked
// history. allGroups waits for every destination group's answer (a
// replicated service's client); optional marks the multicasts Optional
// (check.Event): a client that gives up on a message (a deadline) may
// leave it undelivered without failing termination.
func (r *run) clientConfig(nodes map[wire.ProcID]string, allGroups, optional bool) client.Config {
	return client.Config{Cluster: "weft-demo", ClusterKey: r.key, TLS: r.tls, Topology: r.topo, Nodes: nodes, Tick: r.opt.Tick, RetryTicks: 10,
		AllGroups: allGroups,
		OnMulticast: func(m wire.AppMsg, at time.Time) {
			dest := make([]int, len(m.Dest))
			for i, g := range m.Dest {
				dest[i] = int(g)
			}
			r.mu.Lock()
			r.events = append(r.events, check.Event{Ev: check.EvMulticast, ID: m.ID.Full(), Dest: dest, T: at.UnixMicro(), Optional: optional})
			r.mu.Unlock()
		}}
}

// dashboardAgent is the agent whose dashboard the demo shows: the first
// one outside the group whose leader is killed, so the page stays up
// through the failover and shows it.
func (r *run) dashboardAgent() *agent {
	for _, a := range r.agents {
		if a.group != r.opt.KillGroup {
			return a
		}
	}
	return r.agents[0]
}

// settled reports whether every group's members are all up and agree on
// their last delivery (an amnesiac member, inert, is left out: it never
// delivers).
func (r *run) settled() func(map[wire.ProcID]node.Status) bool {
	prev := map[wire.ProcID]wire.Timestamp{}
	stable := 0
	return func(sts map[wire.ProcID]node.Status) bool {
		if len(sts) < len(r.agents) {
			return false
		}
		for g := range r.topo.Groups {
			ms := slices.DeleteFunc(slices.Clone(r.topo.Members(wire.GroupID(g))), func(p wire.ProcID) bool { return sts[p].Amnesiac })
			for _, p := range ms {
				if sts[p].MaxDelivered != sts[ms[0]].MaxDelivered {
					stable = 0
					return false
				}
			}
		}
		same := true
		for p, st := range sts {
			if prev[p] != st.MaxDelivered {
				same = false
			}
			prev[p] = st.MaxDelivered
		}
		if !same {
			stable = 0
			return false
		}
		stable++
		return stable >= 5
	}
}

func (r *run) worker(ctx context.Context, cl *client.Client, stop *atomic.Bool, w uint64) {
	rng := rand.New(rand.NewPCG(r.opt.Seed, w))
	payload := make([]byte, r.opt.Payload)
	for !stop.Load() {
		k := r.opt.DestGroups
		if k == 0 {
			k = 1 + rng.IntN(min(2, r.opt.Groups))
		}
		perm := rng.Perm(r.opt.Groups)[:k]
		slices.Sort(perm)
		dest := make([]wire.GroupID, k)
		for i, g := range perm {
			dest[i] = wire.GroupID(g)
		}
		for i := range payload {
			payload[i] = byte('a' + rng.IntN(26))
		}
		r.mu.Lock()
		r.inflight++
		r.mu.Unlock()
		submitted := time.Now()
		res, err := cl.Multicast(ctx, dest, payload)
		done := time.Now()
		r.mu.Lock()
		r.inflight--
		if err != nil {
			r.failures++
			r.mu.Unlock()
			return
		}
		r.completed++
		r.lat = append(r.lat, res.Latency)
		r.window = append(r.window, res.Latency)
		r.replies[res.ID.Full()] = res.GTS
		r.observeLocked(dest, submitted, done)
		r.mu.Unlock()
	}
}

// observeLocked notes a write to dest, submitted and answered at the given
// times, for the failover's figures: the first answer from the stopped
// leader's group to a write submitted after the stop, and the longest a
// write to that group waited from the stop on. The caller holds r.mu.
func (r *run) observeLocked(dest []wire.GroupID, submitted, done time.Time) {
	if r.killGroup < 0 || !slices.Contains(dest, wire.GroupID(r.killGroup)) {
		return
	}
	if r.firstBack.IsZero() && submitted.After(r.killTime) {
		r.firstBack = done
	}
	if done.After(r.killTime) && submitted.Before(r.killTime.Add(2*time.Second)) {
		r.longest = max(r.longest, done.Sub(later(submitted, r.killTime)))
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
