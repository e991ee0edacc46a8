package transport

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-dev/weft/wire"
)

// DropReason says why Send dropped a message.
type DropReason uint8

// Drop reasons.
const (
	// DropQueueFull: the destination's send queue was full.
	DropQueueFull DropReason = iota
	// DropNoRoute: the destination is neither a configured peer, this
	// process, nor a connected client.
	DropNoRoute
	// DropTooLarge: the encoded message exceeds the frame limit.
	DropTooLarge
	// DropNotMessage: the message is a durable record (wire.KindRec...).
	DropNotMessage
	// DropClosed: the transport is closed.
	DropClosed
	// DropDisconnected: the message was queued for a client whose
	// connection then closed.
	DropDisconnected
	// DropQueueBytes: the destination's send queue was at its byte
	// budget (Config.QueueBytes, Config.ClientQueueBytes).
	DropQueueBytes
	dropEnd
)

var dropNames = [...]string{
	DropQueueFull:    "queue_full",
	DropNoRoute:      "no_route",
	DropTooLarge:     "too_large",
	DropNotMessage:   "not_message",
	DropClosed:       "closed",
	DropDisconnected: "disconnected",
	DropQueueBytes:   "queue_bytes",
}

func (d DropReason) String() string {
	if d < dropEnd {
		return dropNames[d]
	}
	return fmt.Sprintf("drop_%d", uint8(d))
}

// Stats is a snapshot of a Transport's counters. Frame and byte counts
// cover frames after the handshake (message and close frames), whole
// frames including their overhead; messages a process sends to itself are
// not counted there. Maps hold only non-zero counts.
type Stats struct {
	FramesIn, FramesOut uint64
	BytesIn, BytesOut   uint64
	// Writes counts the write calls that carried FramesOut: a writer
	// writes every frame queued since its last write at once, so
	// FramesOut/Writes is the batching achieved.
	Writes uint64
	// Reads counts the read system calls of the readers of raw TCP
	// connections after their handshake (Linux; rawframes_linux.go):
	// FramesIn/Reads is the batching received. ReadsRecvmsg counts those
	// made with recvmsg(2), which /proc/<pid>/io's syscr leaves out.
	Reads, ReadsRecvmsg uint64
	// Dials counts outbound connection attempts, Connects the ones whose
	// handshake succeeded, and Reconnects the Connects to a peer after its
	// first.
	Dials, Connects, Reconnects uint64
	// Accepts counts inbound handshakes this transport accepted.
	Accepts uint64
	// Drops counts messages Send dropped, by reason.
	Drops map[DropReason]uint64
	// Rejected counts inbound handshakes this transport refused or that
	// failed (timeout, truncated), by reason.
	Rejected map[Reason]uint64
	// DialFailures counts failed outbound attempts, by reason: dial errors,
	// handshakes refused by the peer (under the peer's reason) and bad
	// answers.
	DialFailures map[Reason]uint64
	// ConnErrors counts established connections dropped because of bad
	// input or a network error, by reason. Clean closes are not counted.
	ConnErrors map[Reason]uint64
	// Peers describes each configured peer (this process excluded).
	Peers map[wire.ProcID]PeerStats
	// Clients is the number of connected clients, and ClientQueueBytes
	// the bytes waiting in their reply queues.
	Clients          int
	ClientQueueBytes int64
	// Conns is the number of inbound connections counted against
	// Config.MaxConns (handshaking, or clients), ConnsPeak its highest
	// value.
	Conns, ConnsPeak int
}

// PeerStats describes the outbound stream to one peer.
type PeerStats struct {
	Addr      string
	Connected bool
	// Queued is the number of messages waiting in the send queue,
	// QueuedBytes their encoded size, and PeakBytes the highest
	// QueuedBytes so far.
	Queued                 int
	QueuedBytes, PeakBytes int64
	// Dropped counts messages dropped because the queue was full (in
	// messages or in bytes).
	Dropped uint64
	// Connects counts successful handshakes with the peer.
	Connects uint64
	// LastFailure is why the last attempt to connect failed (ReasonNone
	// before any failure and once connected): ReasonClusterName says the
	// address answers for another cluster.
	LastFailure Reason
}

type counters struct {
	framesIn, framesOut atomic.Uint64
	bytesIn, bytesOut   atomic.Uint64
	writes              atomic.Uint64
	reads, recvmsgs     atomic.Uint64
	dials, connects     atomic.Uint64
	reconnects, accepts atomic.Uint64
	drops               [dropEnd]atomic.Uint64
	rejected            [reasonEnd]atomic.Uint64
	dialFailures        [reasonEnd]atomic.Uint64
	connErrors          [reasonEnd]atomic.Uint64
}

func (c *counters) snapshot() Stats {
	s := Stats{
		FramesIn:     c.framesIn.Load(),
		FramesOut:    c.framesOut.Load(),
		BytesIn:      c.bytesIn.Load(),
		BytesOut:     c.bytesOut.Load(),
		Writes:       c.writes.Load(),
		Reads:        c.reads.Load(),
		ReadsRecvmsg: c.recvmsgs.Load(),
		Dials:        c.dials.Load(),
		Connects:     c.connects.Load(),
		Reconnects:   c.reconnects.Load(),
		Accepts:      c.accepts.Load(),
	}
	s.Drops = nonZero[DropReason](c.drops[:])
	s.Rejected = nonZero[Reason](c.rejected[:])
	s.DialFailures = nonZero[Reason](c.dialFailures[:])
	s.ConnErrors = nonZero[Reason](c.connErrors[:])
	return s
}

func nonZero[K ~uint8](cs []atomic.Uint64) map[K]uint64 {
	m := map[K]uint64{}
	for i := range cs {
		if v := cs[i].Load(); v != 0 {
			m[K(i)] = v
		}
	}
	return m
}

// logLimiter lets one log line through per key and interval and counts the
// ones it suppresses, so a peer that keeps sending garbage (or a peer that
// stays down) cannot flood the log.
type logLimiter struct {
	mu    sync.Mutex
	every time.Duration
	seen  map[string]*logEntry
}

type logEntry struct {
	last       time.Time
	suppressed uint64
}

// maxLogKeys bounds the limiter's memory; when full it starts over.
const maxLogKeys = 4096

// allow reports whether a line for key may be logged now, and how many were
// suppressed since the last one.
func (l *logLimiter) allow(key string, now time.Time) (bool, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil || len(l.seen) >= maxLogKeys {
		l.seen = map[string]*logEntry{}
	}
	e := l.seen[key]
	if e == nil {
		l.seen[key] = &logEntry{last: now}
		return true, 0
	}
	if now.Sub(e.last) < l.every {
		e.suppressed++
		return false, 0
	}
	n := e.suppressed
	e.last, e.suppressed = now, 0
	return true, n
}

// logLimited logs msg at level for (who, r) at most once per LogEvery.
func (t *Transport) logLimited(level slog.Level, who string, r Reason, msg string, args ...any) {
	ok, suppressed := t.limiter.allow(who+"|"+r.String(), time.Now())
	if !ok {
		return
	}
	args = append(args, "peer", who, "reason", r.String())
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	t.log.Log(t.ctx, level, msg, args...)
}
