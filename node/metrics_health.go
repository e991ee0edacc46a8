package node

// Readiness (/readyz, weft status, weft_ready): is this node a member of a
// group with a known leader, and caught up with it?
//
//   - member: the node runs (its loop has not stopped), is not an amnesiac
//     (an inert member never delivers; docs/disk-loss.md) and has not
//     announced its departure (weft leave);
//   - known leader: the node leads its group, or follows a ballot
//     (FOLLOWER: the ballot's owner is the leader) whose leader gossip does
//     not judge down and whose heartbeat arrived within the grace period;
//     a RECOVERING or CANDIDATE node knows no leader;
//   - caught up: a follower has the state of the ballot it joined (its
//     cballot is its ballot), and it is not behind the leader by more than
//     the grace period: WbCast's leader heartbeats carry the leader's last
//     delivery (wire.Heartbeat.MaxDelivered), and the lag is how long ago
//     the oldest such heartbeat arrived whose delivery this node has not
//     reached yet (0 when it has reached them all). The Paxos baselines'
//     heartbeats carry no delivery point: only the ballot check applies.
//
// The grace period is the protocol's own failure-detection span,
// ElectionTicks x Tick (300 ms by default): a follower that has not heard
// its leader for that long suspects it anyway.

import (
	"time"

	"github.com/weft-dev/weft/wire"
)

// Readiness is the answer of /readyz.
type Readiness struct {
	Ready bool `json:"ready"`
	// Reason is why the node is not ready (snake_case; empty when ready):
	// stopped, amnesiac, leaving, no_leader, leader_down, leader_silent,
	// no_state, catching_up.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	Role   string `json:"role"`
	// Leader is the leader this node knows (valid when LeaderKnown).
	Leader      wire.ProcID `json:"leader"`
	LeaderKnown bool        `json:"leader_known"`
	Ballot      wire.Ballot `json:"ballot"`
	// LagSeconds: see the top of this file (0 for a leader).
	LagSeconds float64 `json:"lag_seconds"`
	// GraceSeconds is the grace period the checks use.
	GraceSeconds float64 `json:"grace_seconds"`
}

// lagTarget is a leader heartbeat's delivery point and when it arrived.
type lagTarget struct {
	gts wire.Timestamp
	at  int64 // Unix ns; 0: none
}

// healthSnap is what the loop publishes for Readiness (under metrics.mu).
type healthSnap struct {
	st          Status
	leaderDown  bool  // gossip judges the ballot's leader down
	left        bool  // the node announced its departure
	heardLeader int64 // Unix ns of the last heartbeat from the leader of the node's ballot
	// The oldest leader heartbeat whose delivery point this node has not
	// reached, and the first one after it (whose point is raised to the
	// highest seen since): lag is measured from pending.at.
	pending, latest lagTarget
}

// observe notes the heartbeats of the node's group's leader, before the
// core steps them. Only the ballot's owner's heartbeats count.
func (m *metrics) observe(env wire.Envelope) {
	var b wire.Ballot
	var gts wire.Timestamp
	wb := false
	switch hb := env.Msg.(type) {
	case *wire.Heartbeat:
		if !hb.Leader {
			return
		}
		b, gts, wb = hb.B, hb.MaxDelivered, true
	case *wire.PaxosHeartbeat:
		if !hb.Leader {
			return
		}
		b = hb.B
	default:
		return
	}
	if env.From != b.P {
		return
	}
	now := time.Now().UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	h := &m.health
	if b != h.st.Ballot {
		return
	}
	h.heardLeader = now
	if !wb || gts.LessEq(h.st.MaxDelivered) {
		return
	}
	switch {
	case h.pending.at == 0:
		h.pending = lagTarget{gts, now}
	case h.latest.at == 0:
		if h.pending.gts.Less(gts) {
			h.latest = lagTarget{gts, now}
		}
	case h.latest.gts.Less(gts):
		h.latest.gts = gts
	}
}

// publishHealth updates the snapshot from a status the loop publishes.
func (m *metrics) publishHealth(st *Status) {
	n := m.n
	leaderDown := false
	if gs := n.gossip; gs != nil && !st.Leader && st.Ballot.P != n.cfg.ID {
		leaderDown = gs.det.verdict[st.Ballot.P].down()
	}
	left := n.gossip != nil && (n.gossip.left || n.gossip.g.Stopped())
	m.mu.Lock()
	defer m.mu.Unlock()
	h := &m.health
	if st.Ballot != h.st.Ballot || st.Leader {
		h.pending, h.latest = lagTarget{}, lagTarget{}
		if st.Ballot != h.st.Ballot {
			h.heardLeader = 0
		}
	}
	h.st, h.leaderDown, h.left = *st, leaderDown, left
	// Advance past the targets reached.
	for h.pending.at != 0 && h.pending.gts.LessEq(st.MaxDelivered) {
		h.pending, h.latest = h.latest, lagTarget{}
	}
}

// Readiness reports whether the node is ready (see the top of this file).
func (n *Node) Readiness() Readiness {
	grace := time.Duration(n.cfg.ElectionTicks) * n.cfg.Tick
	now := time.Now().UnixNano()
	m := n.met
	m.mu.Lock()
	h := m.health
	m.mu.Unlock()
	st := h.st
	r := Readiness{Role: st.Role, Ballot: st.Ballot, GraceSeconds: grace.Seconds()}
	if h.pending.at != 0 && !st.Leader {
		r.LagSeconds = time.Duration(now - h.pending.at).Seconds()
	}
	not := func(reason, detail string) Readiness {
		r.Reason, r.Detail = reason, detail
		return r
	}
	select {
	case <-n.done:
		return not("stopped", "the node's loop has stopped")
	default:
	}
	switch {
	case st.Amnesiac:
		return not("amnesiac", "this member lost its data directory and is inert until it has rejoined its group (docs/disk-loss.md)")
	case h.left:
		return not("leaving", "this node announced its departure")
	case st.Leader:
		r.Leader, r.LeaderKnown, r.Ready = st.ID, true, true
		return r
	case st.Role != "FOLLOWER":
		return not("no_leader", "role "+st.Role+": the group is electing a leader")
	}
	r.Leader, r.LeaderKnown = st.Ballot.P, true
	switch {
	case h.leaderDown:
		r.LeaderKnown = false
		return not("leader_down", "gossip judges the leader p"+peerLabel(st.Ballot.P)+" down")
	case h.heardLeader == 0 || time.Duration(now-h.heardLeader) > grace:
		r.LeaderKnown = false
		return not("leader_silent", "no heartbeat from the leader p"+peerLabel(st.Ballot.P)+" within the grace period")
	case st.CBallot != st.Ballot:
		return not("no_state", "joined ballot "+st.Ballot.String()+" but holds the state of "+st.CBallot.String())
	case r.LagSeconds > grace.Seconds():
		return not("catching_up", "behind the leader's deliveries for longer than the grace period")
	}
	r.Ready = true
	return r
}
