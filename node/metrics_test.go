package node

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// scrape fetches and parses an admin endpoint's /metrics (loopback, no
// token).
func scrape(t *testing.T, a *Admin) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + a.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// metricValue sums the samples of a family whose labels include want
// (counter and gauge values, histogram sample counts); ok is false if no
// sample matched.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, w := range want {
			if labels[k] != w {
				continue next
			}
		}
		ok = true
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v, ok
}

// TestMetricsScrape scrapes a live node's /metrics over real HTTP before
// and after a small workload and a forged input: every family follows the
// naming conventions and has the expected type, and the values move.
func TestMetricsScrape(t *testing.T) {
	c := newCluster(t, 1, 3, gossipTune)
	waitUntil(t, 10*time.Second, "a leader and every member up", func() bool {
		_, ok := c.leader(0)
		return ok && allUp(c, 0, 1, 2) && allUp(c, 1, 0, 2)
	})
	lp, _ := c.leader(0)
	a, err := ServeAdmin(c.nodes[lp], "127.0.0.1:0", AdminOptions{Token: []byte(testToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	before := scrape(t, a)

	cl := c.client()
	multicast(t, cl, 40, 4, func(int) []wire.GroupID { return []wire.GroupID{0} })
	// A forged input over TCP: a client connected as id 1000 multicasts a
	// message in client 1001's name. The protocol refuses it
	// (client_mismatch).
	forger, err := transport.New(transport.Config{ClusterName: "test", Self: 1000, Role: transport.RoleClient,
		Peers: map[wire.ProcID]string{lp: c.addrs[lp]}, Handler: func(wire.ProcID, wire.Message) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	forged := &wire.Multicast{M: wire.NewAppMsg(wire.MsgID{Client: 1001, Session: wire.Session(1), Seq: 1}, []wire.GroupID{0}, []byte("x"))}
	if err := forger.Send(lp, forged); err != nil {
		t.Fatal(err)
	}
	peer := "0"
	if lp == 0 {
		peer = "1"
	}
	// The leader answers before its own sync, which it may defer to its
	// next tick (docs/durability.md, "A leader's own sync, deferred"), and
	// its deliveries, their latency and its WAL's counters are recorded at
	// that sync; and one scrape is not one instant: the registry gathers
	// the histograms and the node's status (published at a tick) in
	// goroutines of their own, so a scrape can show a sync in the status's
	// counters and not yet in the histograms. So the workload is awaited
	// in the histograms too.
	var after map[string]*dto.MetricFamily
	waitUntil(t, 10*time.Second, "the forged input to be counted, a gossip round trip measured and the workload synced", func() bool {
		after = scrape(t, a)
		rej, _ := metricValue(after, "weft_rejected_inputs_total", map[string]string{"reason": "client_mismatch"})
		rtt, _ := metricValue(after, "weft_gossip_rtt_seconds", map[string]string{"peer": peer})
		synced := true
		for _, name := range []string{"weft_delivery_latency_seconds", "weft_wal_fsync_duration_seconds", "weft_wal_written_bytes_total"} {
			b, _ := metricValue(before, name, nil)
			v, _ := metricValue(after, name, nil)
			synced = synced && v > b
		}
		del, _ := metricValue(after, "weft_deliveries_total", nil)
		return rej >= 1 && rtt >= 1 && synced && del >= 40
	})

	types := map[string]dto.MetricType{
		"weft_node_info": dto.MetricType_GAUGE, "weft_leader": dto.MetricType_GAUGE, "weft_ballot": dto.MetricType_GAUGE,
		"weft_deliveries_total": dto.MetricType_COUNTER, "weft_multicasts_received_total": dto.MetricType_COUNTER,
		"weft_delivery_latency_seconds": dto.MetricType_HISTOGRAM, "weft_wal_fsync_duration_seconds": dto.MetricType_HISTOGRAM,
		"weft_wal_written_bytes_total": dto.MetricType_COUNTER, "weft_retained_entries": dto.MetricType_GAUGE,
		"weft_rejected_inputs_total": dto.MetricType_COUNTER, "weft_inbox_bytes": dto.MetricType_GAUGE,
		"weft_transport_peer_queue_bytes": dto.MetricType_GAUGE, "weft_gossip_rtt_seconds": dto.MetricType_HISTOGRAM,
		"weft_gossip_phi": dto.MetricType_GAUGE, "weft_gossip_flaps_total": dto.MetricType_COUNTER,
		"weft_gossip_convictions_total": dto.MetricType_COUNTER, "weft_ballot_changes_total": dto.MetricType_COUNTER,
		"weft_recoveries_completed_total": dto.MetricType_COUNTER, "weft_client_retries_total": dto.MetricType_COUNTER,
		"weft_remulticasts_total": dto.MetricType_COUNTER, "weft_transport_bytes_total": dto.MetricType_COUNTER,
		"weft_ready": dto.MetricType_GAUGE, "weft_replication_lag_seconds": dto.MetricType_GAUGE,
		"weft_gossip_probes_total": dto.MetricType_COUNTER, "weft_gossip_probe_convictions_total": dto.MetricType_COUNTER,
		"weft_gossip_verdicts_skipped_total": dto.MetricType_COUNTER, "weft_handovers_total": dto.MetricType_COUNTER,
		"go_goroutines": dto.MetricType_GAUGE,
	}
	for name, typ := range types {
		f := after[name]
		if f == nil {
			t.Errorf("%s: missing", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s: type %v, want %v", name, f.GetType(), typ)
		}
	}
	// Conventions: the weft_ prefix; counters end in _total; durations
	// are in seconds.
	for name, f := range after {
		if !strings.HasPrefix(name, "weft_") {
			continue
		}
		if (f.GetType() == dto.MetricType_COUNTER) != strings.HasSuffix(name, "_total") {
			t.Errorf("%s: a %v; only counters end in _total", name, f.GetType())
		}
		if strings.Contains(name, "_ms") || strings.Contains(name, "millis") {
			t.Errorf("%s: not in base units", name)
		}
	}

	moved := func(name string, labels map[string]string) {
		t.Helper()
		b, _ := metricValue(before, name, labels)
		v, ok := metricValue(after, name, labels)
		if !ok || v <= b {
			t.Errorf("%s%v: %v before the workload, %v after: did not move", name, labels, b, v)
		}
	}
	moved("weft_deliveries_total", nil)
	moved("weft_multicasts_received_total", nil)
	moved("weft_delivery_latency_seconds", nil)
	moved("weft_wal_fsync_duration_seconds", nil)
	moved("weft_wal_written_bytes_total", nil)
	moved("weft_rejected_inputs_total", map[string]string{"reason": "client_mismatch"})
	moved("weft_transport_bytes_total", map[string]string{"direction": "out"})
	if v, _ := metricValue(after, "weft_leader", nil); v != 1 {
		t.Errorf("weft_leader = %v at the leader", v)
	}
	if _, ok := metricValue(after, "weft_gossip_phi", map[string]string{"peer": peer}); !ok {
		t.Errorf("no phi for peer %s", peer)
	}
	if v, _ := metricValue(after, "weft_ready", nil); v != 1 {
		t.Errorf("weft_ready = %v at the leader", v)
	}
	// The latency histogram measures this node's deliveries of what clients
	// sent it: at most the deliveries, at least one.
	lat, _ := metricValue(after, "weft_delivery_latency_seconds", nil)
	del, _ := metricValue(after, "weft_deliveries_total", nil)
	if lat < 1 || lat > del {
		t.Errorf("delivery latency samples %v, deliveries %v", lat, del)
	}

	// The report weft status prints.
	rep, err := (&AdminClient{Addr: a.Addr().String()}).Report(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Fsyncs == 0 || rep.FsyncP99Seconds <= 0 || !rep.Readiness.Ready || rep.Role != "LEADER" || len(rep.PeerQueues) != 2 {
		t.Errorf("report: %+v", rep)
	}
}

// TestGossipFlapsCounted stops a follower until gossip convicts it and
// restarts it: the leader counts a conviction, a revival and a flap each
// way for it (after the flap of its first arrival).
func TestGossipFlapsCounted(t *testing.T) {
	c := newCluster(t, 1, 3, gossipTune)
	waitUntil(t, 10*time.Second, "every member up", func() bool { return allUp(c, 0, 1, 2) })
	lp, _ := c.leader(0)
	var victim wire.ProcID = 2
	if lp == 2 {
		victim = 1
	}
	c.stop(victim)
	waitUntil(t, 10*time.Second, "the stopped member convicted", func() bool {
		return memberStatus(c.nodes[lp], victim).Status == MemberDown
	})
	c.restart(victim)
	waitUntil(t, 10*time.Second, "the restarted member up", func() bool { return allUp(c, lp, victim) })
	a, err := ServeAdmin(c.nodes[lp], "127.0.0.1:0", AdminOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	fams := scrape(t, a)
	l := map[string]string{"peer": peerLabel(victim)}
	conv, _ := metricValue(fams, "weft_gossip_convictions_total", l)
	rev, _ := metricValue(fams, "weft_gossip_revivals_total", l)
	flaps, _ := metricValue(fams, "weft_gossip_flaps_total", l)
	// The first EventAlive (joining) is a transition too: up, then a down
	// and an up per conviction (a loaded machine may add false ones, each
	// revived too, as the member is up at the end).
	if conv < 1 || rev != conv || flaps != 1+2*conv {
		t.Errorf("peer %d: convictions %v, revivals %v, flaps %v; want at least 1, as many, 1+2x as many", victim, conv, rev, flaps)
	}
}

// readyz fetches /readyz without a token from a non-loopback Host name
// (as a load balancer would).
func readyz(t *testing.T, a *Admin) (int, Readiness) {
	t.Helper()
	code, body := adminRequest(t, "GET", "http://"+a.Addr().String()+"/readyz", "", "", "", "probe.example.com")
	var rd Readiness
	if err := json.Unmarshal([]byte(body), &rd); err != nil {
		t.Fatalf("/readyz %d: %q: %v", code, body, err)
	}
	return code, rd
}

// TestReadyz: a follower is ready while it follows a live leader; with the
// rest of its group stopped it knows no leader (503, with the reason);
// once they are back and a leader is elected it is ready again. WbCast, and
// FT-Skeen (Paxos heartbeats, no delivery point).
func TestReadyz(t *testing.T) {
	for _, proto := range []string{ProtocolWbCast, ProtocolFTSkeen} {
		t.Run(proto, func(t *testing.T) { testReadyz(t, proto) })
	}
}

func testReadyz(t *testing.T, proto string) {
	c := newCluster(t, 1, 3, func(cfg *Config) {
		gossipTune(cfg)
		cfg.Protocol = proto
		cfg.ElectionTicks = 30 // a 300 ms grace period
	})
	waitUntil(t, 10*time.Second, "a leader", func() bool { _, ok := c.leader(0); return ok })
	lp, _ := c.leader(0)
	var f wire.ProcID
	for _, p := range c.topo.Members(0) {
		if p != lp {
			f = p
			break
		}
	}
	a, err := ServeAdmin(c.nodes[f], "127.0.0.1:0", AdminOptions{Token: []byte(testToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if code, body := adminRequest(t, "GET", "http://"+a.Addr().String()+"/healthz", "", "", "", "probe.example.com"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	waitUntil(t, 10*time.Second, "the follower ready", func() bool { code, _ := readyz(t, a); return code == 200 })
	_, rd := readyz(t, a)
	if !rd.Ready || rd.Leader != lp || !rd.LeaderKnown || rd.Role != "FOLLOWER" {
		t.Errorf("ready follower: %+v", rd)
	}
	for _, p := range c.topo.Members(0) {
		if p != f {
			c.stop(p)
		}
	}
	var down Readiness
	waitUntil(t, 10*time.Second, "the follower not ready", func() bool {
		var code int
		code, down = readyz(t, a)
		return code == 503
	})
	t.Logf("follower p%d alone: %+v", f, down)
	switch down.Reason {
	case "no_leader", "leader_down", "leader_silent":
	default:
		t.Errorf("not ready for reason %q (%s), want no known leader", down.Reason, down.Detail)
	}
	if down.Ready || down.LeaderKnown {
		t.Errorf("not ready: %+v", down)
	}
	for _, p := range c.topo.Members(0) {
		if p != f {
			c.restart(p)
		}
	}
	waitUntil(t, 20*time.Second, "ready again under a leader", func() bool { code, _ := readyz(t, a); return code == 200 })
}

// TestPprofNeedsToken: the profiler is refused without the token even on
// loopback, and served with it; a node without a token refuses it.
func TestPprofNeedsToken(t *testing.T) {
	c := newCluster(t, 1, 1, nil)
	a, err := ServeAdmin(c.nodes[0], "127.0.0.1:0", AdminOptions{Token: []byte(testToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	base := "http://" + a.Addr().String()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		if code, body := adminRequest(t, "GET", base+path, "", "", "", ""); code != 401 || !strings.Contains(body, "missing_token") {
			t.Errorf("%s without token: %d %q", path, code, body)
		}
		if code, _ := adminRequest(t, "GET", base+path, "", "Bearer "+testToken, "", ""); code != 200 {
			t.Errorf("%s with the token: %d", path, code)
		}
	}
	if got := a.Refused()["missing_token"]; got != 3 {
		t.Errorf("missing_token refusals %d, want 3", got)
	}
	b, err := ServeAdmin(c.nodes[0], "127.0.0.1:0", AdminOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if code, _ := adminRequest(t, "GET", "http://"+b.Addr().String()+"/debug/pprof/", "", "", "", ""); code != 403 {
		t.Errorf("/debug/pprof/ on a node without a token: %d, want 403", code)
	}
	// The probes are read-only.
	if code, _ := adminRequest(t, "POST", base+"/readyz", "application/json", "", "{}", ""); code != 405 {
		t.Errorf("POST /readyz: %d, want 405", code)
	}
	// /metrics follows the read rules: loopback without a token, but a
	// non-loopback Host is refused.
	if code, _ := adminRequest(t, "GET", base+"/metrics", "", "", "", "evil.example.com"); code != 403 {
		t.Errorf("/metrics from a rebound name: %d, want 403", code)
	}
}

// TestReadinessLag drives the lag tracker with a follower's statuses and
// its leader's heartbeats, no network: a heartbeat whose delivery point
// the follower has not reached starts the lag; past the grace period the
// follower is catching_up; reaching that point moves on to the next
// unreached heartbeat, then to none.
func TestReadinessLag(t *testing.T) {
	n := &Node{cfg: Config{ID: 1, Tick: 10 * time.Millisecond, ElectionTicks: 30}, done: make(chan struct{})}
	n.met = newMetrics(n)
	m := n.met
	b := wire.Ballot{N: 2, P: 0}
	st := Status{ID: 1, Role: "FOLLOWER", Ballot: b, CBallot: b, MaxDelivered: wire.Timestamp{T: 3}}
	m.published(&st)
	hb := func(t uint64) {
		m.observe(wire.Envelope{From: 0, To: 1, Msg: &wire.Heartbeat{B: b, CBallot: b, Leader: true, MaxDelivered: wire.Timestamp{T: t}}})
	}
	ready := func(want bool, reason string) Readiness {
		t.Helper()
		rd := n.Readiness()
		if rd.Ready != want || rd.Reason != reason {
			t.Fatalf("readiness %+v, want ready %v reason %q", rd, want, reason)
		}
		return rd
	}
	ready(false, "leader_silent") // no heartbeat yet
	hb(3)                         // a point already reached: no lag
	if rd := ready(true, ""); rd.LagSeconds != 0 || rd.Leader != 0 || !rd.LeaderKnown {
		t.Fatalf("%+v", rd)
	}
	// A heartbeat from another member, or for another ballot, is not the
	// leader's.
	m.observe(wire.Envelope{From: 2, To: 1, Msg: &wire.Heartbeat{B: b, Leader: true, MaxDelivered: wire.Timestamp{T: 9}}})
	m.observe(wire.Envelope{From: 0, To: 1, Msg: &wire.Heartbeat{B: wire.Ballot{N: 1, P: 0}, Leader: true, MaxDelivered: wire.Timestamp{T: 9}}})
	if m.health.pending.at != 0 {
		t.Fatal("a heartbeat that is not the leader's started the lag")
	}
	hb(5)
	hb(7)
	hb(8)
	if m.health.pending.gts.T != 5 || m.health.latest.gts.T != 8 {
		t.Fatalf("targets %+v %+v, want 5 then 8", m.health.pending, m.health.latest)
	}
	m.mu.Lock()
	m.health.pending.at -= int64(time.Second) // as if it arrived a second ago
	m.mu.Unlock()
	if rd := ready(false, "catching_up"); rd.LagSeconds < 1 {
		t.Fatalf("lag %v, want at least 1s", rd.LagSeconds)
	}
	st.MaxDelivered = wire.Timestamp{T: 6} // past 5, not 8: the next target
	m.published(&st)
	if m.health.pending.gts.T != 8 || m.health.latest.at != 0 {
		t.Fatalf("targets %+v %+v, want 8 then none", m.health.pending, m.health.latest)
	}
	ready(true, "")
	st.MaxDelivered = wire.Timestamp{T: 8}
	m.published(&st)
	if rd := ready(true, ""); rd.LagSeconds != 0 || m.health.pending.at != 0 {
		t.Fatalf("caught up: %+v, pending %+v", rd, m.health.pending)
	}
	// A follower without the state of the ballot it joined is not caught up.
	st.Ballot = wire.Ballot{N: 3, P: 0}
	m.published(&st)
	m.observe(wire.Envelope{From: 0, To: 1, Msg: &wire.Heartbeat{B: st.Ballot, Leader: true}})
	ready(false, "no_state")
	// Nor is an amnesiac, or a recovering node.
	st.Amnesiac = true
	m.published(&st)
	ready(false, "amnesiac")
	st.Amnesiac, st.Role = false, "RECOVERING"
	m.published(&st)
	ready(false, "no_leader")
	close(n.done)
	ready(false, "stopped")
}

// BenchmarkMetricsLoopHooks is the loop's cost per client message: its
// arrival noted, its delivery observed, one status published.
func BenchmarkMetricsLoopHooks(b *testing.B) {
	n := &Node{cfg: Config{ID: 1, Tick: 10 * time.Millisecond, ElectionTicks: 30}, done: make(chan struct{})}
	n.met = newMetrics(n)
	st := Status{ID: 1, Role: "LEADER", Leader: true}
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := wire.MsgID{Client: 7, Session: wire.Session(1), Seq: uint64(i)}
		n.met.clientMulticast(id, now.UnixNano())
		n.met.delivered(id, now)
		n.met.published(&st)
	}
}

// BenchmarkScrape gathers a live node's registry (what /metrics does,
// without the HTTP and text encoding).
func BenchmarkScrape(b *testing.B) {
	c := newBenchNode(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Registry().Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

func newBenchNode(b *testing.B) *Node {
	b.Helper()
	topo, err := amcast.NewTopology(1, 1)
	if err != nil {
		b.Fatal(err)
	}
	n, err := New(Config{Cluster: "bench", ID: 0, Topology: topo, Listen: "127.0.0.1:0", DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return n
}
