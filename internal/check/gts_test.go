package check

import (
	"testing"
)

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
