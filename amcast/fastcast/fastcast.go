package fastcast

import (
	"fmt"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/internal/paxos"
	"github.com/weft-dev/weft/amcast/internal/rskeen"
	"github.com/weft-dev/weft/wire"
)

// Config configures one replica. Zero durations take defaults.
type Config = rskeen.Config

// Counters are FastCast's own event counts (for tests and reports).
type Counters struct {
	Speculative int // speculative FINALs proposed (from soft timestamps)
	SlowPaths   int // FINALs proposed from hard timestamps after a mismatch
}

// Process is one FastCast replica.
type Process struct {
	view  // the read-only face of core: Machine, Observable, status getters
	core  rskeen.Core
	clock uint64 // max timestamp in the executed log
	next  uint64 // leader: max timestamp in the log including its proposals
	cnt   Counters
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
		return nil, fmt.Errorf("fastcast: %w", err)
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
// deliver again what it delivered durably (hard timestamps received from
// other groups are volatile: re-multicasts bring them again).
func Restore(cfg Config, st *Store) (*Process, error) {
	p := &Process{}
	if err := p.open(cfg, st); err != nil {
		return nil, fmt.Errorf("fastcast: %w", err)
	}
	return p, nil
}

// Clock returns the largest timestamp in the executed log.
func (p *Process) Clock() uint64 { return p.clock }

// Counters returns the speculation counters.
func (p *Process) Counters() Counters { return p.cnt }

// Step implements amcast.Machine: the envelope and Paxos checks of
// rskeen.Core.Step, then this protocol's messages.
func (p *Process) Step(env wire.Envelope) error { return p.core.Step(env, p.step) }

func (p *Process) step(env wire.Envelope) error {
	switch m := env.Msg.(type) {
	case *wire.Multicast:
		return p.onMulticast(env.From, &m.M)
	case *wire.SoftTS:
		return p.onSoft(env.From, m)
	case *wire.HardTS:
		return p.onHard(env.From, m)
	}
	return p.core.Unexpected(env)
}

// onMulticast (F1-F2): the leader picks the local timestamp its log will
// choose (it knows every command before it), proposes ASSIGN(m, lts) and,
// in parallel, sends it as a soft timestamp to the leaders of the other
// destination groups. A duplicate makes it re-send what it knows.
func (p *Process) onMulticast(from wire.ProcID, m *wire.AppMsg) error {
	if err := p.core.CheckMulticast(from, m); err != nil {
		return err
	}
	r := p.core.Rec(m.ID)
	p.core.Learn(r, m)
	if !p.core.Log.IsLeader() {
		return nil
	}
	switch {
	case r.Delivered:
		p.core.Reply(r)
		p.resendHard(r)
	case r.Phase != rskeen.Start:
		p.resendHard(r)
		p.tryFinal(r)
	case r.AssignInFlight:
		p.resendSoft(r)
	default:
		p.assign(r)
	}
	return nil
}

func (p *Process) assign(r *rskeen.Rec) {
	if !p.core.Log.IsLeader() {
		return
	}
	lts := wire.Timestamp{T: p.next + 1, G: p.core.G}
	p.next = lts.T
	r.AssignInFlight = true
	p.core.SetSoft(r, p.core.G, lts)
	p.core.Log.Propose(wire.Command{Op: wire.CmdAssign, M: r.M, TS: lts})
	if len(r.M.Dest) == 1 || r.Phase == rskeen.Committed {
		return // a single-group message commits when its ASSIGN executes
	}
	s := &wire.SoftTS{ID: r.M.ID, G: p.core.G, LTS: lts}
	for _, g := range r.M.Dest {
		if g != p.core.G {
			p.core.SendTo(p.core.Hint(g), s)
		}
	}
	p.trySpec(r)
}

// resendSoft re-sends the soft timestamp of an ASSIGN in flight to every
// member of the other destination groups (rate-limited).
func (p *Process) resendSoft(r *rskeen.Rec) {
	i := r.M.DestIndex(p.core.G)
	if len(r.M.Dest) == 1 || r.Soft[i].IsZero() || !p.core.MayResend(r) {
		return
	}
	s := &wire.SoftTS{ID: r.M.ID, G: p.core.G, LTS: r.Soft[i]}
	for _, g := range r.M.Dest {
		if g != p.core.G {
			p.core.SendGroup(g, s)
		}
	}
}

// resendHard re-sends the group's chosen local timestamp of a multi-group
// message to every member of the other destination groups (rate-limited).
func (p *Process) resendHard(r *rskeen.Rec) {
	if len(r.M.Dest) == 1 || r.Phase == rskeen.Start || !p.core.MayResend(r) {
		return
	}
	h := &wire.HardTS{ID: r.M.ID, G: p.core.G, LTS: r.LTS}
	for _, g := range r.M.Dest {
		if g != p.core.G {
			p.core.SendGroup(g, h)
		}
	}
}

// onSoft (F3) files another group's soft timestamp; the leader proposes
// the speculative FINAL once it holds every destination group's.
func (p *Process) onSoft(from wire.ProcID, s *wire.SoftTS) error {
	if err := p.core.CheckTS(from, s.ID, s.G, s.LTS, false); err != nil {
		return err
	}
	p.core.SetHint(s.G, from)
	r := p.core.Rec(s.ID)
	p.core.SetSoft(r, s.G, s.LTS)
	p.trySpec(r)
	return nil
}

// trySpec proposes FINAL(m, max soft timestamps), once per leadership.
func (p *Process) trySpec(r *rskeen.Rec) {
	if !p.core.Log.IsLeader() || !r.Known || r.SpecDone || r.Phase == rskeen.Committed || len(r.M.Dest) == 1 {
		return
	}
	gs, ok := rskeen.MaxTS(r.Soft)
	if !ok {
		return
	}
	r.SpecDone = true
	if r.FinalInFlight && r.FinalVal == gs {
		return
	}
	if p.proposeFinal(r, gs) {
		p.cnt.Speculative++
	}
}

func (p *Process) proposeFinal(r *rskeen.Rec, gts wire.Timestamp) bool {
	if !p.core.Log.IsLeader() {
		return false
	}
	p.next = max(p.next, gts.T)
	r.FinalInFlight, r.FinalVal = true, gts
	p.core.Log.Propose(wire.Command{Op: wire.CmdFinal, M: wire.AppMsg{ID: r.M.ID, Dest: r.M.Dest}, TS: gts})
	return true
}

// onHard (F4) files another group's chosen local timestamp: every member
// checks whether m commits; the leader starts the slow path if the FINALs
// in its log do not carry the global timestamp.
func (p *Process) onHard(from wire.ProcID, h *wire.HardTS) error {
	if err := p.core.CheckTS(from, h.ID, h.G, h.LTS, true); err != nil {
		return err
	}
	r := p.core.Rec(h.ID)
	p.core.SetTS(r, h.G, h.LTS)
	if r.Known {
		p.core.Touch(r)
	}
	p.checkCommit(r)
	p.tryFinal(r)
	return nil
}

// checkCommit (F5, every member): m commits once its ASSIGN executed, the
// chosen local timestamps of every destination group are known, and a
// FINAL executed after the ASSIGN carries their maximum.
func (p *Process) checkCommit(r *rskeen.Rec) {
	if r.Phase != rskeen.Assigned {
		return
	}
	gh, ok := rskeen.MaxTS(r.TS)
	if !ok {
		return
	}
	for _, f := range r.Finals {
		if f == gh || p.core.Has(rskeen.MutFastPathMismatch) {
			p.core.Commit(r, f)
			return
		}
	}
}

// tryFinal (F5, leader): the slow path. With every chosen local timestamp
// known and no FINAL carrying their maximum executed or in flight, propose
// FINAL(m, max).
func (p *Process) tryFinal(r *rskeen.Rec) {
	if !p.core.Log.IsLeader() || r.Phase != rskeen.Assigned {
		return
	}
	gh, ok := rskeen.MaxTS(r.TS)
	if !ok {
		return
	}
	if r.FinalInFlight && r.FinalVal == gh {
		return
	}
	for _, f := range r.Finals {
		if f == gh {
			return
		}
	}
	if p.proposeFinal(r, gh) {
		p.cnt.SlowPaths++
	}
}

// execute is paxos.Host's Execute.
func (p *Process) execute(_ uint64, c *wire.Command) {
	switch c.Op {
	case wire.CmdAssign:
		r := p.core.Rec(c.M.ID)
		p.core.Adopt(r, &c.M) // the log's copy is the message
		r.AssignInFlight = false
		if r.Phase != rskeen.Start {
			return // a duplicate ASSIGN: the first one counts
		}
		// The chosen local timestamp is the proposed one if it is above
		// the clock (always, under a stable leader), else clock+1: a value
		// a deposed leader proposed and a later ballot adopted can be
		// stale, and every ASSIGN must land above the FINALs before it.
		lts := wire.Timestamp{T: max(c.TS.T, p.clock+1), G: p.core.G}
		if p.core.Has(rskeen.MutStaleAssignTS) && c.TS.T > 0 {
			lts.T = c.TS.T
		}
		p.clock = lts.T
		p.core.Assign(r, lts)
		if len(r.M.Dest) == 1 {
			p.core.Commit(r, lts)
			return
		}
		if p.core.Log.IsLeader() {
			h := &wire.HardTS{ID: r.M.ID, G: p.core.G, LTS: lts}
			for _, g := range r.M.Dest {
				if g != p.core.G {
					p.core.SendGroup(g, h)
				}
			}
		}
		p.checkCommit(r)
		p.tryFinal(r)
	case wire.CmdFinal:
		if !p.core.Has(rskeen.MutSkipFinalClock) {
			p.clock = max(p.clock, c.TS.T)
		}
		r := p.core.Lookup(c.M.ID)
		if r == nil {
			return
		}
		if r.FinalInFlight && r.FinalVal == c.TS {
			r.FinalInFlight = false
		}
		if r.Phase != rskeen.Assigned {
			return // before the ASSIGN (it cannot carry the gts) or committed
		}
		r.Finals = append(r.Finals, c.TS)
		p.checkCommit(r)
		p.tryFinal(r)
	}
}

// lead is paxos.Host's Lead. A new leader sets its timestamp counter
// above everything in its log, rebuilds its view of the commands in
// flight, proposes the messages it knows that the log never assigned, and
// for every pending multi-group message re-sends its hard timestamp and
// asks the other destination groups for theirs (a MULTICAST makes their
// leaders re-send them).
func (p *Process) lead(leading bool) {
	recs := p.core.Recs()
	for _, r := range recs {
		r.AssignInFlight, r.FinalInFlight, r.SpecDone = false, false, false
	}
	if !leading {
		return
	}
	p.next = p.clock
	n := 0
	p.core.Log.Pending(func(_ uint64, c *wire.Command) {
		p.next = max(p.next, c.TS.T)
		switch c.Op {
		case wire.CmdAssign:
			r := p.core.Rec(c.M.ID)
			p.core.Learn(r, &c.M)
			r.AssignInFlight = true
			p.core.SetSoft(r, p.core.G, c.TS)
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
			if !r.AssignInFlight {
				p.assign(r)
				n++
			}
			continue
		}
		if len(r.M.Dest) > 1 {
			p.resendHard(r)
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
