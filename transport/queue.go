package transport

import (
	"sync"
	"sync/atomic"

	"github.com/weft-dev/weft/wire"
)

// queue is the send queue of one destination: the encoded frames waiting
// for its writer, appended in order to one buffer. It is bounded twice: in
// frames (maxFrames, Config.QueueSize) and in bytes (maxBytes:
// Config.QueueBytes for peers and this process, Config.ClientQueueBytes
// for a client's replies). The byte bound is what bounds memory: 4,096
// frames of up to MaxFrame each would be gigabytes. An empty queue admits
// one frame of any size up to MaxFrame, so a budget below MaxFrame never
// makes a large message unsendable. Send never blocks on a queue.
//
// The writer takes the whole buffer at once and leaves its spare one in
// its place (take), so every frame queued since its last write leaves
// with one write call, and a sender pays a mutex and an append per frame,
// not a channel hand-off. A token in wake tells the writer there is
// something to take: Send puts one with the first frame after a take; a
// Batch puts none until its Flush, so the frames of a whole loop pass
// leave together. The writer's buffer, being written, holds at most as
// much again: a destination costs at most twice its budget (plus one
// frame).
type queue struct {
	maxFrames int
	maxBytes  int64
	wake      chan struct{} // capacity 1

	mu     sync.Mutex
	buf    []byte // the frames waiting, in order
	frames int    // how many
	woken  bool   // a token was put for the frames in buf
	mark   uint64 // the Batch round that last queued here (Batch.Send)

	queued  atomic.Int64 // frames, for Stats
	bytes   atomic.Int64 // len(buf), for Stats
	peak    atomic.Int64 // highest bytes seen (written under mu)
	dropped atomic.Uint64
}

func newQueue(frames, maxBytes int) *queue {
	return &queue{maxFrames: frames, maxBytes: int64(maxBytes), wake: make(chan struct{}, 1)}
}

// admit reports why a frame of n bytes does not fit, if it does not.
// q.mu is held.
func (q *queue) admit(n int) (DropReason, bool) {
	switch {
	case q.frames >= q.maxFrames:
		return DropQueueFull, false
	case len(q.buf) > 0 && int64(len(q.buf)+n) > q.maxBytes:
		return DropQueueBytes, false
	}
	return 0, true
}

// added accounts a frame just appended to buf and, with wake, tells the
// writer. q.mu is held.
func (q *queue) added(wake bool) {
	q.frames++
	b := int64(len(q.buf))
	q.queued.Store(int64(q.frames))
	q.bytes.Store(b)
	if b > q.peak.Load() {
		q.peak.Store(b)
	}
	if wake {
		q.signal()
	}
}

// signal puts the writer's token, once per take. q.mu is held.
func (q *queue) signal() {
	if q.woken || q.frames == 0 {
		return
	}
	q.woken = true
	select {
	case q.wake <- struct{}{}:
	default: // a token from an earlier take is still there: it will do
	}
}

// putMessage encodes m (of n bytes, frame included) into the queue and
// wakes the writer.
func (q *queue) putMessage(m wire.Message, n int) (DropReason, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.admit(n)
	if ok {
		q.buf = AppendMessageFrame(q.buf, m)
		q.added(true)
	}
	return r, ok
}

// putFrame appends an encoded frame for the Batch round mark; first
// reports whether it is the round's first frame here (the Batch must
// then flush this queue). The writer is not woken.
func (q *queue) putFrame(f []byte, mark uint64) (r DropReason, ok, first bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r, ok = q.admit(len(f)); ok {
		q.buf = append(q.buf, f...)
		q.added(false)
		first = q.mark != mark
		q.mark = mark
	}
	return r, ok, first
}

// flush wakes the writer for the frames a Batch queued.
func (q *queue) flush() {
	q.mu.Lock()
	q.signal()
	q.mu.Unlock()
}

// take returns every queued frame (and how many there are), leaving spare,
// emptied, as the queue's buffer.
func (q *queue) take(spare []byte) ([]byte, int) {
	q.mu.Lock()
	b, n := q.buf, q.frames
	q.buf, q.frames, q.woken = spare[:0], 0, false
	q.queued.Store(0)
	q.bytes.Store(0)
	q.mu.Unlock()
	return b, n
}
