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

// queue is a bounded FIFO of frames for one destination. Send never
// blocks on it; the channel is never closed (a writer that stops simply
// leaves it).
type queue struct {
	ch      chan *frame
	dropped atomic.Uint64
}

func newQueue(n int) *queue { return &queue{ch: make(chan *frame, n)} }

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
		case f = <-q.ch:
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
	}
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
func (t *Transport) readLoop(fr *FrameReader, from wire.ProcID, mode readMode) (Reason, error) {
	for {
		typ, payload, err := fr.Next()
		if err != nil {
			return classify(err), err
		}
		t.st.framesIn.Add(1)
		t.st.bytesIn.Add(uint64(len(payload) + FrameOverhead))
		switch typ {
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
