package skeen_test

import (
	"testing"

	"github.com/weft-dev/weft/sim"
)

// FuzzStep feeds a skeen replica, brought into a varied state by a short
// simulated run, arbitrary decoded messages from arbitrary senders
// (sim.FuzzReplica): it must never panic and, when the senders are
// strangers, the run must still pass the checkers. The seed corpus is in
// testdata/fuzz/FuzzStep (regenerate: WEFT_WRITE_FUZZ_CORPUS=1 go test
// ./sim -run TestWriteFuzzCorpus). Fuzz: go test -run '^$' -fuzz FuzzStep
// -fuzztime 60s ./amcast/skeen
func FuzzStep(f *testing.F) {
	f.Fuzz(func(t *testing.T, seed uint64, data []byte) {
		if err := sim.FuzzReplica("skeen", seed, data); err != nil {
			t.Fatal(err)
		}
	})
}
