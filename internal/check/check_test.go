package check

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// builder makes hand-written histories.
type builder struct {
	h History
}

func newBuilder(groups, replicas int) *builder {
	return &builder{h: History{Config: Config{Protocol: "test", Groups: groups, Replicas: replicas, Seed: 1}}}
}

func (b *builder) t() int64 { return int64(len(b.h.Events)) + 1 }

func (b *builder) mc(id string, dest ...int) *builder {
	b.h.Events = append(b.h.Events, Event{Ev: EvMulticast, ID: id, Dest: dest, T: b.t()})
	return b
}

func (b *builder) dl(p int, id string, ts GTS) *builder {
	b.h.Events = append(b.h.Events, Event{Ev: EvDeliver, Proc: p, Group: p / b.h.Config.Replicas, ID: id, GTS: ts, T: b.t()})
	return b
}

// group makes every member of group g deliver ids in order, with the GTSs
// of gts (nil: no GTS).
func (b *builder) group(g int, gts map[string]GTS, ids ...string) *builder {
	R := b.h.Config.Replicas
	for i := 0; i < R; i++ {
		for _, id := range ids {
			b.dl(g*R+i, id, gts[id])
		}
	}
	return b
}

var baseGTS = map[string]GTS{
	"a": {1, 0},
	"b": {2, 1},
	"c": {3, 2},
	"d": {4, 2},
	"e": {5, 2},
}

// base returns a correct history: 3 groups × 3 replicas, five messages to
// one to three groups, all delivered everywhere, with GTSs.
//
//	a→{0} b→{0,1} c→{1,2} d→{0,1,2} e→{2}; order a<b<c<d<e
func base() *History {
	b := newBuilder(3, 3)
	b.mc("a", 0).mc("b", 0, 1).mc("c", 1, 2).mc("d", 0, 1, 2).mc("e", 2)
	b.group(0, baseGTS, "a", "b", "d")
	b.group(1, baseGTS, "b", "c", "d")
	b.group(2, baseGTS, "c", "d", "e")
	return &b.h
}

func clone(h *History) *History {
	return &History{Config: h.Config, Events: slices.Clone(h.Events)}
}

// without removes the deliveries of id at the given processes.
func without(h *History, id string, procs ...int) *History {
	out := &History{Config: h.Config}
	for _, ev := range h.Events {
		if ev.Ev == EvDeliver && ev.ID == id && slices.Contains(procs, ev.Proc) {
			continue
		}
		out.Events = append(out.Events, ev)
	}
	return out
}

func kindsOf(r *Report) []string {
	var ks []string
	for _, k := range kinds {
		if r.Count(k) > 0 {
			ks = append(ks, k)
		}
	}
	return ks
}

// expect asserts that the report has violations of exactly the given kinds
// (none if kinds is empty).
func expect(t *testing.T, r *Report, want ...string) {
	t.Helper()
	got := kindsOf(r)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("violation kinds = %v, want %v\n%s", got, want, r.Error())
	}
}

// expectHas asserts that the report has a violation of kind whose detail
// contains all of subs.
func expectHas(t *testing.T, r *Report, kind string, subs ...string) {
	t.Helper()
next:
	for _, v := range r.Violations {
		if v.Kind != kind {
			continue
		}
		for _, s := range subs {
			if !strings.Contains(v.Detail, s) {
				continue next
			}
		}
		return
	}
	t.Fatalf("no %s violation mentioning %q\n%s", kind, subs, r.Error())
}

func TestBasePasses(t *testing.T) {
	h := base()
	for _, term := range []Termination{TermNone, TermAll, TermQuorum} {
		r := Check(h, Options{Termination: term})
		expect(t, r)
		if r.Multicasts != 5 || r.Deliveries != 27 {
			t.Fatalf("counts: %d multicasts, %d deliveries", r.Multicasts, r.Deliveries)
		}
	}
	// Without GTSs too.
	h2 := clone(h)
	for i := range h2.Events {
		h2.Events[i].GTS = GTS{}
	}
	expect(t, Check(h2, Options{Termination: TermAll}))
	if s := Check(h, Options{}).Error(); !strings.Contains(s, "ok") {
		t.Fatalf("Error() of a passing report: %q", s)
	}
}

func TestDuplicateDelivery(t *testing.T) {
	b := &builder{h: *base()}
	b.dl(0, "a", baseGTS["a"])
	r := Check(&b.h, Options{Termination: TermAll})
	expect(t, r, KindIntegrity)
	expectHas(t, r, KindIntegrity, "proc 0", "a")
}

func TestDuplicateAcrossRestart(t *testing.T) {
	b := &builder{h: *base()}
	b.h.Events = append(b.h.Events,
		Event{Ev: EvCrash, Proc: 0, T: b.t()},
		Event{Ev: EvRestart, Proc: 0, T: b.t() + 1})
	b.dl(0, "b", baseGTS["b"])
	expect(t, Check(&b.h, Options{Termination: TermAll}), KindIntegrity)
}

func TestDeliveryToGroupNotInDest(t *testing.T) {
	b := &builder{h: *base()}
	b.dl(6, "a", baseGTS["a"]) // proc 6 is in group 2; a→{0}
	r := Check(&b.h, Options{Termination: TermAll})
	expect(t, r, KindValidity)
	expectHas(t, r, KindValidity, "proc 6", "not in its dest")
}

func TestDeliveryOfUnknownID(t *testing.T) {
	b := &builder{h: *base()}
	b.dl(0, "zz", GTS{9, 0})
	r := Check(&b.h, Options{Termination: TermAll})
	expect(t, r, KindValidity)
	expectHas(t, r, KindValidity, "zz", "never multicast")
}

func TestOtherValidity(t *testing.T) {
	t.Run("wrong stated group", func(t *testing.T) {
		h := clone(base())
		for i := range h.Events {
			if h.Events[i].Ev == EvDeliver && h.Events[i].Proc == 4 && h.Events[i].ID == "d" {
				h.Events[i].Group = 0
			}
		}
		expect(t, Check(h, Options{}), KindValidity)
	})
	t.Run("unknown proc", func(t *testing.T) {
		b := &builder{h: *base()}
		b.dl(9, "e", baseGTS["e"])
		b.dl(-1, "e", baseGTS["e"])
		r := Check(&b.h, Options{})
		expect(t, r, KindValidity)
		if r.Count(KindValidity) != 2 {
			t.Fatal(r)
		}
	})
	t.Run("deliver before multicast", func(t *testing.T) {
		h := clone(base())
		for i := range h.Events {
			if h.Events[i].Ev == EvDeliver && h.Events[i].ID == "e" && h.Events[i].Proc == 7 {
				h.Events[i].T = 2 // e is multicast at t=5
			}
		}
		r := Check(h, Options{Termination: TermAll})
		expect(t, r, KindValidity)
		expectHas(t, r, KindValidity, "before its multicast")
	})
	t.Run("deliver while crashed", func(t *testing.T) {
		b := newBuilder(1, 1)
		b.mc("x", 0)
		b.h.Events = append(b.h.Events, Event{Ev: EvCrash, Proc: 0, T: 2})
		b.dl(0, "x", GTS{})
		expect(t, Check(&b.h, Options{}), KindValidity)
	})
	t.Run("bad multicasts", func(t *testing.T) {
		b := newBuilder(2, 1)
		b.mc("x", 0).mc("x", 0).mc("y", 1, 0).mc("z").mc("w", 5)
		r := Check(&b.h, Options{})
		expect(t, r, KindValidity)
		if r.Count(KindValidity) != 4 {
			t.Fatal(r)
		}
	})
	t.Run("unknown event and bad config", func(t *testing.T) {
		b := newBuilder(1, 1)
		b.h.Events = append(b.h.Events, Event{Ev: "bogus"})
		expect(t, Check(&b.h, Options{}), KindValidity)
		expect(t, Check(&History{Config: Config{Groups: 0, Replicas: 3}}, Options{}), KindValidity)
	})
}

func TestGap(t *testing.T) {
	// Proc 1 skips b, which its group-mates delivered before d.
	h := without(base(), "b", 1)
	r := Check(h, Options{})
	expect(t, r, KindOrder)
	expectHas(t, r, KindOrder, "proc 1", "d", "b", "prefix")
	r = Check(h, Options{Termination: TermAll})
	expect(t, r, KindOrder, KindTermination)
}

func TestTwoGroupCycle(t *testing.T) {
	mk := func(gts map[string]GTS) *History {
		b := newBuilder(3, 3)
		b.mc("x", 0, 1).mc("y", 0, 1)
		b.group(0, gts, "x", "y")
		b.group(1, gts, "y", "x")
		return &b.h
	}
	// Without GTSs only the graph sees it.
	r := Check(mk(nil), Options{Termination: TermAll})
	expect(t, r, KindOrder)
	expectHas(t, r, KindOrder, "x <g0 y <g1 x")
	// With GTSs the GTS checker sees it too.
	r = Check(mk(map[string]GTS{"x": {1, 0}, "y": {2, 1}}), Options{Termination: TermAll})
	expect(t, r, KindOrder, KindGTS)
	expectHas(t, r, KindGTS, "not increasing")
}

func TestThreeGroupCycle(t *testing.T) {
	b := newBuilder(3, 3)
	b.mc("a", 0, 2).mc("b", 0, 1).mc("c", 1, 2)
	b.group(0, nil, "a", "b")
	b.group(1, nil, "b", "c")
	b.group(2, nil, "c", "a")
	r := Check(&b.h, Options{Termination: TermAll})
	expect(t, r, KindOrder)
	if r.Count(KindOrder) != 1 {
		t.Fatal(r)
	}
	expectHas(t, r, KindOrder, "a <g0 b <g1 c <g2 a")
}

func TestGapEdgeCycle(t *testing.T) {
	// Group 1 delivers mp then m. Group 0, also a destination of mp,
	// delivers m but never mp. Sequence edges alone (mp→m in g1, nothing in
	// g0) are acyclic; the gap edge m→mp of g0 closes the cycle.
	b := newBuilder(3, 3)
	b.mc("mp", 0, 1).mc("m", 0, 1)
	b.group(1, nil, "mp", "m")
	b.group(0, nil, "m")
	r := Check(&b.h, Options{})
	expect(t, r, KindOrder)
	expectHas(t, r, KindOrder, "mp <g1 m <g0(gap) mp")
	expect(t, Check(&b.h, Options{Termination: TermQuorum}), KindOrder, KindTermination, KindAgreement)
}

func TestShortestCycleReported(t *testing.T) {
	// One SCC holding a 4-cycle and a 2-cycle: g0 orders p<q<r<s, g1 orders
	// s<p, g2 orders r<q. The shortest cycle is q <g0 r <g2 q.
	b := newBuilder(3, 1)
	b.mc("p", 0, 1).mc("q", 0, 2).mc("r", 0, 2).mc("s", 0, 1)
	b.group(0, nil, "p", "q", "r", "s")
	b.group(1, nil, "s", "p")
	b.group(2, nil, "r", "q")
	r := Check(&b.h, Options{})
	expect(t, r, KindOrder)
	expectHas(t, r, KindOrder, "cycle of 2 messages", "component of 4", "q <g0 r <g2 q")
}

func TestLongCycle(t *testing.T) {
	// A 100,000-message cycle: g0 delivers m0..m(n-1), g1 delivers m(n-1)
	// then m0. Exercises the iterative SCC and BFS on a deep graph.
	const n = 100000
	b := newBuilder(2, 1)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%d", i)
		if i == 0 || i == n-1 {
			b.mc(ids[i], 0, 1)
		} else {
			b.mc(ids[i], 0)
		}
	}
	b.group(0, nil, ids...)
	b.group(1, nil, ids[n-1], ids[0])
	r := Check(&b.h, Options{})
	expect(t, r, KindOrder)
	expectHas(t, r, KindOrder, fmt.Sprintf("m%d <g1 m0", n-1))
}

func TestCorruptedPayload(t *testing.T) {
	h := clone(base())
	for i := range h.Events {
		h.Events[i].Digest = Digest([]byte("payload of " + h.Events[i].ID))
	}
	expect(t, Check(h, Options{Termination: TermAll}))
	for i := range h.Events {
		if h.Events[i].Ev == EvDeliver && h.Events[i].ID == "c" && h.Events[i].Proc == 5 {
			h.Events[i].Digest = Digest([]byte("corrupted"))
		}
	}
	r := Check(h, Options{Termination: TermAll})
	expect(t, r, KindValidity)
	expectHas(t, r, KindValidity, "proc 5", "digest")
}

func TestGTSDisagreement(t *testing.T) {
	h := clone(base())
	for i := range h.Events {
		if h.Events[i].Ev == EvDeliver && h.Events[i].ID == "b" && h.Events[i].Proc == 3 {
			h.Events[i].GTS = GTS{2, 2} // still increasing at proc 3, still unique
		}
	}
	r := Check(h, Options{Termination: TermAll})
	expect(t, r, KindGTS)
	if r.Count(KindGTS) != 1 {
		t.Fatal(r)
	}
}

func TestGTSNotIncreasing(t *testing.T) {
	h := clone(base())
	for i := range h.Events {
		if h.Events[i].ID == "a" {
			h.Events[i].GTS = GTS{10, 0} // g0 delivers a(10), then b(2)
		}
	}
	r := Check(h, Options{Termination: TermAll})
	expect(t, r, KindGTS)
	if r.Count(KindGTS) != 3 {
		t.Fatal(r)
	}
	expectHas(t, r, KindGTS, "not increasing")
}

func TestGTSNotDistinct(t *testing.T) {
	h := clone(base())
	for i := range h.Events {
		if h.Events[i].ID == "e" {
			h.Events[i].GTS = baseGTS["d"] // same as d, and not increasing
		}
	}
	r := Check(h, Options{Termination: TermAll})
	expect(t, r, KindGTS)
	expectHas(t, r, KindGTS, "d and e both")
}

func TestTermination(t *testing.T) {
	// One replica misses e: TermAll fails, TermQuorum passes.
	h := without(base(), "e", 8)
	r := Check(h, Options{Termination: TermAll})
	expect(t, r, KindTermination)
	expectHas(t, r, KindTermination, "e", "g2 procs 8")
	expect(t, Check(h, Options{Termination: TermQuorum}))
	expect(t, Check(h, Options{Termination: TermNone}))

	// Proc 8 crashed for good before delivering anything: excusing it
	// makes TermAll pass.
	h = without(without(without(base(), "c", 8), "d", 8), "e", 8)
	expect(t, Check(h, Options{Termination: TermAll}), KindTermination)
	expect(t, Check(h, Options{Termination: TermAll, Exclude: func(p int) bool { return p == 8 }}))

	// Two of three replicas miss e: TermQuorum fails (and agreement).
	h = without(base(), "e", 7, 8)
	r = Check(h, Options{Termination: TermQuorum})
	expect(t, r, KindTermination, KindAgreement)
	expectHas(t, r, KindTermination, "g2 delivered by 1")

	// A message nobody delivered counts too (no agreement problem).
	b := &builder{h: *base()}
	b.mc("f", 1)
	r = Check(&b.h, Options{Termination: TermQuorum})
	expect(t, r, KindTermination)
	expectHas(t, r, KindTermination, "f")
	expect(t, Check(&b.h, Options{Termination: TermAll}), KindTermination)

	// An optional message (a client that does not retry) nobody delivered
	// is excused; one that some process delivered is not.
	b = &builder{h: *base()}
	b.mc("f", 1)
	b.h.Events[len(b.h.Events)-1].Optional = true
	expect(t, Check(&b.h, Options{Termination: TermQuorum}))
	expect(t, Check(&b.h, Options{Termination: TermAll}))
	b.dl(3, "f", GTS{T: 99, G: 1})
	r = Check(&b.h, Options{Termination: TermQuorum})
	expect(t, r, KindTermination, KindAgreement)
	expectHas(t, r, KindAgreement, "f")
}

func TestAgreement(t *testing.T) {
	// e is delivered by proc 6 only; procs 7 and 8 are excused from TermAll,
	// so termination holds, but a delivered message must reach a quorum.
	h := without(base(), "e", 7, 8)
	r := Check(h, Options{Termination: TermAll, Exclude: func(p int) bool { return p == 7 || p == 8 }})
	expect(t, r, KindAgreement)
	expectHas(t, r, KindAgreement, "e", "g2 delivered by 1")
	// Agreement is off with TermNone.
	expect(t, Check(h, Options{}))
}

func TestMaxViolations(t *testing.T) {
	b := newBuilder(1, 1)
	for i := 0; i < 50; i++ {
		b.dl(0, fmt.Sprintf("u%d", i), GTS{})
	}
	r := Check(&b.h, Options{})
	if r.Total != 50 || len(r.Violations) != 20 || r.Count(KindValidity) != 50 {
		t.Fatalf("total %d, kept %d", r.Total, len(r.Violations))
	}
	if s := r.Error(); !strings.Contains(s, "validity: 50") || !strings.Contains(s, "40 more") {
		t.Fatalf("Error():\n%s", s)
	}
	r = Check(&b.h, Options{MaxViolations: 3})
	if r.Total != 50 || len(r.Violations) != 3 {
		t.Fatalf("total %d, kept %d", r.Total, len(r.Violations))
	}
	r = Check(&b.h, Options{MaxViolations: -1})
	if len(r.Violations) != 50 {
		t.Fatalf("kept %d", len(r.Violations))
	}
}

// ---------------------------------------------------------------------------
// Randomized property test

type genOpts struct {
	M, G, R int
	full    bool // every member delivers its whole projection
	all     bool // every message is addressed to every group
	gts     bool
	digests bool
	crashes bool
}

// gen builds a valid history from a random global order: each message has a
// random non-empty set of destination groups; each group member delivers a
// prefix of the group's projection of the order (the whole projection for
// at least a quorum of members); deliveries of different processes are
// randomly interleaved.
func gen(r *rand.Rand, o genOpts) *History {
	cfg := Config{Protocol: "gen", Groups: o.G, Replicas: o.R, Seed: r.Uint64()}
	h := &History{Config: cfg}
	ids := make([]string, o.M)
	dests := make([][]int, o.M)
	for m := range ids {
		ids[m] = "m" + fmt.Sprint(m)
		var d []int
		for len(d) == 0 {
			d = d[:0]
			for g := 0; g < o.G; g++ {
				if o.all || r.IntN(2) == 0 {
					d = append(d, g)
				}
			}
		}
		dests[m] = d
	}
	order := r.Perm(o.M) // order[k] = message at global position k
	gtsOf := make([]GTS, o.M)
	for k, m := range order {
		gtsOf[m] = GTS{T: uint64(k/3 + 1), G: k % 3}
	}
	// Multicasts, in a different random order.
	for k, m := range r.Perm(o.M) {
		ev := Event{Ev: EvMulticast, ID: ids[m], Dest: dests[m], T: int64(k)}
		if o.digests {
			ev.Digest = Digest([]byte(ids[m]))
		}
		h.Events = append(h.Events, ev)
	}
	// Per-process sequences.
	N := o.G * o.R
	seqs := make([][]int, N)
	for g := 0; g < o.G; g++ {
		var proj []int
		for _, m := range order {
			if slices.Contains(dests[m], g) {
				proj = append(proj, m)
			}
		}
		fullSet := r.Perm(o.R)[:cfg.Quorum()]
		for i := 0; i < o.R; i++ {
			n := len(proj)
			if !o.full && !slices.Contains(fullSet, i) {
				n = r.IntN(len(proj) + 1)
			}
			seqs[g*o.R+i] = proj[:n]
		}
	}
	// Interleave.
	next := make([]int, N)
	var live []int
	for p := range seqs {
		if len(seqs[p]) > 0 {
			live = append(live, p)
		}
	}
	crashed := make([]bool, N)
	t := int64(o.M)
	for len(live) > 0 {
		t++
		if o.crashes && r.IntN(50) == 0 {
			p := r.IntN(N)
			if !crashed[p] {
				crashed[p] = true
				h.Events = append(h.Events, Event{Ev: EvCrash, Proc: p, T: t})
				continue
			}
		}
		j := r.IntN(len(live))
		p := live[j]
		if crashed[p] {
			crashed[p] = false
			h.Events = append(h.Events, Event{Ev: EvRestart, Proc: p, T: t})
			t++
		}
		m := seqs[p][next[p]]
		next[p]++
		ev := Event{Ev: EvDeliver, Proc: p, Group: p / o.R, ID: ids[m], T: t}
		if o.gts {
			ev.GTS = gtsOf[m]
		}
		if o.digests {
			ev.Digest = Digest([]byte(ids[m]))
		}
		h.Events = append(h.Events, ev)
		if next[p] == len(seqs[p]) {
			live[j] = live[len(live)-1]
			live = live[:len(live)-1]
		}
	}
	return h
}

// mutation applies one fault to a copy of h. It returns the mutant and the
// violation kind that must be reported, or ok=false if it does not apply.
type mutation struct {
	name  string
	apply func(r *rand.Rand, h *History) (mut *History, kind string, ok bool)
}

func deliverIdx(h *History, pred func(ev *Event) bool) []int {
	var out []int
	for i := range h.Events {
		if ev := &h.Events[i]; ev.Ev == EvDeliver && (pred == nil || pred(ev)) {
			out = append(out, i)
		}
	}
	return out
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func multicastOf(h *History, id string) *Event {
	for i := range h.Events {
		if h.Events[i].Ev == EvMulticast && h.Events[i].ID == id {
			return &h.Events[i]
		}
	}
	return nil
}

// procSeqs returns, per process, the indices of its deliver events.
func procSeqs(h *History) [][]int {
	seqs := make([][]int, h.Config.Procs())
	for _, i := range deliverIdx(h, nil) {
		p := h.Events[i].Proc
		seqs[p] = append(seqs[p], i)
	}
	return seqs
}

func removeIdx(h *History, drop func(i int) bool) *History {
	out := &History{Config: h.Config}
	for i, ev := range h.Events {
		if !drop(i) {
			out.Events = append(out.Events, ev)
		}
	}
	return out
}

// swapInGroup finds messages a≺b both addressed to two groups g≠h and
// swaps a and b in the sequences of g's members: g now orders b before a,
// while h still orders a before b.
func swapInGroup(r *rand.Rand, h *History) (*History, bool) {
	R := h.Config.Replicas
	seqs := procSeqs(h)
	type cand struct{ g, i, j int } // positions i<j in g's longest sequence
	var cands []cand
	for g := 0; g < h.Config.Groups; g++ {
		s := longestSeq(seqs, g, R)
		for i := range s {
			for j := i + 1; j < len(s); j++ {
				da := multicastOf(h, h.Events[s[i]].ID).Dest
				db := multicastOf(h, h.Events[s[j]].ID).Dest
				for _, o := range da {
					if o != g && slices.Contains(db, o) {
						cands = append(cands, cand{g, i, j})
						break
					}
				}
			}
		}
	}
	if len(cands) == 0 {
		return nil, false
	}
	c := pick(r, cands)
	mut := clone(h)
	for p := c.g * R; p < (c.g+1)*R; p++ {
		s := seqs[p]
		if c.j < len(s) {
			a, b := &mut.Events[s[c.i]], &mut.Events[s[c.j]]
			a.ID, b.ID = b.ID, a.ID
			a.GTS, b.GTS = b.GTS, a.GTS
			a.Digest, b.Digest = b.Digest, a.Digest
		} else if c.i < len(s) {
			// This member delivered a but not yet b: it now delivers b
			// in a's place.
			a, b := &mut.Events[s[c.i]], h.Events[longestSeq(seqs, c.g, R)[c.j]]
			a.ID, a.GTS, a.Digest = b.ID, b.GTS, b.Digest
		}
	}
	return mut, true
}

func longestSeq(seqs [][]int, g, R int) []int {
	L := g * R
	for p := g * R; p < (g+1)*R; p++ {
		if len(seqs[p]) > len(seqs[L]) {
			L = p
		}
	}
	return seqs[L]
}

var mutations = []mutation{
	{"duplicate", func(r *rand.Rand, h *History) (*History, string, bool) {
		ds := deliverIdx(h, nil)
		if len(ds) == 0 {
			return nil, "", false
		}
		mut := clone(h)
		ev := h.Events[pick(r, ds)]
		ev.T = 1 << 40
		mut.Events = append(mut.Events, ev)
		return mut, KindIntegrity, true
	}},
	{"group not in dest", func(r *rand.Rand, h *History) (*History, string, bool) {
		var cands []Event
		for _, ev := range h.Events {
			if ev.Ev == EvMulticast && len(ev.Dest) < h.Config.Groups {
				cands = append(cands, ev)
			}
		}
		if len(cands) == 0 {
			return nil, "", false
		}
		m := pick(r, cands)
		g := 0
		for slices.Contains(m.Dest, g) {
			g++
		}
		mut := clone(h)
		mut.Events = append(mut.Events, Event{Ev: EvDeliver, Proc: h.Config.Proc(g, r.IntN(h.Config.Replicas)), Group: g, ID: m.ID, T: 1 << 40})
		return mut, KindValidity, true
	}},
	{"never multicast", func(r *rand.Rand, h *History) (*History, string, bool) {
		mut := clone(h)
		p := r.IntN(h.Config.Procs())
		mut.Events = append(mut.Events, Event{Ev: EvDeliver, Proc: p, Group: p / h.Config.Replicas, ID: "nope", T: 1 << 40})
		return mut, KindValidity, true
	}},
	{"corrupt payload", func(r *rand.Rand, h *History) (*History, string, bool) {
		ds := deliverIdx(h, func(ev *Event) bool { return ev.Digest != 0 })
		if len(ds) == 0 {
			return nil, "", false
		}
		mut := clone(h)
		mut.Events[pick(r, ds)].Digest = Digest([]byte("corrupted"))
		return mut, KindValidity, true
	}},
	{"deliver before multicast", func(r *rand.Rand, h *History) (*History, string, bool) {
		ds := deliverIdx(h, nil)
		if len(ds) == 0 {
			return nil, "", false
		}
		mut := clone(h)
		i := pick(r, ds)
		mut.Events[i].T = multicastOf(h, h.Events[i].ID).T - 1
		return mut, KindValidity, true
	}},
	{"gap", func(r *rand.Rand, h *History) (*History, string, bool) {
		var cands []int
		for _, s := range procSeqs(h) {
			if len(s) >= 2 {
				cands = append(cands, s[:len(s)-1]...)
			}
		}
		if len(cands) == 0 || h.Config.Replicas < 2 {
			return nil, "", false
		}
		i := pick(r, cands)
		return removeIdx(h, func(j int) bool { return j == i }), KindOrder, true
	}},
	{"cycle without gts", func(r *rand.Rand, h *History) (*History, string, bool) {
		h = clone(h)
		for i := range h.Events {
			h.Events[i].GTS = GTS{}
		}
		mut, ok := swapInGroup(r, h)
		return mut, KindOrder, ok
	}},
	{"cycle with gts", func(r *rand.Rand, h *History) (*History, string, bool) {
		if len(deliverIdx(h, func(ev *Event) bool { return !ev.GTS.IsZero() })) == 0 {
			return nil, "", false
		}
		mut, ok := swapInGroup(r, h)
		return mut, KindGTS, ok
	}},
	{"gts disagreement", func(r *rand.Rand, h *History) (*History, string, bool) {
		ds := deliverIdx(h, func(ev *Event) bool { return !ev.GTS.IsZero() })
		if len(ds) == 0 {
			return nil, "", false
		}
		mut := clone(h)
		i := pick(r, ds)
		mut.Events[i].GTS.G += 7 // unique: generated groups are 0..2
		return mut, KindGTS, true
	}},
	{"gts not increasing", func(r *rand.Rand, h *History) (*History, string, bool) {
		var cands [][2]int
		for _, s := range procSeqs(h) {
			for k := 0; k+1 < len(s); k++ {
				if !h.Events[s[k]].GTS.IsZero() {
					cands = append(cands, [2]int{s[k], s[k+1]})
				}
			}
		}
		if len(cands) == 0 {
			return nil, "", false
		}
		c := pick(r, cands)
		mut := clone(h)
		a, b := &mut.Events[c[0]], &mut.Events[c[1]]
		a.GTS, b.GTS = b.GTS, a.GTS
		return mut, KindGTS, true
	}},
	{"termination", func(r *rand.Rand, h *History) (*History, string, bool) {
		// Drop all deliveries of one message in one destination group.
		var ms []Event
		for _, ev := range h.Events {
			if ev.Ev == EvMulticast {
				ms = append(ms, ev)
			}
		}
		if len(ms) == 0 {
			return nil, "", false
		}
		m := pick(r, ms)
		g := pick(r, m.Dest)
		return removeIdx(h, func(i int) bool {
			ev := &h.Events[i]
			return ev.Ev == EvDeliver && ev.ID == m.ID && ev.Group == g
		}), KindTermination, true
	}},
	{"agreement", func(r *rand.Rand, h *History) (*History, string, bool) {
		// Keep one delivery of a message in one group: delivered, but
		// not by a quorum (needs Replicas >= 2).
		if h.Config.Replicas < 2 {
			return nil, "", false
		}
		ds := deliverIdx(h, nil)
		if len(ds) == 0 {
			return nil, "", false
		}
		keep := pick(r, ds)
		k := h.Events[keep]
		return removeIdx(h, func(i int) bool {
			ev := &h.Events[i]
			return i != keep && ev.Ev == EvDeliver && ev.ID == k.ID && ev.Group == k.Group
		}), KindAgreement, true
	}},
}

func TestRandomHistories(t *testing.T) {
	iters := 300
	if testing.Short() {
		iters = 50
	}
	applied := map[string]int{}
	for it := 0; it < iters; it++ {
		r := rand.New(rand.NewPCG(uint64(it), 0x5eed))
		o := genOpts{
			M: 1 + r.IntN(25), G: 1 + r.IntN(4), R: 2 + r.IntN(3),
			full: r.IntN(3) == 0, gts: r.IntN(4) != 0, digests: r.IntN(2) == 0, crashes: r.IntN(2) == 0,
		}
		h := gen(r, o)
		rep := Check(h, Options{Termination: TermQuorum})
		if !rep.OK() {
			t.Fatalf("iter %d %+v: valid history rejected:\n%s", it, o, rep.Error())
		}
		if o.full {
			if rep := Check(h, Options{Termination: TermAll}); !rep.OK() {
				t.Fatalf("iter %d %+v: full history rejected by TermAll:\n%s", it, o, rep.Error())
			}
		}
		// A random single mutation must be caught, with the right kind.
		// (Each iteration also tries every other mutation, for coverage.)
		first := r.IntN(len(mutations))
		for k := range mutations {
			mu := mutations[(first+k)%len(mutations)]
			mut, kind, ok := mu.apply(r, h)
			if !ok {
				continue
			}
			applied[mu.name]++
			rep := Check(mut, Options{Termination: TermQuorum})
			if rep.OK() {
				t.Fatalf("iter %d %+v: mutation %q not caught", it, o, mu.name)
			}
			if rep.Count(kind) == 0 {
				t.Fatalf("iter %d %+v: mutation %q: want a %s violation, got:\n%s", it, o, mu.name, kind, rep.Error())
			}
		}
	}
	for _, mu := range mutations {
		if applied[mu.name] == 0 {
			t.Errorf("mutation %q never applied", mu.name)
		}
	}
}

func BenchmarkCheck(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	// 100,000 messages, each to all 3 groups × 3 replicas: 900,000
	// deliveries.
	h := gen(r, genOpts{M: 100000, G: 3, R: 3, full: true, all: true, gts: true, digests: true})
	var rep *Report
	for b.Loop() {
		rep = Check(h, Options{Termination: TermAll})
	}
	if !rep.OK() {
		b.Fatal(rep.Error())
	}
	b.ReportMetric(float64(rep.Deliveries), "deliveries")
}

// TestDigraphAgainstBruteForce compares the SCC and shortest-cycle code with
// a brute-force computation on random small graphs.
func TestDigraphAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for it := 0; it < 2000; it++ {
		n := 1 + r.IntN(12)
		ne := r.IntN(3 * n)
		adjm := make([][]bool, n)
		for i := range adjm {
			adjm[i] = make([]bool, n)
		}
		out := make([][]int32, n)
		for k := 0; k < ne; k++ {
			u, v := r.IntN(n), r.IntN(n)
			if u == v {
				continue
			}
			adjm[u][v] = true
			out[u] = append(out[u], int32(v)) // parallel edges allowed
		}
		gr := &digraph{start: make([]int32, n+1)}
		for u := 0; u < n; u++ {
			gr.start[u+1] = gr.start[u] + int32(len(out[u]))
			for _, v := range out[u] {
				gr.adj = append(gr.adj, v)
				gr.lab = append(gr.lab, int32(u))
			}
		}
		// Brute force: reachability closure.
		reach := make([][]bool, n)
		for i := range reach {
			reach[i] = slices.Clone(adjm[i])
		}
		for k := 0; k < n; k++ {
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					if reach[i][k] && reach[k][j] {
						reach[i][j] = true
					}
				}
			}
		}
		removed := make([]bool, n)
		comps := gr.sccs(removed)
		inCycle := 0
		for i := 0; i < n; i++ {
			if reach[i][i] {
				inCycle++
			}
		}
		total := 0
		for _, comp := range comps {
			total += len(comp)
			for _, u := range comp {
				for _, v := range comp {
					if !reach[u][v] && u != v {
						t.Fatalf("it %d: %d, %d in one component but not mutually reachable", it, u, v)
					}
				}
			}
			// Brute-force shortest cycle within the component (BFS from
			// every node, over all edges: a shortest cycle through a node
			// stays in its component).
			bestBF := 1 << 30
			for _, s := range comp {
				dist := make([]int, n)
				for i := range dist {
					dist[i] = -1
				}
				dist[s] = 0
				q := []int32{s}
				for len(q) > 0 {
					u := q[0]
					q = q[1:]
					for _, v := range out[u] {
						if v == s && dist[u]+1 < bestBF {
							bestBF = dist[u] + 1
						}
						if dist[v] < 0 {
							dist[v] = dist[u] + 1
							q = append(q, v)
						}
					}
				}
			}
			budget := 1 << 30
			cyc, labs, exact := gr.shortestCycle(comp, &budget)
			if !exact || len(cyc) != bestBF || len(labs) != len(cyc) {
				t.Fatalf("it %d: cycle %v (exact %v), want length %d", it, cyc, exact, bestBF)
			}
			for i, u := range cyc {
				v := cyc[(i+1)%len(cyc)]
				if !adjm[u][v] || labs[i] != u {
					t.Fatalf("it %d: cycle %v has no edge %d→%d (label %d)", it, cyc, u, v, labs[i])
				}
			}
		}
		if total != inCycle {
			t.Fatalf("it %d: components cover %d nodes, %d nodes lie on cycles", it, total, inCycle)
		}
	}
}
