package membership

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

const ms = int64(time.Millisecond)

func kinds(evs []Event, k EventKind) []Event {
	var out []Event
	for _, e := range evs {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// TestClockOffsetExchange runs one SYN/ACK/ACK2 exchange between A and B,
// B's clock 2 s ahead of A's, with asymmetric legs: 10 ms A→B, 30 ms B→A.
// Each side's estimate is the true offset minus half the asymmetry
// (NTP's error bound), the delay the 40 ms round trip, and both report
// the skew.
func TestClockOffsetExchange(t *testing.T) {
	const A, B = 1, 2
	skew := 2 * sec
	a := newTestNode(t, A, t0, func(c *Config) { c.Seeds = []wire.ProcID{B} })
	b := newTestNode(t, B, t0+skew, nil)
	a.Advance()
	b.Advance()

	a.Tick(t0) // SYN to the seed B, stamped t0
	syns := envTo(a.Ready(), B)
	if len(syns) != 1 || syns[0].(*Syn).Sent != t0 {
		t.Fatalf("A's SYN: %v", describeAll(syns))
	}
	a.Advance()
	t1 := t0 + skew + 10*ms // B's clock
	if err := b.Step(t1, A, syns[0]); err != nil {
		t.Fatal(err)
	}
	ack := envTo(b.Ready(), A)[0].(*Ack)
	if ack.Times != (Times{Echo: t0, Recv: t1, Sent: t1}) || len(ack.Requests) == 0 {
		t.Fatalf("B's ACK: %s", Describe(ack))
	}
	b.Advance()
	t3 := t0 + 40*ms // A's clock: 10 ms there, 30 ms back
	if err := a.Step(t3, B, ack); err != nil {
		t.Fatal(err)
	}
	rd := a.Ready()
	got, ok := a.ClockOffset(B)
	want := ClockOffset{Node: B, Offset: time.Duration(skew - 10*ms), Delay: 40 * time.Millisecond, Samples: 1, Skewed: true}
	if !ok || got != want {
		t.Fatalf("A's estimate of B: %+v, want %+v", got, want)
	}
	if sk := kinds(rd.Events, EventClockSkew); len(sk) != 1 || sk[0].Node != B || sk[0].Offset != want.Offset {
		t.Errorf("A's events %v", rd.Events)
	}
	ack2 := envTo(rd, B)[0].(*Ack2)
	a.Advance()

	// B measures with its ACK (30 ms to A) and A's ACK2 (10 ms back):
	// the true -2 s, off by half the asymmetry the other way.
	if ack2.Times != (Times{Echo: t1, Recv: t3, Sent: t3}) {
		t.Fatalf("A's ACK2: %s", Describe(ack2))
	}
	if err := b.Step(t1+40*ms, A, ack2); err != nil {
		t.Fatal(err)
	}
	gb, _ := b.ClockOffset(A)
	if gb.Offset != time.Duration(-skew+10*ms) || gb.Delay != 40*time.Millisecond || !gb.Skewed {
		t.Errorf("B's estimate of A: %+v", gb)
	}
	if s := a.Stats(); s.ClockSamples != 1 || s.ClockSkewed != 1 || s.ClockUnmatched+s.ClockNegative+s.ClockSpikes != 0 {
		t.Errorf("A's stats %+v", s)
	}
}

// clockPeer returns a node (id 1) that knows peer 2 and has an exchange
// with it pending since at.
func clockPeer(t *testing.T, at int64) *Node {
	n := newTestNode(t, 1, t0, nil)
	n.apply(t0, []EndpointState{{Node: 2, Generation: uint64(t0 / sec), Heartbeat: 3}})
	n.Advance()
	n.pendSyn = append(n.pendSyn, pending{2, at})
	return n
}

// TestClockSamples feeds stamps to the estimator directly: each row is a
// sequence of (t0, t1, t2, t3) exchanges and the estimate and counters
// after them.
func TestClockSamples(t *testing.T) {
	type ex struct{ t0, t1, t2, t3 int64 } // offsets from t0, ns
	for _, tc := range []struct {
		name            string
		exs             []ex
		offset, delay   int64
		samples         uint64
		unmatched, neg  uint64
		spikes          uint64
		skewed, cleared int
	}{
		{name: "symmetric, no skew", exs: []ex{{0, 5 * ms, 6 * ms, 11 * ms}}, offset: 0, delay: 10 * ms, samples: 1},
		{name: "peer behind", exs: []ex{{0, -300*ms + 2*ms, -300*ms + 2*ms, 4 * ms}}, offset: -300 * ms, delay: 4 * ms, samples: 1},
		// The whole 40 ms on the way there: the estimate is 20 ms off, the
		// most NTP's bound (delay/2) allows.
		{name: "asymmetric", exs: []ex{{0, 40 * ms, 40 * ms, 40 * ms}}, offset: 20 * ms, delay: 40 * ms, samples: 1},
		{name: "beyond threshold", exs: []ex{{0, 700 * ms, 700 * ms, 2 * ms}}, offset: 699 * ms, delay: 2 * ms, samples: 1, skewed: 1},
		// 520 ms ± 300 ms is not certainly beyond 500 ms.
		{name: "within the uncertainty", exs: []ex{{0, 820 * ms, 820 * ms, 600 * ms}}, offset: 520 * ms, delay: 600 * ms, samples: 1},
		{name: "smoothed", exs: []ex{{0, 1 * ms, 1 * ms, 2 * ms}, {0, 41 * ms, 41 * ms, 2 * ms}},
			offset: 10 * ms, delay: 2 * ms, samples: 2},
		// A 500 ms round trip after 2 ms ones: the delay moves, the offset
		// does not (its error could be 250 ms).
		{name: "spike", exs: []ex{{0, 1 * ms, 1 * ms, 2 * ms}, {0, 500 * ms, 500 * ms, 500 * ms}},
			offset: 0, delay: 2*ms + 498*ms/4, samples: 2, spikes: 1},
		{name: "skew then cleared", exs: []ex{{0, 900 * ms, 900 * ms, 2 * ms}, {0, 1 * ms, 1 * ms, 2 * ms}, {0, 1 * ms, 1 * ms, 2 * ms}, {0, 1 * ms, 1 * ms, 2 * ms}},
			offset: -1 /* below */, delay: 2 * ms, samples: 4, skewed: 1, cleared: 1},
		// Bad inputs: not used, counted.
		{name: "round trip negative", exs: []ex{{0, 5 * ms, 5 * ms, -1}}, neg: 1},
		{name: "hold longer than round trip", exs: []ex{{0, 1 * ms, 50 * ms, 10 * ms}}, neg: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := clockPeer(t, t0)
			var evs []Event
			for _, x := range tc.exs {
				n.pendSyn = append(n.pendSyn[:0], pending{2, t0 + x.t0})
				ack := &Ack{Times: Times{Echo: t0 + x.t0, Recv: t0 + x.t1, Sent: t0 + x.t2}}
				if err := n.Step(t0+x.t3, 2, ack); err != nil {
					t.Fatal(err)
				}
				evs = append(evs, n.Ready().Events...)
				n.Advance()
			}
			s := n.Stats()
			if s.ClockUnmatched != tc.unmatched || s.ClockNegative != tc.neg || s.ClockSpikes != tc.spikes || s.ClockSamples != tc.samples {
				t.Errorf("stats: %d samples, %d unmatched, %d negative, %d spikes", s.ClockSamples, s.ClockUnmatched, s.ClockNegative, s.ClockSpikes)
			}
			if sk, cl := len(kinds(evs, EventClockSkew)), len(kinds(evs, EventClockSkewCleared)); sk != tc.skewed || cl != tc.cleared {
				t.Errorf("%d skew and %d cleared events, want %d and %d: %v", sk, cl, tc.skewed, tc.cleared, evs)
			}
			got, ok := n.ClockOffset(2)
			if tc.samples == 0 {
				if ok {
					t.Errorf("estimate %+v from bad samples", got)
				}
				return
			}
			if tc.name == "skew then cleared" {
				// 899, then three quarter-steps towards 0.
				o := 899 * ms
				for range 3 {
					o += (0 - o) / clockGain
				}
				tc.offset = o
			}
			if int64(got.Offset) != tc.offset || int64(got.Delay) != tc.delay || got.Samples != tc.samples {
				t.Errorf("estimate %v ± %v over %d samples, want %v ± %v", got.Offset, got.Delay, got.Samples, time.Duration(tc.offset), time.Duration(tc.delay))
			}
		})
	}
}

// TestClockBadStamps: malformed stamps are refused by Step (ErrBadTime
// under ErrBadMessage, view unchanged); stamps echoing another exchange
// deliver their states but no sample.
func TestClockBadStamps(t *testing.T) {
	n := clockPeer(t, t0)
	for _, m := range []Message{
		&Syn{Sent: -1, Cluster: "weft-test"},
		&Ack{Times: Times{Echo: t0, Recv: 0, Sent: t0}},
		&Ack{Times: Times{Echo: t0, Recv: t0 + 2, Sent: t0 + 1}},
		&Ack2{Times: Times{Echo: -5, Recv: t0, Sent: t0}},
	} {
		if err := n.Step(t0, 2, m); !errors.Is(err, ErrBadMessage) || !errors.Is(err, ErrBadTime) {
			t.Errorf("%s: %v", Describe(m), err)
		}
	}
	if len(n.pendSyn) != 1 {
		t.Fatal("a refused reply consumed the pending exchange")
	}
	// A reply echoing another time: matched to the pending exchange by
	// peer, its states applied, its stamps ignored.
	ack := &Ack{Times: Times{Echo: t0 - 7*sec, Recv: t0 + 9*sec, Sent: t0 + 9*sec},
		States: []EndpointState{{Node: 2, Generation: uint64(t0 / sec), Heartbeat: 4}}}
	if err := n.Step(t0+ms, 2, ack); err != nil {
		t.Fatal(err)
	}
	if m, _ := n.Member(2); m.Heartbeat != 4 {
		t.Errorf("states not applied: %+v", m)
	}
	if _, ok := n.ClockOffset(2); ok || n.Stats().ClockUnmatched != 1 {
		t.Errorf("unmatched stamps used: %+v", n.Stats())
	}
	// Unstamped replies (another driver, a test) are fine and give no
	// sample.
	n.pendSyn = append(n.pendSyn, pending{2, t0})
	if err := n.Step(t0+ms, 2, &Ack{}); err != nil || n.Stats().ClockSamples != 0 {
		t.Errorf("unstamped: %v %+v", err, n.Stats())
	}
}

// TestClockMatchesExchange: with two exchanges pending with one peer, the
// reply is matched to the one it echoes, not to the oldest.
func TestClockMatchesExchange(t *testing.T) {
	n := clockPeer(t, t0)
	n.pendSyn = append(n.pendSyn, pending{2, t0 + 100*ms})
	if err := n.Step(t0+104*ms, 2, &Ack{Times: Times{Echo: t0 + 100*ms, Recv: t0 + 102*ms, Sent: t0 + 102*ms}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := n.ClockOffset(2); got.Offset != 0 || got.Delay != 4*time.Millisecond {
		t.Errorf("estimate %+v", got)
	}
	if len(n.pendSyn) != 1 || n.pendSyn[0].at != t0 {
		t.Errorf("pending %v: want the older exchange left", n.pendSyn)
	}
}

// TestClockBounded: the node keeps one estimate per known peer at most,
// none for peers outside its view, and drops a peer's estimate when the
// peer is evicted or restarts.
func TestClockBounded(t *testing.T) {
	n := newTestNode(t, 0, t0, func(c *Config) { c.LeftExpiry = time.Second; c.QuarantineDelay = time.Second })
	g := uint64(t0 / sec)
	var states []EndpointState
	for p := wire.ProcID(1); p <= 50; p++ {
		states = append(states, EndpointState{Node: p, Generation: g, Heartbeat: 2})
	}
	n.apply(t0, states)
	for round := range 3 {
		for p := wire.ProcID(1); p <= 60; p++ { // 51..60 are unknown
			at := t0 + int64(round)*sec + int64(p)
			n.pendSyn = append(n.pendSyn[:0], pending{p, at})
			n.clockSample(at+2*ms, p, at, Times{Echo: at, Recv: at + ms, Sent: at + ms})
		}
	}
	if len(n.clocks) != 50 {
		t.Fatalf("%d estimates for 50 known peers", len(n.clocks))
	}
	checkInvariants(t, n)
	// Peer 7 restarts; peer 9 leaves and is evicted.
	n.apply(t0, []EndpointState{{Node: 7, Generation: g + 1, Heartbeat: 1}})
	n.apply(t0, []EndpointState{{Node: 9, Generation: g, Base: 2, States: []AppState{{KeyStatus, 3, departedValue(StatusLeft, t0+sec)}}}})
	n.Tick(t0 + 2*sec)
	if _, ok := n.ClockOffset(7); ok {
		t.Error("estimate kept across a restart")
	}
	if _, ok := n.ClockOffset(9); ok || n.find(9) >= 0 {
		t.Error("estimate kept after eviction")
	}
	if len(n.clocks) != 48 {
		t.Errorf("%d estimates", len(n.clocks))
	}
	checkInvariants(t, n)
	// Disabled: no estimates at all.
	off := newTestNode(t, 0, t0, func(c *Config) { c.ClockSkewThreshold = 0 })
	off.apply(t0, states[:1])
	off.clockSample(t0+2*ms, 1, t0, Times{Echo: t0, Recv: t0 + 9*sec, Sent: t0 + 9*sec})
	if len(off.clocks) != 0 || off.Stats().ClockSamples != 0 {
		t.Error("estimates kept with ClockSkewThreshold 0")
	}
}

// TestGenerationAhead: a new endpoint or a new life whose generation is
// more than the threshold (plus the restart slack of a second) ahead of
// the clock is reported once and counted; nearer ones are not.
func TestGenerationAhead(t *testing.T) {
	n := newTestNode(t, 0, t0, nil)
	n.Advance()
	g := uint64(t0 / sec)
	n.apply(t0, []EndpointState{
		{Node: 1, Generation: g + 1, Heartbeat: 1}, // the slack: a quick restart
		{Node: 2, Generation: g + 3, Heartbeat: 1}, // 3 s ahead
		{Node: 3, Generation: g - 100, Heartbeat: 1},
	})
	n.apply(t0+ms, []EndpointState{{Node: 3, Generation: g + 5, Heartbeat: 1}}) // a new life, 5 s ahead
	got := fmt.Sprint(kinds(n.Ready().Events, EventGenerationAhead))
	want := fmt.Sprintf("[generation-ahead 2 gen=%d ahead=3s generation-ahead 3 gen=%d ahead=4.999s]", g+3, g+5)
	if got != want || n.Stats().GenerationsAhead != 2 {
		t.Errorf("events %s, want %s (%d counted)", got, want, n.Stats().GenerationsAhead)
	}
	// Accepted all the same.
	if m, _ := n.Member(3); m.Generation != g+5 {
		t.Errorf("member 3: %+v", m)
	}
}
