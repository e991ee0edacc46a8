// Package skeen implements Skeen's atomic multicast protocol for groups of
// exactly one reliable process (the paper's Figure 1; weft spec §8.1).
//
// A client sends MULTICAST(m) to the process of every destination group.
// Each destination process increments its clock, proposes the local
// timestamp (clock, group) and sends it in PROPOSE to all destinations of m.
// Once a process holds the proposals of all destination groups, the global
// timestamp is their maximum; the process raises its clock to it and m is
// committed. Committed messages are delivered in global-timestamp order once
// no message that is still only PROPOSED has a local timestamp at or below
// the candidate's global timestamp.
//
// Latency: 2δ without contention (MULTICAST, PROPOSE), up to 4δ with it
// (the convoy effect). Not fault tolerant: it exists as a baseline.
package skeen

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/internal/tsheap"
	"github.com/weft-dev/weft/wire"
)

type proposal struct {
	g   wire.GroupID
	lts wire.Timestamp
}

type record struct {
	m      wire.AppMsg
	digest uint64 // FNV-1a of m's payload: kept when the payload is dropped on delivery
	known  bool   // MULTICAST received, m is valid
	phase  wire.Phase
	lts    wire.Timestamp // this group's local timestamp
	gts    wire.Timestamp
	props  []proposal // proposals received, one per group
}

// Process is one Skeen process (the only member of its group).
type Process struct {
	out   amcast.Outbox // unexported: callers must not Send or Deliver for it
	id    wire.ProcID
	g     wire.GroupID
	topo  *amcast.Topology
	clock uint64

	recs      map[wire.MsgID]*record
	proposed  tsheap.Heap[struct{}] // PROPOSED messages by local timestamp (lazy)
	committed tsheap.Heap[struct{}] // COMMITTED, undelivered messages by global timestamp
	lastGTS   wire.Timestamp
	local     []wire.Envelope // messages to self, handled before Step returns
	rejects   amcast.Rejects  // refused remote input, by reason
}

var (
	_ amcast.Machine       = (*Process)(nil)
	_ amcast.RejectCounter = (*Process)(nil)
)

// New returns the Skeen process id. Every group of topo must have exactly
// one member.
func New(topo *amcast.Topology, id wire.ProcID) (*Process, error) {
	for g, ms := range topo.Groups {
		if len(ms) != 1 {
			return nil, fmt.Errorf("skeen: group %d has %d processes; Skeen's protocol needs exactly one per group", g, len(ms))
		}
	}
	g, ok := topo.GroupOf(id)
	if !ok {
		return nil, fmt.Errorf("skeen: process %d is not in the topology", id)
	}
	return &Process{id: id, g: g, topo: topo, recs: map[wire.MsgID]*record{}}, nil
}

// ID implements amcast.Machine.
func (p *Process) ID() wire.ProcID { return p.id }

// Rejected implements amcast.RejectCounter.
func (p *Process) Rejected() map[string]uint64 { return p.rejects.Counts() }

// HasReady implements amcast.Machine.
func (p *Process) HasReady() bool { return p.out.HasReady() }

// Ready implements amcast.Machine.
func (p *Process) Ready() amcast.Ready { return p.out.Ready() }

// Advance implements amcast.Machine.
func (p *Process) Advance() { p.out.Advance() }

// Tick implements amcast.Machine. Skeen has no timers.
func (p *Process) Tick() {}

// Clock returns the process's Lamport clock.
func (p *Process) Clock() uint64 { return p.clock }

// Retained returns the number of messages the process holds (delivered
// ones keep a tombstone).
func (p *Process) Retained() int { return len(p.recs) }

func (p *Process) send(to wire.ProcID, m wire.Message) {
	if to == p.id {
		p.local = append(p.local, wire.Envelope{From: p.id, To: p.id, Msg: m})
		return
	}
	p.out.Send(p.id, to, m)
}

// Step implements amcast.Machine. Input from the network that contradicts
// what the process knows is rejected (counted by reason, Rejected) and
// leaves the state unchanged.
func (p *Process) Step(env wire.Envelope) error {
	if env.To != p.id {
		return p.rejects.Reject("wrong_recipient", "envelope for p%d delivered to p%d", env.To, p.id)
	}
	if env.From == p.id {
		// Messages to self never cross the network (local, below).
		return p.rejects.Reject("from_self", "%s from self p%d", env.Msg.Kind(), p.id)
	}
	if err := p.step(env); err != nil {
		return err
	}
	for len(p.local) > 0 {
		e := p.local[0]
		p.local = p.local[1:]
		if err := p.step(e); err != nil {
			panic(fmt.Sprintf("skeen: p%d refused its own message %s: %v", p.id, wire.Describe(e.Msg), err))
		}
	}
	p.local = p.local[:0]
	return nil
}

func (p *Process) step(env wire.Envelope) error {
	switch m := env.Msg.(type) {
	case *wire.Multicast:
		return p.onMulticast(env.From, m)
	case *wire.Propose:
		return p.onPropose(env.From, m)
	default:
		return p.rejects.Reject("unexpected_kind", "skeen does not handle %s from p%d", env.Msg.Kind(), env.From)
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

// checkMulticast rejects a malformed MULTICAST, one not addressed to this
// group, one not sent by its own client (only clients multicast: Skeen has
// no re-multicasts; a client id that is a process would make the process
// answer itself), and a known id with other destinations or payload.
func (p *Process) checkMulticast(from wire.ProcID, m *wire.AppMsg) error {
	if err := m.Validate(p.topo.NumGroups()); err != nil {
		return p.rejects.Reject("bad_dest", "%v", err)
	}
	if err := m.CheckDigest(); err != nil {
		return p.rejects.Reject("bad_digest", "%v", err)
	}
	if m.DestIndex(p.g) < 0 {
		return p.rejects.Reject("not_destination", "message %s is not addressed to group %d", m.ID, p.g)
	}
	if from != m.ID.Client || p.topo.IsReplica(from) {
		return p.rejects.Reject("client_mismatch", "MULTICAST of %s from p%d, not its client", m.ID, from)
	}
	r := p.recs[m.ID]
	if r == nil || !r.known {
		return nil
	}
	if !slices.Equal(r.m.Dest, m.Dest) {
		return p.rejects.Reject("dest_mismatch", "%s with destinations %v, known with %v", m.ID, m.Dest, r.m.Dest)
	}
	if r.digest != digest(m.Payload) || (r.m.Payload != nil && !bytes.Equal(r.m.Payload, m.Payload)) {
		return p.rejects.Reject("payload_mismatch", "%s with another payload (%d bytes)", m.ID, len(m.Payload))
	}
	return nil
}

// digest is the FNV-1a hash of a payload.
func digest(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

func (p *Process) onMulticast(from wire.ProcID, mc *wire.Multicast) error {
	m := mc.M
	if err := p.checkMulticast(from, &m); err != nil {
		return err
	}
	r := p.rec(m.ID)
	if r.phase != wire.PhaseStart {
		return nil // duplicate MULTICAST: the proposal is already out
	}
	r.m, r.known, r.digest = m, true, digest(m.Payload)
	// Proposals that arrived before the MULTICAST: keep only destinations'.
	kept := r.props[:0]
	for _, x := range r.props {
		if m.DestIndex(x.g) >= 0 {
			kept = append(kept, x)
		}
	}
	r.props = kept
	p.clock++
	r.lts = wire.Timestamp{T: p.clock, G: p.g}
	r.phase = wire.PhaseProposed
	p.proposed.Push(tsheap.Entry[struct{}]{TS: r.lts, ID: m.ID})
	for _, g := range m.Dest {
		p.send(p.topo.Members(g)[0], &wire.Propose{ID: m.ID, G: p.g, LTS: r.lts})
	}
	return nil
}

// checkPropose rejects a PROPOSE from a process that is not the group it
// speaks for, with a timestamp of another group, for a group that is not a
// destination of the message, or contradicting the group's earlier one.
func (p *Process) checkPropose(from wire.ProcID, pr *wire.Propose) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != pr.G {
		return p.rejects.Reject("sender_not_in_group", "PROPOSE for group %d from p%d", pr.G, from)
	}
	if pr.LTS.G != pr.G || pr.LTS.T == 0 {
		return p.rejects.Reject("bad_timestamp", "PROPOSE of %s for group %d with %s", pr.ID, pr.G, pr.LTS)
	}
	r := p.recs[pr.ID]
	if r == nil {
		return nil
	}
	if r.known && r.m.DestIndex(pr.G) < 0 {
		return p.rejects.Reject("not_destination", "PROPOSE for %s from group %d, not a destination", pr.ID, pr.G)
	}
	for _, x := range r.props {
		if x.g == pr.G && x.lts != pr.LTS {
			return p.rejects.Reject("ts_mismatch", "group %d proposed %s for %s, now %s", pr.G, x.lts, pr.ID, pr.LTS)
		}
	}
	return nil
}

func (p *Process) onPropose(from wire.ProcID, pr *wire.Propose) error {
	if err := p.checkPropose(from, pr); err != nil {
		return err
	}
	r := p.rec(pr.ID)
	if r.phase == wire.PhaseCommitted {
		return nil
	}
	for _, x := range r.props {
		if x.g == pr.G {
			return nil // duplicate
		}
	}
	r.props = append(r.props, proposal{g: pr.G, lts: pr.LTS})
	p.tryCommit(pr.ID, r)
	return nil
}

func (p *Process) tryCommit(id wire.MsgID, r *record) {
	if !r.known || len(r.props) < len(r.m.Dest) {
		return
	}
	var gts wire.Timestamp
	for _, x := range r.props {
		gts = wire.MaxTS(gts, x.lts)
	}
	r.gts = gts
	r.phase = wire.PhaseCommitted
	r.props = nil
	p.clock = max(p.clock, gts.T)
	p.committed.Push(tsheap.Entry[struct{}]{TS: gts, ID: id})
	p.tryDeliver()
}

// tryDeliver delivers committed messages in global-timestamp order while no
// PROPOSED message has a local timestamp at or below the next one's.
func (p *Process) tryDeliver() {
	for p.committed.Len() > 0 {
		c := p.committed.Top()
		for p.proposed.Len() > 0 {
			e := p.proposed.Top()
			if r := p.recs[e.ID]; r != nil && r.phase == wire.PhaseProposed && r.lts == e.TS {
				break
			}
			p.proposed.Pop() // stale entry
		}
		if p.proposed.Len() > 0 && p.proposed.Top().TS.LessEq(c.TS) {
			return
		}
		p.committed.Pop()
		r := p.recs[c.ID]
		if !p.lastGTS.Less(c.TS) {
			panic(fmt.Sprintf("skeen: p%d delivers %s with gts %s after gts %s", p.id, c.ID, c.TS, p.lastGTS))
		}
		p.lastGTS = c.TS
		p.out.Deliver(r.m, c.TS)
		if r.m.Dest[0] == p.g {
			p.send(r.m.ID.Client, &wire.Delivered{ID: r.m.ID, G: p.g, GTS: c.TS, Leader: p.id})
		}
		// Delivered messages keep a small tombstone so duplicates are ignored.
		r.m.Payload = nil
	}
}
