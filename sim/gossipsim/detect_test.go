package gossipsim

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/weft-dev/weft/membership"
)

// lanPromise is what the lan profile promises (issue #13): every live node
// convicts a crashed node within 2 s of simulated time and no live node is
// ever convicted, under 10% message loss and 50 ms of delay jitter.
const lanPromise = 2.0 // seconds

// lossyRun runs profile p on 200 nodes, 10% loss, 50 ms jitter, 3 seeds
// (runs), the sim CLI's default 8-sample phi window.
func lossyRun(t *testing.T, p membership.Config, leave bool) *Result {
	t.Helper()
	p.FD.WindowSize = 8
	res, err := RunFull(FullConfig{Nodes: 200, Runs: 3, Seed: 11, Profile: &p,
		Loss: 0.1, Jitter: 50 * time.Millisecond, Leave: leave})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// detectionViolations lists how res breaks the promise.
func detectionViolations(res *Result) []string {
	var out []string
	for i, fr := range res.PerRun {
		if fr.DetectAllSeconds > lanPromise {
			out = append(out, fmt.Sprintf("run %d: the last node convicted the crash after %.2fs", i, fr.DetectAllSeconds))
		}
		if fr.FalseConvictions > 0 {
			out = append(out, fmt.Sprintf("run %d: %d false convictions", i, fr.FalseConvictions))
		}
	}
	return out
}

// TestLANDetection: the lan profile keeps the promise on 200 nodes; the
// checks fail for the profile it replaced (200 ms rounds, phi alone: too
// slow), for phi alone with a threshold low enough to be fast (it
// convicts live nodes), and for a probe timeout of two rounds (two lost
// rounds of probes convict a live peer).
func TestLANDetection(t *testing.T) {
	res := lossyRun(t, membership.LAN(), false)
	fs := res.FullSummary
	t.Logf("lan: every node convicted after p50 %.2fs p99 %.2fs max %.2fs (worst run %.2fs), %d false convictions, %d messages lost",
		fs.DetectP50Seconds, fs.DetectP99Seconds, fs.DetectAllSeconds, fs.DetectAllMax, fs.FalseConvictions, fs.LostMessages)
	if v := detectionViolations(res); len(v) > 0 {
		t.Errorf("lan profile: %v", v)
	}
	if fs.LostMessages == 0 || fs.DetectFirstSeconds >= fs.DetectAllSeconds {
		t.Errorf("lost %d messages, first %.2fs, all %.2fs: the run measured nothing", fs.LostMessages, fs.DetectFirstSeconds, fs.DetectAllSeconds)
	}

	old := membership.LAN()
	old.Interval, old.ProbeTimeout = 200*time.Millisecond, 0
	old.FD.InitialInterval, old.FD.MaxInterval = 400*time.Millisecond, 400*time.Millisecond
	lowPhi := membership.LAN()
	lowPhi.ProbeTimeout, lowPhi.FD.Threshold = 0, 2
	shortProbe := membership.LAN()
	shortProbe.ProbeTimeout = 2 * shortProbe.Interval
	for name, p := range map[string]membership.Config{"old lan": old, "phi threshold 2": lowPhi, "probe timeout 2 rounds": shortProbe} {
		v := detectionViolations(lossyRun(t, p, false))
		t.Logf("%s: %v", name, v)
		if len(v) == 0 {
			t.Errorf("%s kept the promise: the check cannot tell", name)
		}
	}
}

// TestLANLeave: a planned departure is seen by every node within the
// promise and never waits for the detector (no node convicts the leaver).
func TestLANLeave(t *testing.T) {
	res := lossyRun(t, membership.LAN(), true)
	fs := res.FullSummary
	t.Logf("leave: every node saw LEFT after p50 %.2fs p99 %.2fs (worst run %.2fs)", fs.LeftP50Seconds, fs.LeftP99Seconds, fs.LeftAllMax)
	if fs.LeftAllMax > lanPromise || fs.LeaveConvictions != 0 || fs.FalseConvictions != 0 || fs.LeftP50Seconds <= 0 {
		t.Errorf("leave: %+v", fs)
	}
}

// TestLossyDeterministic: loss and jitter are drawn from the run's seed,
// so the same seed gives the same run and another seed another.
func TestLossyDeterministic(t *testing.T) {
	p := membership.LAN()
	p.FD.WindowSize = 8
	cfg := FullConfig{Nodes: 60, Runs: 2, Seed: 5, Profile: &p, Loss: 0.2, Jitter: 80 * time.Millisecond}
	a, err := RunFull(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RunFull(cfg)
	cfg.Seed = 6
	c, _ := RunFull(cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different lossy runs")
	}
	if reflect.DeepEqual(a.PerRun, c.PerRun) || a.PerRun[0].LostMessages == 0 {
		t.Errorf("seeds 5 and 6: %+v %+v", a.PerRun[0], c.PerRun[0])
	}
}
