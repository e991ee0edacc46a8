package membership

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

const sec = int64(time.Second)

func newTestNode(t testing.TB, id wire.ProcID, now int64, mod func(*Config)) *Node {
	t.Helper()
	c := Cassandra()
	c.ID = id
	c.ClusterName = "weft-test"
	c.Rand = rand.NewPCG(uint64(id), 99)
	if mod != nil {
		mod(&c)
	}
	n, err := NewNode(c, now)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// setSelf forces the node's own record to (hb, version counter) for
// table tests.
func setSelf(n *Node, hb uint64) {
	s := n.self()
	n.ver = hb
	s.hb = hb
}

func envTo(rd Ready, to wire.ProcID) []Message {
	var ms []Message
	for _, e := range rd.Messages {
		if e.To == to {
			ms = append(ms, e.Msg)
		}
	}
	return ms
}

func TestGenerationPersisted(t *testing.T) {
	for _, tc := range []struct {
		stored uint64
		now    int64
		want   uint64
	}{
		{0, 1000 * sec, 1000},               // first start: now
		{900, 1000 * sec, 1000},             // normal restart: now
		{1000, 1000*sec + 5e8, 1001},        // restart within the same second: stored+1
		{5000, 1000 * sec, 5001},            // clock behind the stored value (CASSANDRA-3654)
		{0, -5 * sec, 1},                    // nonsense clock: still positive
		{math.MaxUint32, 10 * sec, 1 << 32}, // beyond 32 bits is fine
	} {
		n := newTestNode(t, 1, tc.now, func(c *Config) { c.StoredGeneration = tc.stored })
		if n.Generation() != tc.want {
			t.Errorf("stored %d now %v: generation %d, want %d", tc.stored, time.Duration(tc.now), n.Generation(), tc.want)
		}
		rd := n.Ready()
		if rd.Generation != tc.want || len(rd.Messages) != 0 {
			t.Errorf("first Ready %+v: must carry the generation to persist and nothing to send", rd)
		}
		n.Advance()
		n.Tick(tc.now + sec)
		if rd := n.Ready(); rd.Generation != 0 {
			t.Errorf("generation repeated in a later Ready")
		}
	}
}

func TestConfigValidation(t *testing.T) {
	// Cassandra's rule is 2 x the interval; LAN's 100 ms rounds lose
	// exchanges often enough that it keeps gaps of up to 4 (config.go).
	for _, p := range []struct {
		name  string
		c     Config
		ratio time.Duration
	}{{"Cassandra", Cassandra(), 2}, {"LAN", LAN(), 4}, {"Local", Local(), 2}} {
		c := p.c
		c.ClusterName, c.Rand = "x", rand.NewPCG(1, 1)
		if _, err := NewNode(c, t0); err != nil {
			t.Errorf("profile %s invalid: %v", p.name, err)
		}
		if c.FD.InitialInterval != p.ratio*c.Interval || c.FD.MaxInterval != p.ratio*c.Interval {
			t.Errorf("profile %s: FD intervals are not %d x the gossip interval", p.name, p.ratio)
		}
	}
	bad := map[string]func(*Config){
		"no rand":           func(c *Config) { c.Rand = nil },
		"no cluster":        func(c *Config) { c.ClusterName = "" },
		"long cluster":      func(c *Config) { c.ClusterName = strings.Repeat("c", 256) },
		"zero interval":     func(c *Config) { c.Interval = 0 },
		"bad fd":            func(c *Config) { c.FD.Threshold = -1 },
		"zero left expiry":  func(c *Config) { c.LeftExpiry = 0 },
		"value cap > wire":  func(c *Config) { c.MaxValueBytes = MaxValue + 1 },
		"message too small": func(c *Config) { c.MaxMessageBytes = 2 * c.MaxValueBytes },
		"warn > max":        func(c *Config) { c.StateWarnBytes = c.MaxStateBytes + 1 },
		"no pending acks":   func(c *Config) { c.MaxPendingAcks = 0 },
		"negative probe":    func(c *Config) { c.ProbeTimeout = -1 },
		"probe < 2 rounds":  func(c *Config) { c.ProbeTimeout = 2*c.Interval - 1 },
		"many probe peers":  func(c *Config) { c.ProbePeers = make([]wire.ProcID, MaxProbePeers+1) },
		"verdicts too long": func(c *Config) { c.ProbeTimeout, c.MaxValueBytes = 2*c.Interval, maxVerdictsValue-1 },
	}
	for name, f := range bad {
		c := Cassandra()
		c.ClusterName, c.Rand = "x", rand.NewPCG(1, 1)
		f(&c)
		if _, err := NewNode(c, t0); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestKeyRegistry pins the append-only key registry to testdata.
func TestKeyRegistry(t *testing.T) {
	b, err := os.ReadFile("testdata/keys.golden")
	if err != nil {
		t.Fatal(err)
	}
	var golden []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			golden = append(golden, l)
		}
	}
	var got []string
	for _, k := range RegisteredKeys() {
		got = append(got, fmt.Sprintf("%d %s", k, k))
	}
	if len(got) < len(golden) || !reflect.DeepEqual(got[:len(golden)], golden) {
		t.Fatalf("registry changed an existing key (append only!):\n got %q\nwant prefix %q", got, golden)
	}
	if len(got) > len(golden) {
		t.Errorf("new keys %q: append them to testdata/keys.golden", got[len(golden):])
	}
	if s := (KeyFirstApp + 3).String(); s != "APP+3" {
		t.Errorf("app key string %q", s)
	}
	if s := Key(700).String(); s != "KEY(700)" {
		t.Errorf("unknown key string %q", s)
	}
}

func TestDepartedStatus(t *testing.T) {
	for _, tc := range []struct {
		v        string
		departed bool
		expire   int64
	}{
		{"NORMAL", false, 0},
		{"", false, 0},
		{"LEFTOVER,5", false, 0},
		{"LEFT,1767225600000", true, 1767225600000 * 1e6},
		{"REMOVED,1767225600000", true, 1767225600000 * 1e6},
		{"LEFT,tokens,1767225600000", true, 1767225600000 * 1e6},
		{"LEFT", true, 0},
		{"LEFT,soon", true, 0},
		{"LEFT,-5", true, 0},
		{"LEFT,99999999999999999", true, 0},
	} {
		d, e := departedStatus(tc.v)
		if d != tc.departed || e != tc.expire {
			t.Errorf("%q: (%v, %d), want (%v, %d)", tc.v, d, e, tc.departed, tc.expire)
		}
	}
	if v := departedValue(StatusLeft, 1767225600123456789); v != "LEFT,1767225600123" {
		t.Errorf("departedValue = %q", v)
	}
}

// TestSeedWorkedExample replays the seed document's three-node example:
// A holds A 1000/52, B 1000/40, C 1000/31; B holds A 1000/49, B 1000/44,
// C 1003/2 (C restarted). A's SYN makes B request A above 49, send B above
// 40 and C's whole new life; A's ACK2 sends A above 49. Then both agree.
func TestSeedWorkedExample(t *testing.T) {
	const A, B, C = 1, 2, 3
	now := int64(1005) * sec
	a := newTestNode(t, A, 1000*sec, nil)
	b := newTestNode(t, B, 1000*sec, nil)
	a.Advance()
	b.Advance()
	setSelf(a, 52)
	setSelf(b, 44)
	// A's view of B and C, B's view of A and C, fed as ACK2 payloads.
	a.apply(now, []EndpointState{
		{Node: B, Generation: 1000, Heartbeat: 40},
		{Node: C, Generation: 1000, Heartbeat: 31},
	})
	b.apply(now, []EndpointState{
		{Node: A, Generation: 1000, Heartbeat: 49},
		{Node: C, Generation: 1003, Heartbeat: 2},
	})
	a.Advance()
	b.Advance()

	syn := &Syn{Cluster: "weft-test", Digests: []Digest{{A, 1000, 52}, {B, 1000, 40}, {C, 1000, 31}}}
	ds, _, _, _ := a.digests(0)
	if !reflect.DeepEqual(ds, syn.Digests) {
		t.Fatalf("A's digests %v, want %v", ds, syn.Digests)
	}
	a.pendSyn = append(a.pendSyn, pending{B, now})
	if err := b.Step(now, A, syn); err != nil {
		t.Fatal(err)
	}
	acks := envTo(b.Ready(), A)
	want := `ACK req=[1:1000.49] states=[{2:1000 >40 hb=44} {3:1003 >0 hb=2}]`
	if len(acks) != 1 || Describe(acks[0]) != want {
		t.Fatalf("B's ACK:\n got %v\nwant %s", describeAll(acks), want)
	}
	b.Advance()
	if err := a.Step(now, B, acks[0]); err != nil {
		t.Fatal(err)
	}
	rd := a.Ready()
	a2 := envTo(rd, B)
	want = `ACK2 states=[{1:1000 >49 hb=52}]`
	if len(a2) != 1 || Describe(a2[0]) != want {
		t.Fatalf("A's ACK2:\n got %v\nwant %s", describeAll(a2), want)
	}
	if ev := fmt.Sprint(rd.Events); ev != "[alive 2 restarted 3 gen=1003 alive 3]" {
		t.Errorf("A's events %s", ev)
	}
	a.Advance()
	if err := b.Step(now, A, a2[0]); err != nil {
		t.Fatal(err)
	}
	for _, id := range []wire.ProcID{A, B, C} {
		ma, _ := a.Member(id)
		mb, _ := b.Member(id)
		if ma.Generation != mb.Generation || ma.Version != mb.Version {
			t.Errorf("after one exchange A and B disagree on %d: %+v vs %+v", id, ma, mb)
		}
	}
}

func describeAll(ms []Message) []string {
	var s []string
	for _, m := range ms {
		s = append(s, Describe(m))
	}
	return s
}

// TestExamineTable covers every digest rule of the receiver.
func TestExamineTable(t *testing.T) {
	const me, X = 1, 7
	now := t0 + 100*sec
	gen := uint64(t0/sec) + 10
	tooFar := uint64(now/sec) + 366*24*3600
	for _, tc := range []struct {
		name   string
		local  *EndpointState // our record of X, nil if unknown
		digest Digest
		want   string
	}{
		{"equal: nothing", &EndpointState{Node: X, Generation: gen, Heartbeat: 5}, Digest{X, gen, 5},
			`ACK req=[] states=[]`},
		{"unknown: request all", nil, Digest{X, gen, 5}, `ACK req=[7:0.0] states=[]`},
		{"newer generation: request all", &EndpointState{Node: X, Generation: gen, Heartbeat: 5}, Digest{X, gen + 1, 1},
			`ACK req=[7:` + fmt.Sprint(gen) + `.5] states=[]`},
		{"older generation: send all", &EndpointState{Node: X, Generation: gen, Heartbeat: 5,
			States: []AppState{{KeyLoad, 3, "l"}}}, Digest{X, gen - 1, 9},
			`ACK req=[] states=[{7:` + fmt.Sprint(gen) + ` >0 hb=5 LOAD@3="l"}]`},
		{"peer ahead: request above ours", &EndpointState{Node: X, Generation: gen, Heartbeat: 5}, Digest{X, gen, 9},
			`ACK req=[7:` + fmt.Sprint(gen) + `.5] states=[]`},
		{"peer behind: delta above its version", &EndpointState{Node: X, Generation: gen, Heartbeat: 9,
			States: []AppState{{KeyLoad, 3, "old"}, {KeyRole, 7, "leader"}}}, Digest{X, gen, 4},
			`ACK req=[] states=[{7:` + fmt.Sprint(gen) + ` >4 hb=9 ROLE@7="leader"}]`},
		{"future generation, unknown: ignored", nil, Digest{X, tooFar, 1}, `ACK req=[] states=[]`},
		{"future generation, known: ignored", &EndpointState{Node: X, Generation: gen, Heartbeat: 5}, Digest{X, tooFar, 1},
			`ACK req=[] states=[]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t, me, t0, nil)
			if tc.local != nil {
				n.apply(now, []EndpointState{*tc.local})
			}
			n.Advance()
			// The SYN also lists us, so no self-introduction.
			self := n.self()
			syn := &Syn{Cluster: "weft-test", Digests: []Digest{{me, self.gen, n.maxVer(self)}, tc.digest}}
			if err := n.Step(now, 2, syn); err != nil {
				t.Fatal(err)
			}
			got := envTo(n.Ready(), 2)
			if len(got) != 1 || Describe(got[0]) != tc.want {
				t.Errorf("got %v, want %s", describeAll(got), tc.want)
			}
		})
	}
}

func TestSelfIntroduction(t *testing.T) {
	n := newTestNode(t, 5, t0, nil)
	n.Advance()
	if err := n.SetAppState(KeyGroup, "g1"); err != nil {
		t.Fatal(err)
	}
	syn := &Syn{Cluster: "weft-test", Digests: []Digest{{2, 100, 3}}}
	if err := n.Step(t0, 2, syn); err != nil {
		t.Fatal(err)
	}
	got := envTo(n.Ready(), 2)
	want := fmt.Sprintf(`ACK req=[2:0.0] states=[{5:%d >0 hb=1 GROUP@2="g1"}]`, t0/sec)
	if len(got) != 1 || Describe(got[0]) != want {
		t.Errorf("got %v, want %s", describeAll(got), want)
	}
}

func TestStepRejects(t *testing.T) {
	n := newTestNode(t, 1, t0, nil)
	n.Advance()
	before := n.Members()
	for name, m := range map[string]Message{
		"unsorted digests": &Syn{Cluster: "weft-test", Digests: []Digest{{3, 1, 1}, {2, 1, 1}}},
		"duplicate states": &Ack2{States: []EndpointState{{Node: 3, Generation: 1}, {Node: 3, Generation: 1}}},
		"key 0":            &Ack2{States: []EndpointState{{Node: 3, Generation: 1, States: []AppState{{Key: 0, Version: 1}}}}},
		"unsorted keys": &Ack2{States: []EndpointState{{Node: 3, Generation: 1,
			States: []AppState{{Key: 2, Version: 1}, {Key: 1, Version: 2}}}}},
		"item below base":      &Ack2{States: []EndpointState{{Node: 3, Generation: 1, Base: 5, States: []AppState{{Key: 1, Version: 5}}}}},
		"heartbeat below base": &Ack{States: []EndpointState{{Node: 3, Generation: 1, Base: 5, Heartbeat: 4}}},
		"nil syn":              (*Syn)(nil),
		"nil message":          nil,
	} {
		if err := n.Step(t0, 2, m); !errors.Is(err, ErrBadMessage) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := n.Step(t0, 1, &Ack2{}); !errors.Is(err, ErrBadMessage) {
		t.Errorf("from self: %v", err)
	}
	if !reflect.DeepEqual(before, n.Members()) || n.HasReady() {
		t.Error("a refused message changed the node")
	}
}

// TestRepliesNeedPendingExchange: ACKs and ACK2s are accepted only from a
// peer we sent a SYN (ACK) to within ExchangeTimeout.
func TestRepliesNeedPendingExchange(t *testing.T) {
	n := newTestNode(t, 1, t0, nil)
	n.Advance()
	st := EndpointState{Node: 9, Generation: uint64(t0 / sec), Heartbeat: 3}
	if err := n.Step(t0, 9, &Ack{States: []EndpointState{st}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Step(t0, 9, &Ack2{States: []EndpointState{st}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Member(9); ok || n.Stats().StaleReplies != 2 {
		t.Fatalf("unsolicited replies applied (stale %d)", n.Stats().StaleReplies)
	}
	n.pendSyn = append(n.pendSyn, pending{9, t0})
	if err := n.Step(t0+11*sec, 9, &Ack{States: []EndpointState{st}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Member(9); ok {
		t.Fatal("ACK after ExchangeTimeout applied")
	}
	n.pendSyn = append(n.pendSyn, pending{9, t0 + 20*sec})
	if err := n.Step(t0+21*sec, 9, &Ack{States: []EndpointState{st}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Member(9); !ok {
		t.Fatal("solicited ACK not applied")
	}
}

// TestPendingAckCap: a node answering SYNs keeps at most MaxPendingAcks
// ACKs awaiting their ACK2; more SYNs are dropped (the senders retry next
// round) until exchanges complete or time out.
func TestPendingAckCap(t *testing.T) {
	n := newTestNode(t, 1, t0, func(c *Config) { c.MaxPendingAcks = 4 })
	n.Advance()
	for p := wire.ProcID(10); p < 20; p++ {
		syn := &Syn{Cluster: "weft-test", Digests: []Digest{{Node: p, Generation: uint64(t0 / sec), Version: 5}}}
		if err := n.Step(t0, p, syn); err != nil {
			t.Fatal(err)
		}
	}
	st := n.Stats()
	if st.AckSent != 4 || st.DroppedSyns != 6 || st.PendingAcks != 4 {
		t.Fatalf("acks %d dropped %d pending %d", st.AckSent, st.DroppedSyns, st.PendingAcks)
	}
	// One exchange completes; one more SYN fits.
	if err := n.Step(t0, 10, &Ack2{States: []EndpointState{{Node: 10, Generation: uint64(t0 / sec), Heartbeat: 5}}}); err != nil {
		t.Fatal(err)
	}
	syn := &Syn{Cluster: "weft-test", Digests: []Digest{{Node: 30, Generation: 1, Version: 1}}}
	n.Step(t0, 30, syn)
	n.Step(t0, 31, syn)
	if st := n.Stats(); st.AckSent != 5 || st.DroppedSyns != 7 {
		t.Fatalf("after one completion: acks %d dropped %d", st.AckSent, st.DroppedSyns)
	}
	// All expire after ExchangeTimeout.
	n.Step(t0+11*sec, 32, syn)
	if st := n.Stats(); st.AckSent != 6 || st.PendingAcks != 1 {
		t.Fatalf("after timeout: acks %d pending %d", st.AckSent, st.PendingAcks)
	}
}

func TestClusterMismatchReportedOncePerSender(t *testing.T) {
	n := newTestNode(t, 1, t0, nil)
	n.Advance()
	for i := 0; i < 5; i++ {
		for _, p := range []wire.ProcID{7, 8} {
			if err := n.Step(t0, p, &Syn{Cluster: "prod-eu", Digests: []Digest{{p, 1, 1}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rd := n.Ready()
	if len(rd.Messages) != 0 {
		t.Error("replied to a foreign SYN")
	}
	if fmt.Sprint(rd.Events) != `[cluster-mismatch 7 "prod-eu" cluster-mismatch 8 "prod-eu"]` {
		t.Errorf("events %v", rd.Events)
	}
	if n.Stats().ClusterMismatches != 10 {
		t.Errorf("counted %d", n.Stats().ClusterMismatches)
	}
}

// TestPeerSelection checks the round's targets statistically: one live
// peer, an unreachable one with probability unreachable/(live+1), a seed
// per the seed rule, never a departed endpoint.
func TestPeerSelection(t *testing.T) {
	// run builds a node with live endpoints 1..live, unreachable ones
	// after them, then departed ones, runs 20,000 rounds and counts the
	// SYNs per target.
	run := func(live, unr, departed int, seeds []wire.ProcID) (rounds int, to map[wire.ProcID]int) {
		n := newTestNode(t, 0, t0, func(c *Config) { c.Seeds = seeds })
		var states []EndpointState
		g := uint64(t0 / sec)
		for i := 1; i <= live+unr+departed; i++ {
			s := EndpointState{Node: wire.ProcID(i), Generation: g, Heartbeat: 1}
			if i > live+unr {
				s.States = []AppState{{KeyStatus, 2, departedValue(StatusLeft, t0+1e15)}}
			}
			states = append(states, s)
		}
		n.apply(t0, states)
		for i := range n.eps {
			if e := &n.eps[i]; e.id >= 1 && int(e.id) <= live {
				e.flags |= fAlive
			}
		}
		to = map[wire.ProcID]int{}
		for rounds = 0; rounds < 20000; rounds++ {
			n.Advance()
			n.pendSyn = n.pendSyn[:0]
			n.gossip(t0)
			for _, e := range n.Ready().Messages {
				to[e.To]++
			}
		}
		return rounds, to
	}
	near := func(name string, got int, p float64, rounds int) {
		t.Helper()
		want := p * float64(rounds)
		if math.Abs(float64(got)-want) > 4*math.Sqrt(want)+1 {
			t.Errorf("%s: %d SYNs in %d rounds, want ≈ %.0f (p=%.4f)", name, got, rounds, want, p)
		}
	}
	sum := func(to map[wire.ProcID]int, from, through int) int {
		c := 0
		for i := from; i <= through; i++ {
			c += to[wire.ProcID(i)]
		}
		return c
	}

	// 9 live, unreachable 10..12, departed 13..16; seeds 10, 11 and the
	// departed 16 (skipped). The live pick is never a seed, so a seed is
	// contacted with probability 2/(9+3); the probe fires with 3/(9+1).
	r, to := run(9, 3, 4, []wire.ProcID{10, 11, 16})
	if d := sum(to, 13, 16); d != 0 {
		t.Errorf("%d SYNs to departed endpoints", d)
	}
	if l := sum(to, 1, 9); l != r {
		t.Errorf("%d live SYNs in %d rounds, want one per round", l, r)
	}
	near("probe to non-seed 12", to[12], 0.3/3, r)
	pProbe, pSeed := 0.3/3, 2.0/12/2 // per seed; one SYN if both pick it
	near("SYNs to seeds 10+11", to[10]+to[11], 2*(pProbe+pSeed-pProbe*pSeed), r)

	// Nothing live: always a seed (and a probe, probability 5/1).
	r, to = run(0, 5, 0, []wire.ProcID{1, 2})
	if s := to[1] + to[2]; s < r {
		t.Errorf("no live peers: %d seed SYNs in %d rounds, want at least one per round", s, r)
	}
	if s := sum(to, 1, 5); s < r || s > 2*r {
		t.Errorf("no live peers: %d SYNs in %d rounds", s, r)
	}

	// All 10 live, seeds 3 and 4: a seed is the live pick with
	// probability 2/10; otherwise a seed follows with probability 2/10.
	r, to = run(10, 0, 0, []wire.ProcID{3, 4})
	near("SYNs to seeds", to[3]+to[4], 0.2+0.8*0.2, r)
	near("SYNs to non-seeds", sum(to, 1, 10)-to[3]-to[4], 0.8, r)
}

// TestDeltaPaging: a record larger than the budget travels as version
// prefixes; applying the pages in turn rebuilds it exactly.
func TestDeltaPaging(t *testing.T) {
	src := newTestNode(t, 1, t0, nil)
	dst := newTestNode(t, 2, t0, nil)
	for k := Key(0); k < 20; k++ {
		if err := src.SetAppState(KeyFirstApp+k, strings.Repeat("x", 100+int(k))); err != nil {
			t.Fatal(err)
		}
	}
	src.Tick(t0 + sec) // heartbeat above every item
	self := src.self()
	base := uint64(0)
	pages := 0
	for {
		_, have := dst.Member(1)
		m, _ := dst.Member(1)
		if have {
			base = m.Version
		}
		if base >= src.maxVer(self) {
			break
		}
		s, size, paged, ok := src.delta(self, base, 500)
		if !ok {
			t.Fatalf("delta above %d: nothing fits", base)
		}
		if !paged && base == 0 {
			t.Fatal("the whole record fit in 500 bytes: test is not paging")
		}
		if sizeState(&s) != size || size > 500 {
			t.Fatalf("page size %d (reported %d) over 500", sizeState(&s), size)
		}
		if err := validStates([]EndpointState{s}); err != nil {
			t.Fatal(err)
		}
		dst.apply(t0, []EndpointState{s})
		pages++
		if pages > 100 {
			t.Fatal("paging does not progress")
		}
	}
	if !reflect.DeepEqual(dst.AppStates(1), src.AppStates(1)) {
		t.Error("paged transfer differs from the source")
	}
	if m, _ := dst.Member(1); m.Heartbeat != self.hb || m.Version != src.maxVer(self) {
		t.Errorf("member after paging %+v", m)
	}
	t.Logf("%d-byte record sent in %d pages of <= 500 bytes", sizeState(&EndpointState{Node: 1, Generation: self.gen, Heartbeat: self.hb, States: src.appsOf(self)}), pages)
	if _, _, _, ok := src.delta(self, 0, 10); ok {
		t.Error("a page smaller than any item should fail")
	}
}

// TestDigestPaging: with more endpoints than one SYN holds, rounds send
// contiguous pages that together cover everything.
func TestDigestPaging(t *testing.T) {
	n := newTestNode(t, 0, t0, func(c *Config) { c.MaxValueBytes = 1; c.MaxMessageBytes = 1026 })
	var states []EndpointState
	for i := 1; i < 400; i++ {
		states = append(states, EndpointState{Node: wire.ProcID(i * 3), Generation: uint64(t0 / sec), Heartbeat: 1000 + uint64(i)})
	}
	n.apply(t0, states)
	seen := map[wire.ProcID]int{}
	for round := 0; round < 6; round++ {
		ds, size, _, _ := n.digests(t0)
		syn := &Syn{Sent: t0, Cluster: n.cfg.ClusterName, Digests: ds}
		if Size(syn) != size || size > 1026 {
			t.Fatalf("page of %d bytes (reported %d)", Size(syn), size)
		}
		if err := validDigests(ds); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			seen[d.Node]++
		}
	}
	if len(seen) != 400 {
		t.Errorf("6 pages covered %d of 400 endpoints", len(seen))
	}
	if n.Stats().PagedMessages == 0 {
		t.Error("no paging counted")
	}
}

func TestSetAppState(t *testing.T) {
	n := newTestNode(t, 1, t0, nil)
	for _, tc := range []struct {
		k   Key
		v   string
		err error
	}{
		{KeyInvalid, "x", ErrInvalidKey},
		{KeyStatus, "LEFT,123", ErrReservedStatus},
		{KeyStatus, "REMOVED", ErrReservedStatus},
		{KeyStatus, StatusLeaving, nil},
		{KeyLoad, strings.Repeat("x", 16<<10+1), ErrValueTooLarge},
		{KeyLoad, "1", nil},
	} {
		if err := n.SetAppState(tc.k, tc.v); !errors.Is(err, tc.err) {
			t.Errorf("set %s: %v, want %v", tc.k, err, tc.err)
		}
	}
	v := n.maxVer(n.self())
	if err := n.SetAppState(KeyLoad, "1"); err != nil || n.maxVer(n.self()) != v {
		t.Error("re-setting the same value bumped the version")
	}
	if a, _ := n.AppState(1, KeyLoad); a.Value != "1" {
		t.Errorf("read back %+v", a)
	}
	if err := n.Leave(t0); err != nil {
		t.Fatal(err)
	}
	if err := n.SetAppState(KeyLoad, "2"); !errors.Is(err, ErrLeaving) {
		t.Errorf("set while leaving: %v", err)
	}
	if err := n.Leave(t0); !errors.Is(err, ErrLeaving) {
		t.Errorf("second leave: %v", err)
	}
}

// TestUnknownKeysRelayed: keys this build does not know travel unchanged
// (the registry is append-only so old nodes relay new keys).
func TestUnknownKeysRelayed(t *testing.T) {
	n := newTestNode(t, 1, t0, nil)
	g := uint64(t0 / sec)
	n.apply(t0, []EndpointState{{Node: 4, Generation: g, Heartbeat: 9, States: []AppState{{Key(700), 3, "future"}}}})
	syn := &Syn{Cluster: "weft-test", Digests: []Digest{{4, g, 1}}}
	n.Advance()
	n.Step(t0, 2, syn)
	got := envTo(n.Ready(), 2)
	if len(got) != 1 || !strings.Contains(Describe(got[0]), `KEY(700)@3="future"`) {
		t.Errorf("unknown key not relayed: %v", describeAll(got))
	}
}

// checkInvariants verifies the node's internal consistency.
func checkInvariants(t testing.TB, n *Node) {
	t.Helper()
	if n.find(n.id) < 0 {
		t.Fatal("self record missing")
	}
	bytes := 0
	for i := range n.eps {
		e := &n.eps[i]
		if i > 0 && e.id <= n.eps[i-1].id {
			t.Fatalf("eps not sorted at %d", i)
		}
		app := n.appsOf(e)
		if mv := n.maxVer(e); mv < e.hb {
			t.Fatalf("endpoint %d: maxVer %d (hb %d)", e.id, mv, e.hb)
		}
		for j := range app {
			if j > 0 && app[j].Key <= app[j-1].Key {
				t.Fatalf("endpoint %d: app not sorted", e.id)
			}
		}
		if e.departed() != (n.expireOf(e.id) != 0) {
			t.Fatalf("endpoint %d: departed %v but expiry %d", e.id, e.departed(), n.expireOf(e.id))
		}
		if e.alive() && e.departed() {
			t.Fatalf("endpoint %d alive and departed", e.id)
		}
		if n.quarantined(e.id) != nil {
			t.Fatalf("endpoint %d both known and quarantined", e.id)
		}
		bytes += endpointCost + appCost(app)
	}
	for i := range n.clocks {
		if i > 0 && n.clocks[i].id <= n.clocks[i-1].id || n.find(n.clocks[i].id) < 0 || n.clocks[i].id == n.id {
			t.Fatalf("clock estimate %d of %d: unsorted, unknown or self (%d)", i, len(n.clocks), n.clocks[i].id)
		}
	}
	if len(n.expires) > len(n.eps) || n.fds.Len() != len(n.eps) {
		t.Fatalf("%d expiries, %d windows for %d endpoints", len(n.expires), n.fds.Len(), len(n.eps))
	}
	if n.cfg.Apps == nil {
		// The node's own table: its references are exactly the records'.
		refs := map[appRef]uint32{}
		for i := range n.eps {
			refs[n.eps[i].app]++
		}
		for i := range n.quar {
			refs[n.quar[i].ep.app]++
		}
		delete(refs, 0)
		for r := 1; r < len(n.apps.lists); r++ {
			if got := n.apps.lists[r].refs; got != refs[appRef(r)] {
				t.Fatalf("app list %d: %d references counted, %d held", r, got, refs[appRef(r)])
			}
		}
	}
	if bytes != n.stateBytes {
		t.Fatalf("stateBytes %d, recomputed %d", n.stateBytes, bytes)
	}
	for i := 1; i < len(n.quar); i++ {
		if n.quar[i].ep.id <= n.quar[i-1].ep.id {
			t.Fatal("quarantine not sorted")
		}
	}
	if len(n.pendAck) > n.cfg.MaxPendingAcks || len(n.pendSyn) > n.cfg.MaxPendingAcks {
		t.Fatalf("pending lists over the cap: %d %d", len(n.pendAck), len(n.pendSyn))
	}
	if len(n.probes) > MaxProbePeers || len(n.verdicts) > maxVerdicts {
		t.Fatalf("%d probes, %d verdicts", len(n.probes), len(n.verdicts))
	}
	for i := 1; i < len(n.verdicts); i++ {
		if n.verdicts[i].target <= n.verdicts[i-1].target {
			t.Fatal("verdicts not sorted by target")
		}
	}
}

// FuzzStep feeds arbitrary decodable messages to a node with some state:
// no panics, and the view stays consistent.
func FuzzStep(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	g := uint64(t0 / sec)
	f.Add(Append(nil, &Ack2{States: []EndpointState{{Node: 3, Generation: g + 1, Heartbeat: 1,
		States: []AppState{{KeyStatus, 2, "LEFT,1"}}}}}))
	f.Add(Append(nil, &Ack{Requests: []Digest{{1, 0, 0}, {3, g, 2}}, States: []EndpointState{{Node: 1, Generation: g + 5}}}))
	// Stamped replies to the pending exchanges below: an offset sample, one
	// beyond the threshold, a stamp echoing another exchange, a round trip
	// shorter than the peer's hold, a generation ahead of the clock.
	at := t0 + 2*sec
	f.Add(Append(nil, &Ack{Times: Times{Echo: at, Recv: at + 3e6, Sent: at + 4e6}}))
	f.Add(Append(nil, &Ack2{Times: Times{Echo: at, Recv: at + 9*sec, Sent: at + 9*sec}}))
	f.Add(Append(nil, &Ack{Times: Times{Echo: at - 1, Recv: at, Sent: at}}))
	f.Add(Append(nil, &Ack{Times: Times{Echo: at, Recv: at, Sent: at + 5*sec}}))
	f.Add(Append(nil, &Ack2{Times: Times{Echo: at, Recv: at, Sent: at}, States: []EndpointState{{Node: 2, Generation: g + 60, Heartbeat: 3}}}))
	// Probes and verdicts: a Ping, a Pong to the round's Ping, a verdict
	// on 3 from 2 (and a malformed one).
	f.Add(Append(nil, &Ping{Sent: at, Generation: g, Heartbeat: 9}))
	f.Add(Append(nil, &Pong{Echo: at, Generation: g, Heartbeat: 9}))
	f.Add(Append(nil, &Ack2{Times: Times{Echo: at, Recv: at, Sent: at}, States: []EndpointState{{Node: 2, Generation: g, Heartbeat: 3,
		States: []AppState{{KeyConvicted, 2, fmt.Sprintf("3:%d:7,x:1", g)}}}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			return
		}
		n := newTestNode(t, 1, t0, func(c *Config) {
			c.MaxStateBytes = 4096
			c.StateWarnBytes = 2048
			// Probe 2 and 3 (probe.go), so Pings, Pongs and verdicts
			// reach that code too.
			c.ProbePeers = []wire.ProcID{2, 3}
			c.ProbeTimeout = 2 * c.Interval
		})
		n.SetAppState(KeyLoad, "load")
		n.apply(t0, []EndpointState{
			{Node: 3, Generation: g, Heartbeat: 7, States: []AppState{{KeyRole, 5, "leader"}}},
			{Node: 4, Generation: g, Heartbeat: 2, States: []AppState{{KeyStatus, 1, departedValue(StatusLeft, t0+sec)}}},
		})
		n.Tick(t0 + 2*sec) // evicts 4 into quarantine
		n.pendSyn = append(n.pendSyn, pending{2, t0 + 2*sec})
		n.pendAck = append(n.pendAck, pending{2, t0 + 2*sec})
		if err := n.Step(t0+2*sec, 2, m); err != nil && !errors.Is(err, ErrBadMessage) {
			t.Fatal(err)
		}
		checkInvariants(t, n)
		n.Tick(t0 + 3*sec)
		checkInvariants(t, n)
		for _, e := range n.Ready().Messages {
			if sz := Size(e.Msg); sz > n.cfg.MaxMessageBytes {
				t.Fatalf("reply of %d bytes", sz)
			}
			if _, err := Decode(Append(nil, e.Msg)); err != nil {
				t.Fatalf("node produced an undecodable message: %v", err)
			}
		}
	})
}
