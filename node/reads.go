package node

import (
	"errors"
	"fmt"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/wire"
)

// Reads without a multicast (READ, wire/read.go; docs/reads.md).
//
// A client's READ is admitted like its MULTICASTs (the client inbox and
// its share, inbox.go; shed with READ_REPLY OVERLOADED), and accepted only
// from the connection authenticated as the read's client. Then:
//
//   - a local read (wire.ReadLocal) runs the query at once on this
//     replica's state (rsm.Querier) and answers with the applied gts: it
//     may be stale, by as much as this replica lags;
//   - a linearizable read asks the core for a read index
//     (amcast.ReadIndexer: wbcast's leader confirms its ballot with a
//     quorum round); once the core releases it (Ready.Reads) and the
//     state machine applied through the index, the query runs and the
//     reply carries the applied gts. A core that fails it (not the
//     leader, deposed, overloaded) is answered NOT_LEADER (with this
//     node's view of the leader) or OVERLOADED; the client retries
//     elsewhere or backs off.
//
// Reads pending here are bounded in number, per client and in query
// bytes (ReadLimits); past a bound a read is answered OVERLOADED. A read
// not answered within ReadLimits.TimeoutTicks is answered NOT_LEADER (a
// leader that lost its quorum, or a state still being transferred).
// Nothing of a read is durable: a crash forgets them and clients retry.

// Defaults of ReadLimits.
const (
	DefaultMaxPendingReads   = 4096
	DefaultMaxClientReads    = 256
	DefaultMaxReadBytes      = 64 << 20
	DefaultReadTimeoutFactor = 2 // x ElectionTicks
)

// ReadLimits bounds the reads a node holds (Config.Reads); zero fields
// take the defaults.
type ReadLimits struct {
	// MaxPending is the most reads held in all (default
	// DefaultMaxPendingReads), MaxPerClient the most of one client
	// (default DefaultMaxClientReads), MaxBytes their queries' bytes
	// (default DefaultMaxReadBytes; a read is admitted when it fits or
	// none is held).
	MaxPending, MaxPerClient int
	MaxBytes                 int64
	// TimeoutTicks: a read still pending after this many ticks is
	// answered NOT_LEADER (default 2 x ElectionTicks).
	TimeoutTicks int
}

func (l *ReadLimits) withDefaults(electionTicks int) error {
	for _, d := range []struct {
		v   *int
		def int
	}{
		{&l.MaxPending, DefaultMaxPendingReads},
		{&l.MaxPerClient, DefaultMaxClientReads},
		{&l.TimeoutTicks, DefaultReadTimeoutFactor * electionTicks},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxReadBytes
	}
	if l.MaxPending < 1 || l.MaxPerClient < 1 || l.MaxBytes < 1 || l.TimeoutTicks < 1 {
		return errors.New("node: Config.Reads limits must be positive")
	}
	return nil
}

// ReadStats counts the reads a node answered, by outcome.
type ReadStats struct {
	// Linearizable and Local count the reads answered with a result;
	// NotLeader those answered NOT_LEADER (not the leader, deposed, timed
	// out); Overloaded those refused at a bound (ReadLimits, the core's,
	// the client inbox); Failed those whose query failed or that this node
	// cannot serve; Refused those dropped unanswered (not from their
	// client's connection).
	Linearizable, Local, NotLeader, Overloaded, Failed, Refused uint64
	// Pending and PendingBytes are the reads held now.
	Pending      int
	PendingBytes int64
}

type heldRead struct {
	from  wire.ProcID
	r     *wire.Read
	at    uint64 // tick it arrived
	index wire.Timestamp
	ready bool // the core released it with index
}

// readQueue is the node's pending linearizable reads, by the ctx the core
// knows them by.
type readQueue struct {
	next      uint64
	byCtx     map[uint64]*heldRead
	ready     []uint64 // released by the core, waiting for the state to reach the index
	perClient map[wire.ProcID]int
	bytes     int64
}

// stepRead handles a client's READ (on the loop).
func (n *Node) stepRead(env wire.Envelope, r *wire.Read) {
	rs := &n.stats.Reads
	if env.From != r.ID.Client {
		rs.Refused++
		n.log.Debug("refused a READ not from its client's connection", "from", uint32(env.From), "read", wire.Describe(r))
		return
	}
	switch {
	case r.G != n.group:
		n.failRead(env.From, r, wire.ReadFailed, fmt.Sprintf("node p%d serves group %d, not %d", n.cfg.ID, n.group, r.G))
		return
	case n.svc == nil:
		n.failRead(env.From, r, wire.ReadFailed, fmt.Sprintf("node p%d runs no state machine to query", n.cfg.ID))
		return
	case r.Mode == wire.ReadLocal:
		if n.query(env.From, r) {
			rs.Local++
		}
		return
	}
	ri, ok := n.m.(amcast.ReadIndexer)
	if !ok {
		n.failRead(env.From, r, wire.ReadFailed, fmt.Sprintf("protocol %s serves no read index: use an ordered read (a multicast) or a local one", n.proto.name))
		return
	}
	if !n.m.leader() {
		n.failRead(env.From, r, wire.ReadNotLeader, fmt.Sprintf("p%d does not lead group %d", n.cfg.ID, n.group))
		return
	}
	q := &n.reads
	lim := &n.cfg.Reads
	size := int64(len(r.Query))
	switch {
	case len(q.byCtx) >= lim.MaxPending:
		n.failRead(env.From, r, wire.ReadOverloaded, fmt.Sprintf("%d reads pending at p%d", len(q.byCtx), n.cfg.ID))
		return
	case q.perClient[env.From] >= lim.MaxPerClient:
		n.failRead(env.From, r, wire.ReadOverloaded, fmt.Sprintf("client %d has %d reads pending at p%d", env.From, q.perClient[env.From], n.cfg.ID))
		return
	case len(q.byCtx) > 0 && q.bytes+size > lim.MaxBytes:
		n.failRead(env.From, r, wire.ReadOverloaded, fmt.Sprintf("reads pending at p%d hold %d query bytes", n.cfg.ID, q.bytes))
		return
	}
	if q.byCtx == nil {
		q.byCtx, q.perClient = map[uint64]*heldRead{}, map[wire.ProcID]int{}
	}
	q.next++
	q.byCtx[q.next] = &heldRead{from: env.From, r: r, at: n.stats.Ticks}
	q.perClient[env.From]++
	q.bytes += size
	n.stats.Reads.Pending, n.stats.Reads.PendingBytes = len(q.byCtx), q.bytes
	ri.ReadIndex(q.next)
}

// takeRead removes a held read.
func (n *Node) takeRead(ctx uint64) *heldRead {
	q := &n.reads
	h := q.byCtx[ctx]
	if h == nil {
		return nil
	}
	delete(q.byCtx, ctx)
	if q.perClient[h.from]--; q.perClient[h.from] <= 0 {
		delete(q.perClient, h.from)
	}
	q.bytes -= int64(len(h.r.Query))
	n.stats.Reads.Pending, n.stats.Reads.PendingBytes = len(q.byCtx), q.bytes
	return h
}

// serveReads takes the core's decisions on reads (a Ready's Reads) and
// answers every released read whose index the state machine reached. It
// runs after the Ready's deliveries are applied.
func (n *Node) serveReads(decided []amcast.ReadState) {
	q := &n.reads
	for _, d := range decided {
		h := q.byCtx[d.Ctx]
		switch {
		case h == nil:
		case d.Err != nil:
			n.takeRead(d.Ctx)
			st := wire.ReadNotLeader
			if errors.Is(d.Err, amcast.ErrReadOverloaded) {
				st = wire.ReadOverloaded
			}
			n.failRead(h.from, h.r, st, d.Err.Error())
		default:
			h.index, h.ready = d.Index, true
			q.ready = append(q.ready, d.Ctx)
		}
	}
	if len(q.ready) == 0 || n.svc == nil || n.transferring() {
		return
	}
	applied := n.svc.d.Applied()
	k := 0
	for _, ctx := range q.ready {
		h := q.byCtx[ctx]
		switch {
		case h == nil: // timed out
		case h.index.LessEq(applied):
			n.takeRead(ctx)
			if n.query(h.from, h.r) {
				n.stats.Reads.Linearizable++
			}
		default:
			q.ready[k] = ctx
			k++
		}
	}
	clear(q.ready[k:])
	q.ready = q.ready[:k]
}

// expireReads answers the reads pending for longer than
// ReadLimits.TimeoutTicks (on every tick; reads are few and short-lived).
func (n *Node) expireReads() {
	q := &n.reads
	for ctx, h := range q.byCtx {
		if n.stats.Ticks >= h.at+uint64(n.cfg.Reads.TimeoutTicks) {
			n.takeRead(ctx)
			n.failRead(h.from, h.r, wire.ReadNotLeader, fmt.Sprintf("p%d did not serve the read within %d ticks", n.cfg.ID, n.cfg.Reads.TimeoutTicks))
		}
	}
}

// query runs r's query on the state machine and answers it; false if the
// query failed (answered FAILED).
func (n *Node) query(to wire.ProcID, r *wire.Read) bool {
	res, at, err := n.svc.d.Query(r.Query)
	if err != nil {
		if !errors.Is(err, rsm.ErrQuery) && !errors.Is(err, rsm.ErrNoQuery) && !errors.Is(err, rsm.ErrResultTooLarge) {
			err = fmt.Errorf("the state machine failed: %w", err)
		}
		n.failRead(to, r, wire.ReadFailed, err.Error())
		return false
	}
	n.sendCounted(to, &wire.ReadReply{ID: r.ID, G: n.group, Status: wire.ReadOK, Index: at, Leader: n.leaderHint(), Result: res})
	return true
}

func (n *Node) failRead(to wire.ProcID, r *wire.Read, st wire.ReadStatus, why string) {
	rs := &n.stats.Reads
	switch st {
	case wire.ReadNotLeader:
		rs.NotLeader++
	case wire.ReadOverloaded:
		rs.Overloaded++
	default:
		rs.Failed++
	}
	if len(why) > wire.MaxReadErr {
		why = why[:wire.MaxReadErr]
	}
	n.sendCounted(to, &wire.ReadReply{ID: r.ID, G: r.G, Status: st, Leader: n.leaderHint(), Err: why})
}

// leaderHint is this node's view of its group's leader: the leader of the
// highest ballot it joined.
func (n *Node) leaderHint() wire.ProcID {
	b, _ := n.m.ballots()
	return b.Leader()
}
