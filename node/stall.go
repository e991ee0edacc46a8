package node

import "time"

// Loop stalls (docs/operations.md, the metrics table: weft_loop_stalls_total).
//
// The loop handles a tick every Config.Tick. A tick handled much later
// than the one before means the loop did not run for that long: a pass
// that took that long (a large backlog, a slow sync), or the process
// not getting the CPU at all. While it lasts the node neither steps nor
// sends, so its peers' failure detectors see a silent member (a leader
// stalled for a quarter of election_ticks is suspected once gossip
// convicts it: gossip.go). Counted (Stats.LoopStalls, weft_loop_stalls_total)
// and logged at most once a second, with the longest Ready since the tick
// before (persisting, syncing, sending and delivering one pass's work),
// so an operator can tell a slow disk or a large backlog from a process
// that did not get the CPU; and with the CPU time the process used over
// the gap and the times the kernel took the CPU from it (involuntary
// context switches, getrusage), where the system has them: a loop that
// used a gap's worth of CPU was busy, one that used little of it while
// preempted again and again waited for a CPU.

// stallTicks: a tick handled more than this many ticks after the one
// before marks a stall.
const stallTicks = 5

// stallWatch is the loop's record of its own pace.
type stallWatch struct {
	lastTick     time.Time     // when the last tick was handled
	longestReady time.Duration // since the last tick
	lastLog      time.Time
	// usage, if set, reads the process's CPU time and involuntary context
	// switches so far (processUsage; tests replace it); ok is false where
	// the system cannot tell.
	usage     func() (cpu time.Duration, preempted int64, ok bool)
	lastCPU   time.Duration
	lastPreem int64
}

// readyTook notes how long a pass's Ready took.
func (w *stallWatch) readyTook(d time.Duration) { w.longestReady = max(w.longestReady, d) }

// ticked is called as a tick is handled, at now.
func (n *Node) ticked(now time.Time) {
	w := &n.stall
	if gap := now.Sub(w.lastTick); !w.lastTick.IsZero() && gap > stallTicks*n.cfg.Tick {
		n.stats.LoopStalls++
		n.stats.LongestStall = max(n.stats.LongestStall, gap)
		if now.Sub(w.lastLog) >= time.Second {
			w.lastLog = now
			attrs := []any{"since_last_tick", gap, "longest_ready", w.longestReady,
				"compacting", n.compaction != nil, "peer_inbox", len(n.inbox.ch), "client_inbox", len(n.clients.ch)}
			if w.usage != nil {
				if cpu, preem, ok := w.usage(); ok {
					attrs = append(attrs, "cpu_used", cpu-w.lastCPU, "preempted", preem-w.lastPreem)
				}
			}
			n.log.Warn("the loop was stalled: a tick handled late", attrs...)
		}
	}
	w.lastTick, w.longestReady = now, 0
	if w.usage != nil {
		w.lastCPU, w.lastPreem, _ = w.usage()
	}
}
