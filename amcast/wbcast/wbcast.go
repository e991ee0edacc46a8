// Package wbcast implements White-Box Atomic Multicast (Gotsman, Lefort,
// Chockler, DSN 2019) as a deterministic state machine; weft spec
// ../shared/spec/wbcast.md §4 (normal case) and §5 (recovery).
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
package wbcast

import (
	"fmt"

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

// Config configures one WbCast process.
type Config struct {
	// Topology is the group layout; every process must use the same one.
	Topology *amcast.Topology
	// ID is this process; it must be a replica in Topology.
	ID wire.ProcID
}

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

	issued bool // delivered here (leader: DELIVER issued)

	// Leader only: ACCEPT_ACK tally for one exact ballot vector.
	ackB    []wire.Ballot
	ackGTS  wire.Timestamp
	ackFrom []uint64 // per destination group, bitmask of member indexes
}

// Process is one WbCast replica.
type Process struct {
	amcast.Outbox
	id   wire.ProcID
	g    wire.GroupID
	topo *amcast.Topology

	status  Status
	ballot  wire.Ballot // highest ballot joined (a promise)
	cballot wire.Ballot // ballot whose leader's state was adopted
	clock   uint64

	recs         map[wire.MsgID]*record
	maxDelivered wire.Timestamp
	pending      tsheap.Heap // leader: PROPOSED/ACCEPTED messages by LocalTS (lazy)
	committed    tsheap.Heap // leader: COMMITTED, not issued, by GlobalTS

	local []wire.Envelope // messages to self, handled before Step returns
}

var _ amcast.Machine = (*Process)(nil)

// New returns a process in its initial state: every group's first member is
// the leader of ballot (0, first member); the others follow it.
func New(cfg Config) (*Process, error) {
	if cfg.Topology == nil {
		return nil, fmt.Errorf("wbcast: Config.Topology is nil")
	}
	g, ok := cfg.Topology.GroupOf(cfg.ID)
	if !ok {
		return nil, fmt.Errorf("wbcast: process %d is not a replica of the topology", cfg.ID)
	}
	b0 := wire.Ballot{N: 0, P: cfg.Topology.InitialLeader(g)}
	p := &Process{
		id: cfg.ID, g: g, topo: cfg.Topology,
		ballot: b0, cballot: b0,
		recs: map[wire.MsgID]*record{},
	}
	if b0.Leader() == p.id {
		p.status = Leader
	}
	return p, nil
}

// ID implements amcast.Machine.
func (p *Process) ID() wire.ProcID { return p.id }

// Status returns the process's role.
func (p *Process) Status() Status { return p.status }

// Ballot returns the process's ballot and cballot.
func (p *Process) Ballot() (ballot, cballot wire.Ballot) { return p.ballot, p.cballot }

// Clock returns the process's Lamport clock.
func (p *Process) Clock() uint64 { return p.clock }

// MaxDelivered returns the global timestamp of the last delivery.
func (p *Process) MaxDelivered() wire.Timestamp { return p.maxDelivered }

// Tick implements amcast.Machine.
func (p *Process) Tick() {}

func (p *Process) send(to wire.ProcID, m wire.Message) {
	if to == p.id {
		p.local = append(p.local, wire.Envelope{From: p.id, To: p.id, Msg: m})
		return
	}
	p.Send(p.id, to, m)
}

// Step implements amcast.Machine.
func (p *Process) Step(env wire.Envelope) error {
	if env.To != p.id {
		return fmt.Errorf("%w: envelope for p%d delivered to p%d", amcast.ErrBadMessage, env.To, p.id)
	}
	if err := p.step(env); err != nil {
		return err
	}
	for i := 0; i < len(p.local); i++ {
		if err := p.step(p.local[i]); err != nil {
			panic(fmt.Sprintf("wbcast: p%d refused its own message %s: %v", p.id, wire.Describe(p.local[i].Msg), err))
		}
	}
	clear(p.local)
	p.local = p.local[:0]
	return nil
}

func (p *Process) step(env wire.Envelope) error {
	switch m := env.Msg.(type) {
	case *wire.Multicast:
		return p.onMulticast(env.From, m)
	case *wire.Accept:
		return p.onAccept(env.From, m)
	case *wire.AcceptAck:
		return p.onAcceptAck(env.From, m)
	case *wire.Deliver:
		return p.onDeliver(env.From, m)
	default:
		return fmt.Errorf("%w: wbcast does not handle %s", amcast.ErrBadMessage, env.Msg.Kind())
	}
}

func (p *Process) rec(id wire.MsgID) *record {
	r := p.recs[id]
	if r == nil {
		r = &record{}
		p.recs[id] = r
	}
	return r
}

// learn makes r hold message m (the first copy wins; copies are equal).
func (p *Process) learn(r *record, m *wire.AppMsg) {
	if r.known {
		return
	}
	r.m, r.known = *m, true
	r.acc = make([]accEntry, len(m.Dest))
}

func (p *Process) checkMsg(m *wire.AppMsg) error {
	if err := m.Validate(p.topo.NumGroups()); err != nil {
		return fmt.Errorf("%w: %v", amcast.ErrBadMessage, err)
	}
	if m.DestIndex(p.g) < 0 {
		return fmt.Errorf("%w: message %s is not addressed to group %d", amcast.ErrBadMessage, m.ID, p.g)
	}
	return nil
}

// onMulticast is H1: the leader proposes a local timestamp (once) and sends
// ACCEPT to every member of every destination group.
func (p *Process) onMulticast(from wire.ProcID, mc *wire.Multicast) error {
	if err := p.checkMsg(&mc.M); err != nil {
		return err
	}
	if p.status != Leader {
		return nil // not the leader: the client retries elsewhere
	}
	r := p.rec(mc.M.ID)
	p.learn(r, &mc.M)
	if r.issued {
		// Already delivered here: answer the client again, propose nothing.
		if r.m.Dest[0] == p.g {
			p.send(r.m.ID.Client, &wire.Delivered{ID: r.m.ID, G: p.g, GTS: r.gts, Leader: p.id})
		}
		return nil
	}
	if r.phase == wire.PhaseStart {
		p.clock++
		r.lts = wire.Timestamp{T: p.clock, G: p.g}
		r.phase = wire.PhaseProposed
		p.pending.Push(tsheap.Entry{TS: r.lts, ID: r.m.ID})
	}
	acc := &wire.Accept{M: r.m, G: p.g, B: p.cballot, LTS: r.lts}
	for _, g := range r.m.Dest {
		for _, q := range p.topo.Members(g) {
			p.send(q, acc)
		}
	}
	return nil
}

// onAccept is H2: record the ACCEPT of group a.G; once ACCEPTs from every
// destination group are held, advance the clock to the global timestamp
// and acknowledge to the leaders of all destination groups.
func (p *Process) onAccept(from wire.ProcID, a *wire.Accept) error {
	if err := p.checkMsg(&a.M); err != nil {
		return err
	}
	if g, ok := p.topo.GroupOf(from); !ok || g != a.G || a.B.Leader() != from {
		return fmt.Errorf("%w: ACCEPT for group %d ballot %s from p%d", amcast.ErrBadMessage, a.G, a.B, from)
	}
	idx := a.M.DestIndex(a.G)
	if idx < 0 {
		return fmt.Errorf("%w: ACCEPT from group %d, which is not a destination of %s", amcast.ErrBadMessage, a.G, a.M.ID)
	}
	if p.status == Recovering {
		return nil // P10: no acks while recovering; the new leader retries
	}
	r := p.rec(a.M.ID)
	p.learn(r, &a.M)
	e := &r.acc[idx]
	if a.G == p.g {
		if a.B != p.cballot {
			return nil // P5: stale or not-yet-adopted own-group ballot
		}
	} else if e.ok && a.B.Less(e.b) {
		return nil // P5: stale leader of another group
	}
	if e.ok && e.b == a.B && e.lts != a.LTS {
		panic(fmt.Sprintf("wbcast: p%d: two local timestamps %s and %s for %s under ballot %s (INV-2)", p.id, e.lts, a.LTS, a.M.ID, a.B))
	}
	if !e.ok {
		r.nacc++
	}
	*e = accEntry{b: a.B, lts: a.LTS, ok: true}
	if r.nacc < len(r.acc) {
		return nil
	}
	B := make([]wire.Ballot, len(r.acc))
	var G wire.Timestamp
	for i, x := range r.acc {
		B[i] = x.b
		G = wire.MaxTS(G, x.lts)
	}
	switch r.phase {
	case wire.PhaseStart, wire.PhaseProposed:
		r.phase = wire.PhaseAccepted
		fallthrough
	case wire.PhaseAccepted:
		r.lts = r.acc[r.m.DestIndex(p.g)].lts
		r.gts = G
	case wire.PhaseCommitted:
		if r.gts != G {
			panic(fmt.Sprintf("wbcast: p%d: %s committed with gts %s but ACCEPTs give %s (INV-5)", p.id, r.m.ID, r.gts, G))
		}
	}
	p.clock = max(p.clock, G.T)
	p.Persist(&wire.RecAccepted{S: wire.MsgState{M: r.m, Phase: r.phase, LTS: r.lts, GTS: G, Ballots: B}})
	ack := &wire.AcceptAck{ID: r.m.ID, G: p.g, Ballots: B, GTS: G, MaxDelivered: p.maxDelivered}
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
		return fmt.Errorf("%w: ACCEPT_ACK for group %d from p%d", amcast.ErrBadMessage, ak.G, from)
	}
	if p.status != Leader {
		return nil
	}
	r := p.recs[ak.ID]
	if r == nil || !r.known || r.phase == wire.PhaseCommitted || r.issued {
		return nil // P19: commit once
	}
	if len(ak.Ballots) != len(r.m.Dest) {
		return fmt.Errorf("%w: ACCEPT_ACK for %s with %d ballots, message has %d destinations", amcast.ErrBadMessage, ak.ID, len(ak.Ballots), len(r.m.Dest))
	}
	sidx := r.m.DestIndex(ak.G)
	if sidx < 0 {
		return fmt.Errorf("%w: ACCEPT_ACK from group %d, not a destination of %s", amcast.ErrBadMessage, ak.G, ak.ID)
	}
	if ak.Ballots[r.m.DestIndex(p.g)] != p.cballot {
		return nil // acks a proposal that is not mine
	}
	switch {
	case r.ackB == nil:
		r.ackB = ak.Ballots
		r.ackGTS = ak.GTS
		r.ackFrom = make([]uint64, len(r.m.Dest))
	default:
		switch vecCmp(ak.Ballots, r.ackB) {
		case -1:
			return nil // P18: stale vector
		case 1:
			r.ackB = ak.Ballots // P1: restart the tally for the newer vector
			r.ackGTS = ak.GTS
			clear(r.ackFrom)
		case 0:
			if ak.GTS != r.ackGTS {
				panic(fmt.Sprintf("wbcast: p%d: acks for %s with one ballot vector carry gts %s and %s", p.id, ak.ID, r.ackGTS, ak.GTS))
			}
		}
	}
	r.ackFrom[sidx] |= 1 << p.topo.MemberIndex(from)
	for i, g := range r.m.Dest {
		if popcount(r.ackFrom[i]) < p.topo.Quorum(g) {
			return nil
		}
	}
	p.commit(r, r.ackGTS)
	return nil
}

func popcount(x uint64) int {
	n := 0
	for x != 0 {
		x &= x - 1
		n++
	}
	return n
}

// commit is H3.5-H3.8.
func (p *Process) commit(r *record, gts wire.Timestamp) {
	r.phase = wire.PhaseCommitted
	r.gts = gts
	r.ackB, r.ackFrom = nil, nil
	p.clock = max(p.clock, gts.T) // P4: the acks may beat the ACCEPTs here
	p.committed.Push(tsheap.Entry{TS: gts, ID: r.m.ID})
	p.tryDeliver()
}

// tryDeliver is H4: issue committed messages in gts order while no PROPOSED
// or ACCEPTED message has a local timestamp at or below the next one's gts.
func (p *Process) tryDeliver() {
	for p.committed.Len() > 0 {
		c := p.committed.Top()
		if r := p.recs[c.ID]; r == nil || r.issued || r.phase != wire.PhaseCommitted || r.gts != c.TS {
			p.committed.Pop() // stale entry
			continue
		}
		for p.pending.Len() > 0 {
			e := p.pending.Top()
			if r := p.recs[e.ID]; r != nil && !r.issued && (r.phase == wire.PhaseProposed || r.phase == wire.PhaseAccepted) && r.lts == e.TS {
				break
			}
			p.pending.Pop() // stale entry
		}
		if p.pending.Len() > 0 && p.pending.Top().TS.LessEq(c.TS) {
			return // P6: blocked by a message that may still commit below c
		}
		p.committed.Pop()
		r := p.recs[c.ID]
		r.issued = true
		p.deliverLocal(r)
		d := &wire.Deliver{ID: r.m.ID, B: p.cballot, LTS: r.lts, GTS: r.gts}
		for _, q := range p.topo.Members(p.g) {
			if q != p.id {
				p.send(q, d)
			}
		}
		if r.m.Dest[0] == p.g {
			p.send(r.m.ID.Client, &wire.Delivered{ID: r.m.ID, G: p.g, GTS: r.gts, Leader: p.id})
		}
	}
}

// deliverLocal hands r to the application (after its record is durable).
func (p *Process) deliverLocal(r *record) {
	if !p.maxDelivered.Less(r.gts) {
		panic(fmt.Sprintf("wbcast: p%d delivers %s with gts %s after %s (INV-8)", p.id, r.m.ID, r.gts, p.maxDelivered))
	}
	p.maxDelivered = r.gts
	p.clock = max(p.clock, r.gts.T)
	p.Persist(&wire.RecDelivered{ID: r.m.ID, GTS: r.gts})
	p.Deliver(r.m, r.gts)
}

// onDeliver is H5 at a follower.
func (p *Process) onDeliver(from wire.ProcID, d *wire.Deliver) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g {
		return fmt.Errorf("%w: DELIVER from p%d outside group %d", amcast.ErrBadMessage, from, p.g)
	}
	if p.status == Recovering || d.B != p.cballot || d.B.Leader() != from {
		return nil
	}
	if d.GTS.LessEq(p.maxDelivered) {
		return nil // duplicate (a new leader re-issues)
	}
	r := p.recs[d.ID]
	if r == nil || !r.known {
		panic(fmt.Sprintf("wbcast: p%d: DELIVER %s before its payload (P9)", p.id, d.ID))
	}
	r.phase = wire.PhaseCommitted
	r.lts, r.gts = d.LTS, d.GTS
	r.issued = true
	p.deliverLocal(r)
	return nil
}
