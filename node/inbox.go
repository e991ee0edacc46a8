package node

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// Inboxes and admission control (issue #11 item 7; docs/operations.md,
// "Limits and admission control").
//
// The transport's readers hand every inbound message to handle, which
// queues it for the node's loop in one of four bounded queues, each
// bounded in messages (a channel's capacity) and in encoded bytes (a
// budget: wire.Size of the messages, the figure the transport's frame
// limit and send queues use):
//
//   - the peer inbox: protocol messages from the other nodes and from this
//     process itself (Config.InboxSize, Config.InboxBytes). When it is
//     full the reader waits (counted: Stats.InboxWaits): back-pressure
//     through TCP into the sending peer's send queue, which then drops
//     (queue_full, queue_bytes): a loss the protocols tolerate, since they
//     retransmit and catch up.
//   - the client inbox: clients' MULTICASTs and READs (Config.ClientInboxSize,
//     Config.ClientInboxBytes), of which one client may hold at most
//     Config.ClientShare messages. A message that does not fit is shed
//     unread: counted (Stats.ClientShed, Stats.ClientShedShare) and
//     answered with OVERLOADED (a READ with READ_REPLY OVERLOADED), on which the client returns
//     client.ErrOverloaded. A reader never waits for a client's sake, so
//     a client flood cannot hold up anything but its own connection, and
//     the share keeps a few greedy clients from taking all the room: a
//     client with one message in flight is shed only when more than
//     ClientInboxSize/ClientShare clients are at their share.
//   - the side queue: gossip frames (sideQueue, sideBytes), and the view
//     queue: clients' view requests (viewQueue), each dropped when full
//     (gossip tolerates loss; a client asks again). They are apart so that
//     a client flooding view requests cannot crowd gossip out (gossip's
//     failure detector would then convict live members).
//
// The loop serves peers first: every pass drains the peer inbox (up to
// MaxBatch) before it steps at most Config.ClientBatch client messages, so
// a client flood delays a heartbeat or an ACCEPT_ACK by at most one pass
// of ClientBatch MULTICASTs, never by the depth of the client inbox.

// input is a queued inbound message with its encoded size.
type input struct {
	env  wire.Envelope
	size int64
	at   int64 // a client's MULTICAST: when it arrived (Unix ns; delivery latency, metrics.go)
}

// budget bounds the bytes queued in one inbox. A message is admitted when
// it fits, or when the inbox holds nothing (so a message up to the frame
// limit is never refused for its size alone).
type budget struct {
	mu   sync.Mutex
	max  int64
	used int64
	peak int64
	wake chan struct{} // closed by give when waiters exist; nil if none
}

// take admits n bytes if they fit, without waiting.
func (b *budget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.admitLocked(n)
}

func (b *budget) admitLocked(n int64) bool {
	if b.used > 0 && b.used+n > b.max {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

// wait admits n bytes, waiting until they fit; it reports false if stop
// closes first. waited counts the calls that had to wait.
func (b *budget) wait(n int64, stop <-chan struct{}, waited *atomic.Uint64) bool {
	for first := true; ; first = false {
		b.mu.Lock()
		if b.admitLocked(n) {
			b.mu.Unlock()
			return true
		}
		if first {
			waited.Add(1)
		}
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		w := b.wake
		b.mu.Unlock()
		select {
		case <-w:
		case <-stop:
			return false
		}
	}
}

// give releases n bytes and wakes the waiters.
func (b *budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
	b.mu.Unlock()
}

// load returns the bytes queued now and the most ever queued.
func (b *budget) load() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// inbox is one bounded queue of inputs.
type inbox struct {
	ch     chan input
	budget budget
}

func newInbox(msgs int, bytes int64) *inbox {
	return &inbox{ch: make(chan input, msgs), budget: budget{max: bytes}}
}

// offer queues in without waiting; false: the inbox is full.
func (q *inbox) offer(in input) bool {
	if !q.budget.take(in.size) {
		return false
	}
	select {
	case q.ch <- in:
		return true
	default:
		q.budget.give(in.size)
		return false
	}
}

// put queues in, waiting for room; false if stop closed first. waited
// counts the calls that had to wait.
func (q *inbox) put(in input, stop <-chan struct{}, waited *atomic.Uint64) bool {
	if !q.budget.wait(in.size, stop, waited) {
		return false
	}
	select {
	case q.ch <- in:
		return true
	default:
	}
	waited.Add(1)
	select {
	case q.ch <- in:
		return true
	case <-stop:
		q.budget.give(in.size)
		return false
	}
}

// got releases the bytes of an input taken out of ch.
func (q *inbox) got(in input) { q.budget.give(in.size) }

// shares counts the messages each client holds in the client inbox.
type shares struct {
	mu  sync.Mutex
	max int
	n   map[wire.ProcID]int
}

// take counts one more message of client id, or reports false if id holds
// its share already.
func (s *shares) take(id wire.ProcID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[id] >= s.max {
		return false
	}
	if s.n == nil {
		s.n = map[wire.ProcID]int{}
	}
	s.n[id]++
	return true
}

// give counts one message of id less (entries at zero are deleted, so the
// map holds only clients with queued messages).
func (s *shares) give(id wire.ProcID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[id]--; s.n[id] <= 0 {
		delete(s.n, id)
	}
}

// handle is the transport's Handler: it sorts inbound messages into the
// inboxes (see above).
func (n *Node) handle(from wire.ProcID, m wire.Message) {
	in := input{env: wire.Envelope{From: from, To: n.cfg.ID, Msg: m}, size: int64(wire.Size(m))}
	switch m := m.(type) {
	case *wire.Gossip:
		if !n.side.offer(in) {
			n.sideDrops.Add(1)
		}
		return
	case *wire.ViewRequest:
		if !n.views.offer(in) {
			n.viewDrops.Add(1)
		}
		return
	case *wire.Multicast:
		if !n.cfg.Topology.IsReplica(from) {
			in.at = time.Now().UnixNano()
			if !n.admit(in) {
				n.shed(from, &wire.Overloaded{ID: m.M.ID})
			}
			return
		}
	case *wire.Read: // reads.go
		if !n.admit(in) {
			n.shed(from, &wire.ReadReply{ID: m.ID, G: m.G, Status: wire.ReadOverloaded, Err: "the node's client inbox is full"})
		}
		return
	}
	n.inbox.put(in, n.stop, &n.inboxWaits)
}

// admit queues a client's MULTICAST or READ in the client inbox, or
// counts it shed and returns false; the caller then answers it (shed).
// The answer is built only then: it was an allocation per client message.
func (n *Node) admit(in input) bool {
	switch {
	case !n.shares.take(in.env.From):
		n.clientShedShare.Add(1)
	case !n.clients.offer(in):
		n.shares.give(in.env.From)
		n.clientShed.Add(1)
	default:
		return true
	}
	return false
}

// shed answers a client's message that admit refused. Best effort: if the
// client's reply queue is full this is dropped, and the client retries
// after its timeout instead.
func (n *Node) shed(to wire.ProcID, answer wire.Message) { n.tr.Send(to, answer) }

// take steps one input from q.
func (n *Node) take(q *inbox, in input) {
	q.got(in)
	if q == n.clients {
		n.shares.give(in.env.From)
		n.stats.ClientSteps++
		if mc, ok := in.env.Msg.(*wire.Multicast); ok {
			n.met.clientMulticast(mc.M.ID, in.at)
		}
	}
	n.step(in.env)
}

// drain steps queued inputs so that one Ready (and one sync) covers them:
// the peer inbox first, up to MaxBatch inputs in all (have counts those
// already stepped this pass), then at most ClientBatch client messages
// (clients counts those already stepped this pass). It returns the pass's
// counts after it.
func (n *Node) drain(have, clients int) (int, int) {
	defer func() {
		n.stats.MaxBatchSeen = max(n.stats.MaxBatchSeen, have+clients)
		n.stats.MaxClientBatchSeen = max(n.stats.MaxClientBatchSeen, clients)
	}()
peers:
	for have < n.cfg.MaxBatch {
		select {
		case in := <-n.inbox.ch:
			n.take(n.inbox, in)
			have++
		default:
			break peers
		}
	}
	for clients < n.cfg.ClientBatch {
		select {
		case in := <-n.clients.ch:
			n.take(n.clients, in)
			clients++
		default:
			return have, clients
		}
	}
	return have, clients
}

// pingEvery is how often the node pings its idle connections: often
// enough for a peer with the same idle timeout never to cut them.
func pingEvery(idle time.Duration) time.Duration {
	if idle <= 0 {
		return 0 // the transport's default
	}
	return min(transport.DefaultPingEvery, idle/4)
}
