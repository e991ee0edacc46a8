package check

import (
	"fmt"
	"strings"
	"testing"
)

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
