package node

import (
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/wire"
)

// The node's side of the vote exchange between groups (rsm/exchange.go;
// docs/rsm.md): a state machine that is an rsm.Exchanger holds an entry
// that needs other groups' votes until they are in.
//
//   - The votes this replica casts go to every replica of every other
//     destination group (sendVotes), as soon as the driver casts them.
//   - A VOTE is taken only from a replica of the group it is the vote of,
//     or from a replica of this node's own group (which relays votes it
//     received: a pull's answer); anyone else's, a client's included, is
//     refused and counted. The driver refuses a vote that contradicts what
//     it knows (another vote of the same group, a gts other than the
//     delivered one).
//   - A replica that waits for votes longer than votePullAfter asks again
//     (VOTE_PULL) the replicas of every destination group of the message
//     (the voters cast them, every destination received them; they keep
//     the votes of recent messages: rsm.Config.VoteCache);
//     after votePullGiveUp without them it fetches its group's application
//     state instead (transfer.go), which its members hold past the entry.
//   - While the entries held for votes are over rsm.Config.MaxPendingBytes
//     the node refuses new client MULTICASTs with OVERLOADED: the held
//     entries are deliveries and cannot be refused, so the admission of new
//     ones is where the bound is enforced.

const (
	votePullAfter  = 100 * time.Millisecond
	votePullGiveUp = 10 * time.Second
)

// voteWait is the wait for votes in progress: the entry, since when, and
// the last pull.
type voteWait struct {
	id             wire.MsgID
	since, pulled  time.Time
	pulls          int
	fallbackForGTS wire.Timestamp
}

// VoteStats counts the node's side of the vote exchange.
type VoteStats struct {
	Sent, Received, Pulls, PullsAnswered uint64
	// Refused counts votes refused: from a process that may not send them,
	// or contradicting what the driver knows (rsm.Stats.VotesRefused
	// counts the latter alone).
	Refused uint64
	// Shed counts client MULTICASTs refused while the held entries were
	// over their bound; Fallbacks the state transfers started because a
	// vote could not be had, CalledOff those of them called off because
	// the votes came after all.
	Shed, Fallbacks, CalledOff uint64
}

// sendVotes sends the votes the driver cast.
func (n *Node) sendVotes() {
	for _, v := range n.svc.d.TakeVotes() {
		msg := &wire.Vote{ID: v.ID, GTS: v.GTS, G: v.G, Vote: v.Vote}
		for _, g := range v.To {
			for _, p := range n.cfg.Topology.Members(g) {
				n.stats.Votes.Sent++
				if n.cfg.loseVote != nil && n.cfg.loseVote(p, msg, false) {
					continue
				}
				n.sendCounted(p, msg)
			}
		}
	}
}

// stepVote takes a VOTE from a replica.
func (n *Node) stepVote(env wire.Envelope, m *wire.Vote) {
	g, ok := n.cfg.Topology.GroupOf(env.From)
	if n.svc == nil || !ok || (g != m.G && g != n.group) {
		n.stats.Votes.Refused++
		n.log.Debug("refused a vote", "from", uint32(env.From), "msg", wire.Describe(m), "reason", "not a replica of the voting group or of this one")
		return
	}
	if n.transferring() && !n.voteTransfer() {
		return // the state is about to be replaced; what it needs is pulled after
	}
	n.stats.Votes.Received++
	err := n.svc.d.AddVote(rsm.Vote{ID: m.ID, GTS: m.GTS, G: m.G, Vote: m.Vote})
	if err != nil && n.svc.d.Err() == nil {
		n.stats.Votes.Refused++
		n.log.Debug("refused a vote", "from", uint32(env.From), "msg", wire.Describe(m), "err", err)
	}
	n.afterApply() // a sticky failure stops the node at its next Ready
	n.callOffVoteTransfer()
}

// voteTransfer reports whether the state transfer in progress was started
// for votes (it is called off if they come: callOffVoteTransfer).
func (n *Node) voteTransfer() bool {
	return n.svc != nil && n.svc.xfer != nil && n.svc.xfer.forVotes
}

// callOffVoteTransfer ends a transfer started for the votes of a held
// entry once that entry no longer waits: the votes came after all. Else a
// group whose every member waited (another group down for a while) would
// fetch from one another for ever.
func (n *Node) callOffVoteTransfer() {
	if !n.voteTransfer() {
		return
	}
	if id, _, missing, ok := n.svc.d.Waiting(); ok && id == n.svc.wait.id && len(missing) > 0 {
		return
	}
	n.cancelVoteTransfer()
	n.afterApply()
}

// stepVotePull answers a VOTE_PULL with the vote if this replica holds it.
func (n *Node) stepVotePull(env wire.Envelope, m *wire.VotePull) {
	if _, ok := n.cfg.Topology.GroupOf(env.From); !ok || n.svc == nil {
		n.stats.Votes.Refused++
		return
	}
	v, ok := n.svc.d.VoteOf(m.ID, m.G)
	if !ok || v.GTS != m.GTS {
		return
	}
	msg := &wire.Vote{ID: v.ID, GTS: v.GTS, G: v.G, Vote: v.Vote}
	if n.cfg.loseVote != nil && n.cfg.loseVote(env.From, msg, true) {
		return
	}
	n.stats.Votes.PullsAnswered++
	n.sendCounted(env.From, msg)
}

// afterApply sends what entries applied outside a Ready (on a vote)
// release: the clients' replies, and the votes cast on the next entry.
func (n *Node) afterApply() {
	n.flushReplies()
	n.sendVotes()
}

// appliedEvery is how often a replica whose state machine exchanges votes
// tells the others what it applied (APPLIED): how long the votes of
// messages every destination applied outlive the vote cache, at most.
const appliedEvery = 250 * time.Millisecond

// sendApplied reports this replica's applied gts to every other replica,
// every appliedEvery: they keep the votes of messages its group has not
// applied (a quorum of it) for its pulls (rsm.Driver.NoteApplied).
func (n *Node) sendApplied(now time.Time) {
	s := n.svc
	if s == nil || !n.exchanges() || now.Sub(s.appliedSent) < appliedEvery {
		return
	}
	s.appliedSent = now
	msg := &wire.Applied{G: n.group, GTS: s.d.Applied()}
	n.noteApplied(n.cfg.ID, msg)
	for _, ms := range n.cfg.Topology.Groups {
		for _, q := range ms {
			if q != n.cfg.ID {
				n.sendCounted(q, msg)
			}
		}
	}
}

// exchanges reports whether the node's state machine exchanges votes.
func (n *Node) exchanges() bool {
	_, ok := n.cfg.StateMachine.(rsm.Exchanger)
	return ok
}

// stepApplied takes a replica's APPLIED report: only from a replica of
// the group it reports for.
func (n *Node) stepApplied(env wire.Envelope, m *wire.Applied) {
	if g, ok := n.cfg.Topology.GroupOf(env.From); !ok || g != m.G || n.svc == nil {
		n.stats.Votes.Refused++
		n.log.Debug("refused an APPLIED report", "from", uint32(env.From), "msg", wire.Describe(m))
		return
	}
	n.noteApplied(env.From, m)
}

// noteApplied records replica from's report and tells the driver its
// group's floor: the highest gts a quorum of the group's replicas applied
// (a replica behind it catches up from its group by state transfer).
func (n *Node) noteApplied(from wire.ProcID, m *wire.Applied) {
	s := n.svc
	if s.applied == nil {
		s.applied = map[wire.ProcID]wire.Timestamp{}
	}
	if !s.applied[from].Less(m.GTS) {
		return
	}
	s.applied[from] = m.GTS
	ms := n.cfg.Topology.Members(m.G)
	ts := make([]wire.Timestamp, 0, len(ms))
	for _, q := range ms {
		ts = append(ts, s.applied[q])
	}
	s.d.NoteApplied(m.G, amcast.FloorOf(ts, n.cfg.Topology.Quorum(m.G)))
}

// tickVotes pulls missing votes, and falls back to a state transfer when
// they cannot be had.
func (n *Node) tickVotes(now time.Time) {
	n.callOffVoteTransfer()
	n.sendApplied(now)
	if n.svc == nil || (n.transferring() && !n.voteTransfer()) {
		return
	}
	id, gts, missing, ok := n.svc.d.Waiting()
	w := &n.svc.wait
	if !ok || len(missing) == 0 {
		w.id = wire.MsgID{}
		return
	}
	if w.id != id {
		*w = voteWait{id: id, since: now, pulled: now}
		return
	}
	if now.Sub(w.pulled) < votePullAfter<<min(w.pulls, 4) {
		return // back off: 100 ms, 200 ms, ... 1.6 s between pulls
	}
	w.pulled = now
	w.pulls++
	giveUp := votePullGiveUp
	if n.cfg.votePullGiveUp > 0 {
		giveUp = n.cfg.votePullGiveUp
	}
	if now.Sub(w.since) >= giveUp && w.fallbackForGTS != gts {
		w.fallbackForGTS = gts
		n.stats.Votes.Fallbacks++
		n.log.Warn("the votes a held entry needs could not be had from any replica; fetching the group's application state instead "+
			"(and pulling on: the fetch is called off if they come)",
			"id", id.String(), "gts", gts, "missing", missing, "waited", now.Sub(w.since).Round(time.Millisecond))
		n.startVoteTransfer(gts)
	}
	dest := n.svc.d.HeldDest(id)
	for _, g := range missing {
		pull := &wire.VotePull{ID: id, GTS: gts, G: g}
		for _, h := range dest {
			for _, q := range n.cfg.Topology.Members(h) {
				if q != n.cfg.ID {
					n.stats.Votes.Pulls++
					n.sendCounted(q, pull)
				}
			}
		}
	}
}

// shedForVotes reports whether a client's MULTICAST must be refused while
// the entries held for votes are over their bound (and answers it).
func (n *Node) shedForVotes(env wire.Envelope) bool {
	mc, ok := env.Msg.(*wire.Multicast)
	if !ok || n.svc == nil || n.cfg.Topology.IsReplica(env.From) || n.svc.d.Holds(mc.M.ID) {
		return false // a retry of a held message is delivered already: never "shed"
	}
	if !n.svc.d.OverBacklog() {
		return false
	}
	n.stats.Votes.Shed++
	n.sendCounted(env.From, &wire.Overloaded{ID: mc.M.ID})
	return true
}
