package transport

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// TestDialerChecksAnswer runs a fake acceptor that answers the dialer's
// hellos wrongly, in every way it can.
func TestDialerChecksAnswer(t *testing.T) {
	checkLeaks(t)
	ln := listen(t)
	pre := AppendPreamble(nil)
	welcome := func(mod func(*Hello)) []byte {
		h := Hello{WireVersion: wire.Version, Role: RoleNode, ID: 2, To: 1, Cluster: "test"}
		mod(&h)
		return AppendFrame(bytes.Clone(pre), FrameWelcome, AppendHello(nil, h))
	}
	answers := []struct {
		name   string
		answer []byte
		reason Reason
	}{
		{"welcome from another id", welcome(func(h *Hello) { h.ID = 9 }), ReasonWrongPeer},
		{"welcome to another id", welcome(func(h *Hello) { h.To = 7 }), ReasonWrongPeer},
		{"welcome from a client", welcome(func(h *Hello) { h.Role = RoleClient }), ReasonWrongPeer},
		{"welcome wire version", welcome(func(h *Hello) { h.WireVersion = 9 }), ReasonWireVersion},
		{"welcome cluster", welcome(func(h *Hello) { h.Cluster = "x" }), ReasonClusterName},
		{"not weft", []byte("HTTP/1.1 400 Bad Request\r\n\r\n"), ReasonBadMagic},
		{"other transport version", append([]byte("WEFT\x00"), welcome(func(*Hello) {})[PreambleLen:]...), ReasonTransportVersion},
		{"message instead of welcome", AppendMessageFrame(bytes.Clone(pre), msg(2, 1)), ReasonBadHandshake},
		{"malformed welcome", AppendFrame(bytes.Clone(pre), FrameWelcome, []byte{1}), ReasonBadHandshake},
		{"reject with an unknown reason", AppendFrame(bytes.Clone(pre), FrameReject, AppendNotice(nil, Notice{Reason: 250})), ReasonBadHandshake},
		{"reject", AppendFrame(bytes.Clone(pre), FrameReject, AppendNotice(nil, Notice{Reason: ReasonUnknownPeer, Text: "go away"})), ReasonUnknownPeer},
		{"garbage", append(bytes.Clone(pre), 0, 0, 0, 1, 0x77, 0, 0, 0, 0, 0), ReasonFrameType},
		{"closes at once", nil, ReasonTruncated},
	}
	want := map[Reason]uint64{}
	for _, a := range answers {
		want[a.reason]++
	}

	hellos := make(chan Hello, len(answers))
	served := make(chan struct{})
	go func() {
		defer close(served)
		defer ln.Close() // later dials fail with dial_failed, not counted below
		for _, a := range answers {
			conn, err := ln.Accept()
			if err != nil {
				t.Error(err)
				return
			}
			conn.SetDeadline(time.Now().Add(guard))
			fr := NewFrameReader(conn, maxHandshakePayload)
			var p [PreambleLen]byte
			if _, err := io.ReadFull(fr.br, p[:]); err != nil {
				t.Error(err)
			}
			if _, payload, err := fr.Next(); err != nil {
				t.Error(err)
			} else if h, err := DecodeHello(payload); err != nil {
				t.Error(err)
			} else {
				hellos <- h
			}
			conn.Write(a.answer)
			conn.Close()
		}
	}()

	cfg := baseConfig(t, 1)
	cfg.Listen = "127.0.0.1:0"
	cfg.Peers = map[wire.ProcID]string{2: ln.Addr().String()}
	d := startNode(t, cfg)
	<-served
	got := map[Reason]uint64{}
	waitFor(t, "every answer judged", func() bool {
		got = maps.Clone(d.tr.Stats().DialFailures)
		delete(got, ReasonDial)
		n := uint64(0)
		for _, v := range got {
			n += v
		}
		return n >= uint64(len(answers))
	})
	if !maps.Equal(got, want) {
		t.Errorf("DialFailures %v, want %v", got, want)
	}
	if st := d.tr.Stats(); st.Connects != 0 || st.Peers[2].Connected {
		t.Errorf("connected to a fake: %+v", st)
	}
	close(hellos)
	for h := range hellos {
		if h.Nonce == ([NonceLen]byte{}) {
			t.Errorf("dialer sent a zero nonce")
		}
		h.Nonce = [NonceLen]byte{}
		if h != (Hello{WireVersion: wire.Version, Role: RoleNode, ID: 1, To: 2, Cluster: "test"}) {
			t.Errorf("dialer sent %+v", h)
		}
	}
}

// fakeConn is a net.Conn that reads from a byte slice (then io.EOF) and
// discards writes: it drives the acceptor's handshake without sockets.
type fakeConn struct {
	r *bytes.Reader
	w bytes.Buffer
}

func (c *fakeConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *fakeConn) Write(p []byte) (int, error)      { return c.w.Write(p) }
func (c *fakeConn) Close() error                     { return nil }
func (c *fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 9} }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

// fuzzTransport is a transport with no listener and no goroutines, for
// driving its connection code directly.
func fuzzTransport(t testing.TB, handler func(wire.ProcID, wire.Message)) *Transport {
	cfg := Config{
		ClusterName: "test",
		Self:        2,
		Listen:      "unused",
		Peers:       map[wire.ProcID]string{1: "unused:1"},
		MaxFrame:    MinMaxFrame,
		Handler:     handler,
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	return newTransport(cfg)
}

// FuzzAcceptHandshake feeds arbitrary bytes to the acceptor's side of the
// handshake: it never panics, accepts only valid hellos meant for it from
// allowed ids, counts every refusal once, and answers with well-formed
// frames.
func FuzzAcceptHandshake(f *testing.F) {
	pre := AppendPreamble(nil)
	good := AppendFrame(bytes.Clone(pre), FrameHello, AppendHello(nil, Hello{WireVersion: wire.Version, Role: RoleNode, ID: 1, To: 2, Cluster: "test"}))
	f.Add(good)
	f.Add(AppendFrame(bytes.Clone(pre), FrameHello, AppendHello(nil, Hello{WireVersion: wire.Version, Role: RoleClient, ID: 100, To: 2, Cluster: "test"})))
	f.Add(good[:len(good)-2])
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(append(bytes.Clone(pre), 0xff, 0xff, 0xff, 0xff, 1))
	tr := fuzzTransport(f, func(wire.ProcID, wire.Message) {})
	f.Fuzz(func(t *testing.T, data []byte) {
		tr.st = counters{}
		conn := &fakeConn{r: bytes.NewReader(data)}
		_, h, br, ok := tr.acceptHandshake(conn, conn.RemoteAddr().String())
		rejected := uint64(0)
		for i := range tr.st.rejected {
			rejected += tr.st.rejected[i].Load()
		}
		if ok {
			if br == nil || rejected != 0 || h.Cluster != "test" || h.To != 2 || h.WireVersion != wire.Version || !tr.allowed(h.ID, h.Role) {
				t.Fatalf("accepted %+v with %d rejections", h, rejected)
			}
		} else if rejected != 1 {
			t.Fatalf("refused with %d rejections counted", rejected)
		}
		// Whatever we answered is a preamble and one valid frame.
		out := conn.w.Bytes()
		if len(out) == 0 {
			return
		}
		if len(out) < PreambleLen || string(out[:PreambleLen]) != string(pre) {
			t.Fatalf("answer %q", out)
		}
		typ, payload, n, err := DecodeFrame(out[PreambleLen:], maxHandshakePayload)
		if err != nil || n != len(out)-PreambleLen {
			t.Fatalf("answer frame: %v", err)
		}
		switch typ {
		case FrameWelcome:
			if !ok {
				t.Fatal("welcome sent on a refusal")
			}
			if _, err := DecodeHello(payload); err != nil {
				t.Fatal(err)
			}
		case FrameReject:
			if ok {
				t.Fatal("reject sent on success")
			}
			if _, err := DecodeNotice(payload); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("answered with %s", typ)
		}
	})
}

// FuzzReadLoop feeds arbitrary frames to an established connection's
// reader in every mode: it never panics, hands the Handler only valid
// messages the mode allows, and ends with a reason whenever it stops
// before a clean end.
func FuzzReadLoop(f *testing.F) {
	mc := &wire.Multicast{M: wire.AppMsg{ID: wire.MsgID{Client: 100, Seq: 1}, Dest: []wire.GroupID{0, 1}, Payload: []byte("p")}}
	two := AppendMessageFrame(AppendMessageFrame(nil, mc), msg(1, 2))
	f.Add(byte(1), two)
	f.Add(byte(2), two)
	f.Add(byte(0), AppendMessageFrame(nil, msg(1, 1)))
	f.Add(byte(3), AppendFrame(AppendMessageFrame(nil, mc), FrameClose, AppendNotice(nil, Notice{Reason: ReasonShutdown})))
	f.Add(byte(1), AppendFrame(nil, FrameMessage, []byte{wire.Version, byte(wire.KindRecBallot), 1, 1, 1, 1}))
	var got []wire.Message
	tr := fuzzTransport(f, func(from wire.ProcID, m wire.Message) {
		if from != 7 {
			panic("wrong sender")
		}
		got = append(got, m)
	})
	f.Fuzz(func(t *testing.T, modeByte byte, data []byte) {
		got = got[:0]
		mode := readMode(modeByte % 4)
		r, err := tr.readLoop(nil, NewFrameReader(bytes.NewReader(data), tr.cfg.MaxFrame), 7, mode, 0)
		if err == nil {
			t.Fatalf("readLoop ended without an error (reason %s)", r)
		}
		if mode == modeSendOnly && len(got) > 0 {
			t.Fatal("messages delivered on a send-only connection")
		}
		for _, m := range got {
			if m.Kind() >= wire.KindRecBallot {
				t.Fatalf("record %s delivered", m.Kind())
			}
			if mode == modeFromClient && m.Kind() != wire.KindMulticast {
				t.Fatalf("client's %s delivered", m.Kind())
			}
			if wire.Size(m) > tr.cfg.MaxFrame {
				t.Fatalf("message of %d bytes over the frame limit", wire.Size(m))
			}
		}
	})
}

// TestCloseSendsCloseFrame checks that Close says goodbye on the
// connections the transport writes: its outbound connection to a peer and
// a client's connection.
func TestCloseSendsCloseFrame(t *testing.T) {
	checkLeaks(t)
	ln := listen(t)
	defer ln.Close()
	cfg := baseConfig(t, 1)
	cfg.Listen = "127.0.0.1:0"
	cfg.Peers = map[wire.ProcID]string{2: ln.Addr().String()}
	n := startNode(t, cfg)

	// A fake peer 2 that welcomes node 1.
	peerConn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peerConn.Close()
	peerConn.SetDeadline(time.Now().Add(guard))
	peer := &raw{t: t, conn: peerConn, fr: NewFrameReader(peerConn, DefaultMaxFrame)}
	var p [PreambleLen]byte
	if _, err := io.ReadFull(peer.fr.br, p[:]); err != nil {
		t.Fatal(err)
	}
	if typ, _, err := peer.fr.Next(); err != nil || typ != FrameHello {
		t.Fatalf("first frame %s, %v", typ, err)
	}
	peer.write(AppendFrame(AppendPreamble(nil), FrameWelcome,
		AppendHello(nil, Hello{WireVersion: wire.Version, Role: RoleNode, ID: 2, To: 1, Cluster: "test"})))
	if err := n.tr.Send(2, msg(1, 1)); err != nil {
		t.Fatal(err)
	}
	if typ, payload, err := peer.fr.Next(); err != nil || typ != FrameMessage || seqOf(mustDecode(t, payload)) != 1 {
		t.Fatalf("expected message 1, got %s, %v", typ, err)
	}

	// A client of node 1.
	client := dialRaw(t, n.tr.Addr().String())
	client.handshake(Hello{WireVersion: wire.Version, Role: RoleClient, ID: 100, To: 1, Cluster: "test"})
	waitFor(t, "client registered", func() bool { return n.tr.Stats().Clients == 1 })

	n.tr.Close()
	for name, r := range map[string]*raw{"peer": peer, "client": client} {
		typ, payload, err := r.fr.Next()
		if err != nil || typ != FrameClose {
			t.Fatalf("%s: got %s, %v; want CLOSE", name, typ, err)
		}
		if nt, err := DecodeNotice(payload); err != nil || nt.Reason != ReasonShutdown {
			t.Fatalf("%s: close notice %+v, %v", name, nt, err)
		}
		r.expectClosed()
	}
}

func mustDecode(t *testing.T, b []byte) wire.Message {
	t.Helper()
	m, err := wire.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStuckPeerWriteTimeout connects to a peer that welcomes and then never
// reads: the writer's deadline drops the connection and the peer is
// redialed.
func TestStuckPeerWriteTimeout(t *testing.T) {
	checkLeaks(t)
	ln := listen(t)
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			fr := NewFrameReader(conn, maxHandshakePayload)
			var p [PreambleLen]byte
			if _, err := io.ReadFull(fr.br, p[:]); err != nil {
				continue
			}
			if _, _, err := fr.Next(); err != nil {
				continue
			}
			conn.Write(AppendFrame(AppendPreamble(nil), FrameWelcome,
				AppendHello(nil, Hello{WireVersion: wire.Version, Role: RoleNode, ID: 2, To: 1, Cluster: "test"})))
			// ... and never read again.
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})

	cfg := baseConfig(t, 1)
	cfg.Listen = "127.0.0.1:0"
	cfg.Peers = map[wire.ProcID]string{2: ln.Addr().String()}
	cfg.WriteTimeout = 50 * time.Millisecond
	n := startNode(t, cfg)
	payload := make([]byte, 4096)
	seq := uint64(0)
	waitFor(t, "a write timeout", func() bool {
		for range 256 {
			seq++
			n.tr.Send(2, &wire.Multicast{M: wire.AppMsg{ID: wire.MsgID{Client: 1, Seq: seq}, Dest: []wire.GroupID{0}, Payload: payload}})
		}
		time.Sleep(time.Millisecond)
		return n.tr.Stats().ConnErrors[ReasonTimeout] > 0
	})
	waitFor(t, "a reconnection", func() bool { return n.tr.Stats().Reconnects > 0 })
}

func TestLogLimiter(t *testing.T) {
	l := logLimiter{every: time.Minute}
	t0 := time.Unix(1000, 0)
	if ok, _ := l.allow("a", t0); !ok {
		t.Fatal("first line suppressed")
	}
	for i := range 3 {
		if ok, _ := l.allow("a", t0.Add(time.Duration(i+1)*time.Second)); ok {
			t.Fatal("repeat within the interval let through")
		}
	}
	if ok, _ := l.allow("b", t0); !ok {
		t.Fatal("another key suppressed")
	}
	if ok, n := l.allow("a", t0.Add(time.Minute)); !ok || n != 3 {
		t.Fatalf("after the interval: %v, %d suppressed; want true, 3", ok, n)
	}
	for i := range maxLogKeys + 10 {
		l.allow(fmt.Sprint("k", i), t0)
	}
	if len(l.seen) > maxLogKeys {
		t.Fatalf("limiter holds %d keys", len(l.seen))
	}
}
