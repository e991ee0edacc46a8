package node

import (
	"slices"

	"github.com/weft-dev/weft/wire"
)

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
// whichever comes first. Links stay FIFO (pitfalls P8 and P9 of the spec
// depend on it): only the tail of a peer's messages is held, and whatever
// is sent to the peer afterwards goes behind it. Holding a message is
// what a slower link would do to it; the protocols tolerate any delay,
// and a tick (10 ms by default) bounds this one, as heldBytes bounds what
// is held per peer. The baselines have no such message: FT-Skeen's and
// FastCast's members learn a decision from each other's PaxosAccepted
// votes, which are not held.

// heldBytes bounds the encoded messages held for one peer: past it, the
// peer's messages all go at once.
const heldBytes = 64 << 10

// heldOut is what a node holds, by peer. Its methods are pure: they say
// what to send, and the node sends it.
type heldOut struct {
	by  map[wire.ProcID]*heldPeer
	n   int // messages held
	buf holdBuffers
}

// heldPeer is what is held for one peer, oldest first.
type heldPeer struct {
	msgs  []wire.Envelope
	bytes int
}

// holdBuffers is route's scratch, reused from pass to pass.
type holdBuffers struct {
	out, send []wire.Envelope
	hold      []bool
	closed    []wire.ProcID
}

// mayHold reports whether env may wait for the next message to its
// recipient: its protocol says so, and the recipient is a replica (a
// client's answers never wait). Only for a protocol with mayWait.
func (n *Node) mayHold(env wire.Envelope) bool {
	return n.proto.mayWait(env.Msg) && n.cfg.Topology.IsReplica(env.To)
}

// sendHolding sends msgs as send does, behind what is held for their
// recipients, holding back what may wait (heldOut.route), and returns how
// many of msgs it held.
func (n *Node) sendHolding(msgs []wire.Envelope) (held int) {
	if n.proto.mayWait == nil {
		n.send(msgs)
		return 0
	}
	send, held := n.held.route(msgs, n.mayHold)
	n.stats.Held += uint64(held)
	n.send(send)
	return held
}

// flushHeld sends everything held: at every tick, and when the loop ends.
func (n *Node) flushHeld() {
	send := n.held.flush()
	n.stats.HeldByTick += uint64(len(send))
	n.send(send)
}

// route returns what to send now of msgs, in order: what is held for
// their recipients first, then msgs, without each recipient's trailing run
// of messages that may wait (may), which it holds instead, unless that
// would hold more than heldBytes for the recipient (it then sends them
// last). held is how many of msgs it held (messages held before and held
// again are not counted twice). The result is valid until the next call.
func (h *heldOut) route(msgs []wire.Envelope, may func(wire.Envelope) bool) (send []wire.Envelope, held int) {
	if h.by == nil {
		h.by = map[wire.ProcID]*heldPeer{}
	}
	clear(h.buf.send[:cap(h.buf.send)]) // the last call's result
	// out: what is held for the recipients of msgs, then msgs; each
	// recipient's messages keep their order.
	out := h.buf.out[:0]
	if h.n > 0 {
		for _, p := range h.by {
			if len(p.msgs) > 0 && hasRecipient(msgs, p.msgs[0].To) {
				out = append(out, p.msgs...)
				h.release(p)
			}
		}
	}
	pre := len(out) // out[:pre] were held before this call
	out = append(out, msgs...)
	// From the end back: a recipient's messages are held while they may
	// wait, up to the last one that may not (closed).
	hold := append(h.buf.hold[:0], make([]bool, len(out))...) // no allocation once grown (TestHeldRouteAllocs)
	closed := h.buf.closed[:0]
	for i := len(out) - 1; i >= 0; i-- {
		env := out[i]
		if slices.Contains(closed, env.To) {
			continue
		}
		if !may(env) {
			closed = append(closed, env.To)
			continue
		}
		hold[i] = true
	}
	send = h.buf.send[:0]
	for i, env := range out {
		if !hold[i] {
			send = append(send, env)
			continue
		}
		p := h.by[env.To]
		if p == nil {
			p = &heldPeer{}
			h.by[env.To] = p
		}
		p.msgs = append(p.msgs, env)
		p.bytes += wire.Size(env.Msg)
		h.n++
		if i >= pre {
			held++ // held now for the first time
		}
	}
	// A recipient held for past heldBytes gets it all now, behind its
	// other messages.
	for _, p := range h.by {
		if p.bytes > heldBytes {
			send = append(send, p.msgs...)
			h.release(p)
		}
	}
	clear(out)
	h.buf.out, h.buf.hold, h.buf.closed, h.buf.send = out[:0], hold[:0], closed[:0], send[:0]
	return send, held
}

// flush returns everything held and holds nothing more. The result is
// valid until the next call.
func (h *heldOut) flush() []wire.Envelope {
	clear(h.buf.send[:cap(h.buf.send)]) // the last call's result
	out := h.buf.send[:0]
	if h.n == 0 {
		return out
	}
	for _, p := range h.by {
		out = append(out, p.msgs...)
		h.release(p)
	}
	h.buf.send = out[:0]
	return out
}

// hasRecipient reports whether msgs has a message to to.
func hasRecipient(msgs []wire.Envelope, to wire.ProcID) bool {
	for _, e := range msgs {
		if e.To == to {
			return true
		}
	}
	return false
}

// release forgets what p holds (sent, or about to be).
func (h *heldOut) release(p *heldPeer) {
	h.n -= len(p.msgs)
	clear(p.msgs)
	p.msgs, p.bytes = p.msgs[:0], 0
}
