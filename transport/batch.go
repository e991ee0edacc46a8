package transport

import (
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// Batch queues messages like Send, for a goroutine that sends many at a
// time (a node's loop handling one Ready), at a lower cost per message:
//
//   - the writers are woken once, by Flush, not once per message, so the
//     frames a batch queues for one destination leave with one write call
//     (and one system call) instead of trickling out as they are queued;
//   - a message sent to several destinations in a row (the same
//     wire.Message value, as a protocol's ACCEPT to every member of a
//     group) is encoded and checksummed once, and its frame copied into
//     each destination's queue.
//
// Admission is Send's: the same bounds, drops, counters and errors, at
// Send time. Messages a batch queued wait for Flush (or for the next
// write of an unbatched Send to the same destination). The messages must
// not change until Flush. A Batch is not safe for concurrent use; other
// goroutines may Send meanwhile.
type Batch struct {
	t     *Transport
	mark  uint64   // this round's id (queue.mark)
	dirty []*queue // the queues this round put frames into
	last  wire.Message
	enc   []byte // last's frame
}

// NewBatch returns an empty Batch.
func (t *Transport) NewBatch() *Batch {
	return &Batch{t: t, mark: t.batchRounds.Add(1)}
}

// Send queues m for to, like Transport.Send, until Flush.
func (b *Batch) Send(to wire.ProcID, m wire.Message) error {
	t := b.t
	q, err := t.admit(to, m)
	if err != nil {
		return err
	}
	if b.last == nil || m != b.last {
		// m is a wire type if it got here (admit called m.Kind; Size
		// panics on others), so comparing it with the last one, also a
		// wire pointer type, cannot panic.
		b.last = nil
		if n := wire.Size(m); n > t.cfg.MaxFrame {
			return t.tooLarge(m, n)
		}
		b.enc = AppendMessageFrame(b.enc[:0], m)
		b.last = m
	}
	r, ok, first := q.putFrame(b.enc, b.mark)
	if !ok {
		return t.dropFull(q, r)
	}
	if first {
		b.dirty = append(b.dirty, q)
	}
	return nil
}

// Flush wakes the writers of every destination the batch queued messages
// for since the last Flush, and forgets the messages.
func (b *Batch) Flush() {
	b.last = nil
	if len(b.dirty) == 0 {
		return // nothing queued this round: it goes on
	}
	for i, q := range b.dirty {
		q.flush()
		b.dirty[i] = nil
	}
	b.dirty = b.dirty[:0]
	if cap(b.enc) > retainWriteBuf {
		b.enc = nil
	}
	b.mark = b.t.batchRounds.Add(1)
}

// tooLarge counts and reports a message over Config.MaxFrame.
func (t *Transport) tooLarge(m wire.Message, n int) error {
	t.st.drops[DropTooLarge].Add(1)
	return fmt.Errorf("%w: %s of %d bytes, limit %d", ErrTooLarge, m.Kind(), n, t.cfg.MaxFrame)
}
