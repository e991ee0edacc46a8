package sim

import (
	"fmt"

	"github.com/weft-dev/weft/internal/check"
)

// CheckResult runs every checker on a run's history. Without faults,
// termination is required at every replica (TermAll). With faults it runs
// FaultChecks and requires both of its reports to be clean.
func CheckResult(res *Result) error {
	if res.History == nil {
		return nil
	}
	if !res.Config.Faults.Enabled() {
		rep := check.Check(res.History, check.Options{Termination: check.TermAll})
		if !rep.OK() {
			return fmt.Errorf("seed %d: %s", res.Config.Seed, rep.Error())
		}
		return nil
	}
	quorum, live := FaultChecks(res)
	if !quorum.OK() {
		return fmt.Errorf("seed %d: %s", res.Config.Seed, quorum.Error())
	}
	if n := live.Count(check.KindTermination); n > 0 {
		return fmt.Errorf("seed %d: termination at live replicas: %s", res.Config.Seed, live.Error())
	}
	return nil
}

// FaultChecks checks the history of a run with faults. Both reports are
// required to be clean (SweepResult.Violations):
//
//   - quorum: validity, integrity (across restarts), order, gts, agreement
//     (a message delivered anywhere is delivered by a quorum of every
//     destination group) and termination by a quorum of every destination
//     group (check.TermQuorum): the paper's properties after GST.
//   - live: termination at every replica that is up at the end
//     (check.TermAll, excusing the replicas down for good). Only its
//     termination violations count; its other findings repeat quorum's. A
//     restarted or partitioned replica must catch up by the end of the
//     liveness phase: that is what the run waits for to converge.
func FaultChecks(res *Result) (quorum, live *check.Report) {
	quorum = check.Check(res.History, check.Options{Termination: check.TermQuorum})
	down := map[int]bool{}
	for _, p := range res.Down {
		down[int(p)] = true
	}
	live = check.Check(res.History, check.Options{Termination: check.TermAll, Exclude: func(p int) bool { return down[p] }})
	return quorum, live
}
