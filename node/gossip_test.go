package node

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/wire"
)

// gossipTune enables gossip with fast rounds and a protocol timeout far
// longer than any wait below, so that only gossip's phi-accrual verdicts
// can make a follower start a ballot.
func gossipTune(c *Config) {
	g := membership.Local()
	g.Interval = 20 * time.Millisecond
	g.FD.InitialInterval = 40 * time.Millisecond
	g.FD.MaxInterval = 40 * time.Millisecond
	g.FD.MaxLocalPause = 100 * time.Millisecond
	g.FD.BacklogWindow = 100 * time.Millisecond
	g.LeaveAnnounce = 200 * time.Millisecond
	g.AssassinateCheck = 300 * time.Millisecond
	c.Gossip = &g
	c.ElectionTicks = 3000 // 30 s at 10 ms ticks
}

// waitUntil polls cond every 20ms until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func memberStatus(n *Node, id wire.ProcID) Member {
	for _, m := range n.Members() {
		if m.ID == id {
			return m
		}
	}
	return Member{}
}

// waitAllUp waits until every node of all sees every node of all up.
func waitAllUp(t *testing.T, c *cluster, all ...wire.ProcID) {
	t.Helper()
	waitUntil(t, 10*time.Second, "every node to see every member up", func() bool {
		for _, p := range all {
			if !allUp(c, p, all...) {
				return false
			}
		}
		return true
	})
}

func allUp(c *cluster, at wire.ProcID, ids ...wire.ProcID) bool {
	for _, id := range ids {
		if memberStatus(c.nodes[at], id).Status != MemberUp {
			return false
		}
	}
	return true
}

// TestGossipDrivesFailoverAndDiscovery runs 2 groups x 3 replicas with
// gossip: every node sees every member UP with its group, role and ballot;
// a client finds the leaders through views; when group 0's leader stops,
// gossip convicts it and its successor takes over (the protocol's own
// timeout is 30 s, so only gossip can have triggered it); the client
// follows; a follower leaves and is seen LEFT; the stopped leader is
// assassinated and seen REMOVED.
func TestGossipDrivesFailoverAndDiscovery(t *testing.T) {
	c := newCluster(t, 2, 3, gossipTune)
	waitAllUp(t, c, 0, 1, 2, 3, 4, 5)
	waitUntil(t, 5*time.Second, "leaders published in gossip", func() bool {
		m0, m3 := memberStatus(c.nodes[4], 0), memberStatus(c.nodes[1], 3)
		return m0.Role == RoleLeader && m3.Role == RoleLeader && m0.Group == 0 && m3.Group == 1 &&
			m0.Addr == c.addrs[0] && memberStatus(c.nodes[0], 1).Role == "follower"
	})

	cl := c.client()
	waitUntil(t, 5*time.Second, "the client to apply a view", func() bool { return cl.Views() > 0 })
	multicast(t, cl, 20, 4, func(i int) []wire.GroupID { return []wire.GroupID{wire.GroupID(i % 2), 1} })

	// Stop group 0's leader; gossip must convict it and p1 take over.
	old := c.nodes[0].Status().Ballot
	c.stop(0)
	waitUntil(t, 10*time.Second, "p1 and p2 to convict p0", func() bool {
		return memberStatus(c.nodes[1], 0).Status == MemberDown && memberStatus(c.nodes[2], 0).Status == MemberDown
	})
	waitUntil(t, 10*time.Second, "a new leader of group 0", func() bool {
		p, ok := c.leader(0)
		return ok && p != 0 && old.Less(c.nodes[p].Status().Ballot)
	})
	if d := c.nodes[1].det; d == nil || d.verdict[0] != judgedDown {
		t.Fatalf("p1's detector has no gossip conviction of p0")
	}
	newLeader, _ := c.leader(0)
	waitUntil(t, 5*time.Second, "the client to learn the new leader from a view", func() bool {
		return cl.Leaders()[0] == newLeader
	})
	multicast(t, cl, 20, 4, func(i int) []wire.GroupID { return []wire.GroupID{0} })

	// A follower of group 1 leaves; the others see it LEFT.
	opt := AdminOptions{Token: []byte(testToken), Loopback: true}
	srv := httptest.NewServer(AdminHandler(c.nodes[5], opt))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a5 := &AdminClient{Addr: srv.Listener.Addr().String(), Token: opt.Token}
	if _, err := a5.Post(ctx, "/leave", struct{}{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "p5 seen LEFT", func() bool { return memberStatus(c.nodes[3], 5).Status == MemberLeft })

	// Assassinate the stopped p0 through p3's admin endpoint, by address.
	srv3 := httptest.NewServer(AdminHandler(c.nodes[3], opt))
	defer srv3.Close()
	a3 := &AdminClient{Addr: srv3.Listener.Addr().String(), Token: opt.Token}
	if _, err := a3.Post(ctx, "/assassinate", AssassinateRequest{Addr: c.addrs[0]}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "p0 seen REMOVED", func() bool { return memberStatus(c.nodes[4], 0).Status == MemberRemoved })
	if _, err := a3.Post(ctx, "/assassinate", AssassinateRequest{Addr: "10.9.9.9:1"}); err == nil {
		t.Fatal("assassinating an unknown address succeeded")
	}
	ms, err := FetchMembers(ctx, http.DefaultClient, srv3.Listener.Addr().String())
	if err != nil || len(ms) != 6 {
		t.Fatalf("members: %v %v", ms, err)
	}
}

func TestParseBallot(t *testing.T) {
	for _, b := range []wire.Ballot{{}, {N: 3, P: 1}, {N: 1<<32 - 1, P: 1<<32 - 1}} {
		got, err := ParseBallot(b.String())
		if err != nil || got != b {
			t.Errorf("ParseBallot(%q) = %v, %v", b.String(), got, err)
		}
	}
	for _, s := range []string{"", "3", "3.1", "x.p1", "3.px", "4294967296.p0"} {
		if _, err := ParseBallot(s); err == nil {
			t.Errorf("ParseBallot(%q) succeeded", s)
		}
	}
}

// TestGossipWithOwnDetector runs gossip beside a detector the caller
// supplies: the view still reports gossip's verdicts.
func TestGossipWithOwnDetector(t *testing.T) {
	c := newCluster(t, 1, 3, func(cfg *Config) {
		gossipTune(cfg)
		cfg.Detector = newGossipDetector(30)
	})
	waitUntil(t, 10*time.Second, "every member up", func() bool { return allUp(c, 0, 0, 1, 2) })
	c.stop(2)
	waitUntil(t, 10*time.Second, "p2 convicted in p0's view", func() bool { return memberStatus(c.nodes[0], 2).Status == MemberDown })
}

// TestGossipLeaderLeaves: a leader that leaves is marked down by its peers
// at once (EventLeft), its successor takes over while it is still
// announcing, and a client follows the new leader through the view.
func TestGossipLeaderLeaves(t *testing.T) {
	c := newCluster(t, 1, 3, gossipTune)
	waitUntil(t, 10*time.Second, "every member up", func() bool { return allUp(c, 1, 0, 1, 2) })
	cl := c.client()
	multicast(t, cl, 10, 2, func(int) []wire.GroupID { return []wire.GroupID{0} })
	old := c.nodes[0].Status().Ballot
	d, err := c.nodes[0].Leave(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !d.Led || !d.HandedOver || d.Leader != 1 {
		t.Fatalf("departure %+v: want p0 to hand over to p1", d)
	}
	waitUntil(t, 10*time.Second, "a new leader above "+old.String(), func() bool {
		p, ok := c.leader(0)
		return ok && p != 0 && old.Less(c.nodes[p].Status().Ballot)
	})
	// The view is refreshed every gossip round, possibly after the
	// election the departure triggered.
	waitUntil(t, 5*time.Second, "p1 to see p0 LEFT", func() bool { return memberStatus(c.nodes[1], 0).Status == MemberLeft })
	multicast(t, cl, 10, 2, func(int) []wire.GroupID { return []wire.GroupID{0} })
	if _, err := c.nodes[0].Leave(context.Background()); err == nil {
		t.Fatal("a second Leave succeeded")
	}
}

// TestGossipProbeVerdict runs the lan profile (direct probes between group
// members, rounds scaled to 20 ms) with phi's threshold out of reach:
// when p0 stops, its group peers convict it from their probes and publish
// the verdict, and p4, in the other group, convicts p0 from that verdict
// alone.
func TestGossipProbeVerdict(t *testing.T) {
	c := newCluster(t, 2, 3, func(c *Config) {
		g := membership.LAN()
		g.Interval, g.ProbeTimeout = 20*time.Millisecond, 120*time.Millisecond
		g.FD.InitialInterval, g.FD.MaxInterval = 80*time.Millisecond, 80*time.Millisecond
		g.FD.MaxLocalPause, g.FD.BacklogWindow = time.Second, time.Second
		g.FD.Threshold = 1000 // phi would wait ~30 minutes
		c.Gossip = &g
		c.ElectionTicks = 3000
	})
	waitAllUp(t, c, 0, 1, 2, 3, 4, 5)
	stats := func(p wire.ProcID) (s membership.Stats) {
		if err := c.nodes[p].control(func() error { s = c.nodes[p].gossip.g.Stats(); return nil }); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := stats(1); s.PingRecv == 0 || s.PongRecv == 0 || s.UnknownPings != 0 {
		t.Fatalf("p1 probes: %+v", s)
	}
	c.stop(0)
	waitUntil(t, 10*time.Second, "p4 to convict p0", func() bool { return memberStatus(c.nodes[4], 0).Status == MemberDown })
	if s := stats(4); s.VerdictConvictions != 1 || s.ProbeConvictions != 0 {
		t.Errorf("p4: %d verdict convictions, %d probe convictions", s.VerdictConvictions, s.ProbeConvictions)
	}
	// The same, as an operator scrapes it.
	a, err := ServeAdmin(c.nodes[4], "127.0.0.1:0", AdminOptions{Token: []byte(testToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	fams := scrape(t, a)
	if v, ok := metricValue(fams, "weft_gossip_probe_convictions_total", map[string]string{"by": "verdict"}); !ok || v != 1 {
		t.Errorf("p4's weft_gossip_probe_convictions_total{by=\"verdict\"} = %v (%v), want 1", v, ok)
	}
	if v, _ := metricValue(fams, "weft_gossip_probes_total", map[string]string{"kind": "ping_sent"}); v == 0 {
		t.Error("p4 sent no probe by its metrics")
	}
	if s1, s2 := stats(1), stats(2); s1.ProbeConvictions+s2.ProbeConvictions == 0 {
		t.Error("neither group peer convicted p0 from its probes")
	}
}

// TestGossipDetectorDirectEvidence: a phi conviction suspects a member
// only once the direct link has been quiet for a quarter of the election
// timeout; a departure (LEFT, removed) suspects at once; the direct
// timeout suspects whatever gossip says.
func TestGossipDetectorDirectEvidence(t *testing.T) {
	d := newGossipDetector(40) // quiet: 10 ticks
	d.Heard(1, 100)
	d.Heard(2, 100)
	d.Heard(3, 100)
	d.verdict[1] = judgedDown
	d.verdict[2] = judgedGone
	for _, tc := range []struct {
		p    wire.ProcID
		now  uint64
		want bool
	}{
		{1, 105, false}, // convicted, heard 5 ticks ago
		{1, 110, false}, // 10 ticks: not more than quiet
		{1, 111, true},  // quiet for 11 ticks
		{2, 101, true},  // departed
		{3, 140, false}, // up, 40 ticks: the timeout
		{3, 141, true},  // silent past the timeout
	} {
		if got := d.Suspected(tc.p, tc.now); got != tc.want {
			t.Errorf("p%d at tick %d: suspected %v, want %v", tc.p, tc.now, got, tc.want)
		}
	}
	d.Heard(1, 120)
	if d.Suspected(1, 125) {
		t.Error("p1 suspected right after a message from it, although convicted")
	}
	d.leaving = true
	if d.Suspected(2, 200) {
		t.Error("a leaving node suspects")
	}
	if got := newGossipDetector(4).quiet; got != 2 {
		t.Errorf("quiet window %d at a 4-tick timeout, want 2 (the floor)", got)
	}
}
