package node

// The gossip seed's operational advice, built in (issue #13 item 4;
// docs/operations.md "Gossip warnings" shows each one as an operator sees
// it):
//
//   - Seed lists. Every node publishes the digest of its seed list
//     (membership.KeySeedDigest); each round the node judges the digests
//     of itself and the live members (membership.SeedMajority) and logs
//     when the verdict changes, not every round. At start it warns about
//     more seeds than membership.SeedLimit, and it flags a seed that
//     answers for another cluster: gossip's own cluster-name check
//     (EventClusterMismatch from a seed) or the transport's handshake
//     (transport.PeerStats.LastFailure), whichever sees it.
//   - Clocks. The gossip core estimates every peer's clock offset from
//     the exchanges' stamps (membership/clock.go) and reports crossings of
//     gossip.clock_skew_threshold and generations ahead of this node's
//     clock; this file logs them.
//   - Remembered peers (gossip_peers.go): the peers up in this life,
//     contacted first in the next one.
//
// Everything here runs on the node's loop; metrics, the dashboard and
// weft members read it through the members view and adviceReport.
//
// The seed-count warning is given when the node starts, not by config
// validation: only the node knows the effective list (the default, one
// per group, is filled in here) and every way of starting one (agent,
// demo, the Go API) passes here; a long list is advice, not an error.

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// adviser is the gossiper's advice state.
type adviser struct {
	digest  string                 // this node's seed digest
	seeds   []wire.ProcID          // the effective seed list, sorted
	verdict membership.SeedVerdict // as reported (settled)
	// next is a new verdict waiting to settle, seen for nextRounds rounds.
	next       membership.SeedVerdict
	nextRounds int
	// foreign are the seeds seen answering for another cluster, with what
	// told (the cluster name, or the transport's refusal).
	foreign map[wire.ProcID]string
	// clocks: the last skew reports, by peer (offset; removed when
	// cleared), for the dashboard's warnings.
	skewed    map[wire.ProcID]time.Duration
	checkedAt time.Time // the last look at the transport's seeds
	peers     peerMemory
}

// seedSettleRounds is how many rounds in a row a new seed verdict must
// hold before it is reported: while nodes start, the first two to meet
// are a tie without a majority, which is no news to anyone.
const seedSettleRounds = 5

// adviceEvery paces the checks that need not run every round (the
// transport's view of the seeds, the remembered peers file).
const adviceEvery = time.Second

// openAdvice fills the seed digest, warns about a long seed list, and
// returns the remembered peers to contact first.
func (gs *gossiper) openAdvice(seeds []wire.ProcID) []wire.ProcID {
	a := &gs.adv
	a.seeds = slices.Sorted(slices.Values(seeds))
	a.seeds = slices.Compact(a.seeds)
	a.digest = membership.SeedDigest(a.seeds)
	a.foreign = map[wire.ProcID]string{}
	a.skewed = map[wire.ProcID]time.Duration{}
	groups := gs.n.cfg.Topology.Groups
	if limit := membership.SeedLimit(len(groups)); len(a.seeds) > limit {
		gs.n.log.Warn("gossip: more seeds than advised; keep a few (the same list on every node)",
			"seeds", len(a.seeds), "limit", limit, "groups", len(groups))
	}
	return gs.openPeers()
}

// advise runs after every gossip round.
func (gs *gossiper) advise(now time.Time) {
	if gs.left {
		return
	}
	gs.judgeSeeds()
	if now.Sub(gs.adv.checkedAt) < adviceEvery {
		return
	}
	gs.adv.checkedAt = now
	gs.checkForeignSeeds()
	gs.rememberPeers()
}

// judgeSeeds recomputes the seed verdict and logs when it changed (and
// held for seedSettleRounds).
func (gs *gossiper) judgeSeeds() {
	a := &gs.adv
	v := membership.SeedMajority(gs.g.SeedVotes())
	same := func(x, y membership.SeedVerdict) bool {
		return x.Majority == y.Majority && slices.Equal(x.Differ, y.Differ)
	}
	if same(v, a.verdict) {
		a.verdict.Voters = v.Voters
		a.nextRounds = 0
		return
	}
	if !same(v, a.next) {
		a.next, a.nextRounds = v, 0
	}
	if a.nextRounds++; a.nextRounds < seedSettleRounds {
		return
	}
	was := a.verdict
	a.verdict, a.nextRounds = v, 0
	log, self := gs.n.log, gs.n.cfg.ID
	switch {
	case len(v.Differ) == 0:
		if len(was.Differ) > 0 {
			log.Info("gossip: seed lists agree again", "digest", v.Majority, "members", v.Voters)
		}
	case v.Majority == "":
		log.Warn("gossip: seed lists disagree and none has a majority; make them identical",
			"digest", a.digest, "seeds", a.seeds, "differ", v.Differ)
	default:
		if v.Mismatch(self) {
			log.Warn("gossip: this node's seed list differs from the majority's; make them identical",
				"digest", a.digest, "majority", v.Majority, "seeds", a.seeds)
		}
		if others := slices.DeleteFunc(slices.Clone(v.Differ), func(p wire.ProcID) bool { return p == self }); len(others) > 0 {
			log.Warn("gossip: members' seed lists differ from the majority's; make them identical",
				"members", others, "majority", v.Majority)
		}
	}
}

// checkForeignSeeds asks the transport whether a seed refused this node's
// handshake for its cluster name.
func (gs *gossiper) checkForeignSeeds() {
	ts := gs.n.TransportStats()
	for _, s := range gs.adv.seeds {
		if ps, ok := ts.Peers[s]; ok && ps.LastFailure == transport.ReasonClusterName {
			gs.flagForeign(s, fmt.Sprintf("refuses this node's handshake for its cluster name (%s at %s)", transport.ReasonClusterName, ps.Addr))
		}
	}
}

func (gs *gossiper) flagForeign(seed wire.ProcID, why string) {
	if _, ok := gs.adv.foreign[seed]; ok {
		return
	}
	gs.adv.foreign[seed] = why
	gs.n.log.Warn("gossip: seed belongs to another cluster; fix gossip.seeds or the peer's address",
		"seed", uint32(seed), "our_cluster", gs.n.cfg.Cluster, "evidence", why)
}

// adviseEvent logs the core's clock reports and notes a seed of another
// cluster.
func (gs *gossiper) adviseEvent(e membership.Event) {
	log := gs.n.log
	th := gs.n.cfg.Gossip.ClockSkewThreshold
	switch e.Kind {
	case membership.EventClusterMismatch:
		if _, ok := slices.BinarySearch(gs.adv.seeds, e.Node); ok {
			gs.flagForeign(e.Node, fmt.Sprintf("gossips as cluster %q", e.Value))
		}
	case membership.EventClockSkew:
		gs.adv.skewed[e.Node] = e.Offset
		co, _ := gs.g.ClockOffset(e.Node)
		log.Warn("gossip: clock skew: member's clock differs from this node's beyond the threshold; check time sync (NTP) on both hosts",
			"member", uint32(e.Node), "offset", e.Offset.Round(time.Millisecond), "round_trip", co.Delay.Round(time.Microsecond), "threshold", th)
	case membership.EventClockSkewCleared:
		delete(gs.adv.skewed, e.Node)
		log.Info("gossip: clock skew cleared", "member", uint32(e.Node), "offset", e.Offset.Round(time.Millisecond))
	case membership.EventGenerationAhead:
		log.Warn("gossip: member's generation is ahead of this node's clock; one of the two clocks is off",
			"member", uint32(e.Node), "generation", e.Generation, "ahead", e.Offset.Round(time.Millisecond), "threshold", th)
	}
}

// adviseMember fills a member row's seed and clock columns.
func (gs *gossiper) adviseMember(r *Member) {
	r.SeedMismatch = r.SeedDigest != "" && gs.adv.verdict.Mismatch(r.ID)
	if co, ok := gs.g.ClockOffset(r.ID); ok {
		off := co.Offset.Seconds()
		r.ClockOffsetSeconds = &off
		r.ClockDelaySeconds = co.Delay.Seconds()
		r.ClockSkewed = co.Skewed
	}
}

// adviceReport is the warnings as the dashboard shows them, and what the
// metrics need beyond the members view.
type adviceReport struct {
	ClockSkew []string
	SeedList  []string
	// Foreign counts seeds seen answering for another cluster.
	Foreign int
}

// report builds the warnings (on the loop).
func (gs *gossiper) report() adviceReport {
	a := &gs.adv
	r := adviceReport{ClockSkew: []string{}, SeedList: []string{}, Foreign: len(a.foreign)}
	th := gs.n.cfg.Gossip.ClockSkewThreshold
	for _, p := range slices.Sorted(maps.Keys(a.skewed)) {
		co, ok := gs.g.ClockOffset(p)
		if !ok {
			continue
		}
		dir := "ahead of"
		if co.Offset < 0 {
			dir = "behind"
		}
		r.ClockSkew = append(r.ClockSkew, fmt.Sprintf("p%d's clock is %v %s this node's (±%v; threshold %v)",
			p, co.Offset.Abs().Round(time.Millisecond), dir, (co.Delay/2).Round(time.Microsecond), th))
	}
	if n := gs.stats.GenerationsAhead; n > 0 {
		r.ClockSkew = append(r.ClockSkew, fmt.Sprintf("%d generation(s) seen ahead of this node's clock (see the log)", n))
	}
	v := a.verdict
	switch {
	case len(v.Differ) == 0:
	case v.Majority == "":
		r.SeedList = append(r.SeedList, fmt.Sprintf("no seed list has a majority among %d live members (%s)", v.Voters, pids(v.Differ)))
	default:
		r.SeedList = append(r.SeedList, fmt.Sprintf("%s %s from the majority's list %s (%d of %d live members)",
			pids(v.Differ), verb(len(v.Differ), "differs", "differ"), v.Majority, len(v.Differ), v.Voters))
	}
	if limit := membership.SeedLimit(len(gs.n.cfg.Topology.Groups)); len(a.seeds) > limit {
		r.SeedList = append(r.SeedList, fmt.Sprintf("%d seeds configured, more than the advised %d", len(a.seeds), limit))
	}
	for _, s := range slices.Sorted(maps.Keys(a.foreign)) {
		r.SeedList = append(r.SeedList, fmt.Sprintf("seed p%d belongs to another cluster: it %s", s, a.foreign[s]))
	}
	return r
}

func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func pids(ps []wire.ProcID) string {
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("p%d", p)
	}
	return s
}

// rejectReason names a refused gossip frame or message for
// weft_gossip_rejected_total: bad_time for malformed stamps, else def.
func rejectReason(err error, def string) string {
	if errors.Is(err, membership.ErrBadTime) {
		return "bad_time"
	}
	return def
}

// Advice returns the gossip warnings (nil without gossip or after the
// node stopped).
func (n *Node) advice() *adviceReport {
	var r *adviceReport
	n.control(func() error {
		if n.gossip != nil {
			rep := n.gossip.report()
			r = &rep
		}
		return nil
	})
	return r
}

// memberAdvice renders a member's OFFSET and SEEDS columns for weft
// members: the clock offset ("!" beyond the threshold) and "ok", or
// "DIFFERS!" with the digest for a list that differs from the majority's.
func memberAdvice(m Member) (offset, seeds string) {
	offset, seeds = "-", "-"
	if m.ClockOffsetSeconds != nil {
		offset = fmt.Sprintf("%+.1fms", *m.ClockOffsetSeconds*1000)
		if m.ClockSkewed {
			offset += "!"
		}
	}
	switch {
	case m.SeedMismatch:
		seeds = "DIFFERS! " + m.SeedDigest
	case m.SeedDigest != "":
		seeds = "ok"
	}
	return offset, seeds
}

// writeMembersAdvice ends weft members' table with the warnings it shows.
func writeMembersAdvice(w io.Writer, ms []Member) {
	var differ, skewed []wire.ProcID
	for _, m := range ms {
		if m.SeedMismatch {
			differ = append(differ, m.ID)
		}
		if m.ClockSkewed {
			skewed = append(skewed, m.ID)
		}
	}
	if len(differ) > 0 {
		fmt.Fprintf(w, "seed lists: %s %s from the majority's (DIFFERS!): make gossip.seeds identical on every node\n",
			pids(differ), verb(len(differ), "differs", "differ"))
	}
	if len(skewed) > 0 {
		fmt.Fprintf(w, "clocks: %s %s beyond the skew threshold (OFFSET !): check time sync (NTP)\n",
			pids(skewed), verb(len(skewed), "is", "are"))
	}
}
