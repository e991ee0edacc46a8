package demo

// The demo's cluster: one agent OS process per replica, their
// configuration and security material, start and stop, and the status
// poll every watcher reads.

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

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
			Cluster: "weft-demo", Protocol: r.opt.Protocol, Service: r.opt.Service, ID: a.id, DataDir: a.dir, Admin: a.admin, ClusterKeyFile: keyPath,
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
