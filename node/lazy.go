package node

import "github.com/weft-dev/weft/wire"

// Commit news rides along (issue #14; docs/batching.md, "Commit news
// rides along").
//
// A WbCast leader tells its followers that a message committed (DELIVER,
// H4) as soon as it commits. Nobody waits on that message: the client has
// its answer from the leader, and a follower's delivery only feeds its
// own application, its collection and catch-up, none of them on a
// client's path. At low load it was a frame of its own to every follower
// of the group, waking each for nothing else: two of the eight or so
// process wake-ups per multicast to one group, on a machine where a
// wake-up is the largest cost of a lightly loaded agent (22 read/write
// calls and 8.5 context switches per multicast at 1 client). The Raft
// paper's leader does the same: its commit index reaches the followers in
// its next AppendEntries, heartbeats included (etcd-raft instead sends an
// append as soon as the index moves).
//
// So the node holds the messages its protocol says may wait
// (protocolSpec.mayWait; WbCast's DELIVER) when they are the last ones a
// Ready has for their peer, and sends them in front of the next message
// to that peer (a later Ready's ACCEPTs, a heartbeat) or at the next tick,
// whichever comes first. The rules (links stay FIFO, at most
// amcast.HeldBytes per peer) are amcast.Held's, which the simulator's
// swarm runs too (sim.Config.Hold); a tick (10 ms by default) bounds the
// wait. The baselines have no such message: FT-Skeen's and FastCast's
// members learn a decision from each other's PaxosAccepted votes, which
// are not held.

// sendHolding sends msgs as send does, behind what is held for their
// recipients, holding back what may wait (amcast.Held.Route), and returns how
// many of msgs it held.
func (n *Node) sendHolding(msgs []wire.Envelope) (held int) {
	if n.proto.mayWait == nil {
		n.send(msgs)
		return 0
	}
	send, held := n.held.Route(msgs, n.cfg.Topology, n.proto.mayWait)
	n.stats.Held += uint64(held)
	n.send(send)
	return held
}

// flushHeld sends everything held: at every tick, and when the loop ends.
func (n *Node) flushHeld() {
	send := n.held.Flush()
	n.stats.HeldByTick += uint64(len(send))
	n.send(send)
}
