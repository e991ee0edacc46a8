package amcasttest

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// CheckFuzzCorpus checks that the seed corpus of a FuzzStep target,
// testdata/fuzz/FuzzStep, holds exactly files (name to contents, in the
// fuzzing engine's format), or with -rewrite (datadriven's flag) writes
// them. A corpus written by code and checked on every run cannot go stale
// when the wire format changes: the check fails until it is rewritten.
func CheckFuzzCorpus(t *testing.T, files map[string][]byte) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzStep")
	rewrite := false
	if f := flag.Lookup("rewrite"); f != nil {
		rewrite = f.Value.String() == "true"
	}
	if rewrite {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range files {
		path := filepath.Join(dir, name)
		if rewrite {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != string(want) {
			t.Errorf("%s is not the corpus's %q (%v): rewrite it with -rewrite", path, name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok {
			t.Errorf("%s is not in the corpus: remove it, or add it to the corpus", filepath.Join(dir, e.Name()))
		}
	}
}
