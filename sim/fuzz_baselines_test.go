package sim

import "testing"

// TestFuzzCorpus runs each baseline's seed corpus (BaselineFuzzCorpus)
// through FuzzReplica: the FuzzStep targets run the files too, and each
// protocol's own TestFuzzCorpus checks its files are this corpus (rewrite
// them there with -rewrite); this keeps the seeds passing.
func TestFuzzCorpus(t *testing.T) {
	for _, protocol := range []string{"ftskeen", "fastcast", "skeen"} {
		for name, e := range BaselineFuzzCorpus(protocol) {
			if err := FuzzReplica(protocol, e.Seed, e.Data); err != nil {
				t.Errorf("%s %s: %v", protocol, name, err)
			}
		}
	}
}
