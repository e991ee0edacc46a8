package demo

// The run's history, its checks and the summary the demo prints.

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/node"
)

// history merges the client's multicasts, the crash and restart events and
// every agent's deliveries log, in time order (each process's deliveries
// keep their logged order).
func (r *run) history() (*check.History, error) {
	h := &check.History{Config: check.Config{Protocol: r.opt.Protocol, Groups: r.opt.Groups, Replicas: r.opt.Replicas, Seed: r.opt.Seed}}
	r.mu.Lock()
	evs := slices.Clone(r.events)
	r.mu.Unlock()
	for _, a := range r.agents {
		ph, err := node.ReadDeliveryLog(a.dlogPath)
		if err != nil {
			return nil, fmt.Errorf("demo: p%d's deliveries: %w", a.id, err)
		}
		evs = append(evs, ph.Events...)
	}
	rank := map[string]int{check.EvMulticast: 0, check.EvRestart: 1, check.EvDeliver: 2, check.EvInstall: 2, check.EvCrash: 3}
	slices.SortStableFunc(evs, func(a, b check.Event) int {
		if a.T != b.T {
			if a.T < b.T {
				return -1
			}
			return 1
		}
		return rank[a.Ev] - rank[b.Ev]
	})
	h.Events = evs
	return h, nil
}

// compareReplies counts the client replies whose gts differs from the
// delivered one.
func (r *run) compareReplies(h *check.History) int {
	got := map[string]check.GTS{}
	for _, ev := range h.Events {
		if ev.Ev == check.EvDeliver {
			if _, ok := got[ev.ID]; !ok {
				got[ev.ID] = ev.GTS
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	bad := 0
	for id, ts := range r.replies {
		if ts.IsZero() {
			continue
		}
		if g, ok := got[id]; !ok || g.T != ts.T || g.G != int(ts.G) {
			if bad < 5 {
				r.outMu.Lock()
				fmt.Fprintf(r.opt.Out, "client was told %s has gts %s; the agents delivered %v (found %v)\n", id, ts, g, ok)
				r.outMu.Unlock()
			}
			bad++
		}
	}
	return bad
}

func writeHistory(path string, h *check.History) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := check.WriteJSONL(f, h); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (r *run) printSummary(s *Summary) {
	out := r.opt.Out
	r.outMu.Lock()
	defer r.outMu.Unlock()
	if !s.Report.OK() {
		fmt.Fprintln(out, s.Report.Error())
	}
	if s.KV != nil {
		r.printKVSummary(s)
	} else {
		fmt.Fprintf(out, "== summary: %d groups x %d replicas, %d clients, %v workload\n", r.opt.Groups, r.opt.Replicas, r.opt.Clients, r.opt.Duration)
		fmt.Fprintf(out, "throughput  %s multicasts/s (%s delivered to 1 or 2 groups; %s deliveries at replicas)\n",
			commas(int(s.Throughput+0.5)), commas(s.Completed), commas(s.Deliveries))
		fmt.Fprintf(out, "latency     p50 %s  p99 %s  max %s\n", fmtDur(s.P50), fmtDur(s.P99), fmtDur(s.Max))
	}
	if s.KilledGroup >= 0 {
		elected, back := "not observed", "not observed"
		if s.ElectedAfter > 0 {
			elected = fmt.Sprintf("p%d elected after %s", s.NewLeader, fmtDur(s.ElectedAfter))
		}
		if s.DeliveringAfter > 0 {
			back = r.resumedWord() + " after " + fmtDur(s.DeliveringAfter)
		}
		how := "killed (SIGKILL)"
		if s.Stop == StopTerm {
			how = "stopped (SIGTERM: hand-over)"
		}
		fmt.Fprintf(out, "failover    leader p%d of g%d %s at %.1fs: %s, %s; longest write wait %s (%s)\n",
			s.Killed, s.KilledGroup, how, s.KilledAt.Seconds(), elected, back, fmtDur(s.LongestWait), r.detection())
		rejoin := "did not rejoin"
		if s.RejoinedAfter > 0 {
			rejoin = fmt.Sprintf("replayed %s, rejoined after %s", replayed(s), fmtDur(s.RejoinedAfter))
		}
		if s.RestartedAt > 0 {
			fmt.Fprintf(out, "recovery    p%d restarted at %.1fs: %s\n", s.Killed, s.RestartedAt.Seconds(), rejoin)
		}
	}
	if s.KV != nil {
		r.printKVVerdicts(s)
	}
	// A kv client may give up on an operation (its multicasts are
	// optional) and reads through the read index without a multicast: its
	// answers are not counted against the multicasts.
	unanswered := 0
	if s.KV == nil {
		unanswered = s.Multicasts - s.Completed
	}
	verdict := "PASS"
	if !s.Report.OK() || s.ReplyMismatches > 0 || unanswered > 0 {
		verdict = "FAIL"
	}
	detail := fmt.Sprintf("%d violations", s.Report.Total)
	if s.ReplyMismatches > 0 {
		detail += fmt.Sprintf(", %d client replies with a gts the agents did not deliver", s.ReplyMismatches)
	}
	if unanswered > 0 {
		detail += fmt.Sprintf(", %d multicasts without a reply", unanswered)
	}
	what := "validity, integrity, order, gts, termination (quorum), agreement, client replies"
	if s.KV != nil {
		what = "validity, integrity, order, gts, termination (quorum), agreement"
	}
	fmt.Fprintf(out, "check       %s: %s multicasts, %s deliveries; %s: %s\n",
		verdict, commas(s.Multicasts), commas(s.Deliveries), what, detail)
}

func replayed(s *Summary) string {
	if s.RestoredSnapshot > 0 {
		return fmt.Sprintf("its WAL: a %s KiB snapshot and the records after it, %s records in all", commas((s.RestoredSnapshot+1023)/1024), commas(s.RestoredRecords))
	}
	return "its WAL: " + commas(s.RestoredRecords) + " records"
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)))
	return sorted[min(i, len(sorted)-1)]
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

func commas(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + commas(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
