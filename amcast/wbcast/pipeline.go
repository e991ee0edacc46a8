package wbcast

import "github.com/weft-dev/weft/wire"

// Sending before the sync (issue #14 item 3; docs/durability.md).
//
// The Ready contract makes a process's records durable before its messages
// leave, because a message may promise what the records hold. But some
// messages promise nothing about the sender's own durable state; they can
// leave while the records of the same Ready are being synced, so that the
// leader's fsync overlaps its followers' (etcd-raft's leader does the same
// with its log appends):
//
//   - ACCEPT (H1: a leader proposes a local timestamp for a message under its
//     ballot). Safety rests on the acceptors: a message commits only once a
//     quorum of each destination group durably accepted it and acked (an
//     ACCEPT_ACK is sent only after the acker's sync), and every later
//     recovery reads a quorum, which meets that one (P1, P11). The leader's
//     own acceptance counts only once durable (its own ack, below). And a
//     leader that crashes before its records are durable never proposes
//     under that ballot again: it restarts as a follower (Restore), so no
//     member can hold two different proposals of one ballot for one
//     message.
//   - DELIVER (H4: the leader tells its followers a message committed with
//     its gts). The commit was decided on acks already durable at a quorum;
//     the leader's own delivery record only remembers it.
//   - DELIVERED, the answer to the client, announces the same commit: a
//     crash of the leader after it loses nothing a recovery would not
//     deliver again with the same gts (the simulator's reply check holds
//     the answer to the first delivery, sim/workload.go). A node running
//     a state machine holds it until the delivery is applied: its answer
//     carries the result (a deferring leader applies before its sync,
//     node/pipeline.go; sim/early.go checks that such deliveries are
//     final).
//   - HEARTBEAT: liveness only.
//   - READ_INDEX: a leader's request that its followers confirm its
//     ballot for a linearizable read, carrying the ballot and a round
//     number, as a heartbeat carries the ballot. It promises nothing
//     about the leader's durable state: the round's acks (READ_INDEX_ACK,
//     each after its acker's sync) are what confirm the leadership, and
//     the read index stays with the leader.
//
// Everything else waits for the sync: every acknowledgement (ACCEPT_ACK,
// NEW_LEADER_ACK, NEW_STATE_ACK, READ_INDEX_ACK: each promises the
// acker's durable state) and the recovery messages (NEW_LEADER carries a
// ballot that must be durable before anyone joins it; NEW_STATE an
// adopted state). The simulator's torn crashes let exactly these messages
// leave before the crash (sim.ProtocolSpec.SendsBeforeSync), and its
// pipelined storage (sim.Config.Pipeline) lets them leave before the sync
// of several Readys, so the swarm checks the argument.

// The leader's own ack. A leader's acceptance of its own proposal is an
// ACCEPT_ACK it sends itself, and it leaves through the Ready like any
// other (not stepped within the Step that made it): the driver steps it
// back once the Ready's records are durable, so the leader's own
// acceptance counts towards a commit only once durable, as a follower's
// does. A driver that syncs each Ready before it steps more input would
// be safe either way; one that steps input before its records are
// durable (amcast.Pipeline: a node's deferred leader syncs, the
// simulator's pipelined storage) is safe only this way, since a DELIVER
// leaves before the sync: a commit that counted a not-yet-durable own
// acceptance could be announced, then lost with the leader's log.

// SendsBeforeSync reports whether m may leave before the records of the
// Ready it is in are durable.
func SendsBeforeSync(m wire.Message) bool {
	switch m.(type) {
	case *wire.Accept, *wire.Deliver, *wire.Heartbeat, *wire.Delivered, *wire.ReadIndex:
		return true
	}
	return false
}

// MayWait reports whether m may wait, after its Ready, for the sender's
// next message to the same peer (or a short time bound the driver keeps),
// instead of leaving at once: nobody waits on it. DELIVER is the one (H4):
// the client has its answer from the leader, and a follower's delivery
// feeds only its own application, collection and catch-up. A driver that
// holds it must keep the link FIFO (P8, P9): hold only the last messages
// to a peer, and send whatever follows behind them. As the commit index
// of the Raft paper's leader does, the news then rides with the next
// ACCEPT or heartbeat instead of waking every follower on its own
// (node/lazy.go).
func MayWait(m wire.Message) bool {
	_, ok := m.(*wire.Deliver)
	return ok
}
