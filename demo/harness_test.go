package demo

// A harness for multi-process fault tests: a cluster of real agent
// processes (the weft binary, built once per test binary) on loopback,
// every agent-to-agent stream through its own fault-injecting proxy,
// closed-loop clients, and the checks the demo runs at the end.
//
// The transport gives every ordered pair of agents (i, j) exactly one
// stream: i dials j and sends only on that connection; j answers only the
// handshake on it (see package transport). Agent i's configuration lists
// j at the address of proxy (i→j), which forwards to j's real address, so
// every message from i to j crosses proxy (i→j) and nothing else: cutting
// (i→j) silences i towards j, cutting (i→j) and (j→i) separates the two,
// and cutting every proxy between two sets of agents partitions them for
// real. Agents listen on their own addresses, and clients connect there
// directly: a partition separates agents, not clients from agents.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/internal/faultproxy"
	"github.com/weft-dev/weft/internal/testbin"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/wire"
)

// Generous deadlines for conditions the tests wait for; they only bound a
// hung test, nothing is measured against them.
const (
	upWithin      = 20 * time.Second
	leaderWithin  = 20 * time.Second
	rejoinWithin  = 30 * time.Second
	drainWithin   = 30 * time.Second
	settleWithin  = 30 * time.Second
	progressAfter = 20 * time.Second
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// weftBinary builds cmd/weft once for the whole test binary.
func weftBinary(t *testing.T) string { return testbin.Weft(t) }

// pair is an ordered pair of agents: the stream from From to To.
type pair struct{ From, To wire.ProcID }

// cluster is a running test cluster.
type cluster struct {
	t       *testing.T
	r       *run
	ctx     context.Context
	cancel  context.CancelFunc // ends the workload's contexts and the poll
	proxies map[pair]*faultproxy.Proxy
	proxyIP string
	cl      *client.Client
	stop    atomic.Bool
	workers sync.WaitGroup
	bg      sync.WaitGroup // the poll and the progress logger
	t0      time.Time
	done    bool // finish ran
}

// clusterSpec shapes a test cluster.
type clusterSpec struct {
	Groups, Replicas, Clients int
	// DestGroups as in Options (0: 1 or 2 at random).
	DestGroups int
	// Protocol as in Options (default wbcast).
	Protocol string
	// Service as in Options (default none).
	Service string
}

// logWriter sends the demo's printouts to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// startCluster starts the agents and the proxies, waits for every group to
// have a leader and every proxy to carry a connection, and starts the
// workload.
func startCluster(t *testing.T, spec clusterSpec) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process fault test: skipped with -short")
	}
	exe := weftBinary(t)
	c := &cluster{t: t, proxies: map[pair]*faultproxy.Proxy{}, proxyIP: proxyIP(), t0: time.Now()}
	dir, err := os.MkdirTemp("", "weft-faults-")
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Exe: exe, Duration: 3 * time.Second, Groups: spec.Groups, Replicas: spec.Replicas,
		Clients: spec.Clients, DestGroups: spec.DestGroups, KillGroup: -1, Dir: dir, Out: logWriter{t}, Protocol: spec.Protocol, Service: spec.Service,
		Workload: WorkloadMulticast, // the tests drive their own workloads
		PeerAddr: c.newProxy}
	if err := opt.defaults(); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster: %s, %d groups x %d replicas, %d clients, seed %d, data and logs in %s", opt.Protocol, opt.Groups, opt.Replicas, opt.Clients, opt.Seed, dir)
	c.r = &run{opt: opt, dir: dir, hc: &http.Client{Timeout: 500 * time.Millisecond},
		statuses: map[wire.ProcID]node.Status{}, replies: map[string]wire.Timestamp{}, killGroup: -1}
	if c.r.topo, err = amcast.NewTopology(opt.Groups, opt.Replicas); err != nil {
		t.Fatal(err)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	t.Cleanup(c.cleanup)
	if err := c.r.setup(); err != nil {
		t.Fatal(err)
	}
	c.launch()
	return c
}

// launch starts the agents c.r describes, waits for every group to have a
// leader and every proxy (if any) to carry a stream, connects a client
// (over mutual TLS with c.r.tls, else with c.r.key) and starts the
// workload.
func (c *cluster) launch() {
	t := c.t
	t.Helper()
	for _, a := range c.r.agents {
		if err := c.r.start(a); err != nil {
			t.Fatal(err)
		}
	}
	c.bg.Go(func() { c.r.poll(c.ctx) })
	c.waitFor("every group to have a leader", upWithin, func(sts map[wire.ProcID]node.Status) bool {
		if len(sts) < len(c.r.agents) {
			return false
		}
		for g := range c.r.topo.Groups {
			if _, ok := c.r.leaderOf(sts, g); !ok {
				return false
			}
		}
		return true
	})
	// Every agent dials every other at start: each proxy carries a stream.
	c.waitFor("every agent-to-agent stream to go through its proxy", upWithin, func(map[wire.ProcID]node.Status) bool {
		for _, p := range c.proxies {
			if st := p.Stats(); st.Accepted == 0 || st.Active == 0 {
				return false
			}
		}
		return true
	})
	c.logf("cluster up: %d agents, %d proxies, leaders %s", len(c.r.agents), len(c.proxies), c.r.leaders(c.r.snapshot()))

	c.connect()
	c.bg.Go(c.progress)
}

// connect connects a client to the agents at the addresses they report
// (over mutual TLS with c.r.tls, else with c.r.key) and starts the
// workload.
func (c *cluster) connect() {
	t := c.t
	t.Helper()
	var err error
	if c.cl, err = client.New(c.clientConfig(false)); err != nil {
		t.Fatal(err)
	}
	for w := range c.r.opt.Clients {
		c.workers.Go(func() { c.r.worker(c.ctx, c.cl, &c.stop, uint64(w)) })
	}
}

// clientConfig configures a client of the agents at the addresses they
// report (over mutual TLS with c.r.tls, else with c.r.key) whose
// multicasts go into the checked history. optional marks them Optional
// (check.Event): a client that gives up on a message (a deadline) may
// leave it undelivered without failing termination.
func (c *cluster) clientConfig(optional bool) client.Config {
	c.t.Helper()
	nodes := map[wire.ProcID]string{}
	// Every agent's address, as its status reports it: an agent that just
	// restarted may not have answered the poll yet.
	c.waitFor("every agent's address in its status", progressAfter, func(sts map[wire.ProcID]node.Status) bool {
		for _, a := range c.r.agents {
			if sts[a.id].Addr == "" {
				return false
			}
			nodes[a.id] = sts[a.id].Addr
		}
		return true
	})
	return c.r.clientConfig(nodes, false, optional)
}

// pause stops the workload, waits for the messages in flight and closes
// the client; connect starts it again (with the agents' addresses then).
func (c *cluster) pause() {
	c.t.Helper()
	c.drain("paused")
	if c.ctx.Err() != nil {
		c.t.FailNow()
	}
	c.cl.Close()
	c.stop.Store(false)
	c.logf("workload paused: %d multicasts completed", c.completed())
}

// drain stops the workload and waits for the messages in flight; after
// drainWithin it fails the test and ends them (c.ctx).
func (c *cluster) drain(what string) {
	c.t.Helper()
	c.stop.Store(true)
	drained := make(chan struct{})
	go func() { c.workers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainWithin):
		c.t.Errorf("%s messages still in flight %v after the workload %s\n%s", c.elapsed(), drainWithin, what, c.diagnostics())
		c.cancel()
		<-drained
	}
}

// proxyIP is the loopback address the proxies listen on: 127.0.0.2 where
// it exists (Linux), so that a proxy's port never collides with an agent
// port freePorts picked on 127.0.0.1 and released before the agent binds
// it.
func proxyIP() string {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		return "127.0.0.1"
	}
	ln.Close()
	return "127.0.0.2"
}

// newProxy is Options.PeerAddr: the proxy for the stream from -> to.
func (c *cluster) newProxy(from, to wire.ProcID, addr string) (string, error) {
	p, err := faultproxy.New(net.JoinHostPort(c.proxyIP, "0"), addr)
	if err != nil {
		return "", err
	}
	c.proxies[pair{from, to}] = p
	return p.Addr(), nil
}

func (c *cluster) elapsed() string { return fmt.Sprintf("[%5.2fs]", time.Since(c.t0).Seconds()) }

func (c *cluster) logf(format string, args ...any) {
	c.t.Helper()
	c.t.Logf("%s %s", c.elapsed(), fmt.Sprintf(format, args...))
}

// progress logs the workload's progress every second.
func (c *cluster) progress() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := 0
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.r.mu.Lock()
		done, inflight := c.r.completed, c.r.inflight
		c.r.window = nil
		c.r.mu.Unlock()
		c.logf("completed %d (+%d), in flight %d, leaders %s", done, done-last, inflight, c.r.leaders(c.r.snapshot()))
		last = done
	}
}

// completed returns the number of multicasts the clients got a reply for.
func (c *cluster) completed() int {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	return c.r.completed
}

// load lets the workload run for d, and at least until n more multicasts
// completed (so that "under load" holds on a slow machine too).
func (c *cluster) load(d time.Duration, n int) {
	c.t.Helper()
	start := c.completed()
	time.Sleep(d)
	c.waitFor(fmt.Sprintf("%d more multicasts to complete", n), progressAfter, func(map[wire.ProcID]node.Status) bool {
		return c.completed() >= start+n
	})
}

// waitFor waits until cond holds over the agents' statuses, failing the
// test (with every agent's status and log tail) after timeout.
func (c *cluster) waitFor(what string, timeout time.Duration, cond func(map[wire.ProcID]node.Status) bool) {
	c.t.Helper()
	if c.r.waitFor(c.ctx, timeout, cond) {
		return
	}
	c.t.Fatalf("%s timed out after %v waiting for %s\n%s", c.elapsed(), timeout, what, c.diagnostics())
}

// diagnostics describes every agent: status and the end of its log.
func (c *cluster) diagnostics() string {
	var b strings.Builder
	sts := c.r.snapshot()
	for _, a := range c.r.agents {
		if st, ok := sts[a.id]; ok {
			fmt.Fprintf(&b, "p%d (g%d): %s leader=%v ballot %s cballot %s max_delivered %s retained %d ticks %d steps %d\n",
				a.id, a.group, st.Role, st.Leader, st.Ballot, st.CBallot, st.MaxDelivered, st.Retained, st.Stats.Ticks, st.Stats.Steps)
			if v := c.gossipView(a); v != "" {
				fmt.Fprintf(&b, "    members: %s\n", v)
			}
		} else {
			fmt.Fprintf(&b, "p%d (g%d): not answering (running=%v)\n", a.id, a.group, a.running())
		}
		fmt.Fprintf(&b, "    %s\n", tailN(a.logPath, 6))
	}
	return b.String()
}

// gossipView summarizes an agent's gossip view (GET /members), if it has
// one: each member's status, phi and heartbeat.
func (c *cluster) gossipView(a *agent) string {
	resp, err := c.r.hc.Get("http://" + a.admin + "/members")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var ms []struct {
		ID        wire.ProcID `json:"id"`
		Status    string      `json:"status"`
		Phi       float64     `json:"phi"`
		Heartbeat uint64      `json:"heartbeat"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&ms) != nil {
		return ""
	}
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("p%d %s phi %.1f hb %d", m.ID, m.Status, m.Phi, m.Heartbeat))
	}
	return strings.Join(parts, "; ")
}

func tailN(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n    ")
}

// agent returns agent p.
func (c *cluster) agent(p wire.ProcID) *agent { return c.r.agents[p] }

// leader waits for a leader of g and returns its status.
func (c *cluster) leader(g int) node.Status {
	c.t.Helper()
	var l node.Status
	c.waitFor(fmt.Sprintf("a leader of g%d", g), leaderWithin, func(sts map[wire.ProcID]node.Status) bool {
		var ok bool
		l, ok = c.r.leaderOf(sts, g)
		return ok
	})
	return l
}

// follower returns a live member of g that is not its leader.
func (c *cluster) follower(g int) node.Status {
	c.t.Helper()
	var f node.Status
	c.waitFor(fmt.Sprintf("a follower of g%d", g), leaderWithin, func(sts map[wire.ProcID]node.Status) bool {
		l, ok := c.r.leaderOf(sts, g)
		if !ok {
			return false
		}
		for _, p := range c.r.topo.Members(wire.GroupID(g)) {
			if st, live := sts[p]; live && p != l.ID && st.Role == "FOLLOWER" && st.CBallot == l.CBallot {
				f = st
				return true
			}
		}
		return false
	})
	return f
}

// kill SIGKILLs agent p and records the crash.
func (c *cluster) kill(p wire.ProcID) {
	c.t.Helper()
	a := c.agent(p)
	if !a.running() {
		c.t.Fatalf("p%d is not running", p)
	}
	a.cmd.Process.Kill()
	<-a.exited
	now := time.Now()
	c.r.mu.Lock()
	c.r.events = append(c.r.events, check.Event{Ev: check.EvCrash, Proc: int(p), T: now.UnixMicro()})
	c.r.mu.Unlock()
	c.logf("killed p%d (g%d) with SIGKILL", p, a.group)
}

// terminate stops agent p with SIGTERM, as an operator stops a service,
// and records the stop as a crash (the checkers' event for a process
// that stopped).
func (c *cluster) terminate(p wire.ProcID) {
	c.t.Helper()
	a := c.agent(p)
	if !a.running() {
		c.t.Fatalf("p%d is not running", p)
	}
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(10 * time.Second):
		c.t.Fatalf("p%d did not stop within 10s of SIGTERM", p)
	}
	if !a.cmd.ProcessState.Success() {
		c.t.Errorf("p%d exited with %v after SIGTERM; its log ends:\n    %s", p, a.cmd.ProcessState, tailN(a.logPath, 20))
	}
	c.r.mu.Lock()
	c.r.events = append(c.r.events, check.Event{Ev: check.EvCrash, Proc: int(p), T: time.Now().UnixMicro()})
	c.r.mu.Unlock()
	c.logf("stopped p%d (g%d) with SIGTERM", p, a.group)
}

// restart restarts agent p from its data directory, with flags after its
// --config, and records it.
func (c *cluster) restart(p wire.ProcID, flags ...string) {
	c.t.Helper()
	a := c.agent(p)
	now := time.Now()
	c.r.mu.Lock()
	c.r.events = append(c.r.events, check.Event{Ev: check.EvRestart, Proc: int(p), T: now.UnixMicro()})
	c.r.mu.Unlock()
	if err := c.r.start(a, flags...); err != nil {
		c.t.Fatal(err)
	}
	c.logf("restarted p%d (g%d) from its data directory %v", p, a.group, flags)
}

// cut cuts the streams between every agent of a and every agent of b, in
// both directions.
func (c *cluster) cut(a, b []wire.ProcID) {
	c.t.Helper()
	for _, p := range a {
		for _, q := range b {
			if p != q {
				c.proxies[pair{p, q}].Cut()
				c.proxies[pair{q, p}].Cut()
			}
		}
	}
	c.logf("partitioned %v from %v", a, b)
}

// healAll heals every proxy.
func (c *cluster) healAll() {
	c.t.Helper()
	for _, p := range c.proxies {
		p.Heal()
	}
	c.logf("healed every link")
}

// refused sums the connections the proxies between a and b refused, and
// the bytes they dropped.
func (c *cluster) refused(a, b []wire.ProcID) (conns, dropped int64) {
	for _, p := range a {
		for _, q := range b {
			if p == q {
				continue
			}
			for _, pr := range []*faultproxy.Proxy{c.proxies[pair{p, q}], c.proxies[pair{q, p}]} {
				st := pr.Stats()
				conns += st.Refused
				dropped += st.Dropped[faultproxy.Forward] + st.Dropped[faultproxy.Backward]
			}
		}
	}
	return conns, dropped
}

// others returns the agents not in ps.
func (c *cluster) others(ps ...wire.ProcID) []wire.ProcID {
	var out []wire.ProcID
	for _, a := range c.r.agents {
		if !slices.Contains(ps, a.id) {
			out = append(out, a.id)
		}
	}
	return out
}

// members returns g's members other than the ones in except.
func (c *cluster) members(g int, except ...wire.ProcID) []wire.ProcID {
	var out []wire.ProcID
	for _, p := range c.r.topo.Members(wire.GroupID(g)) {
		if !slices.Contains(except, p) {
			out = append(out, p)
		}
	}
	return out
}

// waitNewLeader waits for g to be led, by another member than old, at a
// ballot above old's, and returns the new leader.
func (c *cluster) waitNewLeader(g int, old node.Status) node.Status {
	c.t.Helper()
	var l node.Status
	c.waitFor(fmt.Sprintf("a new leader of g%d (above ballot %s)", g, old.Ballot), leaderWithin, func(sts map[wire.ProcID]node.Status) bool {
		var ok bool
		l, ok = c.r.leaderOf(sts, g)
		return ok && l.ID != old.ID && old.Ballot.Less(l.Ballot)
	})
	c.logf("g%d: p%d leads at ballot %s (was p%d at %s)", g, l.ID, l.Ballot, old.ID, old.Ballot)
	return l
}

// deliveredBy returns the highest delivery of the given agents.
func deliveredBy(sts map[wire.ProcID]node.Status, ps []wire.ProcID) wire.Timestamp {
	var m wire.Timestamp
	for _, p := range ps {
		if st, ok := sts[p]; ok && m.Less(st.MaxDelivered) {
			m = st.MaxDelivered
		}
	}
	return m
}

// waitDelivering waits until a member of g in ps delivers beyond what ps
// had delivered when it was called.
func (c *cluster) waitDelivering(g int, ps []wire.ProcID) {
	c.t.Helper()
	from := deliveredBy(c.r.snapshot(), ps)
	c.waitFor(fmt.Sprintf("g%d (%v) to deliver beyond %s", g, ps, from), progressAfter, func(sts map[wire.ProcID]node.Status) bool {
		return from.Less(deliveredBy(sts, ps))
	})
	c.logf("g%d delivering again (%v beyond %s)", g, ps, from)
}

// waitRejoin waits until agent p is up, in its group's current ballot
// (following, or leading it), and has caught up with what its leader had
// delivered when p rejoined the ballot. It returns p's status.
func (c *cluster) waitRejoin(p wire.ProcID) node.Status {
	c.t.Helper()
	a := c.agent(p)
	var st, l node.Status
	c.waitFor(fmt.Sprintf("p%d to rejoin g%d", p, a.group), rejoinWithin, func(sts map[wire.ProcID]node.Status) bool {
		var live, ok bool
		st, live = sts[p]
		if !live || st.Role == "RECOVERING" {
			return false
		}
		l, ok = c.r.leaderOf(sts, a.group)
		return ok && st.CBallot == l.CBallot
	})
	target := l.MaxDelivered
	c.waitFor(fmt.Sprintf("p%d to catch up with %s", p, target), rejoinWithin, func(sts map[wire.ProcID]node.Status) bool {
		st = sts[p]
		return target.LessEq(st.MaxDelivered)
	})
	restored := ""
	if st.Stats.RestoredRecords > 0 {
		restored = fmt.Sprintf(" (restored from its WAL: %d records, snapshot %d bytes)", st.Stats.RestoredRecords, st.Stats.RestoredSnapshotBytes)
	}
	c.logf("p%d rejoined g%d as %s of ballot %s and caught up with %s%s", p, a.group, st.Role, st.CBallot, target, restored)
	return st
}

// finish stops the workload, waits for the messages in flight and for the
// groups to settle, stops the agents with SIGTERM and runs every check:
// check.Check with quorum termination and agreement over the merged
// histories, every acknowledged multicast delivered (with the gts the
// client was told) by a quorum of each destination group, every agent
// exited cleanly, no multicast without a reply.
func (c *cluster) finish() {
	c.t.Helper()
	r := c.r
	c.drain("stopped")
	if c.ctx.Err() == nil && !r.waitFor(c.ctx, settleWithin, r.settled()) {
		c.t.Errorf("%s the groups did not settle (all members up, same last delivery) within %v\n%s", c.elapsed(), settleWithin, c.diagnostics())
	}
	c.cancel()
	c.bg.Wait()
	r.stopAll(5 * time.Second)
	c.done = true
	for _, a := range r.agents {
		if a.cmd != nil && !a.cmd.ProcessState.Success() {
			c.t.Errorf("p%d exited with %v; its log ends:\n    %s", a.id, a.cmd.ProcessState, tailN(a.logPath, 20))
		}
	}
	h, err := r.history()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := writeHistory(filepath.Join(r.dir, "history.jsonl"), h); err != nil {
		c.t.Fatal(err)
	}
	rep := check.Check(h, check.Options{Termination: check.TermQuorum})
	if !rep.OK() {
		c.t.Errorf("check: %s", rep.Error())
	}
	if bad := r.compareReplies(h); bad > 0 {
		c.t.Errorf("%d client replies carry a gts the agents did not deliver", bad)
	}
	acked, lost := c.ackedLost(h)
	for _, l := range lost[:min(len(lost), 10)] {
		c.t.Errorf("acknowledged but lost: %s", l)
	}
	r.mu.Lock()
	failures, completed := r.failures, r.completed
	r.mu.Unlock()
	if failures > 0 {
		c.t.Errorf("%d multicasts got no reply", failures)
	}
	if completed == 0 {
		c.t.Errorf("no multicast completed")
	}
	c.logf("checked: %d multicasts (%d acknowledged, %d lost), %d deliveries, %d violations",
		rep.Multicasts, acked, len(lost), rep.Deliveries, rep.Total)
}

// ackedLost checks that every multicast a client got a reply for is in
// the agents' deliveries logs: delivered by a quorum of every destination
// group, every time with the gts of the reply. A member that installed a
// snapshot at or above the reply's gts holds the message in that state
// (it adopted its group's delivered prefix; the log shows the install,
// not each message): it counts. It returns the number of acknowledged
// multicasts and a description of each one lost.
func (c *cluster) ackedLost(h *check.History) (int, []string) {
	dest := map[string][]int{}
	by := map[string]map[int]check.GTS{} // id -> proc -> gts
	installed := map[int]check.GTS{}     // proc -> highest install
	for _, ev := range h.Events {
		switch ev.Ev {
		case check.EvInstall:
			if in, ok := installed[ev.Proc]; !ok || in.Less(ev.GTS) {
				installed[ev.Proc] = ev.GTS
			}
		case check.EvMulticast:
			dest[ev.ID] = ev.Dest
		case check.EvDeliver:
			if by[ev.ID] == nil {
				by[ev.ID] = map[int]check.GTS{}
			}
			by[ev.ID][ev.Proc] = ev.GTS
		}
	}
	c.r.mu.Lock()
	replies := make(map[string]wire.Timestamp, len(c.r.replies))
	for id, ts := range c.r.replies {
		replies[id] = ts
	}
	c.r.mu.Unlock()
	R := c.r.opt.Replicas
	quorum := R/2 + 1
	var lost []string
	ids := make([]string, 0, len(replies))
	for id := range replies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		ts := replies[id]
		d, ok := dest[id]
		if !ok {
			lost = append(lost, id+": acknowledged but never multicast")
			continue
		}
		for _, g := range d {
			n, covered := 0, 0
			for i := range R {
				p := g*R + i
				got, ok := by[id][p]
				if !ok {
					in, ok := installed[p]
					if ok && !ts.IsZero() && !in.Less(check.GTS{T: ts.T, G: int(ts.G)}) {
						covered++
					}
					continue
				}
				if !ts.IsZero() && (got.T != ts.T || got.G != int(ts.G)) {
					lost = append(lost, fmt.Sprintf("%s: acknowledged with gts %s, p%d delivered it with %d.g%d", id, ts, p, got.T, got.G))
				}
				n++
			}
			if n > 0 { // an install holds only what its group delivered
				n += covered
			}
			if n < quorum {
				lost = append(lost, fmt.Sprintf("%s: acknowledged (gts %s), delivered (or installed) by %d of g%d (quorum %d)", id, ts, n, g, quorum))
			}
		}
	}
	return len(replies), lost
}

// cleanup stops whatever is still running; it keeps the directory if the
// test failed.
func (c *cluster) cleanup() {
	c.stop.Store(true)
	c.cancel()
	c.workers.Wait()
	c.bg.Wait()
	if c.cl != nil {
		c.cl.Close()
	}
	if !c.done {
		c.r.stopAll(0)
	}
	for _, p := range c.proxies {
		p.Close()
	}
	if c.t.Failed() {
		c.t.Logf("the cluster's directory stays: %s", c.r.dir)
		return
	}
	if err := os.RemoveAll(c.r.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.t.Log(err)
	}
}
