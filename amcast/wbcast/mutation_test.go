package wbcast

import (
	"strings"
	"testing"
)

// TestMutationNames: every knob has a distinct name.
func TestMutationNames(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Mutations {
		s := k.String()
		if s == "" || strings.Contains(s, "+") || s == "unknown" || seen[s] {
			t.Fatalf("knob %d named %q", uint32(k), s)
		}
		seen[s] = true
	}
	if len(Mutations) < 8 {
		t.Fatalf("%d knobs, issue #10 asks for at least 8", len(Mutations))
	}
	if s := (MutForgetDone | MutFreshRetryLTS).String(); s != "forget-done+fresh-retry-lts" {
		t.Fatalf("combined knobs named %q", s)
	}
	if s := Mutation(0).String(); s != "none" {
		t.Fatalf("no knob named %q", s)
	}
}
