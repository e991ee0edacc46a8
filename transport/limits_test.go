package transport

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// bigMsg is a message whose frame is about size bytes.
func bigMsg(from wire.ProcID, seq uint64, size int) wire.Message {
	return &wire.Multicast{M: wire.AppMsg{ID: wire.MsgID{Client: from, Seq: seq}, Dest: []wire.GroupID{0}, Payload: make([]byte, size)}}
}

// TestQueueBytesBound fills the queue of an unreachable peer with 1 KiB
// messages: the queue stops at its byte budget, well before its message
// capacity, the rest is dropped as queue_bytes, and an empty queue still
// takes one message larger than the budget.
func TestQueueBytesBound(t *testing.T) {
	checkLeaks(t)
	cfg := baseConfig(t, 1)
	cfg.Listen = "127.0.0.1:0"
	cfg.Peers = map[wire.ProcID]string{2: freeAddr(t), 3: freeAddr(t)}
	cfg.QueueBytes = 64 << 10
	cfg.MaxFrame = 256 << 10
	a := startNode(t, cfg)
	ok, full := fillQueue(t, func(m wire.Message) error { return a.tr.Send(2, m) }, 1000, 1000)
	st := a.tr.Stats()
	p := st.Peers[2]
	t.Logf("queued %d messages, %d bytes (peak %d); dropped %d; drops %v", p.Queued, p.QueuedBytes, p.PeakBytes, p.Dropped, st.Drops)
	if p.QueuedBytes > int64(cfg.QueueBytes) || p.PeakBytes > int64(cfg.QueueBytes) || p.QueuedBytes < int64(cfg.QueueBytes)-2000 {
		t.Errorf("queued %d bytes (peak %d), budget %d", p.QueuedBytes, p.PeakBytes, cfg.QueueBytes)
	}
	if ok != p.Queued || full != 1000-ok || st.Drops[DropQueueBytes] != uint64(full) || p.Dropped != uint64(full) || st.Drops[DropQueueFull] != 0 {
		t.Errorf("%d queued, %d refused; stats %+v, drops %v", ok, full, p, st.Drops)
	}
	// An empty queue takes one message above the budget, and only one.
	if err := a.tr.Send(3, bigMsg(1, 1, 100<<10)); err != nil {
		t.Errorf("a 100 KiB message into an empty queue: %v", err)
	}
	if err := a.tr.Send(3, bigMsg(1, 2, 10)); !errors.Is(err, ErrQueueFull) {
		t.Errorf("a message after it: %v, want ErrQueueFull", err)
	}
}

// fillQueue sends count messages of about size bytes from process 1 with
// send and counts those queued and those refused as ErrQueueFull (any
// other error fails the test).
func fillQueue(t *testing.T, send func(wire.Message) error, count, size int) (ok, full int) {
	t.Helper()
	for s := range uint64(count) {
		switch err := send(bigMsg(1, s+1, size)); {
		case err == nil:
			ok++
		case errors.Is(err, ErrQueueFull):
			full++
		default:
			t.Fatalf("Send: %v", err)
		}
	}
	return ok, full
}

// TestQueueBytesDrain: once the peer is reachable, the accounted bytes go
// back to zero (every queued frame is released exactly once).
func TestQueueBytesDrain(t *testing.T) {
	checkLeaks(t)
	nodes := cluster(t, []wire.ProcID{1, 2}, func(c *Config) { c.QueueBytes = 32 << 10 })
	a, b := nodes[1], nodes[2]
	sent := 0
	for s := uint64(1); s <= 2000; s++ {
		if a.tr.Send(2, bigMsg(1, s, 500)) == nil {
			sent++
		}
	}
	waitFor(t, "every queued message received", func() bool { return b.rec.count(1) == sent })
	waitFor(t, "queue bytes back to 0", func() bool { return a.tr.Stats().Peers[2].QueuedBytes == 0 })
	checkIncreasing(t, "received", b.rec.seqs(1))
	if p := a.tr.Stats().Peers[2]; p.PeakBytes > 32<<10 {
		t.Errorf("peak %d bytes over the budget", p.PeakBytes)
	}
}

// dialFrom dials addr from the local IP address from (any 127.x address
// works on Linux loopback).
func dialFrom(t *testing.T, from, addr string) *raw {
	t.Helper()
	d := net.Dialer{Timeout: guard, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot dial from %s: %v", from, err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(guard))
	return &raw{t: t, conn: conn, fr: NewFrameReader(conn, DefaultMaxFrame)}
}

// TestConnectionCaps drives the per-host and the total cap to their
// bounds with connections that never handshake: the next one is refused
// with too_many_connections, a freed slot is taken again, and a peer's
// established connection does not hold a slot.
func TestConnectionCaps(t *testing.T) {
	checkLeaks(t)
	nodes := cluster(t, []wire.ProcID{1, 2}, func(c *Config) {
		c.MaxConns, c.MaxConnsPerHost = 4, 3
		c.HandshakeTimeout = guard
	})
	b := nodes[2]
	waitFor(t, "peers connected", func() bool { return nodes[1].tr.Stats().Peers[2].Connected })
	waitFor(t, "the peer's slot given back", func() bool { n, _ := b.tr.slots.load(); return n == 0 })
	addr := b.tr.Addr().String()
	// Three silent connections from 127.0.0.1: the per-host bound.
	var held []*raw
	for range 3 {
		held = append(held, dialFrom(t, "127.0.0.1", addr))
	}
	waitFor(t, "3 slots taken", func() bool { n, _ := b.tr.slots.load(); return n == 3 })
	dialFrom(t, "127.0.0.1", addr).expectReject(ReasonTooManyConns)
	// Another address still gets in, up to the total of 4.
	held = append(held, dialFrom(t, "127.0.0.2", addr))
	waitFor(t, "4 slots taken", func() bool { n, _ := b.tr.slots.load(); return n == 4 })
	dialFrom(t, "127.0.0.3", addr).expectReject(ReasonTooManyConns)
	st := b.tr.Stats()
	if st.Rejected[ReasonTooManyConns] != 2 || st.Conns != 4 || st.ConnsPeak != 4 {
		t.Errorf("rejected %v, conns %d (peak %d)", st.Rejected, st.Conns, st.ConnsPeak)
	}
	// A freed slot is taken again.
	held[0].conn.Close()
	waitFor(t, "slot freed", func() bool { n, _ := b.tr.slots.load(); return n == 3 })
	r := dialFrom(t, "127.0.0.1", addr)
	r.handshake(Hello{WireVersion: wire.Version, Role: RoleClient, ID: 100, To: 2, Cluster: "test"})
	// The peer's connection (node 1 to node 2) holds none: node 1 still
	// reaches node 2 while every slot is taken.
	sendSeq(t, nodes[1].tr, 1, 2, 1, 10)
	waitFor(t, "peer messages", func() bool { return b.rec.count(1) == 10 })
}

// TestIdleTimeout: an accepted connection that carries nothing after its
// handshake is cut (idle_timeout), while a transport's own connections,
// idle but pinging, are not.
func TestIdleTimeout(t *testing.T) {
	checkLeaks(t)
	const idle = 400 * time.Millisecond
	nodes := cluster(t, []wire.ProcID{1, 2}, func(c *Config) {
		c.IdleTimeout = idle
		c.PingEvery = idle / 8
	})
	a, b := nodes[1], nodes[2]
	sendSeq(t, a.tr, 1, 2, 1, 1)
	waitFor(t, "first message", func() bool { return b.rec.count(1) == 1 })

	r := dialRaw(t, b.tr.Addr().String())
	r.handshake(Hello{WireVersion: wire.Version, Role: RoleClient, ID: 100, To: 2, Cluster: "test"})
	r.expectClosed()
	waitFor(t, "the idle connection counted", func() bool { return b.tr.Stats().ConnErrors[ReasonIdle] == 1 })
	// Meanwhile node 1's idle connection to node 2 kept pinging: wait for
	// enough frames to span several idle timeouts, then check it is the
	// same connection.
	in := b.tr.Stats().FramesIn
	waitFor(t, "pings spanning 3 idle timeouts", func() bool { return b.tr.Stats().FramesIn >= in+24 })
	if st := a.tr.Stats(); st.Peers[2].Connects != 1 || b.tr.Stats().ConnErrors[ReasonIdle] != 1 {
		t.Errorf("peer connection was cut: connects %d, conn errors %v", st.Peers[2].Connects, b.tr.Stats().ConnErrors)
	}
	sendSeq(t, a.tr, 1, 2, 2, 2)
	waitFor(t, "second message", func() bool { return b.rec.count(1) == 2 })
}

// TestClientQueueBytes: replies to a client that does not read pile up in
// its queue only to ClientQueueBytes; the rest is dropped (queue_bytes).
func TestClientQueueBytes(t *testing.T) {
	checkLeaks(t)
	const budget = 32 << 10
	cfg := baseConfig(t, 1)
	cfg.Listen = "127.0.0.1:0"
	cfg.ClientQueueBytes = budget
	n := startNode(t, cfg)
	r := dialRaw(t, n.tr.Addr().String())
	r.handshake(Hello{WireVersion: wire.Version, Role: RoleClient, ID: 100, To: 1, Cluster: "test"})
	waitFor(t, "client connected", func() bool { return n.tr.Stats().Clients == 1 })
	// The client never reads. Send until a refusal finds the queue within
	// one message of its budget (the writer drains it into the socket
	// meanwhile, so it may take a while).
	sent, refused := 0, 0
	var held int64
	for s := uint64(1); held < budget-2000; s++ {
		if s > 1_000_000 {
			t.Fatal("a million replies and the queue never reached its budget")
		}
		switch err := n.tr.Send(100, bigMsg(1, s, 1000)); {
		case err == nil:
			sent++
		case errors.Is(err, ErrQueueFull):
			refused++
			held = n.tr.Stats().ClientQueueBytes
		default:
			t.Fatal(err)
		}
	}
	st := n.tr.Stats()
	t.Logf("%d replies queued or written, %d refused; the client queue held %d bytes at a refusal (budget %d)", sent, refused, held, budget)
	if held > budget || st.Drops[DropQueueBytes] != uint64(refused) {
		t.Errorf("held %d bytes (budget %d); %d refused, drops %v", held, budget, refused, st.Drops)
	}
}
