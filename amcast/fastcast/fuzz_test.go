package fastcast_test

import (
	"testing"

	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/sim"
)

// FuzzStep feeds a fastcast replica, brought into a varied state by a short
// simulated run, arbitrary decoded messages from arbitrary senders
// (sim.FuzzReplica): it must never panic and, when the senders are
// strangers, the run must still pass the checkers. The seed corpus is
// testdata/fuzz/FuzzStep (sim.BaselineFuzzCorpus; see TestFuzzCorpus).
// Fuzz: go test -run '^$' -fuzz FuzzStep
// -fuzztime 60s ./amcast/fastcast
func FuzzStep(f *testing.F) {
	f.Fuzz(func(t *testing.T, seed uint64, data []byte) {
		if err := sim.FuzzReplica("fastcast", seed, data); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFuzzCorpus: the seed corpus files are sim.BaselineFuzzCorpus, in the
// fuzzing engine's format (FuzzStep runs them). Rewrite them with
// go test ./amcast/fastcast -run TestFuzzCorpus -rewrite.
func TestFuzzCorpus(t *testing.T) {
	amcasttest.CheckFuzzCorpus(t, sim.FuzzCorpusFiles(sim.BaselineFuzzCorpus("fastcast")))
}
