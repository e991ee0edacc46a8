// Package faultproxy is a fault-injecting TCP proxy for tests: it listens
// on a loopback port and forwards every connection it accepts to a target
// address, and the test can cut, blackhole, delay or reset the traffic at
// any time.
//
// A Proxy forwards bytes in two directions: Forward, from the process that
// dialed the proxy to the target, and Backward, from the target to the
// dialer. The faults:
//
//   - Cut closes every current connection (both sides) and refuses new
//     ones: they are accepted and closed at once, so the dialer sees its
//     connection end before anything comes back. Heal undoes it.
//   - Blackhole(d) reads and drops the bytes travelling in direction d;
//     connections stay open and the other direction flows. Heal stops
//     dropping and closes every connection that lost bytes: a real network
//     delays or breaks a TCP stream but never splices it, so a stream with
//     a hole in it must not resume. New connections made during a
//     blackhole are dialed to the target as usual (and lose their bytes in
//     direction d).
//   - SetDelay(d) forwards each chunk d after it was read, in both
//     directions, keeping the order (chunks already queued keep the delay
//     they were read with). Heal does not change the delay.
//   - Reset closes every current connection but accepts new ones (a
//     connection cut without a partition).
//
// Closing a connection closes both of its sides. An end of stream (EOF)
// from one side is passed on as a half-close (CloseWrite) to the other,
// after the bytes before it; the connection is closed when both directions
// have ended. The proxy is pure standard library and safe for concurrent
// use.
package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Direction is the direction of a stream through the proxy.
type Direction int

const (
	// Forward is from the dialer (the process that connected to the proxy)
	// to the target.
	Forward Direction = iota
	// Backward is from the target to the dialer.
	Backward
)

func (d Direction) String() string {
	switch d {
	case Forward:
		return "forward"
	case Backward:
		return "backward"
	}
	return "Direction(?)"
}

// DialTimeout bounds the proxy's dial of its target.
const DialTimeout = 5 * time.Second

// chunkSize is the size of one read.
const chunkSize = 32 << 10

// queueLen bounds the chunks read but not yet written, per direction: a
// slow writer (or a long delay) makes the proxy stop reading, so TCP flow
// control reaches the sender.
const queueLen = 64

// Stats counts what a proxy did.
type Stats struct {
	Accepted int64 // connections accepted and forwarded
	Refused  int64 // connections accepted and closed at once (during a Cut)
	Failed   int64 // connections whose target could not be dialed
	Closed   int64 // connections closed by Cut, Reset, Heal or Close
	Active   int   // connections open now
	// Bytes forwarded and dropped, by Direction.
	Forwarded [2]int64
	Dropped   [2]int64
}

// Proxy forwards TCP connections from its listening address to a target.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	cut    bool
	drop   [2]bool
	delay  time.Duration
	links  map[*link]struct{}

	accepted, refused, failed, closedLinks atomic.Int64
	forwarded, dropped                     [2]atomic.Int64
}

// New starts a proxy listening on listen ("127.0.0.1:0" picks a port) that
// forwards to target.
func New(listen, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Cut closes every current connection and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	links := p.takeLinks(func(*link) bool { return true })
	p.mu.Unlock()
	p.closeLinks(links)
}

// Blackhole drops the bytes travelling in direction d, on current and new
// connections, until Heal.
func (p *Proxy) Blackhole(d Direction) {
	p.mu.Lock()
	p.drop[d] = true
	p.mu.Unlock()
}

// SetDelay delays every chunk read from now on by d (0: no delay).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = max(d, 0)
	p.mu.Unlock()
}

// Reset closes every current connection; new ones are accepted (unless
// the proxy is cut).
func (p *Proxy) Reset() {
	p.mu.Lock()
	links := p.takeLinks(func(*link) bool { return true })
	p.mu.Unlock()
	p.closeLinks(links)
}

// Heal ends a Cut and the blackholes, and closes the connections that lost
// bytes to a blackhole. The delay stays.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.drop = [2]bool{}
	links := p.takeLinks(func(l *link) bool { return l.lost.Load() })
	p.mu.Unlock()
	p.closeLinks(links)
}

// Cutting reports whether the proxy is cut.
func (p *Proxy) Cutting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	active := len(p.links)
	p.mu.Unlock()
	s := Stats{Accepted: p.accepted.Load(), Refused: p.refused.Load(), Failed: p.failed.Load(),
		Closed: p.closedLinks.Load(), Active: active}
	for d := range 2 {
		s.Forwarded[d] = p.forwarded[d].Load()
		s.Dropped[d] = p.dropped[d].Load()
	}
	return s
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	links := p.takeLinks(func(*link) bool { return true })
	p.mu.Unlock()
	err := p.ln.Close()
	p.closeLinks(links)
	p.wg.Wait()
	return err
}

// takeLinks removes and returns the links that match; p.mu is held.
func (p *Proxy) takeLinks(match func(*link) bool) []*link {
	var out []*link
	for l := range p.links {
		if match(l) {
			out = append(out, l)
			delete(p.links, l)
		}
	}
	return out
}

func (p *Proxy) closeLinks(links []*link) {
	for _, l := range links {
		p.closedLinks.Add(1)
		l.close()
	}
}

// state returns what a reader must do with a chunk read in direction d.
func (p *Proxy) state(d Direction) (drop bool, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drop[d], p.delay
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	var backoff time.Duration
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: wait and retry.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		p.mu.Lock()
		switch {
		case p.closed:
			p.mu.Unlock()
			c.Close()
			return
		case p.cut:
			p.mu.Unlock()
			p.refused.Add(1)
			c.Close()
			continue
		}
		l := &link{p: p, down: c, done: make(chan struct{})}
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go l.run()
	}
}

// link is one proxied connection: down is the dialer's side, up the
// target's.
type link struct {
	p    *Proxy
	down net.Conn
	lost atomic.Bool // bytes were dropped

	mu     sync.Mutex
	up     net.Conn
	closed bool
	done   chan struct{} // closed by close
}

// close closes both sides; it is idempotent.
func (l *link) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	close(l.done)
	l.down.Close()
	if l.up != nil {
		l.up.Close()
	}
}

func (l *link) forget() {
	p := l.p
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.close()
}

func (l *link) run() {
	p := l.p
	defer p.wg.Done()
	defer l.forget()
	d := net.Dialer{Timeout: DialTimeout}
	up, err := d.Dial("tcp", p.target)
	if err != nil {
		p.failed.Add(1)
		return
	}
	l.mu.Lock()
	if l.closed { // cut while dialing
		l.mu.Unlock()
		up.Close()
		return
	}
	l.up = up
	l.mu.Unlock()
	p.accepted.Add(1)
	for _, c := range []net.Conn{l.down, up} {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { l.pipe(Forward, l.down, up) })
	wg.Go(func() { l.pipe(Backward, up, l.down) })
	wg.Wait()
}

type chunk struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst in direction d, through a bounded queue so that a
// delay does not stop the reading (up to queueLen chunks). It returns when
// src ends (after passing the end on) or either side fails.
func (l *link) pipe(d Direction, src, dst net.Conn) {
	p := l.p
	q := make(chan chunk, queueLen)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		timer := time.NewTimer(0)
		defer timer.Stop()
		for c := range q {
			if c.b == nil { // end of stream
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
				return
			}
			if wait := time.Until(c.due); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-l.done:
					return
				}
			}
			if _, err := dst.Write(c.b); err != nil {
				l.close()
				return
			}
			p.forwarded[d].Add(int64(len(c.b)))
		}
	}()
	defer func() { <-writerDone }()
	defer close(q)
	for {
		buf := make([]byte, chunkSize)
		n, err := src.Read(buf)
		if n > 0 {
			drop, delay := p.state(d)
			if drop {
				l.lost.Store(true)
				p.dropped[d].Add(int64(n))
			} else {
				select {
				case q <- chunk{b: buf[:n], due: time.Now().Add(delay)}:
				case <-l.done:
					return
				case <-writerDone:
					return
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				select {
				case q <- chunk{}:
				case <-l.done:
				case <-writerDone:
				}
				return
			}
			l.close()
			return
		}
	}
}
