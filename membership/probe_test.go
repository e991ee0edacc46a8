package membership

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// probeNode is a LAN-profile node (100 ms rounds, 600 ms probe timeout)
// probing peers, preloaded with records of nodes 1..5 (generation g,
// heartbeat 10) as if gossip had brought them.
func probeNode(t *testing.T, id wire.ProcID, peers ...wire.ProcID) *Node {
	t.Helper()
	n := newTestNode(t, id, t0, func(c *Config) {
		lan := LAN()
		c.Interval, c.FD, c.ProbeTimeout = lan.Interval, lan.FD, lan.ProbeTimeout
		c.ProbePeers = peers
	})
	var view []EndpointState
	for p := wire.ProcID(1); p <= 5; p++ {
		if p != id {
			view = append(view, EndpointState{Node: p, Generation: uint64(t0 / sec), Heartbeat: 10})
		}
	}
	if err := n.Preload(t0, view); err != nil {
		t.Fatal(err)
	}
	n.Advance()
	return n
}

const round = 100 * ms

// pings returns the Pings in rd, by recipient.
func pings(rd Ready) map[wire.ProcID]*Ping {
	out := map[wire.ProcID]*Ping{}
	for _, e := range rd.Messages {
		if p, ok := e.Msg.(*Ping); ok {
			out[e.To] = p
		}
	}
	return out
}

func convictedValue(n *Node) string {
	a, _ := n.AppState(n.ID(), KeyConvicted)
	return a.Value
}

// TestProbeConvictsSilentPeer: a node pings its probe peers every round;
// a peer that answers stays up, a silent one is convicted once
// ProbeTimeout has passed without a life sign (not before), the verdict
// is published with the newest heartbeat seen of it, and its next Ping
// withdraws the verdict.
func TestProbeConvictsSilentPeer(t *testing.T) {
	n := probeNode(t, 1, 2, 3, 1) // itself is ignored
	g := uint64(t0 / sec)
	var dead []wire.ProcID
	now := t0
	for r := 1; r <= 8; r++ {
		now = t0 + int64(r)*round
		n.Tick(now)
		rd := n.Ready()
		ps := pings(rd)
		if len(ps) != 2 || ps[2] == nil || ps[3] == nil || ps[2].Generation != n.Generation() {
			t.Fatalf("round %d: pings %v", r, ps)
		}
		for _, e := range rd.Events {
			if e.Kind == EventDead {
				dead = append(dead, e.Node)
			}
		}
		n.Advance()
		// 2 answers every round, with a heartbeat of 11 once; 3 is silent.
		if err := n.Step(now+2*ms, 2, &Pong{Echo: ps[2].Sent, Generation: g, Heartbeat: 11}); err != nil {
			t.Fatal(err)
		}
		n.Advance()
		if r == 7 && len(dead) != 0 {
			// Its silence counts from the first round, which found its
			// record (preloaded): 600 ms is not more than the timeout.
			t.Fatalf("convicted %v after 600 ms of silence", dead)
		}
	}
	if fmt.Sprint(dead) != "[3]" {
		t.Fatalf("convicted %v, want [3]", dead)
	}
	if v := convictedValue(n); v != fmt.Sprintf("3:%d:10", g) {
		t.Fatalf("published %q", v)
	}
	if s := n.Stats(); s.ProbeConvictions != 1 || s.VerdictConvictions != 1 || s.PongRecv != 8 {
		t.Fatalf("stats %+v", s)
	}
	// 3 pings: the verdict is withdrawn (the record stays down until
	// fresh gossip progress, as after any conviction).
	if err := n.Step(now+5*ms, 3, &Ping{Sent: 1, Generation: g, Heartbeat: 17}); err != nil {
		t.Fatal(err)
	}
	if v := convictedValue(n); v != "" {
		t.Fatalf("after 3's ping: published %q", v)
	}
	if got := envTo(n.Ready(), 3); len(got) != 1 || got[0].(*Pong).Echo != 1 {
		t.Fatalf("3's ping answered with %v", got)
	}
}

// TestProbeRelayedSigns: relayed heartbeat progress keeps a peer that
// cannot be reached directly from conviction, dated from when it was
// likely made: a crash's last heartbeat arriving late does not restart
// the silence.
func TestProbeRelayedSigns(t *testing.T) {
	g := uint64(t0 / sec)
	n := probeNode(t, 1, 2)
	for r := 1; r <= 20; r++ {
		now := t0 + int64(r)*round
		// 2's heartbeat reaches us by gossip only, every round.
		n.apply(now, []EndpointState{{Node: 2, Generation: g, Heartbeat: 10 + uint64(r)}})
		n.Tick(now)
		n.Advance()
	}
	if v := convictedValue(n); v != "" || !n.IsAlive(2) {
		t.Fatalf("relayed progress only: published %q, alive %v", v, n.IsAlive(2))
	}
	// 2 crashes after heartbeat 30 (made at round 20); heartbeat 31 was
	// sent just before and arrives 500 ms later: it dates from round 21,
	// so the verdict comes at round 28, not 6 rounds after its arrival.
	var at int
	for r := 21; r <= 40 && at == 0; r++ {
		now := t0 + int64(r)*round
		if r == 26 {
			n.apply(now, []EndpointState{{Node: 2, Generation: g, Heartbeat: 31}})
		}
		n.Tick(now)
		if convictedValue(n) != "" {
			at = r
		}
		n.Advance()
	}
	if at != 28 {
		t.Fatalf("convicted at round %d, want 28", at)
	}
	if v := convictedValue(n); v != fmt.Sprintf("2:%d:31", g) {
		t.Fatalf("published %q", v)
	}
}

// TestVerdictApplied: a node holding another's verdict convicts the target
// at its next status check while its heartbeat is at most verdictSlack
// above the verdict's, even though phi has not; late gossip of the
// target's last heartbeats does not revive it; newer ones do; a verdict
// about another generation or a heartbeat beyond the slack is ignored.
func TestVerdictApplied(t *testing.T) {
	g := uint64(t0 / sec)
	for _, tc := range []struct {
		name    string
		verdict string
		hb      uint64 // the verdict's heartbeat
		dead    bool
	}{
		{"covers", fmt.Sprintf("3:%d:9", g), 9, true},
		{"slack", fmt.Sprintf("3:%d:8", g), 8, true},
		{"beyond slack", fmt.Sprintf("3:%d:7", g), 7, false},
		{"other generation", fmt.Sprintf("3:%d:50", g-1), 50, false},
		{"about me", fmt.Sprintf("1:%d:50", g), 50, false},
		{"malformed", "3:x:9,3:1", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := probeNode(t, 1) // no probe peers of its own
			n.apply(t0+round, []EndpointState{{Node: 2, Generation: g, Heartbeat: 11,
				States: []AppState{{KeyConvicted, 11, tc.verdict}}}})
			n.Tick(t0 + 2*round)
			if n.IsAlive(3) == tc.dead {
				t.Fatalf("verdict %q: 3 alive %v", tc.verdict, n.IsAlive(3))
			}
			if tc.name == "malformed" && n.Stats().BadVerdicts != 2 {
				t.Fatalf("bad verdicts %d", n.Stats().BadVerdicts)
			}
			if !tc.dead {
				return
			}
			if s := n.Stats(); s.VerdictConvictions != 1 || n.Phi(3, t0+2*round) > 1 {
				t.Fatalf("stats %+v, phi %v", s, n.Phi(3, t0+2*round))
			}
			// 3's last heartbeats still spreading: no revival.
			n.apply(t0+3*round, []EndpointState{{Node: 3, Generation: g, Heartbeat: tc.hb + verdictSlack}})
			if n.IsAlive(3) {
				t.Fatal("revived by a heartbeat the verdict covers")
			}
			n.apply(t0+4*round, []EndpointState{{Node: 3, Generation: g, Heartbeat: tc.hb + verdictSlack + 1}})
			if !n.IsAlive(3) {
				t.Fatal("not revived by a heartbeat above the verdict")
			}
		})
	}
}

// TestPingAnswers: Pings from endpoints in the view get a Pong carrying
// this node's generation and heartbeat, others are counted and dropped;
// Pongs echoing no recent Ping are stale; probes from a peer's earlier
// life do not count.
func TestPingAnswers(t *testing.T) {
	g := uint64(t0 / sec)
	n := probeNode(t, 1, 2)
	n.Tick(t0 + round)
	n.Advance()
	if err := n.Step(t0+round, 9, &Ping{Sent: 5}); err != nil {
		t.Fatal(err)
	}
	if s := n.Stats(); s.UnknownPings != 1 || len(n.Ready().Messages) != 0 {
		t.Fatalf("unknown ping: %+v %v", s, n.Ready().Messages)
	}
	// A probe peer not in the view yet (a cluster starting) is answered.
	n2 := newTestNode(t, 1, t0, func(c *Config) { c.ProbePeers, c.ProbeTimeout = []wire.ProcID{7}, 2*c.Interval })
	if err := n2.Step(t0, 7, &Ping{Sent: 5}); err != nil {
		t.Fatal(err)
	}
	if got := envTo(n2.Ready(), 7); len(got) != 1 || n2.Stats().UnknownPings != 0 {
		t.Fatalf("probe peer's ping: %v, %+v", got, n2.Stats())
	}
	if err := n.Step(t0+round, 4, &Ping{Sent: 5}); err != nil {
		t.Fatal(err)
	}
	got := envTo(n.Ready(), 4)
	if len(got) != 1 || *got[0].(*Pong) != (Pong{Echo: 5, Generation: n.Generation(), Heartbeat: n.self().hb}) {
		t.Fatalf("pong %v", got)
	}
	n.Advance()
	for _, p := range []*Pong{
		{Echo: t0 - sec, Generation: g, Heartbeat: 12},       // too old
		{Echo: t0 + sec, Generation: g, Heartbeat: 12},       // from the future
		{Echo: 0, Generation: g, Heartbeat: 12},              // unstamped
		{Echo: t0 + round, Generation: g - 1, Heartbeat: 99}, // earlier life
	} {
		if err := n.Step(t0+2*round, 2, p); err != nil {
			t.Fatal(err)
		}
	}
	if s := n.Stats(); s.StaleReplies != 4 || n.probes[0].hb == 99 || n.probes[0].hb == 12 {
		t.Fatalf("stale pongs: %+v, probe %+v", s, n.probes[0])
	}
}

// TestVerdictTableBound drives the verdict table to maxVerdicts: 300
// endpoints each publishing MaxProbePeers verdicts (and one entry too
// many) give a table of exactly maxVerdicts entries, the rest counted.
func TestVerdictTableBound(t *testing.T) {
	g := uint64(t0 / sec)
	n := newTestNode(t, 0, t0, nil)
	var view []EndpointState
	target := wire.ProcID(100000)
	for p := wire.ProcID(1); p <= 300; p++ {
		var b strings.Builder
		for k := 0; k <= MaxProbePeers; k++ {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d:%d:%d", target, g, 5)
			target++
		}
		view = append(view, EndpointState{Node: p, Generation: g, Heartbeat: 3,
			States: []AppState{{KeyConvicted, 2, b.String()}}})
	}
	if err := n.Preload(t0, view); err != nil {
		t.Fatal(err)
	}
	vs := n.Verdicts()
	want := 300*MaxProbePeers - maxVerdicts
	if s := n.Stats(); len(vs) != maxVerdicts || s.DroppedVerdicts != uint64(want) || s.BadVerdicts != 300 {
		t.Fatalf("%d verdicts, %d dropped (want %d), %d bad", len(vs), s.DroppedVerdicts, want, s.BadVerdicts)
	}
	for i := 1; i < len(vs); i++ {
		if vs[i].Target <= vs[i-1].Target {
			t.Fatal("verdicts not sorted by target")
		}
	}
}

// TestProbeDisabled: the cassandra and local profiles do not probe, and
// a node without ProbeTimeout sends no Pings whatever its ProbePeers.
func TestProbeDisabled(t *testing.T) {
	if Cassandra().ProbeTimeout != 0 || Local().ProbeTimeout != 0 || LAN().ProbeTimeout == 0 {
		t.Fatal("only the lan profile probes")
	}
	n := newTestNode(t, 1, t0, func(c *Config) { c.ProbePeers = []wire.ProcID{2, 3} })
	n.apply(t0, []EndpointState{{Node: 2, Generation: uint64(t0 / sec), Heartbeat: 3}})
	n.Tick(t0 + time.Second.Nanoseconds())
	if ps := pings(n.Ready()); len(ps) != 0 {
		t.Fatalf("pings %v", ps)
	}
}
