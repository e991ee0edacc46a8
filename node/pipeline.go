package node

import (
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// A leader's own sync, deferred (issue #14; docs/durability.md, "A
// leader's own sync, deferred"; amcast/pipeline.go).
//
// With the fsync'd WAL a loaded WbCast leader spent 85-87% of its loop in
// its own fdatasync, although nothing it sends at 1 destination group
// waits for its records: its ACCEPTs, DELIVERs and answers to clients
// promise nothing about its own durable state (wbcast/pipeline.go), and
// its own ACCEPT_ACK, the one message that does, goes to itself and is
// not needed while its followers ack. So a Ready whose every message may
// leave before the sync, or goes to the node itself, is written and not
// synced: its early messages leave at once, and what it releases once
// durable (its messages to the node itself, its deliveries) waits in an
// amcast.Pipeline for the next sync. That sync comes with the next Ready
// that must sync (a follower's acks, reads), at the next tick, when the
// pipeline holds amcast.PipelineBytes, or when the loop ends; it covers
// every record written before it, and releases what waited in order.
//
// A node running a state machine applies such a Ready's deliveries at
// once, and answers with their results (applyBeforeSync): a delivery at a
// deferring leader rests on its followers' durable acks, so it is final
// before this node's record of it is durable. Its deliveries log and
// OnDeliver still get them at the sync.
//
// A deferred own ack does not delay commits while a quorum of followers
// acks: with 3 replicas both followers' acks commit. With a follower down
// it would, each commit waiting for the leader's next sync: so a leader
// defers only while its detector suspects none of its followers
// (wbcast.Process.FollowersMakeQuorum), and between a follower's failure
// and its suspicion commits wait up to a tick.
//
// A compaction snapshots what was applied, so it starts only once nothing
// waits (maybeCompact); the tick's sync empties the pipeline.

// deferSync reports whether rd's sync may wait: there is something to
// wait for, every message of it may leave before the sync, goes to the
// node itself, is an ACCEPT_ACK (to another group's leader) or, with a
// state machine that may apply rd's deliveries now (applyBeforeSync), a
// reply that waits for their results; and the node leads a group whose
// followers, none suspected, make its quorums without it. (Reads come
// only with a state machine, and are served with the deliveries.)
func (n *Node) deferSync(rd *amcast.Ready) bool {
	if n.pipe == nil || (len(rd.Persist) == 0 && n.pipe.Len() == 0) {
		return false
	}
	if n.svc != nil && !n.applyBeforeSync(rd) {
		return false
	}
	for _, env := range rd.Messages {
		if env.To == n.cfg.ID || n.early(env.Msg) || n.svcReply(env.Msg) {
			continue
		}
		if _, ok := env.Msg.(*wire.AcceptAck); !ok {
			return false
		}
	}
	// Its acks, to itself or to other groups' leaders, and its records
	// may wait while its followers' acks make its group's quorums.
	return n.followersMakeQuorum()
}

// applyBeforeSync reports whether the state machine may apply rd's
// deliveries before their records are durable, answer with their results
// and serve rd's reads on them (applyNow; reads are not durable in any
// case: they wait for their index to be applied, and for nothing of this
// node's log). Each of them is final once delivered: a deferring leader
// delivers on its followers' durable acks, never on its own unsynced
// records (its own ack waits for the sync), so what a crash loses is only
// this node's record of the delivery, which its group delivers again at
// the same place in the order (sim/early.go checks that claim in the
// swarm). The deliveries log and Config.OnDeliver, which promise
// deliveries durable here, still get them at the sync. A compaction
// snapshots the state machine only once nothing waits (maybeCompact); a
// snapshot served to a member meanwhile (serveTransfer) may carry
// deliveries not yet durable here, which are final all the same. Not
// during a state transfer, whose deliveries the log keeps for the replay,
// nor for a Ready that installs one.
func (n *Node) applyBeforeSync(rd *amcast.Ready) bool {
	if n.transferring() {
		return false
	}
	for i := range rd.Deliveries {
		if rd.Deliveries[i].Install {
			return false
		}
	}
	return true
}

// svcReply reports whether m is a reply the state machine sends with a
// result (a DELIVERED, held until its delivery is applied: holdReply).
func (n *Node) svcReply(m wire.Message) bool {
	if n.svc == nil {
		return false
	}
	_, ok := m.(*wire.Delivered)
	return ok
}

// followersMakeQuorum reports whether the node leads and its followers,
// all heard, make its group's quorums without it
// (wbcast.Process.FollowersMakeQuorum).
func (n *Node) followersMakeQuorum() bool {
	f, ok := n.m.(interface{ FollowersMakeQuorum() bool })
	return ok && n.m.leader() && f.FollowersMakeQuorum()
}

// readyDeferred handles a Ready whose sync may wait (deferSync): its
// records are written, its early messages leave, and the rest waits in the
// pipeline for the next sync.
func (n *Node) readyDeferred(rd *amcast.Ready) error {
	if err := n.appendRecords(rd.Persist); err != nil {
		return err
	}
	if err := n.w.Write(); err != nil {
		return err
	}
	if n.svc != nil {
		// The deliveries are applied now, the replies leave with their
		// results and the reads are served on them (applyBeforeSync); the
		// rest waits for the sync, and so do the deliveries, for the
		// deliveries log and OnDeliver.
		replies, rest := n.sendBuf[:0], n.lateIn[:0]
		for _, env := range rd.Messages {
			if n.svcReply(env.Msg) {
				replies = append(replies, env)
			} else {
				rest = append(rest, env)
			}
		}
		waits := amcast.Ready{Persist: rd.Persist, Messages: rest, Deliveries: rd.Deliveries}
		n.sendEarly(n.pipe.Add(&waits, n.w.WrittenIndex()))
		clear(rest)
		n.lateIn = rest[:0]
		n.stats.AppliedBeforeSync += uint64(len(rd.Deliveries))
		err := n.applyNow(replies, rd.Deliveries, rd.Reads)
		clear(replies)
		n.sendBuf = replies[:0]
		if err != nil {
			return err
		}
	} else {
		n.sendEarly(n.pipe.Add(rd, n.w.WrittenIndex()))
	}
	n.stats.DeferredSyncs++
	n.m.Advance()
	if n.pipe.Full() {
		return n.syncDeferred()
	}
	return nil
}

// applyNow is the state machine's part of a deferred Ready, done before
// its sync (applyBeforeSync): the deliveries are applied, the replies
// held for them leave with their results, and the reads are served. The
// rest of afterSync comes at the sync (releaseDeferred).
func (n *Node) applyNow(replies []wire.Envelope, deliveries []amcast.Delivery, reads []amcast.ReadState) error {
	for _, env := range replies {
		n.svc.holdReply(env)
	}
	n.out.Flush() // the early messages first: the other processes wait on these
	if len(deliveries) > 0 || len(n.svc.held) > 0 {
		if err := n.applyService(deliveries); err != nil {
			return err
		}
	}
	n.serveReads(reads)
	return nil
}

// sendEarly sends what a deferred Ready lets leave before its sync.
func (n *Node) sendEarly(now []wire.Envelope) {
	if len(now) > 0 {
		held := n.sendHolding(now)
		n.stats.SentBeforeSync += uint64(len(now) - held)
	}
}

// syncDeferred makes every record written durable and does, in order,
// what the deferred Readys released; then a due compaction may start.
func (n *Node) syncDeferred() error {
	if n.pipe == nil || n.pipe.Len() == 0 {
		return nil
	}
	if err := n.syncWritten(); err != nil {
		return err
	}
	if err := n.releaseDeferred(); err != nil {
		return err
	}
	return n.maybeCompact()
}

// appendRecords appends a Ready's records to the WAL, unsynced, counts
// them, and mirrors them to the image compactions snapshot (mirror).
func (n *Node) appendRecords(recs []wire.Message) error {
	if len(recs) == 0 {
		return nil
	}
	bytes, err := n.w.AppendMessages(recs...) // the records' bytes: the metric's and the compaction threshold's
	if err != nil {
		return err
	}
	n.unsynced += bytes
	n.stats.Records += uint64(len(recs))
	n.sinceCut += bytes
	return n.mirror(recs)
}

// syncWritten syncs the records written and not yet durable, if any,
// counting the sync.
func (n *Node) syncWritten() error {
	if n.w.SyncedIndex() >= n.w.LastIndex() {
		return nil
	}
	start := time.Now()
	if err := n.w.Sync(); err != nil {
		return err
	}
	n.met.synced(time.Since(start), n.unsynced)
	n.unsynced = 0
	n.stats.Syncs++
	return nil
}

// releaseDeferred does, in order, what the deferred Readys durable by now
// released: their messages leave and their deliveries are applied.
func (n *Node) releaseDeferred() error {
	if n.pipe == nil {
		return nil
	}
	// A state machine applied every deferred Ready's deliveries before
	// the sync (readyDeferred): only the deliveries log, OnDeliver and the
	// counts get them now.
	applied := n.svc != nil
	for _, e := range n.pipe.Release(n.w.SyncedIndex()) {
		if err := n.afterSync(e.Messages, e.Deliveries, e.Reads, applied); err != nil {
			return err
		}
	}
	return nil
}
