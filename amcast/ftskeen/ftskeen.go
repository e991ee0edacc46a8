// Package ftskeen implements FT-Skeen: Skeen's atomic multicast with each
// group's Skeen process replicated by Multi-Paxos used as a black box (weft
// spec §8.2, "BaseCast" in the FastCast paper; the baseline the WbCast
// paper measures at 6 and 12 message delays).
//
// Both of Skeen's clock actions go through the group's replicated log:
//
//	client  --MULTICAST-->  leader of each destination group          (δ1)
//	leader  proposes ASSIGN(m): PAXOS_ACCEPT to its group              (δ2)
//	members PAXOS_ACCEPTED to every member: ASSIGN(m) chosen           (δ3)
//	        every member executes it: clock := clock+1, lts := (clock, g)
//	leader  --PROPOSE(m, g, lts)--> leaders of the other destinations  (δ4)
//	leader  (local timestamps of every destination group held)
//	        proposes FINAL(m, gts = max lts): PAXOS_ACCEPT             (δ5)
//	members PAXOS_ACCEPTED: FINAL chosen; every member executes it:    (δ6)
//	        m committed, clock := max(clock, gts), Skeen's delivery rule
//
// Every member delivers when it executes the log, so leaders and followers
// deliver together: 6δ without contention. The FINAL must go through the
// log because the clock update it carries is state of the replicated
// process. A message to a single group commits when its ASSIGN executes
// (Skeen's process proposes to itself), after 3δ.
//
// With contention a message m can wait for a message m' whose ASSIGN comes
// before m's FINAL in the log with a smaller local timestamp. m's FINAL is
// placed in the log when the leader proposes it (4δ after m was multicast),
// not when it executes, so m' must reach the leader before 4δ, and m waits
// at most until m' commits 6δ later: the tight bound of this design is 10δ.
// The WbCast paper quotes 12δ, twice the collision-free latency (the
// general doubling bound); docs/latency.md has the derivation.
//
// Fault tolerance comes from package paxos (phase 1 leader change with a
// heartbeat failure detector, catch-up, durable promises and values) and
// from re-multicasts: a message that makes no progress is multicast again
// to every member of its destination groups, and a leader that knows it
// re-sends its local timestamp to every member of the other destination
// groups. A replica that crashes restarts from its Store: it re-executes
// the chosen prefix of its log and skips the deliveries it made durable.
package ftskeen

import (
	"fmt"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/internal/paxos"
	"github.com/weft-dev/weft/amcast/internal/rskeen"
	"github.com/weft-dev/weft/wire"
)

// Config configures one replica. Zero durations take defaults.
type Config = rskeen.Config

// Process is one FT-Skeen replica.
type Process struct {
	view  // the read-only face of core: Machine, Observable, status getters
	core  rskeen.Core
	clock uint64
}

var (
	_ amcast.Machine       = (*Process)(nil)
	_ amcast.Observable    = (*Process)(nil)
	_ amcast.RejectCounter = (*Process)(nil)
	_ paxos.Host           = (*host)(nil)
)

// New returns a replica in its initial state (each group's first member
// leads).
func New(cfg Config) (*Process, error) {
	p := &Process{}
	if err := p.open(cfg, nil); err != nil {
		return nil, fmt.Errorf("ftskeen: %w", err)
	}
	return p, nil
}

// Store is a replica's durable image: its Paxos log (promise, accepted and
// chosen values) and its deliveries.
type Store = rskeen.Store

// NewStore returns an empty durable store for one replica.
func NewStore() *Store { return rskeen.NewStore() }

// Restore rebuilds a replica after a crash from its store: it comes back
// as a follower, re-executes the chosen prefix of its log and does not
// deliver again what it delivered durably. Config.Detector must be fresh.
func Restore(cfg Config, st *Store) (*Process, error) {
	p := &Process{}
	if err := p.open(cfg, st); err != nil {
		return nil, fmt.Errorf("ftskeen: %w", err)
	}
	return p, nil
}

// Clock returns the replica's Skeen clock (a function of the executed log).
func (p *Process) Clock() uint64 { return p.clock }

// Step implements amcast.Machine: the envelope and Paxos checks of
// rskeen.Core.Step, then this protocol's messages.
func (p *Process) Step(env wire.Envelope) error { return p.core.Step(env, p.step) }

func (p *Process) step(env wire.Envelope) error {
	switch m := env.Msg.(type) {
	case *wire.Multicast:
		return p.onMulticast(env.From, &m.M)
	case *wire.Propose:
		return p.onPropose(env.From, m)
	}
	return p.core.Unexpected(env)
}

// onMulticast: the leader proposes ASSIGN(m) once; a duplicate makes it
// re-send what it knows (the reply, its local timestamp).
func (p *Process) onMulticast(from wire.ProcID, m *wire.AppMsg) error {
	if err := p.core.CheckMulticast(from, m); err != nil {
		return err
	}
	r := p.core.Rec(m.ID)
	p.core.Learn(r, m)
	if !p.core.Log.IsLeader() {
		return nil // followers keep it for re-multicasts; the leader acts
	}
	switch {
	case r.Delivered:
		p.core.Reply(r)
		p.resendTS(r)
	case r.Phase != rskeen.Start:
		p.resendTS(r)
		p.tryFinal(r)
	case !r.AssignInFlight:
		p.proposeAssign(r)
	}
	return nil
}

// proposeAssign proposes ASSIGN(m) (the leader's state first: in a group of
// one the command executes inside Propose).
func (p *Process) proposeAssign(r *rskeen.Rec) bool {
	if !p.core.Log.IsLeader() {
		return false
	}
	r.AssignInFlight = true
	p.core.Log.Propose(wire.Command{Op: wire.CmdAssign, M: r.M})
	return true
}

// resendTS re-sends the group's local timestamp of a multi-group message
// to every member of the other destination groups (rate-limited).
func (p *Process) resendTS(r *rskeen.Rec) {
	if len(r.M.Dest) == 1 || r.Phase == rskeen.Start || !p.core.MayResend(r) {
		return
	}
	pr := &wire.Propose{ID: r.M.ID, G: p.core.G, LTS: r.LTS}
	for _, g := range r.M.Dest {
		if g != p.core.G {
			p.core.SendGroup(g, pr)
		}
	}
}

// onPropose files another group's local timestamp; the leader proposes
// FINAL once it holds every destination group's.
func (p *Process) onPropose(from wire.ProcID, pr *wire.Propose) error {
	if err := p.core.CheckTS(from, pr.ID, pr.G, pr.LTS, true); err != nil {
		return err
	}
	p.core.SetHint(pr.G, from)
	r := p.core.Rec(pr.ID)
	p.core.SetTS(r, pr.G, pr.LTS)
	p.tryFinal(r)
	return nil
}

func (p *Process) tryFinal(r *rskeen.Rec) {
	if !p.core.Log.IsLeader() || r.Phase != rskeen.Assigned || r.FinalInFlight {
		return
	}
	gts, ok := rskeen.MaxTS(r.TS)
	if !ok {
		return
	}
	r.FinalInFlight, r.FinalVal = true, gts
	p.core.Log.Propose(wire.Command{Op: wire.CmdFinal, M: wire.AppMsg{ID: r.M.ID, Dest: r.M.Dest}, TS: gts})
}

// execute is paxos.Host's Execute: the replicated Skeen process.
func (p *Process) execute(_ uint64, c *wire.Command) {
	switch c.Op {
	case wire.CmdAssign:
		r := p.core.Rec(c.M.ID)
		p.core.Adopt(r, &c.M) // the log's copy is the message
		r.AssignInFlight = false
		if r.Phase != rskeen.Start {
			return // a duplicate ASSIGN: the first one counts
		}
		p.clock++
		lts := wire.Timestamp{T: p.clock, G: p.core.G}
		p.core.Assign(r, lts)
		if len(r.M.Dest) == 1 {
			p.core.Commit(r, lts)
			return
		}
		if p.core.Log.IsLeader() {
			pr := &wire.Propose{ID: r.M.ID, G: p.core.G, LTS: lts}
			for _, g := range r.M.Dest {
				if g != p.core.G {
					p.core.SendTo(p.core.Hint(g), pr)
				}
			}
		}
		p.tryFinal(r)
	case wire.CmdFinal:
		if !p.core.Has(rskeen.MutSkipFinalClock) {
			p.clock = max(p.clock, c.TS.T)
		}
		r := p.core.Lookup(c.M.ID)
		if r == nil {
			return
		}
		r.FinalInFlight = false
		if r.Phase == rskeen.Start {
			return // cannot happen: the leader proposes FINAL after ASSIGN ran
		}
		p.core.Commit(r, c.TS)
	}
}

// lead is paxos.Host's Lead. A new leader rebuilds its view of the
// commands in flight from the log, proposes the messages it knows that the
// log never assigned, and asks the other destination groups of every
// pending message for their local timestamps (a MULTICAST makes their
// leaders re-send them) while sending its own.
func (p *Process) lead(leading bool) {
	recs := p.core.Recs()
	for _, r := range recs {
		r.AssignInFlight, r.FinalInFlight = false, false
	}
	if !leading {
		return
	}
	n := 0
	p.core.Log.Pending(func(_ uint64, c *wire.Command) {
		switch c.Op {
		case wire.CmdAssign:
			r := p.core.Rec(c.M.ID)
			p.core.Learn(r, &c.M)
			r.AssignInFlight = true
			n++
		case wire.CmdFinal:
			if r := p.core.Lookup(c.M.ID); r != nil {
				r.FinalInFlight, r.FinalVal = true, c.TS
				n++
			}
		}
	})
	for _, id := range p.core.SortedIDs() {
		r := recs[id]
		if !r.Known || r.Delivered || r.Phase == rskeen.Committed {
			continue
		}
		if r.Phase == rskeen.Start {
			if !r.AssignInFlight && p.proposeAssign(r) {
				n++
			}
			continue
		}
		if len(r.M.Dest) > 1 {
			p.resendTS(r)
			mc := &wire.Multicast{M: r.M}
			for _, g := range r.M.Dest {
				if g != p.core.G {
					p.core.SendGroup(g, mc)
				}
			}
		}
		p.tryFinal(r)
	}
	p.core.AddRetried(n)
}
