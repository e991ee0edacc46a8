package node

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLoopStallsCounted: a tick handled more than stallTicks ticks after
// the one before counts a stall (Stats.LoopStalls, the longest gap in
// LongestStall) and is logged, at most once a second, with the longest
// Ready since the tick before and the CPU time and preemptions over the
// gap; ticks on time count nothing.
func TestLoopStallsCounted(t *testing.T) {
	var logs bytes.Buffer
	n := &Node{cfg: Config{Tick: 10 * time.Millisecond}, log: slog.New(slog.NewTextHandler(&logs, nil)),
		inbox: newInbox(4, 1<<10), clients: newInbox(4, 1<<10)}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ms := time.Millisecond
	var cpu time.Duration
	var preempted int64
	n.stall.usage = func() (time.Duration, int64, bool) { return cpu, preempted, true }
	n.ticked(at(0))
	n.ticked(at(10 * ms))
	n.ticked(at(60 * ms)) // 5 ticks late: not yet a stall
	if n.stats.LoopStalls != 0 {
		t.Fatalf("%d stalls counted for ticks on time", n.stats.LoopStalls)
	}
	n.stall.readyTook(40 * ms)
	cpu, preempted = 25*ms, 7 // over the gap: 25 ms of CPU, 7 preemptions
	n.ticked(at(200 * ms))    // 140 ms after the one before
	n.ticked(at(210 * ms))
	n.ticked(at(400 * ms)) // 190 ms, within a second of the last log
	if n.stats.LoopStalls != 2 || n.stats.LongestStall != 190*ms {
		t.Fatalf("stalls %d, longest %v; want 2 and 190ms", n.stats.LoopStalls, n.stats.LongestStall)
	}
	out := logs.String()
	if strings.Count(out, "the loop was stalled") != 1 || !strings.Contains(out, "since_last_tick=140ms") || !strings.Contains(out, "longest_ready=40ms") ||
		!strings.Contains(out, "cpu_used=25ms") || !strings.Contains(out, "preempted=7") {
		t.Fatalf("log:\n%s", out)
	}
	n.ticked(at(1500 * ms)) // a second after the last log: logged again
	if strings.Count(logs.String(), "the loop was stalled") != 2 {
		t.Fatalf("log:\n%s", logs.String())
	}
}
