package sim

import "testing"

// regressionSeeds are swarm seeds that once exposed a WbCast bug; each
// stays in the suite for good (the TigerBeetle/etcd habit):
//   - 6, 44: retry storms (every blocked message re-multicast) and election
//     churn under heavy-tailed delays;
//   - 116: re-multicast skipped the blocking ACCEPTED message;
//   - 189: a member that missed a recovery could not succeed a dead leader;
//   - 14089: a member promised to a dead candidate's higher ballot was
//     stranded;
//   - 28437: the liveness horizon ignored multicasts issued after GST.
var regressionSeeds = []uint64{6, 44, 116, 189, 14089, 28437}

func TestSwarmRegressionSeeds(t *testing.T) {
	for _, seed := range regressionSeeds {
		r := RunSwarm("wbcast", seed)
		if r.Violations() > 0 {
			t.Errorf("seed %d: %s", seed, r.Failure())
		}
	}
}
