package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/check"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestSimRunWritesCheckableHistory(t *testing.T) {
	h := filepath.Join(t.TempDir(), "h.jsonl")
	out, err := run(t, "sim", "run", "--protocol", "wbcast", "--messages", "200", "--seed", "42", "--history", h)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "checkers: ok") {
		t.Fatalf("no verdict:\n%s", out)
	}
	f, err := os.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := check.ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	if hist.Config.Protocol != "wbcast" || hist.Config.Seed != 42 || hist.Config.Groups != 3 {
		t.Fatalf("config line: %+v", hist.Config)
	}
	if rep := check.Check(hist, check.Options{Termination: check.TermAll}); !rep.OK() {
		t.Fatal(rep.Error())
	}
	b, _ := os.ReadFile(h)
	first := strings.SplitN(string(b), "\n", 2)[0]
	if first != `{"ev":"config","protocol":"wbcast","groups":3,"replicas":3,"seed":42}` {
		t.Fatalf("first line %s", first)
	}
}

func TestSimRunBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "run", "--protocol", "paxos"},
		{"sim", "run", "--dest", "5"},
		{"sim", "run", "--delay", "slow"},
		{"sim", "run", "--mode", "burst"},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestSimLatencyJSON(t *testing.T) {
	out, err := run(t, "sim", "latency", "--format", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := map[string][4]any{
		"skeen":  {2.0, 4.0, nil, nil},
		"wbcast": {3.0, 5.0, 4.0, 6.0},
	}
	for _, r := range rows {
		w := want[r["protocol"].(string)]
		got := [4]any{r["collision_free_leader"], r["failure_free_leader"], r["collision_free_follower"], r["failure_free_follower"]}
		if got != w {
			t.Errorf("%s: got %v want %v", r["protocol"], got, w)
		}
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
}
