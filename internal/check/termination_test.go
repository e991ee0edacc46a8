package check

import (
	"testing"
)

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
