package check

import (
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
