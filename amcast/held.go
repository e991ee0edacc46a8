package amcast

import (
	"slices"

	"github.com/weft-dev/weft/wire"
)

// Messages that may wait (issue #14; docs/batching.md, "Commit news rides
// along").
//
// Some messages nobody waits on: a WbCast leader's DELIVER tells a
// follower that a message committed, while the client already has its
// answer from the leader and the follower's delivery feeds only its own
// application, collection and catch-up (wbcast.MayWait). Sent as soon as
// they exist, at low load they are frames of their own that wake every
// follower for nothing else. A driver (the node, the simulator) may hold
// them instead and send them in front of the next message to the same
// peer, or at its next tick, whichever comes first, as the Raft paper's
// leader lets its commit index ride in its next AppendEntries.
//
// Held keeps what is held and says what to send; the driver sends it.
// Links stay FIFO (the spec's pitfalls P8 and P9 depend on it): only a
// peer's trailing messages of a Ready are held, and whatever is sent to
// the peer afterwards goes behind them. Holding a message is what a slower
// link would do to it; the protocols tolerate any delay, the driver's tick
// bounds this one, and HeldBytes bounds what is held per peer. Everything
// Held does is deterministic (peers in the order they were first held), so
// the simulator's runs stay reproducible.

// HeldBytes bounds the encoded messages held for one peer: past it, the
// peer's messages all go at once.
const HeldBytes = 64 << 10

// Held is what a driver holds, by peer. The zero value holds nothing and
// is ready to use. Not safe for concurrent use.
type Held struct {
	peers []*heldPeer // every peer ever held for, in first-held order
	n     int         // messages held
	buf   heldBuffers
}

// heldPeer is what is held for one peer, oldest first.
type heldPeer struct {
	to    wire.ProcID
	msgs  []wire.Envelope
	bytes int
}

// heldBuffers is Route's scratch, reused from call to call.
type heldBuffers struct {
	out, send []wire.Envelope
	hold      []bool
	closed    []wire.ProcID
}

// Len is the number of messages held.
func (h *Held) Len() int { return h.n }

// Route returns what to send now of msgs, in order per recipient: what is
// held for their recipients first, then msgs, without each recipient's
// trailing run of messages that may wait, which it holds instead,
// unless that would hold more than HeldBytes for the recipient (it then
// sends them last). held is how many of msgs it held (messages held
// before and held again are not counted twice). The result is valid until
// the next call of Route or Flush. A message may wait if its protocol
// says so (mayWait) and it goes to a replica of topo: a client's answers
// never wait.
func (h *Held) Route(msgs []wire.Envelope, topo *Topology, mayWait func(wire.Message) bool) (send []wire.Envelope, held int) {
	clear(h.buf.send[:cap(h.buf.send)]) // the last call's result
	// out: what is held for the recipients of msgs, then msgs; each
	// recipient's messages keep their order.
	out := h.buf.out[:0]
	if h.n > 0 {
		for _, p := range h.peers {
			if len(p.msgs) > 0 && hasRecipient(msgs, p.to) {
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
		if !topo.IsReplica(env.To) || !mayWait(env.Msg) {
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
		p := h.peer(env.To)
		p.msgs = append(p.msgs, env)
		p.bytes += wire.Size(env.Msg)
		h.n++
		if i >= pre {
			held++ // held now for the first time
		}
	}
	// A recipient held for past HeldBytes gets it all now, behind its
	// other messages.
	for _, p := range h.peers {
		if p.bytes > HeldBytes {
			send = append(send, p.msgs...)
			h.release(p)
		}
	}
	clear(out)
	h.buf.out, h.buf.hold, h.buf.closed, h.buf.send = out[:0], hold[:0], closed[:0], send[:0]
	return send, held
}

// Flush returns everything held and holds nothing more: a driver calls it
// at each tick, and a node when it stops. The result is valid until the
// next call of Route or Flush.
func (h *Held) Flush() []wire.Envelope {
	clear(h.buf.send[:cap(h.buf.send)]) // the last call's result
	out := h.buf.send[:0]
	if h.n == 0 {
		return out
	}
	for _, p := range h.peers {
		out = append(out, p.msgs...)
		h.release(p)
	}
	h.buf.send = out[:0]
	return out
}

// Drop forgets everything held without returning it: the driver's process
// crashed, and what it held is lost with it.
func (h *Held) Drop() {
	for _, p := range h.peers {
		h.release(p)
	}
}

// peer returns the entry of to, added if new. A driver's peers are its
// group's other members: a linear scan is cheaper than a map.
func (h *Held) peer(to wire.ProcID) *heldPeer {
	for _, p := range h.peers {
		if p.to == to {
			return p
		}
	}
	p := &heldPeer{to: to}
	h.peers = append(h.peers, p)
	return p
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
func (h *Held) release(p *heldPeer) {
	h.n -= len(p.msgs)
	clear(p.msgs)
	p.msgs, p.bytes = p.msgs[:0], 0
}
