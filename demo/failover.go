package demo

// Watching the injected faults: the killed leader's failover, its
// restart and rejoin, and gossip's view of them.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/wire"
)

// watchFailover reports when the killed leader's group elects a new leader
// and delivers again.
func (r *run) watchFailover(ctx context.Context, sum *Summary, g int, killed wire.ProcID, old wire.Ballot, at time.Time) {
	var elected node.Status
	if r.waitFor(ctx, 10*time.Second, func(sts map[wire.ProcID]node.Status) bool {
		st, ok := r.leaderOf(sts, g)
		if ok && old.Less(st.Ballot) {
			elected = st
			return true
		}
		return false
	}) {
		sum.NewLeader, sum.ElectedAfter = elected.ID, time.Since(at)
		if since := elected.LeaderSince.Sub(at); since > 0 && since < sum.ElectedAfter {
			sum.ElectedAfter = since // when it took over, not when the poll saw it
		}
		r.printf("failover: p%d leads g%d (ballot %s) %v after the %s", elected.ID, g, elected.Ballot, fmtDur(sum.ElectedAfter), r.stopWord())
		r.gossipLine(ctx, elected.ID, killed)
	} else {
		r.printf("failover: no new leader of g%d within 10s", g)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.mu.Lock()
		back := r.firstBack
		r.mu.Unlock()
		if !back.IsZero() {
			sum.DeliveringAfter = back.Sub(at)
			r.printf("failover: g%d %s %v after the %s", g, r.resumedWord(), fmtDur(sum.DeliveringAfter), r.stopWord())
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.printf("failover: g%d did not answer a new write within 10s of the %s", g, r.stopWord())
}

// resumedWord says that the stopped leader's group is back: the first
// answer to a write submitted after the stop.
func (r *run) resumedWord() string {
	if r.opt.Workload == WorkloadKV {
		return "writes resumed"
	}
	return "delivering again"
}

// stopWord names the leader's stop in the failover lines.
func (r *run) stopWord() string {
	if r.opt.Stop == StopTerm {
		return "SIGTERM"
	}
	return "kill"
}

// detection says what moved the leadership: gossip's failure detector
// (the profile and round the demo's agents use) after a kill, the
// leader's hand-over after a SIGTERM.
func (r *run) detection() string {
	if r.opt.Stop == StopTerm {
		return "leadership handed over, no failure detection"
	}
	return fmt.Sprintf("detected by gossip, profile local, %v rounds", r.opt.GossipInterval)
}

// printMembers prints the cluster as the first live agent's gossip sees
// it (weft members).
func (r *run) printMembers(ctx context.Context) {
	for _, a := range r.agents {
		if !a.running() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ms, err := node.FetchMembers(cctx, r.hc, a.admin)
		cancel()
		if err != nil {
			continue
		}
		r.printf("cluster as p%d's gossip sees it (weft members --admin %s):", a.id, a.admin)
		var sb strings.Builder
		node.WriteMembers(&sb, ms)
		r.printf("%s", strings.TrimRight(sb.String(), "\n"))
		return
	}
}

// gossipLine prints how agent at's gossip sees member of: the failure
// detector's verdict that triggered the failover.
func (r *run) gossipLine(ctx context.Context, at, of wire.ProcID) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ms, err := node.FetchMembers(ctx, r.hc, r.agents[at].admin)
	if err != nil {
		r.printf("gossip: cannot read p%d's view: %v", at, err)
		return
	}
	up := 0
	for _, m := range ms {
		if m.Status == node.MemberUp {
			up++
		}
	}
	for _, m := range ms {
		if m.ID == of {
			r.printf("gossip: p%d sees p%d %s (phi %.1f), %d of %d members up", at, of, m.Status, m.Phi, up, len(ms))
		}
	}
}

// watchRejoin reports when a restarted agent is back in its group: up,
// following (or leading) the group's current ballot, caught up.
func (r *run) watchRejoin(ctx context.Context, sum *Summary, a *agent, at time.Time) {
	var st node.Status
	ok := r.waitFor(ctx, 15*time.Second, func(sts map[wire.ProcID]node.Status) bool {
		var live bool
		st, live = sts[a.id]
		if !live || st.Role == "RECOVERING" {
			return false
		}
		l, ok := r.leaderOf(sts, a.group)
		return ok && st.CBallot == l.CBallot
	})
	if !ok {
		r.printf("p%d did not rejoin g%d within 15s; its log ends:\n    %s", a.id, a.group, r.tail(a))
		return
	}
	sum.RejoinedAfter = time.Since(at)
	sum.RestoredRecords = st.Stats.RestoredRecords
	sum.RestoredSnapshot = st.Stats.RestoredSnapshotBytes
	r.printf("p%d rejoined g%d as %s of ballot %s %v after the restart (replayed %s)",
		a.id, a.group, st.Role, st.CBallot, fmtDur(sum.RejoinedAfter), replayed(sum))
}
