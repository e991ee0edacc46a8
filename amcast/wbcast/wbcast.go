// Package wbcast implements White-Box Atomic Multicast (Gotsman, Lefort,
// Chockler, DSN 2019) as a deterministic state machine; weft spec
// ../shared/spec/wbcast.md §4 (normal case), §5 (recovery), §6 (GC).
//
// Each group of 2f+1 processes has a leader. Skeen's two clock actions —
// assigning a local timestamp and advancing the clock past the global
// timestamp — are replicated in one round trip between the leaders of all
// destination groups and majorities of every destination group:
//
//	client  --MULTICAST-->  leader of each destination group      (δ1)
//	leader  --ACCEPT(lts)-> every member of every destination group (δ2)
//	member  (holds ACCEPTs of all destination leaders: clock := gts)
//	member  --ACCEPT_ACK(B, gts)--> every destination leader        (δ3)
//	leader  (quorum of every destination group with one ballot vector B:
//	         commit; deliver in gts order; DELIVER to its followers) (δ4)
//
// Leaders deliver after 3δ without contention and 5δ with it; followers
// one δ later. Messages to self are handled inside the machine, instantly.
//
// Fault tolerance (recovery.go, timers.go, gc.go): a failure detector fed by
// heartbeats decides when the designated successor starts a ballot
// (NEW_LEADER / NEW_LEADER_ACK / NEW_STATE / NEW_STATE_ACK, merging the
// quorum's states with the highest cballot and highest phase per message);
// a new leader re-sends ACCEPTED messages with their old local timestamps;
// DELIVERs are chained (each names the previous delivery) so a lost one is
// noticed and re-sent from the leader's delivery log; stuck messages are
// re-multicast (H12); delivered messages are garbage-collected once a
// quorum of every destination group delivered them (every process with
// Config.CollectAfterAll), keeping their ids so retries are never
// delivered twice, and members the floor passed get a SNAPSHOT
// (transfer.go); every promise and delivery is a
// durable record (store.go) from which a crashed process restarts.
package wbcast

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/internal/tsheap"
	"github.com/weft-dev/weft/wire"
)

// Status is a process's role.
type Status uint8

// Roles.
const (
	Follower Status = iota
	Leader
	Recovering
)

func (s Status) String() string {
	switch s {
	case Follower:
		return "FOLLOWER"
	case Leader:
		return "LEADER"
	case Recovering:
		return "RECOVERING"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Config configures one WbCast process. Durations are in ticks; zero fields
// take the documented defaults.
type Config struct {
	// Topology is the group layout; every process must use the same one.
	Topology *amcast.Topology
	// ID is this process; it must be a replica in Topology.
	ID wire.ProcID
	// HeartbeatTicks: ticks between heartbeats to the group (default 1).
	HeartbeatTicks int
	// ElectionTicks: a member silent this long is suspected by the default
	// detector; a candidate that has not won after 2x this retries with a
	// higher ballot (default 10).
	ElectionTicks int
	// RetryTicks: a message known here but not delivered after this many
	// ticks without progress is re-multicast to its destination groups
	// (H12; default 12).
	RetryTicks int
	// CatchUpBatch: DELIVERs re-sent per lagging follower per round
	// (default 256).
	CatchUpBatch int
	// MaxDeferred: cross-group messages held while recovering (default
	// 4096); older ones are dropped (retries re-send them).
	MaxDeferred int
	// MaxMsgBytes is the byte budget of one protocol message: a
	// NEW_LEADER_ACK or NEW_STATE whose state is larger is split into pages
	// of at most this size (a page holds at least one message), and the
	// DELIVERs of one catch-up round add up to at most this (default 1 MiB;
	// at most wire.DefaultMaxFrame/2, so a page with the largest payload
	// still fits the transport's frame cap).
	MaxMsgBytes int
	// MaxStatePages bounds a state arriving in pages: a member's
	// NEW_LEADER_ACK or the leader's NEW_STATE of more pages, or of more
	// than MaxMsgBytes x MaxStatePages bytes, is rejected (default 256:
	// 256 MiB with the default budget, about 250,000 messages of 1 KiB).
	MaxStatePages int
	// SessionTicks: a client session with no message held here and no
	// activity for this many ticks is forgotten (default 1000; see
	// docs/sessions.md for the timing assumption it rests on).
	SessionTicks int
	// CollectAfterAll makes garbage collection wait until every member of
	// each destination group delivered a message, as WbCast's paper does
	// (spec §6, P14). By default (false) a quorum of each group suffices
	// (updateGroupLinf): a member down for good no longer pins memory, and
	// a member the floor passed is caught up by a SNAPSHOT (transfer.go).
	// The price is where a collected prefix lives: on the members at or
	// above the floor only, so a group must not lose the disks of f+1
	// members counting those still catching up (docs/disk-loss.md). With
	// CollectAfterAll every member holds every message until all
	// delivered it; memory grows while one is down.
	CollectAfterAll bool
	// MaxPendingReads bounds the read-index requests held at a leader
	// (readindex.go; default 4096): past it a read fails with
	// amcast.ErrReadOverloaded.
	MaxPendingReads int
	// Detector judges the liveness of group members. Default: a timeout
	// detector with ElectionTicks. Real nodes plug in phi-accrual.
	Detector Detector
	// Mutation is test only: breaks the protocol on purpose; never set
	// outside tests (mutation.go).
	Mutation Mutation
}

func (c *Config) withDefaults() error {
	if err := amcast.ReplicaDefaults("wbcast", c.Topology, c.ID,
		amcast.IntDefault{V: &c.HeartbeatTicks, Default: 1, Name: "HeartbeatTicks"},
		amcast.IntDefault{V: &c.ElectionTicks, Default: 10, Name: "ElectionTicks"},
		amcast.IntDefault{V: &c.RetryTicks, Default: 12, Name: "RetryTicks"},
		amcast.IntDefault{V: &c.CatchUpBatch, Default: 256, Name: "CatchUpBatch"},
		amcast.IntDefault{V: &c.MaxDeferred, Default: 4096, Name: "MaxDeferred"},
		amcast.IntDefault{V: &c.MaxMsgBytes, Default: DefaultMaxMsgBytes, Name: "MaxMsgBytes"},
		amcast.IntDefault{V: &c.MaxStatePages, Default: 256, Name: "MaxStatePages"},
		amcast.IntDefault{V: &c.SessionTicks, Default: 1000, Name: "SessionTicks"},
		amcast.IntDefault{V: &c.MaxPendingReads, Default: 4096, Name: "MaxPendingReads"}); err != nil {
		return err
	}
	if c.MaxMsgBytes < MinMaxMsgBytes || c.MaxMsgBytes > wire.DefaultMaxFrame/2 {
		return fmt.Errorf("wbcast: Config.MaxMsgBytes %d outside [%d, %d] (half the frame cap)", c.MaxMsgBytes, MinMaxMsgBytes, wire.DefaultMaxFrame/2)
	}
	if c.MaxStatePages > math.MaxInt/c.MaxMsgBytes {
		return fmt.Errorf("wbcast: Config.MaxStatePages %d too large", c.MaxStatePages)
	}
	if c.Detector == nil {
		c.Detector = NewTimeoutDetector(uint64(c.ElectionTicks))
	}
	return nil
}

// Byte budget of a protocol message (Config.MaxMsgBytes).
const (
	DefaultMaxMsgBytes = 1 << 20
	MinMaxMsgBytes     = 1 << 10
)

type accEntry struct {
	b   wire.Ballot
	lts wire.Timestamp
	ok  bool
}

// record is a process's state for one message.
type record struct {
	m     wire.AppMsg
	known bool
	phase wire.Phase
	lts   wire.Timestamp // LocalTS: the own group's local timestamp
	gts   wire.Timestamp // GlobalTS (final once COMMITTED)

	acc  []accEntry // latest ACCEPT per destination group, indexed like m.Dest
	nacc int

	issued   bool   // delivered here (a leader issues DELIVER when it delivers)
	since    uint64 // tick of the last progress (H12)
	acceptAt uint64 // leader: tick of the last ACCEPT sent (+1; 0 = never)

	// Leader only: ACCEPT_ACK tally for one exact ballot vector.
	ackB    []wire.Ballot
	ackGTS  wire.Timestamp
	ackFrom []uint64 // per destination group, bitmask of member indexes

	// Room for acc and ackFrom of a message to at most inlineDests groups
	// (nearly every message), so a record costs one allocation, not three
	// (issue #14 item 4: allocations per multicast; TestStepAllocs).
	accInline     [inlineDests]accEntry
	ackFromInline [inlineDests]uint64

	dur durState // what the records persisted made durable of it (image.go)

	dropped bool // it left recs (collect, drop); refs.go
}

// peer is what a process knows of a member of its group.
type peer struct {
	maxDelivered wire.Timestamp
	cballot      wire.Ballot
	ballot       wire.Ballot // the ballot in its last heartbeat
	claimsLead   bool        // and whether it claimed to lead (or establish) it
	heardHB      bool        // a heartbeat arrived at all
	catchAt      uint64      // last catch-up sent (leader)
	stateAt      uint64      // last NEW_STATE re-sent (leader)
	stateBusy    uint64      // no NEW_STATE re-sent before this tick (leader; paging.go)
	caughtUp     bool        // catchAt is meaningful
	stateSent    bool
	snapBusy     uint64 // no SNAPSHOT sent before this tick (leader; transfer.go)
	stuckReports int    // heartbeats in a row that reported the same delivery, stalled (leader; catchUp)
	rejoining    bool   // it lost its disk and asks to rejoin (amnesia.go); cannot lead
}

// logEntry is one delivery of this incarnation, with the one before it:
// catchUp re-sends DELIVERs only along this chain, and a member whose
// last delivery is not a link (collected since, or delivered before this
// process restarted or installed a snapshot) gets a SNAPSHOT instead.
type logEntry struct {
	gts  wire.Timestamp
	prev wire.Timestamp
	r    *record // the delivery's record; dropped once collected
	// wait is 1 + the destination group whose delivered floor held this
	// delivery back from collection at the last pass (0: none seen): the
	// next pass skips it without looking its record up while that floor
	// is still below its gts (gc.go).
	wait int32
}

// Process is one WbCast replica.
type Process struct {
	// out is unexported (issue #10 item 8): an embedded Outbox would let any
	// caller queue deliveries or messages in this process's name.
	out     amcast.Outbox
	rejects amcast.Rejects // refused remote input, by reason (validate.go)
	cfg     Config
	id      wire.ProcID
	g       wire.GroupID
	gi      int // index in the group
	topo    *amcast.Topology

	status  Status
	ballot  wire.Ballot // highest ballot joined (a promise)
	cballot wire.Ballot // ballot whose leader's state was adopted
	clock   uint64
	ticks   uint64
	// durClock is the clock of the last state adopted or installed here,
	// as persisted (the Store's Clock; image.go).
	durClock uint64
	// deliveredAt[t % len] is maxDelivered at tick t, for the last
	// catchUpTicks+1 ticks (stalled).
	deliveredAt [catchUpTicks + 1]wire.Timestamp

	recs         map[wire.MsgID]*record
	maxDelivered wire.Timestamp
	dlog         []logEntry   // deliveries in gts order, trimmed by GC
	offLog       []wire.MsgID // delivered records dlog does not hold (restored, installed), for collect
	pending      tsheap.Heap[*record]
	committed    tsheap.Heap[*record]
	sess         sessionTable // per client session: collected ids, floor (sessions.go)
	linf         []wire.Timestamp
	// ackFloor bounds from above what this process may have collected of
	// its own group's messages without its current linf showing it: its
	// last delivery when it restarted (linf is volatile) or installed a
	// snapshot. Its NEW_LEADER_ACK reports max(linf, ackFloor) (transfer.go).
	ackFloor wire.Timestamp
	// ackedFloor is the highest Linf a quorum of NEW_LEADER_ACKs reported
	// to this process as a candidate: it is behind until it delivered
	// that far (behind), and never collects by it.
	ackedFloor wire.Timestamp

	peers     []peer
	cand      *candidate
	stateIn   *stateInbound // a NEW_STATE whose pages are arriving
	snapIn    *snapInbound  // a SNAPSHOT whose pages are arriving (transfer.go)
	amn       *amnesia      // non-nil: lost its durable state, inert (amnesia.go)
	joinedAt  uint64        // tick when the current ballot was joined
	lastStart uint64        // tick when this process last started a ballot
	started   bool
	// forgotB is a ballot whose own leader has shown a lower one in its
	// heartbeats since tick forgotAt, last looked at on tick forgotSeen
	// (forgot, timers.go).
	forgotB    wire.Ballot
	forgotAt   uint64
	forgotSeen uint64
	deferred   []wire.Envelope
	ho         *handover // a leadership hand-over under way or done (handover.go)
	retiring   bool      // departing: never leads again (handover.go)
	cov        amcast.Coverage
	ri         readIndex // read-index rounds (readindex.go)

	local []wire.Envelope // messages to self, handled before Step returns
	held  []wire.Message  // records held back by MutSendBeforePersist (tests only)
}

var (
	_ amcast.Machine       = (*Process)(nil)
	_ amcast.Observable    = (*Process)(nil)
	_ amcast.RejectCounter = (*Process)(nil)
	_ amcast.HandOverer    = (*Process)(nil)
	_ amcast.ReadIndexer   = (*Process)(nil)
)

// New returns a process in its initial state: every group's first member is
// the leader of ballot (0, first member); the others follow it.
func New(cfg Config) (*Process, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	p := newProcess(cfg)
	b0 := wire.Ballot{N: 0, P: cfg.Topology.InitialLeader(p.g)}
	p.ballot, p.cballot = b0, b0
	if b0.Leader() == p.id {
		p.status = Leader
	}
	return p, nil
}

func newProcess(cfg Config) *Process {
	g, _ := cfg.Topology.GroupOf(cfg.ID)
	return &Process{
		cfg: cfg, id: cfg.ID, g: g, gi: cfg.Topology.MemberIndex(cfg.ID), topo: cfg.Topology,
		recs:  map[wire.MsgID]*record{},
		linf:  make([]wire.Timestamp, cfg.Topology.NumGroups()),
		peers: make([]peer, len(cfg.Topology.Members(g))),
		sess:  newSessionTable(),
	}
}

// ID implements amcast.Machine.
func (p *Process) ID() wire.ProcID { return p.id }

// HasReady implements amcast.Machine.
func (p *Process) HasReady() bool { return p.out.HasReady() }

// Advance implements amcast.Machine.
func (p *Process) Advance() { p.out.Advance() }

// Status returns the process's role.
func (p *Process) Status() Status { return p.status }

// IsLeader implements amcast.Observable.
func (p *Process) IsLeader() bool { return p.status == Leader }

// Retained implements amcast.Observable: the entries held in memory,
// messages and client-session state (one per session plus the collected
// sequence numbers it remembers).
func (p *Process) Retained() int { return len(p.recs) + p.sess.size() }

// Coverage implements amcast.Observable.
func (p *Process) Coverage() amcast.Coverage { return p.cov }

// Ballot returns the process's ballot and cballot.
func (p *Process) Ballot() (ballot, cballot wire.Ballot) { return p.ballot, p.cballot }

// Clock returns the process's Lamport clock.
func (p *Process) Clock() uint64 { return p.clock }

// MaxDelivered returns the global timestamp of the last delivery.
func (p *Process) MaxDelivered() wire.Timestamp { return p.maxDelivered }

// Floor returns the group's delivered floor as this process knows it:
// what its group may have collected (gc.go). A member whose MaxDelivered
// is below it can be caught up only by a SNAPSHOT (transfer.go).
func (p *Process) Floor() wire.Timestamp { return p.linf[p.g] }

func (p *Process) send(to wire.ProcID, m wire.Message) {
	if to == p.id {
		if _, ok := m.(*wire.AcceptAck); ok && !p.mut(MutSelfAckEarly) {
			// A leader's own ACCEPT_ACK leaves through the Ready like
			// anyone's, and the driver steps it back once the Ready's
			// records are durable: its own acceptance then counts only
			// once durable, whatever the driver steps meanwhile
			// (pipeline.go, "The leader's own ack").
			p.out.Send(p.id, p.id, m)
			return
		}
		p.local = append(p.local, wire.Envelope{From: p.id, To: p.id, Msg: m})
		return
	}
	p.out.Send(p.id, to, m)
}

func (p *Process) sendGroup(g wire.GroupID, m wire.Message) {
	for _, q := range p.topo.Members(g) {
		p.send(q, m)
	}
}

// Step implements amcast.Machine.
func (p *Process) Step(env wire.Envelope) error {
	if env.To != p.id {
		return fmt.Errorf("%w: envelope for p%d delivered to p%d", amcast.ErrBadMessage, env.To, p.id)
	}
	if err := p.step(env); err != nil {
		return err // refused: nothing changed, not even the detector's view
	}
	if g, ok := p.topo.GroupOf(env.From); ok && g == p.g && env.From != p.id {
		p.cfg.Detector.Heard(env.From, p.ticks)
	}
	p.drainLocal()
	p.checkReads()
	return nil
}

func (p *Process) drainLocal() {
	for i := 0; i < len(p.local); i++ {
		if err := p.step(p.local[i]); err != nil {
			panic(fmt.Sprintf("wbcast: p%d refused its own message %s: %v", p.id, wire.Describe(p.local[i].Msg), err))
		}
	}
	clear(p.local)
	p.local = p.local[:0]
}

func (p *Process) step(env wire.Envelope) error {
	if p.amn != nil {
		return p.stepAmnesiac(env) // inert until it rejoined (amnesia.go)
	}
	switch m := env.Msg.(type) {
	case *wire.Multicast:
		return p.onMulticast(env, m)
	case *wire.Accept:
		return p.onAccept(env, m)
	case *wire.AcceptAck:
		return p.onAcceptAck(env.From, m)
	case *wire.Deliver:
		return p.onDeliver(env.From, m)
	case *wire.Heartbeat:
		return p.onHeartbeat(env.From, m)
	case *wire.NewLeader:
		return p.onNewLeader(env.From, m)
	case *wire.NewLeaderAck:
		return p.onNewLeaderAck(env.From, m)
	case *wire.NewState:
		return p.onNewState(env.From, m)
	case *wire.NewStateAck:
		return p.onNewStateAck(env.From, m)
	case *wire.Snapshot:
		return p.onSnapshot(env.From, m)
	case *wire.Rejoin:
		return p.onRejoin(env.From, m)
	case *wire.HandOver:
		return p.onHandOver(env.From, m)
	case *wire.ReadIndex:
		return p.onReadIndex(env.From, m)
	case *wire.ReadIndexAck:
		return p.onReadIndexAck(env.From, m)
	default:
		return fmt.Errorf("%w: wbcast does not handle %s", amcast.ErrBadMessage, env.Msg.Kind())
	}
}

// deferMsg holds a cross-group message while recovering (P10).
func (p *Process) deferMsg(env wire.Envelope) {
	if len(p.deferred) >= p.cfg.MaxDeferred {
		copy(p.deferred, p.deferred[1:])
		p.deferred = p.deferred[:len(p.deferred)-1]
	}
	p.deferred = append(p.deferred, env)
}

// replayDeferred re-handles messages held while recovering.
func (p *Process) replayDeferred() {
	ds := p.deferred
	p.deferred = nil
	for _, env := range ds {
		_ = p.step(env) // they were validated when they arrived
	}
}

// recOr returns r, the record of id a lookup found, or if it found none a
// new one (rec).
func (p *Process) recOr(r *record, id wire.MsgID) *record {
	if r != nil {
		return r
	}
	return p.rec(id)
}

func (p *Process) rec(id wire.MsgID) *record {
	r := p.recs[id]
	if r == nil {
		r = &record{since: p.ticks}
		p.recs[id] = r
		s := p.sess.get(id.Key())
		s.live++
		s.last = p.ticks
	}
	return r
}

// learn makes r hold message m. The first copy wins: handlers refuse a
// copy that differs from a known one (checkKnown) before calling learn.
func (p *Process) learn(r *record, m *wire.AppMsg) {
	if r.known {
		return
	}
	r.m, r.known = *m, true
	r.acc = r.newAcc(len(m.Dest))
	p.sess.touch(m, p.ticks)
}

// reply answers the client if this group is the message's designated
// replier (its first destination).
func (p *Process) reply(m *wire.AppMsg, gts wire.Timestamp) {
	if m.Dest[0] == p.g && !p.topo.IsReplica(m.ID.Client) {
		p.send(m.ID.Client, &wire.Delivered{ID: m.ID, G: p.g, GTS: gts, Leader: p.id})
	}
}

// onMulticast is H1: the leader proposes a local timestamp (once) and sends
// ACCEPT to every member of every destination group.
func (p *Process) onMulticast(env wire.Envelope, mc *wire.Multicast) error {
	held, err := p.checkKnown(&mc.M)
	if err != nil {
		return err
	}
	if err := amcast.CheckMulticastSender(p.topo, &p.rejects, env.From, &mc.M); err != nil {
		return err
	}
	switch p.status {
	case Recovering:
		if p.cand != nil || p.ho != nil {
			p.deferMsg(env) // a former leader forwards it once it follows (handover.go)
		}
		return nil
	case Follower:
		p.forward(mc) // a former leader's clients (handover.go); else the client retries to every member
		return nil
	}
	if p.collected(mc.M.ID) {
		p.reply(&mc.M, wire.Timestamp{}) // delivered everywhere and collected (P15)
		return nil
	}
	if p.holding() {
		if held == nil || held.phase == wire.PhaseStart {
			p.deferMsg(env) // handing over: propose nothing new (handover.go)
			return nil
		}
	}
	p.sess.touch(&mc.M, p.ticks)
	r := p.recOr(held, mc.M.ID)
	p.learn(r, &mc.M)
	if r.issued {
		// Already delivered: answer again and re-send the ACCEPT (H1.7), so
		// another destination group whose leader changed can collect this
		// group's acks again (P2).
		p.reply(&r.m, r.gts)
		if len(r.m.Dest) > 1 {
			p.resendAccept(r)
		}
		return nil
	}
	if r.phase == wire.PhaseStart {
		p.clock++
		r.lts = wire.Timestamp{T: p.clock, G: p.g}
		r.phase = wire.PhaseProposed
		r.since = p.ticks
		p.pending.Push(tsheap.Entry[*record]{TS: r.lts, ID: r.m.ID, Ref: r})
		p.sendAccept(r)
		return nil
	}
	p.resendAccept(r)
	return nil
}

// resendAccept re-sends r's ACCEPT for a duplicate MULTICAST, at most once
// per two ticks: retries from several processes of several groups then
// cost one ACCEPT round, not one per copy.
func (p *Process) resendAccept(r *record) {
	if r.acceptAt != 0 && p.ticks < r.acceptAt-1+2 {
		return
	}
	p.sendAccept(r)
}

func (p *Process) sendAccept(r *record) {
	r.acceptAt = p.ticks + 1
	acc := &wire.Accept{M: r.m, G: p.g, B: p.cballot, LTS: r.lts, Linf: p.linf[p.g]}
	for _, g := range r.m.Dest {
		p.sendGroup(g, acc)
	}
}

// onAccept is H2: record the ACCEPT of group a.G; once ACCEPTs from every
// destination group are held, advance the clock to the global timestamp
// and acknowledge to the leaders of all destination groups.
func (p *Process) onAccept(env wire.Envelope, a *wire.Accept) error {
	from := env.From
	held, err := p.checkKnown(&a.M)
	if err != nil {
		return err
	}
	if g, ok := p.topo.GroupOf(from); !ok || g != a.G || a.B.Leader() != from {
		return p.rejects.Reject("wrong_sender", "ACCEPT for group %d ballot %s from p%d", a.G, a.B, from)
	}
	idx := a.M.DestIndex(a.G)
	if idx < 0 {
		return p.rejects.Reject("not_a_destination", "ACCEPT from group %d, which is not a destination of %s", a.G, a.M.ID)
	}
	if err := p.checkLTS("ACCEPT", a.M.ID, a.LTS, a.G); err != nil {
		return err
	}
	if r := held; r != nil && r.known {
		// INV-2: a leader proposes one lts per message per ballot, so a
		// second, different one under the ballot held is no correct
		// leader's (this was a panic).
		if e := r.acc[idx]; e.ok && e.b == a.B && e.lts != a.LTS {
			return p.rejects.Reject("lts_conflict", "two local timestamps %s and %s for %s under ballot %s (INV-2)", e.lts, a.LTS, a.M.ID, a.B)
		}
	}
	p.raiseLinf(a.G, a.Linf)
	if p.status == Recovering && !p.mut(MutAckWhileRecovering) {
		if a.G != p.g {
			p.deferMsg(env) // P10: no acks while recovering
		}
		return nil
	}
	if p.collected(a.M.ID) {
		return nil // delivered everywhere and collected: a stale ACCEPT
	}
	r := p.recOr(held, a.M.ID)
	p.learn(r, &a.M)
	e := &r.acc[idx]
	if a.G == p.g {
		if a.B != p.cballot {
			return nil // P5: stale or not-yet-adopted own-group ballot
		}
	} else if e.ok && a.B.Less(e.b) {
		return nil // P5: stale leader of another group
	}
	if r.phase == wire.PhaseCommitted && r.nacc+b2i(!e.ok) == len(r.acc) {
		// The final gts is known. An ACCEPT that would give another one is
		// stale (a deposed leader's, delayed): ignore it rather than let it
		// displace what decided the gts (P5, H2.10).
		G := a.LTS
		for i, x := range r.acc {
			if i != idx {
				G = wire.MaxTS(G, x.lts)
			}
		}
		if G != r.gts {
			return nil
		}
	}
	changed := !e.ok || e.b != a.B
	if !e.ok {
		r.nacc++
	}
	*e = accEntry{b: a.B, lts: a.LTS, ok: true}
	if r.nacc < len(r.acc) {
		return nil
	}
	ack := newAcceptAck(len(r.acc))
	B := ack.Ballots
	var G wire.Timestamp
	for i, x := range r.acc {
		B[i] = x.b
		G = wire.MaxTS(G, x.lts)
	}
	switch r.phase {
	case wire.PhaseStart, wire.PhaseProposed:
		r.phase = wire.PhaseAccepted
		r.since = p.ticks
		changed = true
		fallthrough
	case wire.PhaseAccepted:
		r.lts = r.acc[r.m.DestIndex(p.g)].lts
		r.gts = G
	case wire.PhaseCommitted:
		// Unreachable from input: the H2.10 check above ignores an ACCEPT
		// that completes the set with another gts, and a set completed
		// earlier gave r.gts. Only a bug here can get this far.
		if r.gts != G {
			panic(fmt.Sprintf("wbcast: p%d: %s committed with gts %s but ACCEPTs give %s (INV-5)", p.id, r.m.ID, r.gts, G))
		}
	}
	if !p.mut(MutSkipAcceptClock) {
		p.clock = max(p.clock, G.T) // H2.11
	}
	if changed && !r.issued {
		rec := p.recAccepted(r)
		p.persist(rec)
		r.durAccepted(rec)
	}
	if r.issued && p.mut(MutNoReack) {
		return nil // P2 broken: no re-ack of a delivered message
	}
	ack.ID, ack.G, ack.GTS, ack.Linf = r.m.ID, p.g, G, p.linf[p.g]
	for _, b := range B {
		p.send(b.Leader(), ack)
	}
	return nil
}

// vecCmp compares ballot vectors: -1 if a has a lower component than b
// (stale), 0 if equal, +1 if a >= b everywhere and higher somewhere.
func vecCmp(a, b []wire.Ballot) int {
	higher := false
	for i := range a {
		if a[i].Less(b[i]) {
			return -1
		}
		if b[i].Less(a[i]) {
			higher = true
		}
	}
	if higher {
		return 1
	}
	return 0
}

// onAcceptAck is H3: count acks per exact ballot vector; commit on a quorum
// of every destination group.
func (p *Process) onAcceptAck(from wire.ProcID, ak *wire.AcceptAck) error {
	sg, ok := p.topo.GroupOf(from)
	if !ok || sg != ak.G {
		return p.rejects.Reject("wrong_sender", "ACCEPT_ACK for group %d from p%d", ak.G, from)
	}
	if ak.GTS.T == 0 || ak.GTS.T >= maxClock || int(ak.GTS.G) >= p.topo.NumGroups() {
		return p.rejects.Reject("bad_timestamp", "ACCEPT_ACK for %s with gts %s", ak.ID, ak.GTS)
	}
	r := p.recs[ak.ID]
	if r != nil && r.known {
		if len(ak.Ballots) != len(r.m.Dest) {
			return p.rejects.Reject("bad_ballots", "ACCEPT_ACK for %s with %d ballots, message has %d destinations", ak.ID, len(ak.Ballots), len(r.m.Dest))
		}
		if r.m.DestIndex(ak.G) < 0 {
			return p.rejects.Reject("not_a_destination", "ACCEPT_ACK from group %d, not a destination of %s", ak.G, ak.ID)
		}
		for i, b := range ak.Ballots {
			if !p.inGroup(b, r.m.Dest[i]) {
				return p.rejects.Reject("foreign_ballot", "ACCEPT_ACK for %s: ballot %s for group %d", ak.ID, b, r.m.Dest[i])
			}
		}
		if r.m.DestIndex(ak.GTS.G) < 0 {
			return p.rejects.Reject("bad_timestamp", "ACCEPT_ACK for %s with gts %s of a group that is not a destination", ak.ID, ak.GTS)
		}
	}
	counts := p.status == Leader && r != nil && r.known && r.phase != wire.PhaseCommitted && !r.issued &&
		ak.Ballots[r.m.DestIndex(p.g)] == p.cballot
	if counts {
		// It acks this leader's proposal (H3.1), whose lts is in the gts.
		if (r.phase == wire.PhaseProposed || r.phase == wire.PhaseAccepted) && ak.GTS.Less(r.lts) {
			return p.rejects.Reject("bad_timestamp", "ACCEPT_ACK for %s with gts %s below this leader's lts %s", ak.ID, ak.GTS, r.lts)
		}
		// P1: one ballot vector fixes every group's lts, hence the gts (this
		// was a panic).
		if r.ackB != nil && vecCmp(ak.Ballots, r.ackB) == 0 && ak.GTS != r.ackGTS {
			return p.rejects.Reject("gts_conflict", "acks for %s with one ballot vector carry gts %s and %s", ak.ID, r.ackGTS, ak.GTS)
		}
	}
	p.raiseLinf(ak.G, ak.Linf)
	if !counts {
		return nil // not a leader, unknown, committed once already (P19), or not my proposal
	}
	sidx := r.m.DestIndex(ak.G)
	switch {
	case r.ackB == nil:
		r.ackB = ak.Ballots
		r.ackGTS = ak.GTS
		r.ackFrom = r.newAckFrom(len(r.m.Dest))
	case p.mut(MutMixAckVectors): // P1 broken: one tally across vectors
	default:
		switch vecCmp(ak.Ballots, r.ackB) {
		case -1:
			return nil // P18: stale vector
		case 1:
			r.ackB = ak.Ballots // P1: restart the tally for the newer vector
			r.ackGTS = ak.GTS
			clear(r.ackFrom)
		}
	}
	r.ackFrom[sidx] |= 1 << p.topo.MemberIndex(from)
	for i, g := range r.m.Dest {
		if popcount(r.ackFrom[i]) < p.topo.Quorum(g) && (g == p.g || !p.mut(MutDeliverBeforeCommit)) {
			return nil
		}
	}
	p.commit(r, r.ackGTS)
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// popcount is the number of set bits of x (acks as a bit set per member).
func popcount(x uint64) int { return bits.OnesCount64(x) }

// sortedIDs returns the ids of the records, sorted (map order is random and
// outputs must be deterministic).
func (p *Process) sortedIDs() []wire.MsgID { return wire.SortedIDs(p.recs) }
