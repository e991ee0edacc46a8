package transport

import (
	"bufio"
	"fmt"
	"log/slog"
	"net"
	"sync"
)

// Connection caps (Config.MaxConns, Config.MaxConnsPerHost).
//
// An accepted connection takes a slot before anything is read from it, so
// connections that never finish their handshake (each held for up to
// Config.HandshakeTimeout) are bounded as well as clients. A configured
// peer's connection gives its slot back once its handshake succeeds: there
// is at most one per peer (a newer one replaces the older), and a flood of
// clients must never keep a peer out for longer than the handshakes that
// hold the slots. A connection over a cap is answered with a reject frame
// (ReasonTooManyConns; not with TLS, see refuse) and closed; at most
// maxRefusing such answers are in flight at a time, beyond that the
// connection is just closed, so a connection flood cannot pile up
// goroutines either.

// maxRefusing bounds the goroutines answering refused connections.
const maxRefusing = 64

// slots counts the inbound connections that hold a slot, in all and by
// remote host.
type slots struct {
	mu      sync.Mutex
	n, peak int
	perHost map[string]int
}

// take reserves a slot for a connection from host, or explains why not.
// A negative bound is no bound.
func (s *slots) take(host string, maxConns, maxHost int) (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if maxConns >= 0 && s.n >= maxConns {
		return false, fmt.Sprintf("%d connections, the most this node accepts (max_conns)", s.n)
	}
	if maxHost >= 0 && s.perHost[host] >= maxHost {
		return false, fmt.Sprintf("%d connections from %s, the most this node accepts from one address (max_conns_per_host)", s.perHost[host], host)
	}
	if s.perHost == nil {
		s.perHost = map[string]int{}
	}
	s.n++
	s.peak = max(s.peak, s.n)
	s.perHost[host]++
	return true, ""
}

// put gives a slot of host back.
func (s *slots) put(host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n--
	if s.perHost[host]--; s.perHost[host] <= 0 {
		delete(s.perHost, host)
	}
}

func (s *slots) load() (n, peak int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.peak
}

// slot is one connection's hold on a slot; release is idempotent and used
// only by the connection's goroutine.
type slot struct {
	s    *slots
	host string
	held bool
}

func (s *slot) release() {
	if s.held {
		s.s.put(s.host)
		s.held = false
	}
}

// remoteHost is the IP address a connection comes from (the whole address
// if it has no port).
func remoteHost(conn net.Conn) string {
	remote := conn.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// refuse answers a connection over a cap with a reject frame (when few
// refusals are in flight) and closes it. conn is tracked. With TLS it only
// closes: a plain REJECT would read to a TLS dialer as a node without TLS,
// and a TLS handshake per refused connection is what a flood must not
// cost.
func (t *Transport) refuse(conn net.Conn, host, detail string) {
	t.st.rejected[ReasonTooManyConns].Add(1)
	t.logLimited(slog.LevelWarn, host, ReasonTooManyConns, "refused inbound connection", "remote", conn.RemoteAddr().String(), "detail", detail)
	if t.cfg.TLS != nil {
		t.release(conn)
		return
	}
	if t.refusing.Add(1) > maxRefusing {
		t.refusing.Add(-1)
		t.release(conn)
		return
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer t.refusing.Add(-1)
		defer t.release(conn)
		t.sendReject(conn, bufio.NewReaderSize(conn, 512), ReasonTooManyConns, detail, true)
	}()
}
