package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/wire"
)

// benchCluster is one loopback cluster of `weft agent` processes that
// `weft bench` measures: the configuration an operator would run (the
// sample's defaults: 64 MiB WAL segments, compaction every 8 MiB, gossip
// profile lan), not the demo's small, frequently compacted one.
type benchCluster struct {
	dir     string
	keyFile string
	topo    *amcast.Topology
	nodes   map[wire.ProcID]string // client addresses
	procs   []*exec.Cmd
	exited  []chan struct{}
	admins  []string // the agents' admin addresses
}

// startBenchCluster writes the configurations and starts groups x
// replicas agents of exe in dir.
// service names the replicated service the agents run ("" for none: the
// raw multicast benchmark). With profile set, agent N writes its CPU profile to profile-nodeN.pprof.
// A positive lease sets the agents' session_lease; share is their
// client_share (benchOptions.clientShare).
func startBenchCluster(ctx context.Context, exe, dir, protocol string, groups, replicas int, noFsync bool, service, profile string, lease time.Duration, share int) (*benchCluster, error) {
	topo, err := amcast.NewTopology(groups, replicas)
	if err != nil {
		return nil, err
	}
	c := &benchCluster{dir: dir, topo: topo, keyFile: filepath.Join(dir, "cluster.key"), nodes: map[wire.ProcID]string{}}
	var raw [32]byte
	crand.Read(raw[:])
	if err := os.WriteFile(c.keyFile, []byte(hex.EncodeToString(raw[:])+"\n"), 0o600); err != nil {
		return nil, err
	}
	n := topo.NumReplicas()
	addrs, err := benchFreeAddrs(2 * n)
	if err != nil {
		return nil, err
	}
	base, err := config.Parse(config.Sample, config.Agent)
	if err != nil {
		return nil, err
	}
	peers := map[string]string{}
	for p := range n {
		peers[strconv.Itoa(p)] = addrs[p]
	}
	var admins []string
	for p := range n {
		cfg := *base
		cfg.Cluster, cfg.Protocol, cfg.ID = "weft-bench", protocol, wire.ProcID(p)
		cfg.DataDir = filepath.Join(dir, fmt.Sprintf("node%d", p))
		cfg.Listen, cfg.ClientAddr, cfg.Admin = addrs[p], "", addrs[n+p]
		cfg.ClusterKeyFile = c.keyFile
		cfg.Groups, cfg.Nodes = topo.Groups, peers
		cfg.UnsafeNoFsync = noFsync
		if lease > 0 {
			cfg.SessionLease = lease
		}
		if service != "" {
			cfg.Service = service
		}
		cfg.BootstrapProbe = 0 // a new cluster: nobody to ask
		cfg.LogLevel = "warn"
		// Up to --clients clients, every one on loopback.
		cfg.Limits.MaxConns, cfg.Limits.MaxConnsPerHost = 4096, 2048
		// A shared client keeps all its workers' multicasts (and, in weft
		// bench kv, reads) in flight.
		cfg.Limits.ClientShare = share
		cfg.Limits.ClientInboxMessages = max(cfg.Limits.ClientInboxMessages, share)
		cfg.Limits.ReadsPerClient = max(cfg.Limits.ReadsPerClient, share)
		cfg.Limits.ReadsPending = max(cfg.Limits.ReadsPending, cfg.Limits.ReadsPerClient)
		path := filepath.Join(dir, fmt.Sprintf("node%d.toml", p))
		if _, err := config.Parse(cfg.Format(), config.Agent); err != nil {
			return nil, fmt.Errorf("bench: node %d's configuration: %w", p, err)
		}
		if err := os.WriteFile(path, []byte(cfg.Format()), 0o644); err != nil {
			return nil, err
		}
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("node%d.log", p)))
		if err != nil {
			return nil, err
		}
		args := []string{"agent", "--config", path}
		if profile != "" {
			args = append(args, "--cpu-profile", fmt.Sprintf("%s-node%d.pprof", profile, p))
		}
		cmd := exec.Command(exe, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			c.stop()
			return nil, fmt.Errorf("bench: starting %s agent: %w", exe, err)
		}
		ex := make(chan struct{})
		go func() { cmd.Wait(); logf.Close(); close(ex) }()
		c.procs, c.exited = append(c.procs, cmd), append(c.exited, ex)
		c.nodes[wire.ProcID(p)] = addrs[p]
		admins = append(admins, addrs[n+p])
	}
	c.admins = admins
	// Up: every agent answers its status and every group has a leader.
	// Polled once a second (the measurement must not pay for polling).
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		up, leaders := 0, map[wire.GroupID]bool{}
		for _, a := range admins {
			if st, err := node.FetchStatus(ctx, hc, a); err == nil {
				up++
				if st.Leader {
					leaders[st.Group] = true
				}
			}
		}
		if up == n && len(leaders) == groups {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.stop()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("bench: the cluster did not come up within 30s (%d of %d agents answer, %d of %d groups have a leader; logs in %s)",
				up, n, len(leaders), groups, dir)
		}
		time.Sleep(time.Second)
	}
}

// agentCounts is what one agent's status reports that /proc does not:
// its socket reads made with recvmsg (node.TransportTraffic, left out of
// /proc/<pid>/io), its Readies and its WAL syncs (node.Stats: one
// fdatasync each with fsync, a write without). Negative: the agent did
// not answer.
type agentCounts struct {
	recvmsgs, readies, syncs int64
	pauses                   int64 // Stats.RawSyncPauses
	// ballots and leads are the protocol's ballots started and won
	// (amcast.Coverage): in a failure-free run, leader changes that
	// suspicion under load caused, which the row's latency then shows.
	ballots, leads int64
	stalls         int64 // Stats.LoopStalls (node/stall.go)
}

// counts returns each agent's counters.
func (c *benchCluster) counts(ctx context.Context) []agentCounts {
	hc := &http.Client{Timeout: time.Second}
	out := make([]agentCounts, len(c.admins))
	for i, a := range c.admins {
		out[i] = agentCounts{-1, -1, -1, -1, -1, -1, -1}
		if st, err := node.FetchStatus(ctx, hc, a); err == nil {
			out[i] = agentCounts{int64(st.Transport.ReadsRecvmsg), int64(st.Stats.Readies), int64(st.Stats.Syncs), int64(st.Stats.RawSyncPauses),
				int64(st.Coverage.BallotsStarted), int64(st.Coverage.LeaderChanges), int64(st.Stats.LoopStalls)}
		}
	}
	return out
}

// countsSince sums the agents' counters from r0 to r1, over the agents
// that answered both times.
func countsSince(r0, r1 []agentCounts) (n agentCounts) {
	for i := range min(len(r0), len(r1)) {
		a, b := r0[i], r1[i]
		if a.recvmsgs >= 0 && b.recvmsgs >= a.recvmsgs && b.readies >= a.readies && b.syncs >= a.syncs && b.pauses >= a.pauses &&
			b.ballots >= a.ballots && b.leads >= a.leads && b.stalls >= a.stalls {
			n.recvmsgs += b.recvmsgs - a.recvmsgs
			n.readies += b.readies - a.readies
			n.syncs += b.syncs - a.syncs
			n.pauses += b.pauses - a.pauses
			n.ballots += b.ballots - a.ballots
			n.leads += b.leads - a.leads
			n.stalls += b.stalls - a.stalls
		}
	}
	return n
}

// pids returns the agents' process ids.
func (c *benchCluster) pids() []int {
	var out []int
	for _, p := range c.procs {
		out = append(out, p.Process.Pid)
	}
	return out
}

// stop stops every agent (SIGTERM, then SIGKILL after 5s).
func (c *benchCluster) stop() {
	for _, p := range c.procs {
		p.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(5 * time.Second)
	for i, ex := range c.exited {
		select {
		case <-ex:
		case <-deadline:
			c.procs[i].Process.Kill()
			<-ex
		}
	}
}

func benchFreeAddrs(n int) ([]string, error) {
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out, nil
}
