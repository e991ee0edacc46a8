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
//     a new leader was elected and when the group delivered a message
//     submitted after the kill;
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
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/internal/check"
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
	// Clients is the number of concurrent closed-loop clients (default 16).
	Clients int
	// Payload is the size of each message in bytes (default 64).
	Payload int
	// DestGroups fixes the number of destination groups of every message;
	// 0 draws 1 or 2 at random.
	DestGroups int
	// KillGroup is the group whose leader is killed (default 0); negative
	// kills nobody.
	KillGroup int
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
	ElectedAfter          time.Duration // 0 if not observed
	DeliveringAfter       time.Duration // 0 if not observed
	RestartedAt           time.Duration
	RejoinedAfter         time.Duration // 0 if not observed
	RestoredRecords       int
	RestoredSnapshot      int // bytes
	Report                *check.Report
	ReplyMismatches       int
	Deliveries            int
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
	switch {
	case o.GossipInterval < config.MinGossipInterval:
		return fmt.Errorf("demo: gossip interval %v is below %v", o.GossipInterval, config.MinGossipInterval)
	case o.Duration < 3*time.Second:
		return fmt.Errorf("demo: --duration %v is below 3s", o.Duration)
	case o.Groups < 1 || o.Replicas < 1 || o.Groups*o.Replicas > 64:
		return fmt.Errorf("demo: %d groups x %d replicas: want at least 1 x 1 and at most 64 processes", o.Groups, o.Replicas)
	case o.Clients < 1 || o.Payload < 0:
		return fmt.Errorf("demo: --clients must be positive")
	case o.KillGroup >= o.Groups:
		return fmt.Errorf("demo: --kill-group %d: there are %d groups", o.KillGroup, o.Groups)
	case o.DestGroups < 0 || o.DestGroups > o.Groups:
		return fmt.Errorf("demo: %d destination groups with %d groups", o.DestGroups, o.Groups)
	}
	return nil
}

type agent struct {
	id      wire.ProcID
	group   int
	dir     string
	cfgPath string
	logPath string
	// dlogPath is the agent's deliveries log (outside its data directory:
	// the checks read it whatever happens to the node's state).
	dlogPath string
	admin    string
	// wrap, if set, is the command the agent runs under: its name and
	// arguments come before the weft binary's (tests run agents in network
	// namespaces: ip netns exec NS).
	wrap   []string
	cmd    *exec.Cmd
	exited chan struct{}
}

func (a *agent) running() bool {
	if a.cmd == nil {
		return false
	}
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
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

func freePorts(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// setup writes every agent's configuration.
func (r *run) setup() error {
	n := r.topo.NumReplicas()
	keyPath, err := r.setupSecurity()
	if err != nil {
		return err
	}
	addrs, err := freePorts(2 * n)
	if err != nil {
		return err
	}
	nodes := map[string]string{}
	var groups [][]wire.ProcID
	for g := range r.topo.Groups {
		groups = append(groups, slices.Clone(r.topo.Groups[g]))
	}
	for p := range n {
		nodes[strconv.Itoa(p)] = addrs[p]
	}
	for p := range n {
		a := &agent{id: wire.ProcID(p), group: p / r.opt.Replicas, dir: filepath.Join(r.dir, fmt.Sprintf("node%d", p)), admin: addrs[n+p]}
		a.cfgPath = filepath.Join(r.dir, fmt.Sprintf("node%d.toml", p))
		a.logPath = filepath.Join(r.dir, fmt.Sprintf("node%d.log", p))
		a.dlogPath = filepath.Join(r.dir, fmt.Sprintf("node%d-deliveries.jsonl", p))
		peers := nodes
		if r.opt.PeerAddr != nil {
			peers = map[string]string{}
			for q := range n {
				addr := addrs[q]
				if q != p {
					if addr, err = r.opt.PeerAddr(a.id, wire.ProcID(q), addr); err != nil {
						return err
					}
				}
				peers[strconv.Itoa(q)] = addr
			}
		}
		cfg := config.Config{
			Cluster: "weft-demo", Protocol: r.opt.Protocol, ID: a.id, DataDir: a.dir, Admin: a.admin, ClusterKeyFile: keyPath,
			Tick: r.opt.Tick, ElectionTicks: r.opt.ElectionTicks, HeartbeatTicks: config.DefaultHeartbeatTicks,
			RetryTicks: config.DefaultRetryTicks, SessionLease: config.DefaultSessionLease, LogLevel: "info", LogFormat: r.opt.LogFormat, Groups: groups, Nodes: peers,
			// Small segments (9 agents preallocate them) and frequent
			// compaction, so the restarted agent recovers from a snapshot.
			WALSegmentSize: 4 << 20, CompactBytes: 256 << 10,
			// Gossip's phi-accrual detector drives failover: fast rounds
			// on loopback convict a killed leader in about 0.4s.
			Gossip: config.Gossip{Enabled: true, Profile: "local", Interval: r.opt.GossipInterval},
			// The checks read every delivery: rotate, but keep every file.
			DeliveryLog: a.dlogPath, DeliveryLogFiles: config.MaxDeliveryLogFiles,
			// A member whose data directory is empty asks its peers
			// whether they saw it run before it starts as a new one.
			BootstrapProbe: config.DefaultBootstrapProbe,
		}
		if r.tlsDir != "" {
			cfg.TLSCert = filepath.Join(r.tlsDir, fmt.Sprintf("node-%d.crt", p))
			cfg.TLSKey = filepath.Join(r.tlsDir, fmt.Sprintf("node-%d.key", p))
			cfg.TLSCA = filepath.Join(r.tlsDir, "ca.crt")
		}
		// Check what we write the way the agent will read it.
		if _, err := config.Parse(cfg.Format(), config.Agent); err != nil {
			return err
		}
		if err := os.WriteFile(a.cfgPath, []byte(cfg.Format()), 0o644); err != nil {
			return err
		}
		r.agents = append(r.agents, a)
	}
	return nil
}

// setupSecurity writes a fresh cluster key, or with Options.TLS a CA and
// every agent's certificate (in r.tlsDir) and makes the client's. It
// returns the key file's path ("" with TLS).
func (r *run) setupSecurity() (string, error) {
	if !r.opt.TLS {
		// A fresh cluster key: every connection proves it on both sides.
		var raw [32]byte
		crand.Read(raw[:])
		keyPath := filepath.Join(r.dir, "cluster.key")
		if err := os.WriteFile(keyPath, []byte(hex.EncodeToString(raw[:])+"\n"), 0o600); err != nil {
			return "", err
		}
		var err error
		r.key, err = config.ReadClusterKey(keyPath)
		return keyPath, err
	}
	r.tlsDir = filepath.Join(r.dir, "tls")
	if err := os.MkdirAll(r.tlsDir, 0o700); err != nil {
		return "", err
	}
	now := time.Now()
	ca, err := transport.NewDevCA("weft demo CA", now.Add(-time.Hour), now.Add(24*time.Hour))
	if err != nil {
		return "", err
	}
	files := map[string][]byte{"ca.crt": ca.CertPEM}
	for p := range r.topo.NumReplicas() {
		is, err := ca.Issue(transport.CertSpec{Cluster: "weft-demo", Identity: transport.NodeIdentity(wire.ProcID(p)),
			Hosts: []string{"127.0.0.1"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)})
		if err != nil {
			return "", err
		}
		files[fmt.Sprintf("node-%d.crt", p)], files[fmt.Sprintf("node-%d.key", p)] = is.CertPEM, is.KeyPEM
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(r.tlsDir, name), b, 0o600); err != nil {
			return "", err
		}
	}
	r.tls, err = transport.DevTLS("weft-demo", transport.AnyClientIdentity(), ca, nil, 24*time.Hour)
	return "", err
}

// start starts agent a's process, with flags after its --config.
func (r *run) start(a *agent, flags ...string) error {
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := slices.Concat(a.wrap, []string{r.opt.Exe, "agent", "--config", a.cfgPath}, flags)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("demo: starting %s agent: %w", r.opt.Exe, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(exited)
	}()
	a.cmd, a.exited = cmd, exited
	return nil
}

// stopAll stops every running agent: SIGTERM (unless grace is 0), then
// SIGKILL after grace.
func (r *run) stopAll(grace time.Duration) {
	for _, a := range r.agents {
		if a.running() {
			if grace > 0 {
				a.cmd.Process.Signal(syscall.SIGTERM)
			} else {
				a.cmd.Process.Kill()
			}
		}
	}
	deadline := time.After(max(grace, time.Second))
	for _, a := range r.agents {
		if a.cmd == nil {
			continue
		}
		select {
		case <-a.exited:
		case <-deadline:
			a.cmd.Process.Kill()
			<-a.exited
		}
	}
}

// poll refreshes the statuses of the agents until ctx ends.
func (r *run) poll(ctx context.Context) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		got := make([]*node.Status, len(r.agents))
		for i, a := range r.agents {
			wg.Go(func() {
				st, err := node.FetchStatus(ctx, r.hc, a.admin)
				if err == nil && st.ID == a.id {
					got[i] = &st
				}
			})
		}
		wg.Wait()
		r.mu.Lock()
		for i, a := range r.agents {
			if got[i] != nil {
				r.statuses[a.id] = *got[i]
			} else {
				delete(r.statuses, a.id)
			}
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *run) snapshot() map[wire.ProcID]node.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[wire.ProcID]node.Status, len(r.statuses))
	for k, v := range r.statuses {
		out[k] = v
	}
	return out
}

// waitFor polls cond over the statuses until it holds, ctx ends or the
// timeout passes.
func (r *run) waitFor(ctx context.Context, timeout time.Duration, cond func(map[wire.ProcID]node.Status) bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond(r.snapshot()) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leaderOf returns the live member of g that leads the highest ballot.
func (r *run) leaderOf(sts map[wire.ProcID]node.Status, g int) (node.Status, bool) {
	var best node.Status
	ok := false
	for _, p := range r.topo.Members(wire.GroupID(g)) {
		st, live := sts[p]
		if live && st.Leader && (!ok || best.Ballot.Less(st.Ballot)) {
			best, ok = st, true
		}
	}
	return best, ok
}

func (r *run) leaders(sts map[wire.ProcID]node.Status) string {
	var parts []string
	for g := range r.topo.Groups {
		if st, ok := r.leaderOf(sts, g); ok {
			parts = append(parts, fmt.Sprintf("g%d=p%d", g, st.ID))
		} else {
			parts = append(parts, fmt.Sprintf("g%d=?", g))
		}
	}
	return strings.Join(parts, " ")
}

func (r *run) tail(a *agent) string {
	b, _ := os.ReadFile(a.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n    ")
}

func (r *run) main(ctx context.Context) (*Summary, error) {
	opt := r.opt
	sum := &Summary{KilledGroup: -1}
	if err := r.setup(); err != nil {
		return nil, err
	}
	r.printf("weft demo: %d groups x %d replicas as separate processes on loopback, %d closed-loop clients, %v",
		opt.Groups, opt.Replicas, opt.Clients, opt.Duration)
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
	cl, err := client.New(client.Config{Cluster: "weft-demo", ClusterKey: r.key, TLS: r.tls, Topology: r.topo, Nodes: nodes, Tick: opt.Tick, RetryTicks: 10,
		OnMulticast: func(m wire.AppMsg, at time.Time) {
			dest := make([]int, len(m.Dest))
			for i, g := range m.Dest {
				dest[i] = int(g)
			}
			r.mu.Lock()
			r.events = append(r.events, check.Event{Ev: check.EvMulticast, ID: m.ID.Full(), Dest: dest, T: at.UnixMicro()})
			r.mu.Unlock()
		}})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var stop atomic.Bool
	drainCtx, cancelDrain := context.WithCancel(ctx)
	defer cancelDrain()
	var workers sync.WaitGroup
	t0 := time.Now()
	for w := range opt.Clients {
		workers.Go(func() { r.worker(drainCtx, cl, &stop, uint64(w)) })
	}

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
	lastCompleted := 0
loop:
	for {
		select {
		case <-ctx.Done():
			stop.Store(true)
			cancelDrain()
			workers.Wait()
			watchers.Wait()
			r.endProgress()
			return nil, ctx.Err()
		case <-progress.C:
			r.mu.Lock()
			win := r.window
			r.window = nil
			done, inflight := r.completed, r.inflight
			r.mu.Unlock()
			slices.Sort(win)
			r.showProgress(fmt.Sprintf("[%5.1fs] delivered %s  rate %s/s  p50 %s  in flight %d  leaders %s",
				time.Since(t0).Seconds(), commas(done), commas(done-lastCompleted), fmtDur(pct(win, 0.5)), inflight, r.leaders(r.snapshot())))
			lastCompleted = done
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
			killed.cmd.Process.Kill()
			<-killed.exited
			now := time.Now()
			r.mu.Lock()
			r.events = append(r.events, check.Event{Ev: check.EvCrash, Proc: int(killed.id), T: now.UnixMicro()})
			r.killTime, r.killGroup = now, opt.KillGroup
			r.mu.Unlock()
			sum.Killed, sum.KilledGroup, sum.KilledAt = killed.id, opt.KillGroup, now.Sub(t0)
			r.printf("killed p%d (leader of g%d, ballot %s, pid %d) with SIGKILL at %.1fs", killed.id, opt.KillGroup, oldBallot, st.Pid, now.Sub(t0).Seconds())
			watchers.Go(func() { r.watchFailover(ctx, sum, opt.KillGroup, killed.id, oldBallot, now) })
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
	stop.Store(true)
	r.mu.Lock()
	inflight := r.inflight
	r.mu.Unlock()
	r.printf("[%5.1fs] workload stopped; waiting for %d messages in flight", time.Since(t0).Seconds(), inflight)
	drained := make(chan struct{})
	go func() { workers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(20 * time.Second):
		r.printf("messages still in flight after 20s; giving up on them")
		cancelDrain()
		<-drained
	}
	sum.Elapsed = time.Since(t0)
	watchers.Wait()
	r.endProgress()

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
	r.mu.Lock()
	all := slices.Clone(r.lat)
	sum.Completed = r.completed
	failures := r.failures
	r.mu.Unlock()
	slices.Sort(all)
	sum.Multicasts = sum.Report.Multicasts
	sum.Deliveries = sum.Report.Deliveries
	sum.P50, sum.P99 = pct(all, 0.5), pct(all, 0.99)
	if len(all) > 0 {
		sum.Max = all[len(all)-1]
	}
	sum.Throughput = float64(sum.Completed) / opt.Duration.Seconds()
	if failures > 0 {
		r.printf("%d multicasts got no reply", failures)
	}
	if opt.Keep || !sum.Report.OK() || sum.ReplyMismatches > 0 || failures > 0 {
		r.printf("the cluster's directory stays: %s", r.dir)
	}
	r.printSummary(sum)
	if !sum.Report.OK() || sum.ReplyMismatches > 0 || failures > 0 {
		return sum, ErrCheckFailed
	}
	return sum, nil
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
		if r.killGroup >= 0 && r.firstBack.IsZero() && submitted.After(r.killTime) && slices.Contains(dest, wire.GroupID(r.killGroup)) {
			r.firstBack = done
		}
		r.mu.Unlock()
	}
}

// watchFailover reports when the killed leader's group elects a new leader
// and delivers again.
func (r *run) watchFailover(ctx context.Context, sum *Summary, g int, killed wire.ProcID, old wire.Ballot, at time.Time) {
	var elected node.Status
	if r.waitFor(ctx, 10*time.Second, func(sts map[wire.ProcID]node.Status) bool {
		st, ok := r.leaderOf(sts, g)
		if ok && old.Less(st.Ballot) {
			elected = st
			return true
		}
		return false
	}) {
		sum.NewLeader, sum.ElectedAfter = elected.ID, time.Since(at)
		if since := elected.LeaderSince.Sub(at); since > 0 && since < sum.ElectedAfter {
			sum.ElectedAfter = since // when it took over, not when the poll saw it
		}
		r.printf("failover: p%d leads g%d (ballot %s) %v after the kill", elected.ID, g, elected.Ballot, fmtDur(sum.ElectedAfter))
		r.gossipLine(ctx, elected.ID, killed)
	} else {
		r.printf("failover: no new leader of g%d within 10s", g)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.mu.Lock()
		back := r.firstBack
		r.mu.Unlock()
		if !back.IsZero() {
			sum.DeliveringAfter = back.Sub(at)
			r.printf("failover: g%d delivering again %v after the kill", g, fmtDur(sum.DeliveringAfter))
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.printf("failover: g%d did not deliver a new message within 10s of the kill", g)
}

// printMembers prints the cluster as the first live agent's gossip sees
// it (weft members).
func (r *run) printMembers(ctx context.Context) {
	for _, a := range r.agents {
		if !a.running() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ms, err := node.FetchMembers(cctx, r.hc, a.admin)
		cancel()
		if err != nil {
			continue
		}
		r.printf("cluster as p%d's gossip sees it (weft members --admin %s):", a.id, a.admin)
		var sb strings.Builder
		node.WriteMembers(&sb, ms)
		r.printf("%s", strings.TrimRight(sb.String(), "\n"))
		return
	}
}

// gossipLine prints how agent at's gossip sees member of: the failure
// detector's verdict that triggered the failover.
func (r *run) gossipLine(ctx context.Context, at, of wire.ProcID) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ms, err := node.FetchMembers(ctx, r.hc, r.agents[at].admin)
	if err != nil {
		r.printf("gossip: cannot read p%d's view: %v", at, err)
		return
	}
	up := 0
	for _, m := range ms {
		if m.Status == node.MemberUp {
			up++
		}
	}
	for _, m := range ms {
		if m.ID == of {
			r.printf("gossip: p%d sees p%d %s (phi %.1f), %d of %d members up", at, of, m.Status, m.Phi, up, len(ms))
		}
	}
}

// watchRejoin reports when a restarted agent is back in its group: up,
// following (or leading) the group's current ballot, caught up.
func (r *run) watchRejoin(ctx context.Context, sum *Summary, a *agent, at time.Time) {
	var st node.Status
	ok := r.waitFor(ctx, 15*time.Second, func(sts map[wire.ProcID]node.Status) bool {
		var live bool
		st, live = sts[a.id]
		if !live || st.Role == "RECOVERING" {
			return false
		}
		l, ok := r.leaderOf(sts, a.group)
		return ok && st.CBallot == l.CBallot
	})
	if !ok {
		r.printf("p%d did not rejoin g%d within 15s; its log ends:\n    %s", a.id, a.group, r.tail(a))
		return
	}
	sum.RejoinedAfter = time.Since(at)
	sum.RestoredRecords = st.Stats.RestoredRecords
	sum.RestoredSnapshot = st.Stats.RestoredSnapshotBytes
	r.printf("p%d rejoined g%d as %s of ballot %s %v after the restart (replayed %s)",
		a.id, a.group, st.Role, st.CBallot, fmtDur(sum.RejoinedAfter), replayed(sum))
}

// history merges the client's multicasts, the crash and restart events and
// every agent's deliveries log, in time order (each process's deliveries
// keep their logged order).
func (r *run) history() (*check.History, error) {
	h := &check.History{Config: check.Config{Protocol: r.opt.Protocol, Groups: r.opt.Groups, Replicas: r.opt.Replicas, Seed: r.opt.Seed}}
	r.mu.Lock()
	evs := slices.Clone(r.events)
	r.mu.Unlock()
	for _, a := range r.agents {
		ph, err := node.ReadDeliveryLog(a.dlogPath)
		if err != nil {
			return nil, fmt.Errorf("demo: p%d's deliveries: %w", a.id, err)
		}
		evs = append(evs, ph.Events...)
	}
	rank := map[string]int{check.EvMulticast: 0, check.EvRestart: 1, check.EvDeliver: 2, check.EvInstall: 2, check.EvCrash: 3}
	slices.SortStableFunc(evs, func(a, b check.Event) int {
		if a.T != b.T {
			if a.T < b.T {
				return -1
			}
			return 1
		}
		return rank[a.Ev] - rank[b.Ev]
	})
	h.Events = evs
	return h, nil
}

// compareReplies counts the client replies whose gts differs from the
// delivered one.
func (r *run) compareReplies(h *check.History) int {
	got := map[string]check.GTS{}
	for _, ev := range h.Events {
		if ev.Ev == check.EvDeliver {
			if _, ok := got[ev.ID]; !ok {
				got[ev.ID] = ev.GTS
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	bad := 0
	for id, ts := range r.replies {
		if ts.IsZero() {
			continue
		}
		if g, ok := got[id]; !ok || g.T != ts.T || g.G != int(ts.G) {
			if bad < 5 {
				r.outMu.Lock()
				fmt.Fprintf(r.opt.Out, "client was told %s has gts %s; the agents delivered %v (found %v)\n", id, ts, g, ok)
				r.outMu.Unlock()
			}
			bad++
		}
	}
	return bad
}

func writeHistory(path string, h *check.History) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := check.WriteJSONL(f, h); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (r *run) printSummary(s *Summary) {
	out := r.opt.Out
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if !s.Report.OK() {
		fmt.Fprintln(out, s.Report.Error())
	}
	fmt.Fprintf(out, "== summary: %d groups x %d replicas, %d clients, %v workload\n", r.opt.Groups, r.opt.Replicas, r.opt.Clients, r.opt.Duration)
	fmt.Fprintf(out, "throughput  %s multicasts/s (%s delivered to 1 or 2 groups; %s deliveries at replicas)\n",
		commas(int(s.Throughput+0.5)), commas(s.Completed), commas(s.Deliveries))
	fmt.Fprintf(out, "latency     p50 %s  p99 %s  max %s\n", fmtDur(s.P50), fmtDur(s.P99), fmtDur(s.Max))
	if s.KilledGroup >= 0 {
		elected, back := "not observed", "not observed"
		if s.ElectedAfter > 0 {
			elected = fmt.Sprintf("p%d elected after %s", s.NewLeader, fmtDur(s.ElectedAfter))
		}
		if s.DeliveringAfter > 0 {
			back = "delivering again after " + fmtDur(s.DeliveringAfter)
		}
		fmt.Fprintf(out, "failover    leader p%d of g%d killed at %.1fs: %s, %s\n", s.Killed, s.KilledGroup, s.KilledAt.Seconds(), elected, back)
		rejoin := "did not rejoin"
		if s.RejoinedAfter > 0 {
			rejoin = fmt.Sprintf("replayed %s, rejoined after %s", replayed(s), fmtDur(s.RejoinedAfter))
		}
		if s.RestartedAt > 0 {
			fmt.Fprintf(out, "recovery    p%d restarted at %.1fs: %s\n", s.Killed, s.RestartedAt.Seconds(), rejoin)
		}
	}
	verdict := "PASS"
	if !s.Report.OK() || s.ReplyMismatches > 0 || s.Completed < s.Multicasts {
		verdict = "FAIL"
	}
	detail := fmt.Sprintf("%d violations", s.Report.Total)
	if s.ReplyMismatches > 0 {
		detail += fmt.Sprintf(", %d client replies with a gts the agents did not deliver", s.ReplyMismatches)
	}
	if s.Completed < s.Multicasts {
		detail += fmt.Sprintf(", %d multicasts without a reply", s.Multicasts-s.Completed)
	}
	fmt.Fprintf(out, "check       %s: %s multicasts, %s deliveries; validity, integrity, order, gts, termination (quorum), agreement, client replies: %s\n",
		verdict, commas(s.Multicasts), commas(s.Deliveries), detail)
}

func replayed(s *Summary) string {
	if s.RestoredSnapshot > 0 {
		return fmt.Sprintf("its WAL: a %s KiB snapshot and the records after it, %s records in all", commas((s.RestoredSnapshot+1023)/1024), commas(s.RestoredRecords))
	}
	return "its WAL: " + commas(s.RestoredRecords) + " records"
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)))
	return sorted[min(i, len(sorted)-1)]
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func commas(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
