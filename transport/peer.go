package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/weft-dev/weft/wire"
)

// peer is the outbound stream to one configured peer: a send queue and the
// goroutine that dials, handshakes, drains the queue into the connection
// and redials with backoff when the connection is lost.
type peer struct {
	t         *Transport
	id        wire.ProcID
	addr      string
	q         *queue
	rng       *rand.Rand // backoff jitter; used only by run
	connected atomic.Bool
	connects  atomic.Uint64
	lastFail  atomic.Uint32 // Reason of the last failed dial, ReasonNone once connected
}

func (p *peer) who() string { return fmt.Sprintf("node %d", p.id) }

// run owns the peer's connections, one at a time, until Close.
func (p *peer) run() {
	t := p.t
	defer t.wg.Done()
	var backoff time.Duration
	for {
		if backoff > 0 && !t.sleep(p.jitter(backoff)) {
			return
		}
		if t.ctx.Err() != nil {
			return
		}
		conn, br, err := p.dial()
		if err != nil {
			if t.ctx.Err() != nil {
				return
			}
			backoff = p.nextBackoff(backoff)
			continue
		}
		p.serve(conn, br)
		backoff = t.cfg.DialBackoffMin
	}
}

func (p *peer) nextBackoff(d time.Duration) time.Duration {
	if d <= 0 {
		return p.t.cfg.DialBackoffMin
	}
	return min(2*d, p.t.cfg.DialBackoffMax)
}

// jitter draws a wait uniformly from [d/2, d].
func (p *peer) jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + time.Duration(p.rng.Int64N(int64(d-half)+1))
}

// dial connects and handshakes. The returned connection is tracked.
func (p *peer) dial() (net.Conn, *bufio.Reader, error) {
	t := p.t
	t.st.dials.Add(1)
	d := net.Dialer{Timeout: t.cfg.HandshakeTimeout, KeepAliveConfig: keepAlive}
	conn, err := d.DialContext(t.ctx, "tcp", p.addr)
	if err != nil {
		p.dialFailed(ReasonDial, err)
		return nil, nil, err
	}
	conn = wrapRaw(conn)
	if t.cfg.TLS != nil {
		conn = t.tlsClient(conn)
	}
	if !t.track(conn) {
		conn.Close()
		return nil, nil, ErrClosed
	}
	br, err := p.handshake(conn)
	if err != nil {
		t.release(conn)
		return nil, nil, err
	}
	return conn, br, nil
}

// handshake runs the dialer's side of the handshake on conn.
func (p *peer) handshake(conn net.Conn) (*bufio.Reader, error) {
	t := p.t
	fail := func(r Reason, err error) (*bufio.Reader, error) {
		p.dialFailed(r, err)
		return nil, err
	}
	if tc, ok := tcpOf(conn); ok {
		tc.SetNoDelay(true)
	}
	if err := conn.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout)); err != nil {
		return fail(handshakeReason(err), err)
	}
	if tc, ok := conn.(*tlsConn); ok {
		if r, err := t.tlsDialHandshake(tc, p.id, p.addr); r != ReasonNone {
			return fail(r, err)
		}
	}
	mine := AppendHello(nil, Hello{WireVersion: wire.Version, Role: t.cfg.Role, ID: t.cfg.Self, To: p.id,
		Cluster: t.cfg.ClusterName, Keyed: t.cfg.Key != nil, Nonce: NewNonce()})
	if _, err := conn.Write(AppendFrame(AppendPreamble(nil), FrameHello, mine)); err != nil {
		return fail(handshakeReason(err), fmt.Errorf("sending hello: %w", err))
	}
	br := bufio.NewReaderSize(conn, readBufSize)
	var pre [PreambleLen]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil {
		return fail(handshakeReason(err), fmt.Errorf("reading preamble: %w", err))
	}
	if r, detail := checkPreamble(pre[:]); r != ReasonNone {
		return fail(r, errors.New(detail))
	}
	fr := NewFrameReader(br, maxHandshakePayload)
	typ, payload, err := fr.Next()
	if err != nil {
		return fail(handshakeReason(err), fmt.Errorf("reading answer: %w", err))
	}
	switch typ {
	case FrameReject:
		n, err := DecodeNotice(payload)
		if err != nil {
			return fail(ReasonBadHandshake, err)
		}
		r := n.Reason
		if r == ReasonNone || r >= reasonEnd {
			r = ReasonBadHandshake
		}
		return fail(r, fmt.Errorf("peer rejected the handshake: %s: %s", n.Reason, n.Text))
	case FrameWelcome:
		h, err := DecodeHello(payload)
		switch {
		case err != nil:
			return fail(ReasonBadHandshake, err)
		case h.WireVersion != wire.Version:
			return fail(ReasonWireVersion, fmt.Errorf("peer speaks wire version %d, want %d", h.WireVersion, wire.Version))
		case h.Cluster != t.cfg.ClusterName:
			return fail(ReasonClusterName, fmt.Errorf("peer is in cluster %q", h.Cluster))
		case h.ID != p.id || h.Role != RoleNode || h.To != t.cfg.Self:
			return fail(ReasonWrongPeer, fmt.Errorf("%s answers as %s %d (to %d)", p.addr, h.Role, h.ID, h.To))
		case h.Keyed != (t.cfg.Key != nil):
			return fail(ReasonAuth, fmt.Errorf("%s has a cluster key: %t, this process: %t", p.addr, h.Keyed, t.cfg.Key != nil))
		}
		if t.cfg.Key != nil {
			welcome := append([]byte(nil), payload...)
			typ, proof, err := fr.Next()
			switch {
			case err != nil:
				return fail(handshakeReason(err), fmt.Errorf("reading the peer's key proof: %w", err))
			case typ != FrameAuth:
				return fail(ReasonBadHandshake, fmt.Errorf("%s frame instead of AUTH", typ))
			case !checkMAC(t.cfg.Key, proofAcceptor, mine, welcome, proof):
				return fail(ReasonAuth, fmt.Errorf("%s does not hold this cluster key", p.addr))
			}
			if _, err := conn.Write(AppendFrame(nil, FrameAuth, authMAC(t.cfg.Key, proofDialer, mine, welcome))); err != nil {
				return fail(handshakeReason(err), fmt.Errorf("sending the key proof: %w", err))
			}
		}
	default:
		return fail(ReasonBadHandshake, fmt.Errorf("unexpected %s frame in the handshake", typ))
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return fail(handshakeReason(err), err)
	}
	return br, nil
}

// handshakeReason classifies an I/O error during a handshake, where even a
// clean end of stream is a failure.
func handshakeReason(err error) Reason {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return ReasonTLS // a TLS alert from the peer
	}
	if r := classify(err); r != ReasonNone {
		return r
	}
	return ReasonTruncated
}

func (p *peer) dialFailed(r Reason, err error) {
	t := p.t
	if t.ctx.Err() != nil {
		return // closing: not a failure
	}
	t.st.dialFailures[r].Add(1)
	p.lastFail.Store(uint32(r))
	t.logLimited(slog.LevelWarn, p.who(), r, "cannot connect to peer", "addr", p.addr, "err", err)
}

// serve runs one established connection: the writer here, the reader in a
// goroutine. It returns when either ends, with the connection closed and
// the reader gone.
func (p *peer) serve(conn net.Conn, br *bufio.Reader) {
	t := p.t
	if p.connects.Add(1) > 1 {
		t.st.reconnects.Add(1)
	}
	t.st.connects.Add(1)
	p.lastFail.Store(uint32(ReasonNone))
	p.connected.Store(true)
	t.log.Info("connected to peer", "peer", p.who(), "addr", p.addr)

	mode := modeSendOnly
	if t.cfg.Role == RoleClient {
		mode = modeReplies
	}
	readerDone := make(chan struct{})
	var rr Reason
	var rerr error
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer close(readerDone)
		rr, rerr = t.readLoop(conn, NewFrameReader(br, t.cfg.MaxFrame), p.id, mode, 0)
	}()
	wr, werr := t.writeLoop(conn, p.q, readerDone)
	p.connected.Store(false)
	t.release(conn)
	<-readerDone
	if wr == ReasonNone {
		wr, werr = rr, rerr
	}
	t.connLost(p.who(), wr, werr)
}

// connLost reports the end of an established connection.
func (t *Transport) connLost(who string, r Reason, err error) {
	switch {
	case t.ctx.Err() != nil:
		t.log.Debug("connection closed on shutdown", "peer", who)
	case r == ReasonNone:
		t.logLimited(slog.LevelInfo, who, r, "connection closed", "err", err)
	default:
		t.st.connErrors[r].Add(1)
		t.logLimited(slog.LevelWarn, who, r, "dropping connection", "err", err)
	}
}
