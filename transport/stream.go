package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/weft-dev/weft/wire"
)

// writeChunk bounds one write call of a writer: a large backlog goes out
// in pieces of this size, each with its own chance to meet the write
// deadline (Config.WriteTimeout bounds a piece, not the whole backlog).
const writeChunk = 1 << 20

// retainWriteBuf is the largest buffer a writer keeps between two takes
// (a larger one, grown by one burst, is left to the garbage collector),
// so an idle destination holds at most two of them: its queue's and its
// writer's spare (as much as the bufio.Writer each writer used to hold).
const retainWriteBuf = 64 << 10

// closeFrame is what a writer sends when the transport closes.
var closeFrame = AppendFrame(nil, FrameClose, AppendNotice(nil, Notice{Reason: ReasonShutdown, Text: "shutting down"}))

// writeLoop drains q into conn until stop is closed, the transport closes
// or a write fails. It takes every frame queued so far at once (queue.take)
// and writes them with one call: natural batching under load, one write
// per message when idle, and one write per Batch.Flush for a loop that
// queues through a Batch. On Close it sends a close frame.
//
// The write deadline is pushed forward at most every WriteTimeout/8 (a
// write then has between 7/8 of WriteTimeout and all of it), not before
// every write: under load the writer writes thousands of times a second.
// The ping timer is not reset on every write either: when it fires, it
// pings if nothing was written for PingEvery, and otherwise waits for the
// rest of PingEvery after the last write.
func (t *Transport) writeLoop(conn net.Conn, q *queue, stop <-chan struct{}) (Reason, error) {
	var ping *time.Timer
	var pingC <-chan time.Time
	if t.cfg.PingEvery > 0 {
		ping = time.NewTimer(t.cfg.PingEvery)
		defer ping.Stop()
		pingC = ping.C
	}
	dl := writeDeadline{conn: conn, timeout: t.cfg.WriteTimeout}
	var spare []byte
	last := time.Now() // of the last write
	for {
		select {
		case <-t.ctx.Done():
			t.goodbye(conn)
			return ReasonNone, nil
		case <-stop:
			if t.ctx.Err() != nil {
				t.goodbye(conn)
			}
			return ReasonNone, nil
		case <-pingC:
			if quiet := time.Since(last); quiet < t.cfg.PingEvery {
				ping.Reset(t.cfg.PingEvery - quiet)
				continue
			}
			if err := t.write(conn, &dl, pingFrame, 1); err != nil {
				return classify(err), err
			}
			last = time.Now()
			ping.Reset(t.cfg.PingEvery)
			continue
		case <-q.wake:
		}
		// Yield once before taking the queue (not a timer: with nothing
		// else runnable it returns at once), so the goroutines that woke
		// with this one (a client's workers, the node's loop) queue their
		// frames too and one write carries them all. Measured at 90 shared
		// clients without fsync, alternated twice: 25,544 and 25,442
		// against 20,303 and 23,060 multicasts/s, 2.3 against 3.3
		// read/write system calls per multicast; no change at 1 client
		// (docs/batching.md, "The writer yields").
		runtime.Gosched()
		b, frames := q.take(spare)
		if frames == 0 {
			spare = b
			continue
		}
		if err := t.write(conn, &dl, b, frames); err != nil {
			return classify(err), err
		}
		last = time.Now()
		spare = nil
		if cap(b) <= retainWriteBuf {
			spare = b[:0]
		}
	}
}

// write writes b, frames whole frames, in pieces of at most writeChunk,
// and counts them once all are written.
func (t *Transport) write(conn net.Conn, dl *writeDeadline, b []byte, frames int) error {
	for off := 0; off < len(b); {
		end := min(off+writeChunk, len(b))
		if err := dl.arm(); err != nil {
			return err
		}
		if _, err := conn.Write(b[off:end]); err != nil {
			return err
		}
		t.st.writes.Add(1)
		off = end
	}
	t.st.framesOut.Add(uint64(frames))
	t.st.bytesOut.Add(uint64(len(b)))
	return nil
}

// writeDeadline pushes a connection's write deadline forward, at most
// every timeout/8 (see writeLoop).
type writeDeadline struct {
	conn    net.Conn
	timeout time.Duration
	armed   time.Time
}

func (d *writeDeadline) arm() error {
	now := time.Now()
	if !d.armed.IsZero() && now.Sub(d.armed) < d.timeout/8 {
		return nil
	}
	if err := d.conn.SetWriteDeadline(now.Add(d.timeout)); err != nil {
		return err
	}
	d.armed = now
	return nil
}

// pingFrame keeps an idle connection alive (see Config.IdleTimeout).
var pingFrame = AppendFrame(nil, FramePing, nil)

// goodbye sends a close frame, best effort, within closeGrace.
func (t *Transport) goodbye(conn net.Conn) {
	conn.SetWriteDeadline(time.Now().Add(closeGrace))
	if _, err := conn.Write(closeFrame); err == nil {
		t.st.writes.Add(1)
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
	// arm pushes the idle deadline forward, before the first frame and
	// after each.
	arm := func() error {
		if idle <= 0 {
			return nil
		}
		if t.ctx.Err() != nil {
			return &readStop{ReasonNone, nil} // closing: don't undo closeRead's deadline
		}
		if now := time.Now(); now.Sub(armed) >= idle/8 {
			if err := conn.SetReadDeadline(now.Add(idle)); err != nil {
				return &readStop{classify(err), err}
			}
			armed = now
		}
		return nil
	}
	handle := func(typ FrameType, payload []byte) error {
		t.st.framesIn.Add(1)
		t.st.bytesIn.Add(uint64(len(payload) + FrameOverhead))
		switch typ {
		case FramePing:
			if len(payload) != 0 {
				return &readStop{ReasonBadHandshake, fmt.Errorf("ping frame with %d bytes of payload", len(payload))}
			}
		case FrameMessage:
			if mode == modeSendOnly {
				return &readStop{ReasonUnexpectedFrame, errors.New("message frame on a send-only connection")}
			}
			m, err := wire.Decode(payload)
			if err != nil {
				return &readStop{ReasonBadMessage, err}
			}
			k := m.Kind()
			if k >= wire.KindRecBallot {
				return &readStop{ReasonBadMessage, fmt.Errorf("durable record %s sent as a message", k)}
			}
			if mode == modeFromClient && k != wire.KindMulticast && k != wire.KindViewRequest && k != wire.KindRead {
				return &readStop{ReasonForbiddenKind, fmt.Errorf("clients may send only %s, %s and %s, got %s", wire.KindMulticast, wire.KindViewRequest, wire.KindRead, k)}
			}
			t.cfg.Handler(from, m)
		case FrameClose:
			n, err := DecodeNotice(payload)
			if err != nil {
				return &readStop{ReasonBadHandshake, fmt.Errorf("close frame: %w", err)}
			}
			return &readStop{ReasonNone, fmt.Errorf("peer closed the connection: %s: %q", n.Reason, n.Text)}
		default:
			return &readStop{ReasonUnexpectedFrame, fmt.Errorf("unexpected %s frame after the handshake", typ)}
		}
		return arm()
	}
	err := arm()
	if err == nil {
		if fe, ok := conn.(frameEacher); ok {
			err = fe.eachFrame(fr.br, fr.maxPayload, &t.st, handle) // rawframes_linux.go
		} else {
			err = fr.each(handle)
		}
	}
	if s, ok := err.(*readStop); ok {
		return s.reason, s.err
	}
	if idle > 0 && errors.Is(err, os.ErrDeadlineExceeded) && t.ctx.Err() == nil {
		return ReasonIdle, fmt.Errorf("nothing received for %v", idle)
	}
	return classify(err), err
}

// readStop is how readLoop's frame handler ends the loop: with why, and
// the error to report (nil for a clean stop).
type readStop struct {
	reason Reason
	err    error
}

func (s *readStop) Error() string {
	if s.err == nil {
		return "stopped"
	}
	return s.err.Error()
}

// frameEacher is a connection that pushes its frames to a handler instead
// of being read through a FrameReader: a raw TCP connection on Linux
// (rawframes_linux.go), whose reads then need no extra read to find the
// socket empty.
type frameEacher interface {
	eachFrame(br *bufio.Reader, maxPayload int, st *counters, fn func(FrameType, []byte) error) error
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
