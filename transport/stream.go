package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-dev/weft/wire"
)

// frame is one encoded frame waiting in a send queue.
type frame struct{ b []byte }

// maxPooledFrame is the largest frame buffer returned to the pool.
const maxPooledFrame = 64 << 10

var framePool = sync.Pool{New: func() any { return &frame{b: make([]byte, 0, 256)} }}

func getFrame() *frame { return framePool.Get().(*frame) }

func putFrame(f *frame) {
	if cap(f.b) <= maxPooledFrame {
		f.b = f.b[:0]
		framePool.Put(f)
	}
}

// queue is a bounded FIFO of frames for one destination, bounded twice:
// in frames (the channel's capacity, Config.QueueSize) and in bytes
// (maxBytes: Config.QueueBytes for peers and this process,
// Config.ClientQueueBytes for a client's replies). The byte bound is what
// bounds memory: 4,096 frames of up to MaxFrame each would be gigabytes.
// An empty queue admits one frame of any size up to MaxFrame, so a budget
// below MaxFrame never makes a large message unsendable. Send never blocks
// on a queue; the channel is never closed (a writer that stops simply
// leaves it).
type queue struct {
	ch       chan *frame
	maxBytes int64
	bytes    atomic.Int64 // encoded bytes of the frames in ch (and being put in)
	peak     atomic.Int64 // highest bytes seen
	dropped  atomic.Uint64
}

func newQueue(n int, maxBytes int) *queue {
	return &queue{ch: make(chan *frame, n), maxBytes: int64(maxBytes)}
}

// reserve accounts n more bytes, or reports false (and accounts nothing)
// when they would take a non-empty queue over its byte budget.
func (q *queue) reserve(n int) bool {
	v := q.bytes.Add(int64(n))
	if v > q.maxBytes && v != int64(n) {
		q.bytes.Add(-int64(n))
		return false
	}
	for p := q.peak.Load(); v > p && !q.peak.CompareAndSwap(p, v); p = q.peak.Load() {
	}
	return true
}

// took releases the bytes of a frame taken out of ch.
func (q *queue) took(f *frame) { q.bytes.Add(-int64(len(f.b))) }

// writeBufSize is the size of a connection's bufio.Writer.
const writeBufSize = 64 << 10

// maxBatch and maxBatchBytes bound what is written between two flushes
// (and two write deadline refreshes).
const (
	maxBatch      = 1024
	maxBatchBytes = 1 << 20
)

// closeFrame is what a writer sends when the transport closes.
var closeFrame = AppendFrame(nil, FrameClose, AppendNotice(nil, Notice{Reason: ReasonShutdown, Text: "shutting down"}))

// writeLoop drains q into conn until stop is closed, the transport closes
// or a write fails. Frames that are queued together are written with one
// flush: natural batching under load, one write per message when idle. On
// Close it sends a close frame.
func (t *Transport) writeLoop(conn net.Conn, bw *bufio.Writer, q *queue, stop <-chan struct{}) (Reason, error) {
	bw.Reset(conn)
	defer bw.Reset(nil)
	// A connection that carried nothing for PingEvery gets a ping, so the
	// reader's idle timeout (Config.IdleTimeout) only ever cuts dead or
	// silent connections.
	var ping *time.Timer
	var pingC <-chan time.Time
	if t.cfg.PingEvery > 0 {
		ping = time.NewTimer(t.cfg.PingEvery)
		defer ping.Stop()
		pingC = ping.C
	}
	for {
		var f *frame
		select {
		case <-t.ctx.Done():
			t.goodbye(conn, bw)
			return ReasonNone, nil
		case <-stop:
			if t.ctx.Err() != nil {
				t.goodbye(conn, bw)
			}
			return ReasonNone, nil
		case <-pingC:
			if err := t.ping(conn, bw); err != nil {
				return classify(err), err
			}
			ping.Reset(t.cfg.PingEvery)
			continue
		case f = <-q.ch:
			q.took(f)
		}
		if err := conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout)); err != nil {
			putFrame(f)
			return classify(err), err
		}
		var frames, bytes uint64
		for {
			_, err := bw.Write(f.b)
			n := len(f.b)
			putFrame(f)
			if err != nil {
				t.st.framesOut.Add(frames)
				t.st.bytesOut.Add(bytes)
				return classify(err), err
			}
			frames++
			bytes += uint64(n)
			if frames >= maxBatch || bytes >= maxBatchBytes {
				break
			}
			more := false
			select {
			case f = <-q.ch:
				q.took(f)
				more = true
			default:
			}
			if !more {
				break
			}
		}
		err := bw.Flush()
		t.st.framesOut.Add(frames)
		t.st.bytesOut.Add(bytes)
		if err != nil {
			return classify(err), err
		}
		if ping != nil {
			ping.Reset(t.cfg.PingEvery)
		}
	}
}

// pingFrame keeps an idle connection alive (see Config.IdleTimeout).
var pingFrame = AppendFrame(nil, FramePing, nil)

// ping writes a ping frame.
func (t *Transport) ping(conn net.Conn, bw *bufio.Writer) error {
	if err := conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout)); err != nil {
		return err
	}
	bw.Write(pingFrame)
	if err := bw.Flush(); err != nil {
		return err
	}
	t.st.framesOut.Add(1)
	t.st.bytesOut.Add(uint64(len(pingFrame)))
	return nil
}

// goodbye sends a close frame, best effort, within closeGrace.
func (t *Transport) goodbye(conn net.Conn, bw *bufio.Writer) {
	conn.SetWriteDeadline(time.Now().Add(closeGrace))
	bw.Write(closeFrame)
	if bw.Flush() == nil {
		t.st.framesOut.Add(1)
		t.st.bytesOut.Add(uint64(len(closeFrame)))
	}
}

// readMode says which frames and messages a connection may carry towards
// us.
type readMode uint8

const (
	// modeSendOnly: our outbound connection to a node; the acceptor never
	// sends messages on it.
	modeSendOnly readMode = iota
	// modeFromNode: a node's connection to us.
	modeFromNode
	// modeFromClient: a client's connection to us; MULTICAST only.
	modeFromClient
	// modeReplies: our (client's) connection to a node, which replies on
	// it.
	modeReplies
)

// readLoop reads frames from one connection and hands its messages to the
// Handler until the stream ends or carries something it must not. It
// returns ReasonNone for a clean end (end of stream between frames, a
// close frame, or our own close), otherwise why the connection must go.
// With idle > 0, a connection that carries no frame for idle is cut
// (ReasonIdle); the deadline is pushed forward at most every idle/8, so the
// cut comes between 7/8 idle and idle after the last frame.
func (t *Transport) readLoop(conn net.Conn, fr *FrameReader, from wire.ProcID, mode readMode, idle time.Duration) (Reason, error) {
	var armed time.Time
	for {
		if idle > 0 {
			if t.ctx.Err() != nil {
				return ReasonNone, nil // closing: don't undo closeRead's deadline
			}
			if now := time.Now(); now.Sub(armed) >= idle/8 {
				if err := conn.SetReadDeadline(now.Add(idle)); err != nil {
					return classify(err), err
				}
				armed = now
			}
		}
		typ, payload, err := fr.Next()
		if err != nil {
			if idle > 0 && errors.Is(err, os.ErrDeadlineExceeded) && t.ctx.Err() == nil {
				return ReasonIdle, fmt.Errorf("nothing received for %v", idle)
			}
			return classify(err), err
		}
		t.st.framesIn.Add(1)
		t.st.bytesIn.Add(uint64(len(payload) + FrameOverhead))
		switch typ {
		case FramePing:
			if len(payload) != 0 {
				return ReasonBadHandshake, fmt.Errorf("ping frame with %d bytes of payload", len(payload))
			}
		case FrameMessage:
			if mode == modeSendOnly {
				return ReasonUnexpectedFrame, errors.New("message frame on a send-only connection")
			}
			m, err := wire.Decode(payload)
			if err != nil {
				return ReasonBadMessage, err
			}
			k := m.Kind()
			if k >= wire.KindRecBallot {
				return ReasonBadMessage, fmt.Errorf("durable record %s sent as a message", k)
			}
			if mode == modeFromClient && k != wire.KindMulticast && k != wire.KindViewRequest {
				return ReasonForbiddenKind, fmt.Errorf("clients may send only %s and %s, got %s", wire.KindMulticast, wire.KindViewRequest, k)
			}
			t.cfg.Handler(from, m)
		case FrameClose:
			n, err := DecodeNotice(payload)
			if err != nil {
				return ReasonBadHandshake, fmt.Errorf("close frame: %w", err)
			}
			return ReasonNone, fmt.Errorf("peer closed the connection: %s: %q", n.Reason, n.Text)
		default:
			return ReasonUnexpectedFrame, fmt.Errorf("unexpected %s frame after the handshake", typ)
		}
	}
}

// classify maps an I/O or framing error to a Reason; ReasonNone means a
// clean end (EOF between frames, or the connection was closed locally).
func classify(err error) Reason {
	switch {
	case err == nil:
		return ReasonNone
	case errors.Is(err, ErrTruncated), errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonTruncated
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		return ReasonNone
	case errors.Is(err, ErrFrameTooLarge):
		return ReasonFrameTooLarge
	case errors.Is(err, ErrChecksum):
		return ReasonChecksum
	case errors.Is(err, ErrFrameType):
		return ReasonFrameType
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ReasonTimeout
	}
	return ReasonIO
}
