package node

import (
	"time"
)

// statusWait is how long Status waits for the loop to build a fresh
// status before it settles for the last published one.
const statusWait = 100 * time.Millisecond

// Status returns a snapshot of the node's state. The loop builds it on
// request (the loop publishes a full status only on its ticks and when
// the process's role, leadership or ballot changes, not on every pass: at
// tens of thousands of passes a second that was a measurable share of
// its work), between two passes. When the loop does not answer within
// statusWait (busy in a long sync or compaction step), or has stopped,
// Status returns the last published one: a stuck node still shows what it
// was doing. Called from OnDeliver or the state machine, which run on the
// loop, it always waits statusWait for that fallback.
func (n *Node) Status() Status {
	built := make(chan struct{})
	timer := time.NewTimer(statusWait)
	select {
	case n.ctl <- func() { n.publish(); close(built) }:
		<-built
	case <-n.done:
	case <-timer.C:
	}
	timer.Stop()
	n.mu.Lock()
	st := n.status
	n.mu.Unlock()
	// The transport's counters are its own (atomics): read here, not at
	// every publish.
	ts := n.tr.Stats()
	st.Transport = TransportTraffic{FramesIn: ts.FramesIn, FramesOut: ts.FramesOut, Writes: ts.Writes, Reads: ts.Reads, ReadsRecvmsg: ts.ReadsRecvmsg}
	return st
}

// changed reports whether the process's role, leadership or ballot moved
// since the last publish: those are published at once (the log, gossip's
// view of the leaders, the readiness probe), the rest on the next tick.
func (n *Node) changed() bool {
	b, _ := n.m.ballots()
	return b != n.published.ballot || n.m.leader() != n.published.leader || n.m.role() != n.published.role
}

// publish builds the status and hands it to Status, gossip and the
// metrics.
func (n *Node) publish() {
	b, cb := n.m.ballots()
	switch leader := n.m.leader(); {
	case leader && n.leaderSince.IsZero():
		n.leaderSince = time.Now()
		n.log.Info("leading the group", "ballot", b)
	case !leader && !n.leaderSince.IsZero():
		n.leaderSince = time.Time{}
		n.log.Info("no longer leading the group", "ballot", b)
	}
	st := Status{
		ID: n.cfg.ID, Group: n.group, Protocol: n.proto.name, Role: n.m.role(), Leader: n.m.leader(),
		Ballot: b, CBallot: cb, Clock: n.m.clock(), MaxDelivered: n.m.maxDelivered(),
		Retained: n.m.retained(), Coverage: n.m.coverage(),
		WALFirst: n.w.FirstIndex(), WALLast: n.w.LastIndex(), Stats: n.stats, Pid: n.pid, LeaderSince: n.leaderSince,
		Incarnation: n.ident.Incarnation, Amnesiac: n.ident.Amnesiac && n.coreAmnesiac(),
	}
	n.published.role, n.published.leader, n.published.ballot = st.Role, st.Leader, st.Ballot
	if n.svc != nil {
		st.Service = &ServiceStatus{Stats: n.svc.d.Stats(), AppliedGTS: n.svc.d.Applied(), Replayed: n.svc.replayed}
	}
	st.Stats.RawSyncPauses = n.w.RawSyncPauses()
	st.Stats.InboxQueued = len(n.inbox.ch)
	st.Stats.InboxBytes, st.Stats.InboxPeakBytes = n.inbox.budget.load()
	st.Stats.ClientQueued = len(n.clients.ch)
	st.Stats.ClientInboxBytes, st.Stats.ClientInboxPeakBytes = n.clients.budget.load()
	st.Stats.ClientShed = n.clientShed.Load()
	st.Stats.ClientShedShare = n.clientShedShare.Load()
	st.Stats.SideDrops = n.sideDrops.Load()
	st.Stats.ViewDrops = n.viewDrops.Load()
	st.Stats.InboxWaits = n.inboxWaits.Load()
	n.gossip.publish(roleName(st.Role, st.Leader), st.Ballot)
	if n.gossip != nil {
		gst := n.gossip.stats
		st.Gossip = &gst
	}
	if n.tr != nil {
		st.Addr = n.tr.Addr().String()
	}
	n.mu.Lock()
	n.status = st
	n.status.Stats = st.Stats
	n.mu.Unlock()
	n.met.published(&st)
}
