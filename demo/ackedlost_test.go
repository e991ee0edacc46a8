package demo

import (
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/wire"
)

// TestAckedLostCountsInstalls: a member that installed a snapshot at or
// above an acknowledged message's gts holds it (demo.TestPlannedStopHandsOver
// reported "acknowledged but lost" for messages a member had installed),
// but an install only holds what its group delivered, and one below the
// gts holds nothing of it.
func TestAckedLostCountsInstalls(t *testing.T) {
	gts := check.GTS{T: 10, G: 0}
	mc := func(id string) check.Event { return check.Event{Ev: check.EvMulticast, ID: id, Dest: []int{0}} }
	dl := func(id string, p int) check.Event {
		return check.Event{Ev: check.EvDeliver, ID: id, Proc: p, Group: 0, GTS: gts}
	}
	in := func(p int, t uint64) check.Event {
		return check.Event{Ev: check.EvInstall, Proc: p, Group: 0, GTS: check.GTS{T: t}}
	}
	for _, tc := range []struct {
		name string
		evs  []check.Event
		lost bool
	}{
		{"delivered by a quorum", []check.Event{mc("a"), dl("a", 0), dl("a", 1)}, false},
		{"delivered by one", []check.Event{mc("a"), dl("a", 2)}, true},
		{"delivered by one, installed above by one", []check.Event{mc("a"), dl("a", 2), in(1, 12)}, false},
		{"delivered by one, installed at its gts", []check.Event{mc("a"), dl("a", 2), in(1, 10)}, false},
		{"delivered by one, installed below", []check.Event{mc("a"), dl("a", 2), in(1, 9), in(0, 3)}, true},
		{"delivered by none, installed by all", []check.Event{mc("a"), in(0, 12), in(1, 12), in(2, 12)}, true},
	} {
		c := &cluster{r: &run{opt: Options{Replicas: 3}, replies: map[string]wire.Timestamp{"a": {T: 10, G: 0}}}}
		n, lost := c.ackedLost(&check.History{Events: tc.evs})
		if n != 1 || (len(lost) > 0) != tc.lost {
			t.Errorf("%s: %d acknowledged, lost %v; want lost=%v", tc.name, n, lost, tc.lost)
		}
		if tc.lost && len(lost) > 0 && !strings.Contains(lost[0], "of g0 (quorum 2)") {
			t.Errorf("%s: %s", tc.name, lost[0])
		}
	}
}
