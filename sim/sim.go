// Package sim is weft's deterministic simulator: it runs protocol machines
// (amcast.Machine) of any protocol on virtual time with a seeded PRNG,
// per-link FIFO channels with delay models, and client processes with a
// configurable workload. Every protocol message passes through the wire
// codec. The same Config (seed included) gives a byte-identical history.
//
// Time is an int64 count of virtual units; Config.Delta units make one
// message delay δ, so latencies divide by Delta to be read in δ. One global
// tick event ticks every live process, in id order, every Config.TickEvery.
//
// Faults (Config.Faults) crash and restart replicas from their durable
// stores (Persist records reach the store before anything of their Ready
// leaves the process, torn crashes excepted), partition links (both ways or
// one), reset links (dropping what is in flight) and multiply link delays.
// SwarmConfig draws a whole configuration with a fault profile from a seed
// (TigerBeetle VOPR style), with a fault phase until GST and a liveness
// phase after it; RunSwarm and Sweep run and check swarm seeds.
//
// A run ends when it converges (every multicast delivered by every live
// replica of its destination groups, nothing of the workload in flight, the
// fault phase over), when it stalls (Config.StallTime), at the horizon
// (Config.MaxTime, or GST + Faults.Conv) or past its message budget
// (Config.MaxMessages).
package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/wire"
)

type msgInfo struct {
	t     int64
	gts   wire.Timestamp // of its first delivery at any replica (client-reply check)
	told  wire.Timestamp // the gts a client was told before any replica delivered it
	first uint64         // groups that delivered it at least once
	dest  []wire.GroupID
	got   int // offset in Sim.got of one member bitmask per destination group
	// injected: an outside client's message (Sim.recordInjected) or one
	// its client gave up (Sim.giveUp), tracked from its first delivery on,
	// kept out of the latency figures.
	injected bool
	// applied: some replica applied it before its delivery was durable
	// (early.go): it must complete, as if delivered.
	applied bool
	hist    int // index of its multicast event in Sim.hist, or -1
}

// Stats counts what a run did.
type Stats struct {
	Multicasts int
	MultiGroup int // multicasts to 2 or more groups
	Sessions   int // client sessions started after the first (Workload.SessionEvery)
	Expired    int // messages their client gave up (Workload.ExpireTicks)
	GivenUp    int // messages given up: expired, or outstanding at a client restart (Workload.CrashClients)
	Replies    int // client completions checked against the deliveries
	Deliveries int
	// Installs counts state transfers (SNAPSHOTs installed at replicas).
	Installs int
	// InjectedDeliveries counts the deliveries of messages that clients
	// outside the run multicast in their own name (Sim.recordInjected).
	InjectedDeliveries int
	Messages           int            // protocol messages sent between processes
	Bytes              int64          // their encoded size
	ByKind             map[string]int // messages by kind
	VirtualTime        int64          // time of the last event
	Ticks              int            // global ticks (each ticks every live process)
	// Messages lost to faults: sent on a partitioned link, in flight on a
	// link that was reset, or arriving at a crashed replica.
	LostPartition, LostReset, LostDown int
	// Latencies in virtual units: first delivery per destination group
	// (leaders) and every later delivery in the group (followers).
	LeaderLat   []int64
	FollowerLat []int64
	// Handled counts, per process (replicas, then clients), the messages
	// it handled.
	Handled []int
	// Held counts the messages replicas held for their next message to
	// the same peer (Config.Hold), HeldByTick those of them a tick sent.
	Held, HeldByTick int
	// Pipeline counts what pipelined storage did (Config.Pipeline).
	Pipeline PipelineStats
}

// Result is the outcome of a run.
type Result struct {
	Config  Config
	Stats   Stats
	History *check.History // nil with NoHistory
	// Converged is true when the run ended because every multicast had
	// been delivered by every live replica of its destination groups (and
	// nothing of the workload was left in flight), not at the horizon, on
	// a stall or on an error.
	Converged bool
	// LastDelivery is the time of the last delivery at a replica.
	LastDelivery int64
	// Faults counts the faults injected.
	Faults FaultStats
	// Down lists the replicas down at the end (crashed for good), and those
	// that lost their disk (inert, they deliver nothing more).
	Down []wire.ProcID
	// LeaderChanges counts, over all groups, the times a replica began to
	// lead (amcast.Observable.IsLeader went from false to true, a restarted
	// replica counting from false); GroupLeaderChanges counts them per
	// group. Protocols that are not Observable count none.
	LeaderChanges      int
	GroupLeaderChanges []int
	// Coverage sums amcast.Observable.Coverage over every incarnation of
	// every replica: at its crash, and at the end for the live ones.
	Coverage amcast.Coverage
	// LeaderEvents lists, in time order, every time a replica began to lead.
	LeaderEvents []LeaderEvent
	// PeakRetained is the most messages any one replica held in memory at
	// any time (amcast.Observable.Retained), the measure of garbage
	// collection.
	PeakRetained int
}

// Sim is one simulation in progress.
type Sim struct {
	cfg     Config
	spec    *ProtocolSpec
	rng     *rand.Rand
	topo    *amcast.Topology
	now     int64
	seq     uint64
	q       []event
	procs   []amcast.Machine // replicas then clients, indexed by ProcID; nil while crashed
	up      []bool
	obs     []amcast.Observable // per replica, nil if the machine is not Observable
	leader  []bool              // per replica: last IsLeader seen
	clients []*amcast.Client
	nrep    int
	last    []int64       // per link (from*n+to): arrival time of the last message
	busy    []int64       // per replica: end of the work queued (Config.ServiceTime)
	held    []amcast.Held // per replica: messages held (Config.Hold)
	issued  int
	nextSeq []uint64
	// crashIn is, per closed-loop client, the session that crashes at its
	// pending evClientCrash (Workload.CrashClients).
	crashIn []wire.SessionID
	msgs    map[wire.MsgID]*msgInfo
	// optional holds the messages recorded in the history as optional:
	// authentic MULTICASTs of clients outside the run (Config.Inject) and
	// messages their client gave up (Sim.giveUp). Each is tracked for
	// convergence from its first delivery on.
	optional map[wire.MsgID]bool
	hist     *check.History
	stats    Stats
	msgData  arena
	kindCnt  [256]int

	fg           int   // workload events in the queue
	horizon      int64 // 0: none
	lastProgress int64
	converged    bool
	lastDelivery int64
	leaderChg    []int // per group
	leaderEvs    []LeaderEvent
	peakRetained int
	cov          amcast.Coverage

	// Convergence: remaining counts the (multicast, live destination
	// replica) pairs not delivered yet.
	addressed []int    // per group: multicasts addressed to it
	delivered []int    // per replica: distinct multicasts delivered
	got       []uint64 // per (multicast, destination group): members that delivered
	remaining int

	f *faultState // nil without faults

	rc    *restoreCheck // Config.CheckRestore; nil without it
	pipes []*pipeState  // Config.Pipeline, per replica; nil without it
	early *earlyCheck   // with pipes: deliveries applied before durable
	// replyErr: a delivery contradicted what a client was told (checkReply).
	replyErr error
}

// New prepares a simulation.
func New(cfg Config) (*Sim, error) {
	ps := cfg.Spec
	if ps == nil {
		var err error
		if ps, err = LookupProtocol(cfg.Protocol); err != nil {
			return nil, err
		}
	}
	if err := cfg.validate(ps); err != nil {
		return nil, err
	}
	topo, err := amcast.NewTopology(cfg.Groups, cfg.Replicas)
	if err != nil {
		return nil, err
	}
	s := &Sim{
		cfg:  cfg,
		spec: ps,
		rng:  rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		topo: topo,
		nrep: topo.NumReplicas(),
		msgs: map[wire.MsgID]*msgInfo{},
	}
	for id := 0; id < s.nrep; id++ {
		m, err := ps.New(topo, wire.ProcID(id))
		if err != nil {
			return nil, err
		}
		s.procs = append(s.procs, m)
	}
	for i := 0; i < cfg.Workload.Clients; i++ {
		c, err := amcast.NewClient(topo, wire.ProcID(s.nrep+i))
		if err != nil {
			return nil, err
		}
		c.ExpireTicks = cfg.Workload.ExpireTicks
		s.procs = append(s.procs, c)
		s.clients = append(s.clients, c)
	}
	n := len(s.procs)
	s.up = make([]bool, n)
	for i := range s.up {
		s.up[i] = true
	}
	s.obs = make([]amcast.Observable, s.nrep)
	s.leader = make([]bool, s.nrep)
	for id := 0; id < s.nrep; id++ {
		if o, ok := s.procs[id].(amcast.Observable); ok {
			s.obs[id] = o
			s.leader[id] = o.IsLeader()
		}
	}
	s.addressed = make([]int, cfg.Groups)
	s.leaderChg = make([]int, cfg.Groups)
	s.delivered = make([]int, s.nrep)
	s.nextSeq = make([]uint64, len(s.clients))
	s.crashIn = make([]wire.SessionID, len(s.clients))
	s.last = make([]int64, n*n)
	s.stats.Handled = make([]int, n)
	if cfg.ServiceTime > 0 {
		s.busy = make([]int64, s.nrep)
	}
	if cfg.Hold && s.spec.MayWait != nil {
		s.held = make([]amcast.Held, s.nrep)
	}
	if cfg.Pipeline {
		s.pipes = newPipes(s.nrep, s.spec.SendsBeforeSync)
	}
	s.horizon = cfg.MaxTime
	if cfg.Faults.Enabled() {
		s.f = newFaultState(s)
		if s.horizon == 0 {
			s.horizon = cfg.Faults.GST + cfg.Faults.Conv
		}
	}
	if cfg.CheckRestore {
		s.rc = newRestoreCheck(s)
	}
	if !cfg.NoHistory {
		s.hist = &check.History{Config: check.Config{Protocol: cfg.Protocol, Groups: cfg.Groups, Replicas: cfg.Replicas, Seed: cfg.Seed}}
	}
	return s, nil
}

// Run simulates until the run converges (every multicast delivered by
// every live replica of its destination groups, nothing of the workload in
// flight and the fault phase over), stalls, or reaches the horizon, and
// returns the result. On an error (a refused message, a panic inside a
// protocol) it returns the error and, when the simulation got that far,
// the partial result with the history up to the failure.
func Run(cfg Config) (res *Result, err error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sim: seed %d: panic at t=%d: %v", cfg.Seed, s.now, r)
			res = s.result()
		}
	}()
	if err := s.run(); err != nil {
		return s.result(), err
	}
	if s.converged {
		if err := s.checkEarly(); err != nil {
			return s.result(), err
		}
	}
	return s.result(), nil
}

func (s *Sim) result() *Result {
	s.stats.VirtualTime = s.now
	s.stats.ByKind = map[string]int{}
	for k, c := range s.kindCnt {
		if c > 0 {
			s.stats.ByKind[wire.Kind(k).String()] = c
		}
	}
	res := &Result{Config: s.cfg, Stats: s.stats, History: s.hist, Converged: s.converged,
		LastDelivery: s.lastDelivery, GroupLeaderChanges: s.leaderChg, Coverage: s.cov,
		LeaderEvents: s.leaderEvs, PeakRetained: s.peakRetained}
	for _, n := range s.leaderChg {
		res.LeaderChanges += n
	}
	for id := 0; id < s.nrep; id++ {
		if !s.up[id] || (s.f != nil && s.f.inert(wire.ProcID(id))) {
			res.Down = append(res.Down, wire.ProcID(id))
		} else if o := s.obs[id]; o != nil {
			res.Coverage.Add(o.Coverage())
		}
	}
	if s.f != nil {
		res.Faults = s.f.stats
	}
	return res
}

func (s *Sim) run() error {
	w := &s.cfg.Workload
	switch w.Mode {
	case ClosedLoop:
		for i := range s.clients {
			s.push(event{at: 0, kind: evIssue, arg: int32(i), fg: true})
		}
	case OpenLoop:
		for i := range s.clients {
			s.push(event{at: s.expDelay(w.Interval), kind: evIssue, arg: int32(i), fg: true})
		}
	case Solo:
		s.push(event{at: 0, kind: evIssue, arg: 0, fg: true})
	case Script:
		for i, sc := range w.Script {
			s.push(event{at: sc.At, kind: evIssue, arg: int32(i), fg: true})
		}
	}
	if s.cfg.TickEvery > 0 {
		s.push(event{at: s.cfg.TickEvery, kind: evTick})
	}
	if s.f != nil {
		s.f.start()
	}
	for len(s.q) > 0 {
		if s.horizon > 0 && s.q[0].at > s.horizon {
			s.now = s.horizon
			return nil
		}
		ev := s.pop()
		s.now = ev.at
		if ev.fg {
			s.fg--
		}
		if err := s.handle(&ev); err != nil {
			return err
		}
		if s.replyErr != nil {
			return s.replyErr
		}
		if s.cfg.MaxMessages > 0 && s.stats.Messages > s.cfg.MaxMessages {
			return fmt.Errorf("%w: %d protocol messages by t=%.1fδ with %d (multicast, replica) deliveries missing: a livelock or a retry storm",
				ErrBudget, s.stats.Messages, float64(s.now)/float64(s.cfg.Delta), s.remaining)
		}
		if s.fg > 0 {
			continue
		}
		if w.Mode == Solo && s.issued < w.Messages {
			// Quiet: the next solo message goes one δ later.
			s.push(event{at: s.now + s.cfg.Delta, kind: evIssue, arg: 0, fg: true})
			continue
		}
		if s.f != nil && !s.f.over() {
			continue
		}
		if s.remaining == 0 && s.workloadDone() {
			s.converged = true
			return nil
		}
		if s.now-s.lastProgress >= s.cfg.StallTime && (len(s.q) == 0 || s.q[0].at > s.now) {
			return nil // stalled (at the end of a time step)
		}
	}
	return nil
}

func (s *Sim) workloadDone() bool {
	w := &s.cfg.Workload
	if w.Mode == Script {
		return s.issued == len(w.Script)
	}
	return s.issued >= w.Messages
}

func (s *Sim) handle(ev *event) error {
	switch ev.kind {
	case evMsg:
		if f := s.f; f != nil {
			if ev.epoch != f.epoch[int(ev.from)*len(s.procs)+int(ev.to)] {
				s.stats.LostReset++
				s.msgData.done(ev)
				return nil
			}
			if !s.up[ev.to] {
				s.stats.LostDown++
				s.msgData.done(ev)
				return nil
			}
		}
		if s.busy != nil && int(ev.to) < s.nrep {
			// Queue it behind the replica's work (the event keeps its
			// reference to the encoded message).
			h := *ev
			h.kind = evHandle
			h.at = max(s.now, s.busy[ev.to]) + s.cfg.ServiceTime
			s.busy[ev.to] = h.at
			s.push(h)
			return nil
		}
		return s.handleMsg(ev)
	case evHandle:
		if !s.up[ev.to] {
			s.stats.LostDown++
			s.msgData.done(ev)
			return nil
		}
		return s.handleMsg(ev)
	case evIssue:
		return s.issue(int(ev.arg))
	case evClientCrash:
		return s.crashClient(int(ev.arg))
	case evSync:
		return s.synced(ev.to, ev.arg, ev.fg)
	case evTick:
		s.stats.Ticks++
		if s.cfg.Inject != nil {
			if err := s.inject(); err != nil {
				return err
			}
		}
		for id, m := range s.procs {
			if !s.up[id] {
				continue
			}
			m.Tick()
			if err := s.sendHeld(wire.ProcID(id)); err != nil { // as a node's tick does
				return err
			}
			if err := s.flush(wire.ProcID(id), false); err != nil {
				return err
			}
		}
		s.push(event{at: s.now + s.cfg.TickEvery, kind: evTick})
		return nil
	}
	return s.f.handle(ev)
}

// handleMsg decodes a message and hands it to its recipient.
func (s *Sim) handleMsg(ev *event) error {
	msg, err := wire.Decode(s.msgData.bytes(ev))
	s.msgData.done(ev)
	if err != nil {
		return fmt.Errorf("sim: p%d->p%d: %w", ev.from, ev.to, err)
	}
	for env := range amcast.Unbatch(wire.Envelope{From: ev.from, To: ev.to, Msg: msg}) {
		s.stats.Handled[ev.to]++
		if err := s.procs[ev.to].Step(env); err != nil {
			return fmt.Errorf("sim: t=%d p%d refused %s from p%d: %w", s.now, ev.to, wire.Describe(env.Msg), ev.from, err)
		}
	}
	return s.flush(ev.to, ev.fg)
}

func (s *Sim) delay(from, to wire.ProcID, m wire.Message) int64 {
	if from == to {
		return 0
	}
	if s.cfg.DelayFn != nil {
		if d, ok := s.cfg.DelayFn(s.now, from, to, m); ok {
			return d
		}
	}
	D := s.cfg.Delta
	switch s.cfg.Delay {
	case DelayUniform:
		return 1 + s.rng.Int64N(D)
	case DelayHeavy:
		u := 1 - s.rng.Float64() // (0,1]
		d := float64(D) / 3 / math.Pow(u, 1/1.5)
		return min(max(int64(d), 1), 50*D)
	}
	return D
}

// flush drains process id's Ready in the contract's order: Persist records
// go to the replica's store (when it has one) first, then messages are
// scheduled on their links and deliveries recorded. fg marks the messages
// as workload traffic. A torn crash pending at id strikes here instead.
func (s *Sim) flush(id wire.ProcID, fg bool) error {
	m := s.procs[id]
	rep := int(id) < s.nrep
	if rep && s.obs[id] != nil {
		s.observe(id)
	}
	if !m.HasReady() {
		return nil
	}
	rd := m.Ready()
	if rep && s.pipes != nil {
		return s.flushPipelined(id, m, &rd, fg)
	}
	f := s.f
	if f != nil && rep {
		if f.torn[id] != noTorn {
			return f.tornCrash(id, &rd, fg)
		}
		if err := f.persist(id, rd.Persist); err != nil {
			return err
		}
	}
	if s.rc != nil && rep {
		if err := s.rc.check(id, rd.Persist); err != nil {
			return err
		}
	}
	if err := s.sendRouted(id, rd.Messages, fg); err != nil {
		return err
	}
	if !rep {
		ci := int(id) - s.nrep
		for _, d := range rd.Deliveries {
			if d.Expired {
				if err := s.expired(id, d.M.ID); err != nil {
					return err
				}
			} else if err := s.checkReply(id, d); err != nil {
				return err
			} else if s.cfg.OnReply != nil {
				s.cfg.OnReply(ci, d, s.now)
			}
			s.lastProgress = s.now
			if s.cfg.Workload.Mode == ClosedLoop {
				s.push(event{at: s.now, kind: evIssue, arg: int32(ci), fg: true})
			}
		}
	} else {
		g, _ := s.topo.GroupOf(id)
		for _, d := range rd.Deliveries {
			s.recordDelivery(id, g, d)
		}
	}
	m.Advance()
	return nil
}

// sendRouted sends process id's messages, through what a replica holds
// (Config.Hold) if it holds any.
func (s *Sim) sendRouted(id wire.ProcID, msgs []wire.Envelope, fg bool) error {
	if s.held != nil && int(id) < s.nrep {
		var n int
		msgs, n = s.held[id].Route(msgs, s.topo, s.spec.MayWait)
		s.stats.Held += n
	}
	return s.send(msgs, fg, nil)
}

// sendHeld sends everything replica id holds (Config.Hold).
func (s *Sim) sendHeld(id wire.ProcID) error {
	if s.held == nil || int(id) >= s.nrep || s.cfg.holdForever {
		return nil
	}
	msgs := s.held[id].Flush()
	s.stats.HeldByTick += len(msgs)
	return s.send(msgs, false, nil)
}

// send schedules msgs on their links (only those only accepts, if set).
func (s *Sim) send(msgs []wire.Envelope, fg bool, only func(wire.Message) bool) error {
	f := s.f
	n := len(s.procs)
	if only != nil {
		var sel []wire.Envelope
		for _, e := range msgs {
			if only(e.Msg) {
				sel = append(sel, e)
			}
		}
		msgs = sel
	}
	if s.cfg.Batch && len(msgs) > 1 && int(msgs[0].From) < s.nrep { // replicas batch, clients do not
		msgs = amcast.Coalesce(msgs, func(to wire.ProcID) bool { return int(to) < s.nrep }, 0)
	}
	for _, e := range msgs {
		if e.From == e.To {
			// A process's message to itself (a WbCast leader's own
			// ACCEPT_ACK) never crosses a link: not counted, not lost.
			ev := event{kind: evMsg, from: e.From, to: e.To, fg: fg, at: s.now}
			ev.chunk, ev.off, ev.n = s.msgData.add(e.Msg)
			if f != nil {
				ev.epoch = f.epoch[int(e.From)*n+int(e.To)]
			}
			s.push(ev)
			continue
		}
		s.kindCnt[e.Msg.Kind()]++
		if b, ok := e.Msg.(*wire.Batch); ok {
			for _, m := range b.Msgs {
				s.kindCnt[m.Kind()]++
			}
		}
		s.stats.Messages++
		size := wire.Size(e.Msg)
		if size > s.cfg.MaxFrame {
			return fmt.Errorf("%w: t=%d p%d->p%d: %s of %d bytes, cap %d", ErrFrame, s.now, e.From, e.To, e.Msg.Kind(), size, s.cfg.MaxFrame)
		}
		if int(e.To) >= n {
			// A reply to a process outside the run (the sender of
			// injected input): lost.
			s.stats.LostDown++
			continue
		}
		link := int(e.From)*n + int(e.To)
		if s.cfg.Mute != nil && s.cfg.Mute(e.From) {
			s.stats.LostPartition++
			continue
		}
		s.stats.Bytes += int64(size)
		if f != nil && f.cut[link] > 0 {
			s.stats.LostPartition++
			continue
		}
		ev := event{kind: evMsg, from: e.From, to: e.To, fg: fg}
		ev.chunk, ev.off, ev.n = s.msgData.add(e.Msg)
		at := s.now + s.delay(e.From, e.To, e.Msg)
		if f != nil {
			at = f.spiked(link, at)
			ev.epoch = f.epoch[link]
		}
		if at < s.last[link] {
			at = s.last[link] // FIFO
		}
		s.last[link] = at
		ev.at = at
		s.push(ev)
	}
	return nil
}

// observe tracks replica id's leadership.
func (s *Sim) observe(id wire.ProcID) {
	if r := s.obs[id].Retained(); r > s.peakRetained {
		s.peakRetained = r
	}
	if s.f != nil {
		s.f.noteFloor(id)
	}
	l := s.obs[id].IsLeader()
	if l == s.leader[id] {
		return
	}
	s.leader[id] = l
	if l {
		g, _ := s.topo.GroupOf(id)
		s.leaderChg[g]++
		s.leaderEvs = append(s.leaderEvs, LeaderEvent{T: s.now, Group: g, Proc: id})
	}
}

// recordInstall is a state transfer at replica id of group g (amcast
// Delivery.Install): every message of g's order up to gts counts as
// delivered there (the checker splices them in the same way, check's
// install.go).
func (s *Sim) recordInstall(id wire.ProcID, g wire.GroupID, gts wire.Timestamp) {
	s.stats.Installs++
	s.lastProgress = s.now
	bit := uint64(1) << s.topo.MemberIndex(id)
	for _, mi := range s.msgs {
		if mi.gts.IsZero() || gts.Less(mi.gts) {
			continue
		}
		for di, dg := range mi.dest {
			if w := &s.got[mi.got+di]; dg == g && *w&bit == 0 {
				*w |= bit
				s.delivered[id]++
				s.remaining--
			}
		}
	}
	if s.hist != nil {
		s.hist.Events = append(s.hist.Events, check.Event{
			Ev: check.EvInstall, Proc: int(id), Group: int(g), GTS: check.GTS{T: gts.T, G: int(gts.G)}, T: s.now,
		})
	}
}

// forget clears what replica id (down) delivered: it lost its disk and
// delivers (or installs) everything again once it rejoined, and the
// checker no longer counts its old deliveries (check's wipe event).
func (s *Sim) forget(id wire.ProcID) {
	g, _ := s.topo.GroupOf(id)
	bit := uint64(1) << s.topo.MemberIndex(id)
	for _, mi := range s.msgs {
		for di, dg := range mi.dest {
			if w := &s.got[mi.got+di]; dg == g && *w&bit != 0 {
				*w &^= bit
			}
		}
	}
	s.delivered[id] = 0
	if s.pipes != nil {
		s.pipes[id].applied, s.pipes[id].appliedDurable = wire.Timestamp{}, wire.Timestamp{}
	}
}

// LeaderEvent records that Proc began to lead Group at time T.
type LeaderEvent struct {
	T     int64
	Group wire.GroupID
	Proc  wire.ProcID
}

func (s *Sim) recordDelivery(id wire.ProcID, g wire.GroupID, d amcast.Delivery) {
	if s.cfg.OnDeliver != nil {
		s.cfg.OnDeliver(id, d)
	}
	if s.pipes != nil {
		s.noteDurable(id, d.GTS)
	}
	if d.Install {
		s.recordInstall(id, g, d.GTS)
		return
	}
	s.stats.Deliveries++
	if s.optional[d.M.ID] {
		if int(d.M.ID.Client) >= s.nrep+len(s.clients) {
			s.stats.InjectedDeliveries++
		}
		s.trackOptional(&d.M)
	}
	s.lastProgress = s.now
	s.lastDelivery = s.now
	if mi := s.msgs[d.M.ID]; mi != nil {
		if mi.gts.IsZero() {
			mi.gts = d.GTS
			if !mi.told.IsZero() && mi.told != d.GTS && s.replyErr == nil {
				s.replyErr = fmt.Errorf("sim: t=%d p%d delivered %s at %s; its client was told %s", s.now, id, d.M.ID, d.GTS, mi.told)
			}
		}
		for di, dg := range mi.dest {
			if dg != g {
				continue
			}
			bit := uint64(1) << s.topo.MemberIndex(id)
			if w := &s.got[mi.got+di]; *w&bit == 0 {
				*w |= bit
				s.delivered[id]++
				s.remaining--
			}
		}
		lat := s.now - mi.t
		switch {
		case mi.first&(1<<g) == 0:
			mi.first |= 1 << g
			if !mi.injected {
				s.stats.LeaderLat = append(s.stats.LeaderLat, lat)
			}
		case !mi.injected:
			s.stats.FollowerLat = append(s.stats.FollowerLat, lat)
		}
	}
	if s.hist != nil {
		s.hist.Events = append(s.hist.Events, check.Event{
			Ev: "deliver", Proc: int(id), Group: int(g), ID: d.M.ID.Full(),
			GTS: check.GTS{T: d.GTS.T, G: int(d.GTS.G)}, T: s.now, Digest: check.Digest(d.M.Payload),
		})
	}
}
