package sim

import (
	"fmt"

	"github.com/weft-dev/weft/internal/check"
)

// CheckResult runs every checker on a failure-free run's history, with
// termination at every replica.
func CheckResult(res *Result) error {
	if res.History == nil {
		return nil
	}
	rep := check.Check(res.History, check.Options{Termination: check.TermAll})
	if !rep.OK() {
		return fmt.Errorf("seed %d: %s", res.Config.Seed, rep.Error())
	}
	return nil
}
