package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-dev/weft/wire"
)

// Defaults for zero Config fields.
const (
	DefaultQueueSize        = 4096
	DefaultQueueBytes       = 8 << 20
	DefaultClientQueueBytes = 256 << 10
	DefaultMaxConns         = 1024
	DefaultMaxConnsPerHost  = 256
	DefaultIdleTimeout      = time.Minute
	DefaultPingEvery        = 5 * time.Second
	DefaultDialBackoffMin   = 50 * time.Millisecond
	DefaultDialBackoffMax   = 5 * time.Second
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultWriteTimeout     = 10 * time.Second
	DefaultLogEvery         = time.Minute
)

// closeGrace is how long Close lets writers send their close frames before
// it closes their connections under them.
const closeGrace = 250 * time.Millisecond

// keepAlive is the TCP keep-alive setting of every connection: an idle
// connection to a vanished host is noticed after about 30 s.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// Send errors. Send wraps them; test with errors.Is.
var (
	// ErrClosed: the transport is closed.
	ErrClosed = errors.New("transport: closed")
	// ErrNoRoute: the destination is neither a peer, this process, nor a
	// connected client.
	ErrNoRoute = errors.New("transport: no route to destination")
	// ErrQueueFull: the destination's send queue is full; the message was
	// dropped.
	ErrQueueFull = errors.New("transport: send queue full")
	// ErrTooLarge: the encoded message exceeds Config.MaxFrame.
	ErrTooLarge = errors.New("transport: message too large")
	// ErrNotMessage: durable records (wire.KindRec...) are not sent.
	ErrNotMessage = errors.New("transport: not a network message")
)

// Config configures a Transport. Zero fields take the defaults above.
type Config struct {
	// ClusterName must be equal on both ends of every connection; 1 to
	// MaxClusterName bytes.
	ClusterName string
	// Self is this process's id.
	Self wire.ProcID
	// Role is this process's role. RoleNode (also the meaning of zero)
	// listens and dials its peers; RoleClient dials the nodes in Peers
	// and receives their replies on the same connections, and does not
	// listen.
	Role Role
	// Listen is the TCP address to listen on ("127.0.0.1:0" picks a
	// port; see Addr). A node needs Listen or Listener; a client must set
	// neither.
	Listen string
	// Listener, if set, is used instead of Listen. The Transport owns it
	// and closes it.
	Listener net.Listener
	// Peers maps peer ids to their addresses. A node dials every entry
	// but Self (which may be listed, so one map can serve a whole
	// cluster); a client dials every entry.
	Peers map[wire.ProcID]string
	// Allow decides whether an inbound handshake from id with role is
	// accepted; it must be safe for concurrent use. Nil accepts the ids
	// in Peers other than Self as nodes, and ids that are neither in Peers
	// nor Self as clients.
	Allow func(id wire.ProcID, role Role) bool
	// Handler receives every inbound message with its sender (required).
	// It is called from the connection's reader goroutine: calls for one
	// sender are sequential and in the order the sender sent them (also
	// across reconnections), calls for different senders may be
	// concurrent. A slow Handler slows that sender down (TCP flow control
	// and then its queue drops); it must not call Close. The message is
	// the Handler's to keep.
	Handler func(from wire.ProcID, m wire.Message)
	// MaxFrame limits the payload of a frame, hence the encoded size of a
	// message, in bytes, in both directions (default DefaultMaxFrame,
	// between MinMaxFrame and MaxMaxFrame).
	MaxFrame int
	// QueueSize is the capacity of each destination's send queue, in
	// messages (default DefaultQueueSize). Send drops when it is full.
	QueueSize int
	// QueueBytes bounds the encoded bytes waiting in the send queue of
	// each peer (and of this process to itself), default
	// DefaultQueueBytes; ClientQueueBytes bounds each connected client's
	// queue of replies, default DefaultClientQueueBytes. Send drops a
	// message that would exceed the bound (ErrQueueFull, counted as
	// DropQueueBytes); an empty queue takes one message of any size up to
	// MaxFrame. The protocols tolerate the loss: they retransmit.
	QueueBytes, ClientQueueBytes int
	// MaxConns bounds the inbound connections that are handshaking or
	// belong to clients, in all (default DefaultMaxConns), and
	// MaxConnsPerHost those from one remote IP address (default
	// DefaultMaxConnsPerHost). A connection over either bound is refused
	// at once (ReasonTooManyConns). Connections of configured peers stop
	// counting once their handshake succeeds: there is at most one per
	// peer. Negative: no bound.
	MaxConns, MaxConnsPerHost int
	// IdleTimeout closes an accepted connection, after its handshake,
	// that carries nothing (no message, no ping) for this long (default
	// DefaultIdleTimeout; negative: never). Every writer pings after
	// PingEvery without traffic (default DefaultPingEvery; negative:
	// never), so a live peer or client is never idle; PingEvery must be
	// below the IdleTimeout of the processes this one dials.
	IdleTimeout, PingEvery time.Duration
	// DialBackoffMin and DialBackoffMax bound the wait before redialing a
	// peer: it starts at Min, doubles after each failed attempt up to Max,
	// and each wait is drawn uniformly from [d/2, d] (jitter). After a
	// connection is lost the next dial waits about Min.
	DialBackoffMin, DialBackoffMax time.Duration
	// HandshakeTimeout bounds dialing plus the handshake, on both sides.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds a write of queued frames (up to 1 MiB of them);
	// a connection that makes no progress for that long is dropped and
	// redialed. The deadline is pushed forward at most every
	// WriteTimeout/8, so a stuck connection goes after between 7/8 of it
	// and all of it.
	WriteTimeout time.Duration
	// Seed seeds the backoff jitter (with Self and the peer id mixed in).
	Seed uint64
	// Key, if set, is the cluster key (MinKeyLen to MaxKeyLen bytes):
	// every connection then proves on both sides that it holds the same
	// key (see handshake.go), and processes without it are refused. Nil:
	// no key; processes with one are refused.
	Key []byte
	// TLS, if set, runs every connection over mutual TLS 1.3 and binds
	// each side's id and role to its certificate (see tls.go). It can be
	// combined with Key.
	TLS *TLS
	// Logger receives connection events and bad-input reports (default:
	// discard).
	Logger *slog.Logger
	// LogEvery is the minimum interval between two log lines about the
	// same peer (or remote host) and reason (default DefaultLogEvery).
	LogEvery time.Duration
}

func (c *Config) validate() error {
	if c.Role == 0 {
		c.Role = RoleNode
	}
	if !c.Role.valid() {
		return fmt.Errorf("transport: unknown role %d", c.Role)
	}
	if n := len(c.ClusterName); n == 0 || n > MaxClusterName {
		return fmt.Errorf("transport: cluster name must be 1 to %d bytes, got %d", MaxClusterName, n)
	}
	if n := len(c.Key); c.Key != nil && (n < MinKeyLen || n > MaxKeyLen) {
		return fmt.Errorf("transport: cluster key must be %d to %d bytes, got %d", MinKeyLen, MaxKeyLen, n)
	}
	if c.Handler == nil {
		return errors.New("transport: Config.Handler is required")
	}
	switch {
	case c.Role == RoleNode && c.Listen == "" && c.Listener == nil:
		return errors.New("transport: a node needs Listen or Listener")
	case c.Role == RoleClient && (c.Listen != "" || c.Listener != nil):
		return errors.New("transport: a client does not listen")
	}
	for id, addr := range c.Peers {
		if addr == "" && !(id == c.Self && c.Role == RoleNode) {
			return fmt.Errorf("transport: peer %d has no address", id)
		}
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	if c.MaxFrame < MinMaxFrame || c.MaxFrame > MaxMaxFrame {
		return fmt.Errorf("transport: MaxFrame %d outside [%d, %d]", c.MaxFrame, MinMaxFrame, MaxMaxFrame)
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.QueueSize < 0 {
		return fmt.Errorf("transport: negative QueueSize %d", c.QueueSize)
	}
	if c.QueueBytes == 0 {
		c.QueueBytes = DefaultQueueBytes
	}
	if c.ClientQueueBytes == 0 {
		c.ClientQueueBytes = DefaultClientQueueBytes
	}
	if c.QueueBytes < 0 || c.ClientQueueBytes < 0 {
		return fmt.Errorf("transport: negative QueueBytes %d or ClientQueueBytes %d", c.QueueBytes, c.ClientQueueBytes)
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConnsPerHost == 0 {
		c.MaxConnsPerHost = DefaultMaxConnsPerHost
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.PingEvery == 0 {
		c.PingEvery = DefaultPingEvery
	}
	if c.IdleTimeout > 0 && c.PingEvery > 0 && c.Role == RoleNode && c.PingEvery >= c.IdleTimeout {
		return fmt.Errorf("transport: PingEvery %v must be below IdleTimeout %v (peers would time out each other)", c.PingEvery, c.IdleTimeout)
	}
	if c.DialBackoffMin == 0 {
		c.DialBackoffMin = DefaultDialBackoffMin
	}
	if c.DialBackoffMax == 0 {
		c.DialBackoffMax = max(DefaultDialBackoffMax, c.DialBackoffMin)
	}
	if c.DialBackoffMin < 0 || c.DialBackoffMax < c.DialBackoffMin {
		return fmt.Errorf("transport: dial backoff [%v, %v] is not a range", c.DialBackoffMin, c.DialBackoffMax)
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.HandshakeTimeout < 0 || c.WriteTimeout < 0 {
		return errors.New("transport: negative timeout")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if err := c.validateTLS(); err != nil {
		return err
	}
	c.Peers = maps.Clone(c.Peers) // the caller may reuse its map
	if c.LogEvery == 0 {
		c.LogEvery = DefaultLogEvery
	}
	return nil
}

// Transport connects a process to its peers over TCP. See the package
// documentation.
type Transport struct {
	cfg    Config
	log    *slog.Logger
	ln     net.Listener
	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	closed atomic.Bool
	wg     sync.WaitGroup

	peers map[wire.ProcID]*peer // fixed after New
	local *queue                // messages to Self

	connMu sync.Mutex
	conns  map[net.Conn]struct{} // every open connection, closed by Close

	inMu    sync.RWMutex
	inbound map[wire.ProcID]*inConn // accepted connections by remote id

	slots    slots        // inbound connections counted against MaxConns (caps.go)
	refusing atomic.Int32 // refusals being answered (caps.go)

	batchRounds atomic.Uint64 // Batch rounds so far (batch.go)

	st      counters
	limiter logLimiter
}

// New starts a Transport: it listens (nodes), and starts dialing every
// peer. Messages sent before a peer is reachable wait in its queue.
func New(cfg Config) (*Transport, error) {
	if err := cfg.validate(); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	t := newTransport(cfg)
	if cfg.Role == RoleNode {
		t.ln = cfg.Listener
		if t.ln == nil {
			lc := net.ListenConfig{KeepAliveConfig: keepAlive}
			ln, err := lc.Listen(t.ctx, "tcp", cfg.Listen)
			if err != nil {
				t.cancel()
				return nil, fmt.Errorf("transport: %w", err)
			}
			t.ln = ln
		}
	}
	if t.ln != nil {
		t.wg.Add(1)
		go t.acceptLoop()
	}
	for _, p := range t.peers {
		t.wg.Add(1)
		go p.run()
	}
	t.wg.Add(1)
	go t.localLoop()
	return t, nil
}

// newTransport builds a Transport from a validated cfg, without starting
// anything.
func newTransport(cfg Config) *Transport {
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		cfg:     cfg,
		log:     cfg.Logger.With("self", uint32(cfg.Self)),
		ctx:     ctx,
		cancel:  cancel,
		peers:   map[wire.ProcID]*peer{},
		local:   newQueue(cfg.QueueSize, cfg.QueueBytes),
		conns:   map[net.Conn]struct{}{},
		inbound: map[wire.ProcID]*inConn{},
		limiter: logLimiter{every: cfg.LogEvery},
	}
	for id, addr := range cfg.Peers {
		if id == cfg.Self && cfg.Role == RoleNode {
			continue
		}
		mix := cfg.Seed ^ uint64(cfg.Self)<<32
		t.peers[id] = &peer{
			t:    t,
			id:   id,
			addr: addr,
			q:    newQueue(cfg.QueueSize, cfg.QueueBytes),
			rng:  rand.New(rand.NewPCG(mix, uint64(id))),
		}
	}
	return t
}

// Addr returns the listener's address, or nil for a client.
func (t *Transport) Addr() net.Addr {
	if t.ln == nil {
		return nil
	}
	return t.ln.Addr()
}

// Send queues m for to and returns at once; it never blocks. The
// destination is a peer, this process itself (delivered to the Handler by
// a local goroutine, in order), or a client connected to this node
// (replies go back on the client's connection). m is encoded before Send
// returns, so the caller may reuse it. Messages to one destination leave
// in the order of the Send calls (from one goroutine); any of them may be
// lost, when the queue is full or the connection breaks, but they are
// never reordered or duplicated by the transport.
//
// Errors (all counted in Stats.Drops) wrap ErrClosed, ErrNoRoute,
// ErrQueueFull, ErrTooLarge or ErrNotMessage. Send panics if m is nil or
// not a wire type, like wire.Append. It is safe for concurrent use.
func (t *Transport) Send(to wire.ProcID, m wire.Message) error {
	q, err := t.admit(to, m)
	if err != nil {
		return err
	}
	n := wire.Size(m)
	if n > t.cfg.MaxFrame {
		return t.tooLarge(m, n)
	}
	if r, ok := q.putMessage(m, n+FrameOverhead); !ok {
		return t.dropFull(q, r)
	}
	return nil
}

// admit returns the queue of to, or why m cannot be sent there (counted).
func (t *Transport) admit(to wire.ProcID, m wire.Message) (*queue, error) {
	if t.closed.Load() {
		t.st.drops[DropClosed].Add(1)
		return nil, ErrClosed
	}
	if k := m.Kind(); k >= wire.KindRecBallot {
		t.st.drops[DropNotMessage].Add(1)
		return nil, fmt.Errorf("%w: %s", ErrNotMessage, k)
	}
	q := t.route(to)
	if q == nil {
		t.st.drops[DropNoRoute].Add(1)
		return nil, fmt.Errorf("%w: %d", ErrNoRoute, to)
	}
	return q, nil
}

// dropFull counts a message dropped because q is full, in frames or in
// bytes. The error is not wrapped: this is the overload path, it should
// not allocate.
func (t *Transport) dropFull(q *queue, r DropReason) error {
	q.dropped.Add(1)
	t.st.drops[r].Add(1)
	return ErrQueueFull
}

func (t *Transport) route(to wire.ProcID) *queue {
	if p := t.peers[to]; p != nil {
		return p.q
	}
	if to == t.cfg.Self {
		return t.local
	}
	t.inMu.RLock()
	c := t.inbound[to]
	t.inMu.RUnlock()
	if c != nil && c.q != nil {
		return c.q
	}
	return nil
}

// Close stops the transport: it stops listening, sends a close frame on
// the connections it writes (best effort), closes every connection and
// waits for all its goroutines. Queued messages are dropped. Close is
// idempotent; Send after Close returns ErrClosed.
func (t *Transport) Close() error {
	if !t.closed.CompareAndSwap(false, true) {
		t.wg.Wait()
		return nil
	}
	t.cancel()
	var err error
	if t.ln != nil {
		err = t.ln.Close()
	}
	// Wake the readers; writers notice ctx, send a close frame and close
	// their connections. Whatever is still running after closeGrace (a
	// writer stuck on a peer that does not read) is cut off.
	t.connMu.Lock()
	for c := range t.conns {
		closeRead(c)
	}
	t.connMu.Unlock()
	done := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(closeGrace)
	select {
	case <-done:
	case <-timer.C:
	}
	timer.Stop()
	t.connMu.Lock()
	for c := range t.conns {
		c.Close()
	}
	clear(t.conns)
	t.connMu.Unlock()
	<-done
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Stats returns a snapshot of the counters.
func (t *Transport) Stats() Stats {
	s := t.st.snapshot()
	s.Peers = make(map[wire.ProcID]PeerStats, len(t.peers))
	for id, p := range t.peers {
		s.Peers[id] = PeerStats{
			Addr:        p.addr,
			Connected:   p.connected.Load(),
			Queued:      int(p.q.queued.Load()),
			QueuedBytes: p.q.bytes.Load(),
			PeakBytes:   p.q.peak.Load(),
			Dropped:     p.q.dropped.Load(),
			Connects:    p.connects.Load(),
			LastFailure: Reason(p.lastFail.Load()),
		}
	}
	t.inMu.RLock()
	for _, c := range t.inbound {
		if c.role == RoleClient {
			s.Clients++
			s.ClientQueueBytes += c.q.bytes.Load()
		}
	}
	t.inMu.RUnlock()
	s.Conns, s.ConnsPeak = t.slots.load()
	return s
}

// track registers an open connection so Close can close it. It reports
// false (and the caller must close c) if the transport is closed.
func (t *Transport) track(c net.Conn) bool {
	t.connMu.Lock()
	defer t.connMu.Unlock()
	if t.closed.Load() {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

// release closes c and forgets it.
func (t *Transport) release(c net.Conn) {
	c.Close()
	t.connMu.Lock()
	delete(t.conns, c)
	t.connMu.Unlock()
}

// closeRead wakes a reader blocked on c without stopping writes.
func closeRead(c net.Conn) {
	if tc, ok := tcpOf(c); ok {
		tc.CloseRead()
		return
	}
	c.SetReadDeadline(time.Unix(1, 0))
}

// sleep waits for d or until Close; it reports false on Close.
func (t *Transport) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-t.ctx.Done():
		return false
	}
}

// localLoop delivers the messages this process sends to itself.
func (t *Transport) localLoop() {
	defer t.wg.Done()
	var spare []byte
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-t.local.wake:
		}
		b, _ := t.local.take(spare)
		for off := 0; off < len(b); {
			end := off + FrameOverhead + int(binary.BigEndian.Uint32(b[off:]))
			m, err := wire.Decode(b[off+FrameHeaderLen : end-FrameTrailerLen])
			if err != nil {
				// Send encoded it; Decode must accept it.
				panic(fmt.Sprintf("transport: decoding own message: %v", err))
			}
			t.cfg.Handler(t.cfg.Self, m)
			off = end
		}
		spare = nil
		if cap(b) <= retainWriteBuf {
			spare = b[:0]
		}
	}
}
