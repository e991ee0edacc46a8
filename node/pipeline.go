package node

import (
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// A leader's own sync, deferred (issue #14; docs/durability.md, "The
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
// that must sync (a follower's acks, a leader's ack to another group's
// leader, a state machine's replies, reads), at the next tick, when the
// pipeline holds amcast.PipelineBytes, or when the loop ends; it covers
// every record written before it, and releases what waited in order.
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
// wait for, the node runs no state machine (whose replies wait for the
// deliveries' results), rd has no reads, every message of it may leave
// before the sync, goes to the node itself, or is an ACCEPT_ACK (to
// another group's leader), and the node leads a group whose followers,
// none suspected, make its quorums without it.
func (n *Node) deferSync(rd *amcast.Ready) bool {
	if n.pipe == nil || n.svc != nil || len(rd.Reads) > 0 || (len(rd.Persist) == 0 && n.pipe.Len() == 0) {
		return false
	}
	for _, env := range rd.Messages {
		if env.To == n.cfg.ID || n.early(env.Msg) {
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
	if now := n.pipe.Add(rd, n.w.WrittenIndex()); len(now) > 0 {
		held := n.sendHolding(now)
		n.stats.SentBeforeSync += uint64(len(now) - held)
	}
	n.stats.DeferredSyncs++
	n.m.Advance()
	if n.pipe.Full() {
		return n.syncDeferred()
	}
	return nil
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
	for _, e := range n.pipe.Release(n.w.SyncedIndex()) {
		if err := n.afterSync(e.Messages, e.Deliveries, e.Reads); err != nil {
			return err
		}
	}
	return nil
}
