package check

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

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
