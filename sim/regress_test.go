package sim

import (
	"fmt"
	"testing"

	"github.com/weft-dev/weft/amcast/wbcast"
)

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

// forgedRegressionSeeds are such seeds of sweeps with ForgedClients
// (weft sim sweep --forged-clients):
//   - 300493: a leader kept the highest delivery a member ever reported;
//     the member lost its disk and rejoined, and the leader caught it up
//     along a chain it no longer had, for ever (peers' reports are now the
//     latest, not the highest);
//   - 303407, 303008: a member's delivered floor is volatile; restarted,
//     it reported none in its NEW_LEADER_ACK, and a candidate behind what
//     it had collected led with a gap (an order violation; the group's
//     other members stalled). A member now reports at least its last
//     delivery at its restart or install (ackFloor);
//   - 300768: a candidate took that report for its group's floor and
//     collected (and made others collect) what members had not delivered;
//     late copies were delivered twice. The reports now only tell the
//     candidate it is behind (ackedFloor);
//   - 301315, 303260, 304004, 304771, 304973: a candidate behind by those
//     reports did not start ballots, but its peers, who cannot know it,
//     waited for it as their designated successor (stalled groups,
//     livelocks). It now starts as a successor, gives the ballot up at the
//     acks and does not restart it, so the next successor takes over.
var forgedRegressionSeeds = []uint64{300493, 303008, 303407, 300768, 301315, 303260, 304004, 304771, 304973}

// quorumGCRegressionSeeds are such seeds of sweeps with ForgedClients and
// collection by a quorum (the default since; wbcast.Config.CollectAfterAll
// off):
//   - 302706 (with hand-overs): a candidate behind its group's floor gave
//     its ballot up while alive; the leader of the ballot below waited for
//     it to be suspected before re-establishing, the third member waited
//     for that leader as the next successor: the group stalled. A leader
//     now also passes a ballot its own leader gave up (gaveUp).
//   - 311782: in a group of 5 with 2 members down for good, every live
//     candidate gave its ballot up as behind a floor that only the dead
//     members had reported to earlier candidacies (a livelock). A
//     candidate now gives up only on its own quorum's reports.
//   - 509452 (link resets only): a candidate merged only the highest
//     cballot's states, which carried a message committed under an earlier
//     ballot as ACCEPTED; it re-ran the message's ACCEPT phase, and another
//     group, which had collected the message once this group's quorum
//     delivered it, proposed a new timestamp for it (two gts for one
//     message). The merge now takes every ack's commits (commitsOf).
//   - 500529: livelocked an attempted fix of 509452 that counted only
//     members at the leader's cballot towards the floor.
//   - 441503 (as drawn, batches on): with catch-ups only for members below
//     what the leader had delivered 4 ticks ago, a member was still behind
//     the floor at a leader change; it started the next ballot as
//     successor, gave it up at the acks, and the up-to-date member waited
//     for it as its designated successor: the group stalled for good. The
//     successor search now passes over a member that gave up a ballot of
//     its own.
//   - 506430 (disk losses and a torn crash): g1's candidate restarted
//     below its own ballot (it lost it); the member that had promised it
//     waited, after three election timeouts, for the next successor, and
//     that successor, hearing the candidate alive, waited for it: the
//     group stalled for good. A member now takes a ballot for dead when
//     its leader has shown a lower one for an election timeout (forgot).
var quorumGCRegressionSeeds = []uint64{302706, 311782, 509452, 500529, 441503, 506430}

// TestSwarmRegressionSeeds runs each regression seed as it was found
// (without batches, which came later: Config.Batch), the seeds found
// collecting after every member also with the default (collection by a
// quorum), and every seed also as the swarm draws it today.
func TestSwarmRegressionSeeds(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) { regressionSeedsRun(t, batch) })
	}
}

func regressionSeedsRun(t *testing.T, drawn bool) {
	// SwarmConfig's draw, or no batches (the seed as it was found).
	SwarmConfig := func(protocol string, seed uint64) Config {
		cfg := SwarmConfig(protocol, seed)
		cfg.Batch = cfg.Batch && drawn
		return cfg
	}
	all := WbCastSpec(func(c *wbcast.Config) { c.CollectAfterAll = true })
	for _, spec := range []*ProtocolSpec{all, nil} {
		mode := "collection by a quorum"
		if spec != nil {
			mode = "collection after every member"
		}
		for _, seed := range regressionSeeds {
			cfg := SwarmConfig("wbcast", seed)
			cfg.Faults.HandOverEvery = 0 // the scenario as it was found
			cfg.Spec = spec
			if r := RunSwarmConfig(cfg); r.Violations() > 0 {
				t.Errorf("seed %d (%s): %s", seed, mode, r.Failure())
			}
		}
		for _, seed := range forgedRegressionSeeds {
			cfg := SwarmConfig("wbcast", seed)
			cfg.Faults.HandOverEvery = 0
			cfg.Spec = spec
			ForgedClients(&cfg)
			if r := RunSwarmConfig(cfg); r.Violations() > 0 {
				t.Errorf("seed %d (forged clients, %s): %s", seed, mode, r.Failure())
			}
		}
	}
	for _, seed := range quorumGCRegressionSeeds {
		cfg := SwarmConfig("wbcast", seed)
		ForgedClients(&cfg)
		if r := RunSwarmConfig(cfg); r.Violations() > 0 {
			t.Errorf("seed %d (forged clients, collection by a quorum): %s", seed, r.Failure())
		}
	}
}
