package amcast

import (
	"iter"

	"github.com/weft-dev/weft/wire"
)

// Protocol-level batching (issue #14 item 2).
//
// A driver (the simulator, a node) that handles one Ready sends its
// messages through Coalesce: the messages of the Ready from one replica to
// another become one wire.Batch, in their order. Nothing waits for a batch
// to fill: a batch is exactly what one Ready holds, and a Ready is closed
// when the machine's input queue is drained (the node steps what arrived
// while the previous Ready was being handled, up to its MaxBatch, then
// handles the Ready). At low load a Ready holds one message per peer and
// nothing changes (no batch, no delay): the latency stays 3δ / 5δ. At high
// load a leader's ACCEPTs for every MULTICAST it took in one pass reach each
// member as one BATCH, the member's ACCEPT_ACKs for that batch come back as
// one, and the DELIVERs of a pass leave as one: the per-message costs of a
// frame, a decode call, an inbox hand-off and a loop wake-up are paid once
// per batch.
//
// A batch is a container, not a protocol message: the receiver steps its
// messages one by one (Unbatch), each with the batch's sender, as if they
// had arrived back to back on the link, which FIFO links allow; losing a
// batch is losing each of its messages, a loss the protocols already
// tolerate. No protocol core changes, so the baselines batch the same way
// and the comparison stays fair.

// DefaultBatchBytes bounds the encoded messages of one batch: well under
// the transport's frame cap (wire.DefaultMaxFrame), so a batch never comes
// near it, and small enough that one batch does not hold a link for long.
const DefaultBatchBytes = 256 << 10

// batchEntryOverhead is the most a message adds to a batch's encoding
// beyond its own size: its length prefix (a uvarint of at most 5 bytes for
// a frame-sized message).
const batchEntryOverhead = 5

// Coalesce returns msgs with the messages to each recipient that batch
// reports true for (replicas: clients do not take batches) combined into
// wire.Batch messages, each at most maxBytes (DefaultBatchBytes if 0)
// encoded, in their order. A recipient with a single message (or a message
// too large to share a batch) gets it as it was. Each recipient's batches
// take the place of its first message, so recipients stay in the order
// they first appear; when consecutive recipients get the same messages (a
// leader's ACCEPTs and DELIVERs to every member of its group), they get
// the same *wire.Batch, which a driver encodes once (transport.Batch).
//
// msgs is not modified; the result is a new slice unless nothing batches,
// when it is msgs itself.
func Coalesce(msgs []wire.Envelope, batch func(to wire.ProcID) bool, maxBytes int) []wire.Envelope {
	var c Coalescer
	return c.Coalesce(msgs, batch, maxBytes)
}

// Coalescer is Coalesce with its working slices kept from one call to
// the next: what a call returns, and the message lists of the batches in
// it, are valid only until the next call. A driver that encodes a Ready's
// messages as it sends them (a node: transport.Batch.Send) uses one per
// loop, which spared the slices Coalesce made for every Ready, about 1.3%
// of a loaded agent's CPU in allocating and collecting them
// (docs/batching.md). The batches themselves are new values each call: a
// transport.Batch tells a message sent again from a new one by its
// pointer. A driver that keeps messages after sending them (the
// simulator's network) calls Coalesce. The zero value is ready to use.
type Coalescer struct {
	dests []coalesceDest
	out   []wire.Envelope
}

// coalesceDest is one recipient's messages in a call, and its batches.
type coalesceDest struct {
	from, to wire.ProcID
	msgs     []wire.Message
	out      []wire.Message // its batches (or lone messages)
	shared   bool           // out is the recipient's before it (not its own buffer)
	done     bool           // out is in the result
}

// Coalesce is the package's Coalesce, into c's buffers.
func (c *Coalescer) Coalesce(msgs []wire.Envelope, batch func(to wire.ProcID) bool, maxBytes int) []wire.Envelope {
	if len(msgs) < 2 {
		return msgs
	}
	if maxBytes <= 0 {
		maxBytes = DefaultBatchBytes
	}
	c.release()
	// Each recipient's messages, in order, by its first appearance. A
	// Ready has few recipients (its process's peers): a linear search, no
	// map. The recipients' slices are kept for the next call.
	dests := c.dests[:0]
	find := func(from, to wire.ProcID) int {
		for i := range dests {
			if dests[i].to == to && dests[i].from == from {
				return i
			}
		}
		return -1
	}
	batched := false
	for _, e := range msgs {
		if !batch(e.To) {
			continue
		}
		i := find(e.From, e.To)
		if i < 0 {
			i = len(dests)
			if i < cap(dests) {
				dests = dests[:i+1]
				d := &dests[i]
				*d = coalesceDest{from: e.From, to: e.To, msgs: d.msgs[:0], out: d.out[:0]}
			} else {
				dests = append(dests, coalesceDest{from: e.From, to: e.To})
			}
		} else {
			batched = true
		}
		dests[i].msgs = append(dests[i].msgs, e.Msg)
	}
	c.dests = dests
	if !batched {
		return msgs // no recipient has two messages
	}
	for i := range dests {
		if i > 0 && sameMessages(dests[i].msgs, dests[i-1].msgs) {
			dests[i].out, dests[i].shared = dests[i-1].out, true // the same values, encoded once downstream
			continue
		}
		dests[i].out = chunk(dests[i].out[:0], dests[i].msgs, maxBytes)
	}
	out := c.out[:0]
	for _, e := range msgs {
		if !batch(e.To) {
			out = append(out, e)
			continue
		}
		d := &dests[find(e.From, e.To)]
		if d.done {
			continue
		}
		d.done = true
		for _, m := range d.out {
			out = append(out, wire.Envelope{From: e.From, To: e.To, Msg: m})
		}
	}
	c.out = out
	return out
}

// release ends the last call's results, at the start of the next call:
// it clears the kept slices' references to that call's messages (the
// entries a smaller Ready does not overwrite would otherwise pin them for
// good) and drops the batch lists recipients shared.
func (c *Coalescer) release() {
	for i := range c.dests {
		d := &c.dests[i]
		clear(d.msgs)
		if d.shared {
			d.out, d.shared = nil, false // its predecessor's buffer
		} else {
			clear(d.out)
		}
	}
	clear(c.out)
}

// chunk appends msgs split into batches of at most maxBytes encoded (a
// batch of one is its message alone) to out.
func chunk(out []wire.Message, msgs []wire.Message, maxBytes int) []wire.Message {
	start, size := 0, 0
	cut := func(end int) {
		switch end - start {
		case 0:
		case 1:
			out = append(out, msgs[start])
		default:
			out = append(out, &wire.Batch{Msgs: msgs[start:end:end]})
		}
		start, size = end, 0
	}
	for i, m := range msgs {
		n := wire.Size(m) + batchEntryOverhead
		if size+n > maxBytes || i-start == wire.MaxBatchMsgs {
			cut(i)
		}
		size += n
	}
	cut(len(msgs))
	return out
}

// sameMessages reports whether a and b hold the same message values (the
// same pointers) in the same order.
func sameMessages(a, b []wire.Message) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Unbatch yields the messages env carries, each as an envelope from env's
// sender: a batch's messages in order, any other message as it is.
func Unbatch(env wire.Envelope) iter.Seq[wire.Envelope] {
	return func(yield func(wire.Envelope) bool) {
		b, ok := env.Msg.(*wire.Batch)
		if !ok {
			yield(env)
			return
		}
		for _, m := range b.Msgs {
			if !yield(wire.Envelope{From: env.From, To: env.To, Msg: m}) {
				return
			}
		}
	}
}
