package wbcast

import (
	"os"
	"path/filepath"
	"regexp"
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

// TestRecordsGoThroughPersist: every durable record and durable delivery
// of the process is queued through persist and deliverDurable, so that
// MutSendBeforePersist holds back all of them; only mutation.go queues
// into the outbox directly.
func TestRecordsGoThroughPersist(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	direct := regexp.MustCompile(`\.out\.(Persist|DeliverDurable)\(`)
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "mutation.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if direct.MatchString(line) {
				t.Errorf("%s:%d: a record queued without persist/deliverDurable: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked %d files", checked)
	}
}
