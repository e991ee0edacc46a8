package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/weft-dev/weft/wire"
)

// inConn is an accepted connection after its handshake. A node's accepted
// connection is read-only (we send to nodes on connections we dial); a
// client's carries replies back, from q.
type inConn struct {
	id   wire.ProcID
	role Role
	conn net.Conn
	q    *queue        // clients only
	done chan struct{} // closed when the reader has delivered its last message
}

// Lingering close after a reject: stop writing, then read and discard what
// the remote already sent, for at most rejectLinger or rejectDrain bytes,
// so that closing with unread input does not reset the connection before
// the remote has read the reject.
const (
	rejectLinger = time.Second
	rejectDrain  = 64 << 10
)

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	var delay time.Duration
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				if t.ctx.Err() == nil {
					t.log.Error("listener closed; no longer accepting connections", "err", err)
				}
				return
			}
			// Out of file descriptors and the like: wait and retry.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t.logLimited(slog.LevelError, "listener", ReasonIO, "accept failed", "err", err)
			if !t.sleep(delay) {
				return
			}
			continue
		}
		delay = 0
		conn = wrapRaw(conn)
		if !t.track(conn) {
			conn.Close()
			return
		}
		host := remoteHost(conn)
		if ok, detail := t.slots.take(host, t.cfg.MaxConns, t.cfg.MaxConnsPerHost); !ok {
			t.refuse(conn, host, detail)
			continue
		}
		t.wg.Add(1)
		go t.serveInbound(conn, &slot{s: &t.slots, host: host, held: true})
	}
}

// serveInbound handshakes an accepted connection, which holds sl, and
// reads it until it ends.
func (t *Transport) serveInbound(conn net.Conn, sl *slot) {
	defer t.wg.Done()
	defer t.release(conn)
	defer sl.release()
	if tc, ok := tcpOf(conn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAliveConfig(keepAlive)
	}
	remote := conn.RemoteAddr().String()
	// With TLS, conn becomes the TLS connection (t.conns keeps the TCP
	// one, which release closes).
	conn, h, br, ok := t.acceptHandshake(conn, remote)
	if !ok {
		return
	}
	t.st.accepts.Add(1)
	who := fmt.Sprintf("%s %d", h.Role, h.ID)
	c := &inConn{id: h.ID, role: h.Role, conn: conn, done: make(chan struct{})}
	if h.Role == RoleClient {
		c.q = newQueue(t.cfg.QueueSize, t.cfg.ClientQueueBytes)
	} else {
		sl.release() // at most one connection per peer: see caps.go
	}
	// One stream per sender: a newer connection from the same id replaces
	// the older one and delivers nothing before the older reader is gone,
	// so the sender's messages reach the Handler in order.
	t.inMu.Lock()
	old := t.inbound[h.ID]
	t.inbound[h.ID] = c
	t.inMu.Unlock()
	if old != nil {
		old.conn.Close()
		<-old.done
		t.log.Info("connection replaced by a newer one", "peer", who, "remote", remote)
	} else {
		t.log.Info("accepted connection", "peer", who, "remote", remote)
	}

	var stop, writerDone chan struct{}
	var wr Reason
	var werr error
	if c.q != nil {
		stop, writerDone = make(chan struct{}), make(chan struct{})
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer close(writerDone)
			wr, werr = t.writeLoop(conn, c.q, stop)
			if wr != ReasonNone {
				conn.Close() // wake the reader
			}
		}()
	}
	mode := modeFromNode
	if h.Role == RoleClient {
		mode = modeFromClient
	}
	rr, rerr := t.readLoop(conn, NewFrameReader(br, t.cfg.MaxFrame), h.ID, mode, t.cfg.IdleTimeout)

	t.inMu.Lock()
	if t.inbound[h.ID] == c {
		delete(t.inbound, h.ID)
	}
	t.inMu.Unlock()
	close(c.done)
	if stop != nil {
		// The client is gone (or misbehaved): stop the writer, even if it
		// is blocked on a client that no longer reads. On shutdown the
		// writer sends its close frame first (bounded by closeGrace).
		close(stop)
		if t.ctx.Err() == nil {
			conn.Close()
		}
		<-writerDone
		t.discard(c.q)
	}
	if rr == ReasonNone && wr != ReasonNone {
		rr, rerr = wr, werr
	}
	t.connLost(who, rr, rerr)
}

// discard empties the queue of a client that is gone.
func (t *Transport) discard(q *queue) {
	if _, n := q.take(nil); n > 0 {
		t.st.drops[DropDisconnected].Add(uint64(n))
	}
}

// acceptHandshake runs the acceptor's side of the handshake (with TLS,
// first the TLS handshake and the check of the dialer's certificate) and
// returns the connection to use. On failure it counts and logs the
// reason, answers with a reject frame when that can help, and reports
// false.
func (t *Transport) acceptHandshake(conn net.Conn, remote string) (net.Conn, Hello, *bufio.Reader, bool) {
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	br := bufio.NewReaderSize(conn, readBufSize)
	welcomed := false // our preamble is out: a reject is then a bare frame
	reject := func(r Reason, detail string, answer bool) (net.Conn, Hello, *bufio.Reader, bool) {
		if t.ctx.Err() != nil {
			return nil, Hello{}, nil, false // closing: not a rejection
		}
		t.st.rejected[r].Add(1)
		t.logLimited(slog.LevelWarn, host, r, "rejected inbound connection", "remote", remote, "detail", detail)
		if answer {
			t.sendReject(conn, br, r, detail, !welcomed)
		}
		return nil, Hello{}, nil, false
	}
	if err := conn.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout)); err != nil {
		return reject(handshakeReason(err), err.Error(), false)
	}
	var cert *Identity // the dialer's, with TLS
	if t.cfg.TLS != nil {
		c, id, r, detail := t.tlsAcceptHandshake(conn)
		if c != nil {
			conn = c
			br.Reset(c)
		}
		if r != ReasonNone {
			return reject(r, detail, c != nil)
		}
		cert = id
	}
	var pre [PreambleLen]byte
	if n, err := io.ReadFull(br, pre[:]); err != nil {
		r := handshakeReason(err)
		return reject(r, fmt.Sprintf("preamble: got %d of %d bytes: %v", n, PreambleLen, err), r == ReasonTimeout)
	}
	if r, detail := checkPreamble(pre[:]); r != ReasonNone {
		return reject(r, detail, true)
	}
	fr := NewFrameReader(br, maxHandshakePayload)
	typ, payload, err := fr.Next()
	if err != nil {
		r := handshakeReason(err)
		return reject(r, fmt.Sprintf("hello: %v", err), r != ReasonTruncated && r != ReasonIO)
	}
	if typ == FrameReject {
		// The dialer refuses us (with TLS: our certificate).
		n, err := DecodeNotice(payload)
		if err != nil || (n.Reason != ReasonCertificate && n.Reason != ReasonWrongPeer) {
			// Only a TLS dialer refuses, for one of those reasons.
			return reject(ReasonBadHandshake, fmt.Sprintf("REJECT frame instead of HELLO (%s, %v)", n.Reason, err), false)
		}
		return reject(n.Reason, "refused by the dialer: "+n.Text, false)
	}
	if typ != FrameHello {
		return reject(ReasonBadHandshake, fmt.Sprintf("%s frame instead of HELLO", typ), true)
	}
	h, err := DecodeHello(payload)
	switch {
	case err != nil:
		return reject(ReasonBadHandshake, err.Error(), true)
	case h.WireVersion != wire.Version:
		return reject(ReasonWireVersion, fmt.Sprintf("wire version %d, want %d", h.WireVersion, wire.Version), true)
	case h.Cluster != t.cfg.ClusterName:
		return reject(ReasonClusterName, fmt.Sprintf("cluster %q is not served here", h.Cluster), true)
	case h.To != t.cfg.Self:
		return reject(ReasonWrongPeer, fmt.Sprintf("this is %d, not %d", t.cfg.Self, h.To), true)
	case !t.allowed(h.ID, h.Role):
		return reject(ReasonUnknownPeer, fmt.Sprintf("%s %d is not allowed here", h.Role, h.ID), true)
	case cert.refuses(h) != "":
		return reject(ReasonIdentity, cert.refuses(h), true)
	case h.Keyed && t.cfg.Key == nil:
		return reject(ReasonAuth, "this process has no cluster key", true)
	case !h.Keyed && t.cfg.Key != nil:
		return reject(ReasonAuth, "a cluster key is required", true)
	}
	hello := append([]byte(nil), payload...)
	welcome := AppendHello(nil, Hello{WireVersion: wire.Version, Role: RoleNode, ID: t.cfg.Self, To: h.ID,
		Cluster: t.cfg.ClusterName, Keyed: t.cfg.Key != nil, Nonce: NewNonce()})
	out := AppendFrame(AppendPreamble(nil), FrameWelcome, welcome)
	if t.cfg.Key != nil {
		out = AppendFrame(out, FrameAuth, authMAC(t.cfg.Key, proofAcceptor, hello, welcome))
	}
	if _, err := conn.Write(out); err != nil {
		return reject(handshakeReason(err), fmt.Sprintf("sending welcome: %v", err), false)
	}
	welcomed = true
	if t.cfg.Key != nil {
		typ, proof, err := fr.Next()
		switch {
		case err != nil:
			r := handshakeReason(err)
			return reject(r, fmt.Sprintf("key proof: %v", err), false)
		case typ != FrameAuth:
			return reject(ReasonBadHandshake, fmt.Sprintf("%s frame instead of AUTH", typ), true)
		case !checkMAC(t.cfg.Key, proofDialer, hello, welcome, proof):
			return reject(ReasonAuth, fmt.Sprintf("%s %d does not hold this cluster key", h.Role, h.ID), true)
		}
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return reject(handshakeReason(err), err.Error(), false)
	}
	return conn, h, br, true
}

// allowed applies Config.Allow or the default rule.
func (t *Transport) allowed(id wire.ProcID, role Role) bool {
	if t.cfg.Allow != nil {
		return t.cfg.Allow(id, role)
	}
	if id == t.cfg.Self {
		return false
	}
	_, listed := t.cfg.Peers[id]
	if role == RoleNode {
		return listed
	}
	return !listed
}

// sendReject answers a refused handshake with a reject frame (after our
// preamble, unless it was sent already), then closes gracefully (see
// rejectLinger).
func (t *Transport) sendReject(conn net.Conn, br *bufio.Reader, r Reason, detail string, preamble bool) {
	var buf []byte
	if preamble {
		buf = AppendPreamble(buf)
	}
	buf = AppendFrame(buf, FrameReject, AppendNotice(nil, Notice{Reason: r, Text: detail}))
	if err := conn.SetDeadline(time.Now().Add(min(rejectLinger, t.cfg.HandshakeTimeout))); err != nil {
		return
	}
	if _, err := conn.Write(buf); err != nil {
		return
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok { // TCP or TLS
		cw.CloseWrite()
		io.CopyN(io.Discard, br, rejectDrain)
	}
}
