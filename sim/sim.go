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
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/wire"
)

// DelayModel picks each message's link delay.
type DelayModel int

// Delay models.
const (
	// DelayFixed: every message takes exactly δ.
	DelayFixed DelayModel = iota
	// DelayUniform: uniform in (0, δ].
	DelayUniform
	// DelayHeavy: Pareto (α = 1.5, median ≈ δ/2), capped at 50δ.
	DelayHeavy
)

// ParseDelay parses "fixed", "uniform" or "heavy".
func ParseDelay(s string) (DelayModel, error) {
	switch s {
	case "fixed":
		return DelayFixed, nil
	case "uniform":
		return DelayUniform, nil
	case "heavy":
		return DelayHeavy, nil
	}
	return 0, fmt.Errorf("sim: unknown delay model %q (want fixed, uniform or heavy)", s)
}

func (d DelayModel) String() string {
	return [...]string{"fixed", "uniform", "heavy"}[d]
}

// Mode is how clients issue messages.
type Mode int

// Workload modes.
const (
	// ClosedLoop: each client keeps one message outstanding.
	ClosedLoop Mode = iota
	// OpenLoop: each client multicasts at exponential inter-arrival times
	// with mean Workload.Interval, whatever the replies.
	OpenLoop
	// Solo: one message at a time system-wide; the next is multicast one δ
	// after the simulation goes quiet (collision-free runs).
	Solo
	// Script: exactly the multicasts in Workload.Script.
	Script
)

// Scripted is one multicast of a Script workload.
type Scripted struct {
	At     int64
	Client int // client index, 0-based
	Dest   []wire.GroupID
}

// Workload describes the client load.
type Workload struct {
	Messages    int  // total multicasts (ignored by Script)
	Clients     int  // client processes (default 1)
	Mode        Mode // default ClosedLoop
	Interval    int64
	DestMin     int // destination-set size, uniform in [DestMin, DestMax]
	DestMax     int
	PayloadSize int
	Script      []Scripted
	// SessionEvery, if positive, makes each client start a new session
	// (wire.MsgID.Session: a client restarted with the same id) after
	// every SessionEvery of its messages, at the first moment it has none
	// outstanding. 0 keeps one session per client for the whole run.
	SessionEvery int
	// CrashClients, with SessionEvery, starts a client's new session even
	// while messages are outstanding, as a client process that crashed
	// and restarted would: the messages in flight are given up
	// (Sim.giveUp), and replies to them reach the new incarnation, which
	// ignores them.
	CrashClients bool
	// ExpireTicks, if positive, is the clients' side of the session lease
	// (amcast.Client.ExpireTicks): a message unanswered that many ticks
	// after its first send is given up (Sim.giveUp). A give-up once the
	// liveness phase has begun (GST plus Faults.Conv) fails the run: after
	// GST every message must complete. Keep it at most half the
	// replicas' session lease (wbcast.Config.SessionTicks).
	ExpireTicks int
}

// DelayFunc overrides the delay of one message; ok=false keeps the model's.
type DelayFunc func(now int64, from, to wire.ProcID, m wire.Message) (d int64, ok bool)

// ErrBudget is wrapped by the error of a run that exceeded
// Config.MaxMessages.
var ErrBudget = errors.New("sim: message budget exceeded")

// ErrFrame is wrapped by the error of a run in which a process sent a
// message whose encoding exceeds Config.MaxFrame: the transport would refuse
// to send it, so the run stops instead of delivering it.
var ErrFrame = errors.New("sim: message exceeds the frame cap")

// Config is one simulation.
type Config struct {
	Protocol string
	// Spec, when set, is the protocol to run instead of the one Protocol
	// names in the simulator's table (tests, protocols defined elsewhere).
	// Protocol then only names it in the history; empty means Spec.Name.
	Spec     *ProtocolSpec
	Groups   int
	Replicas int
	Seed     uint64
	Delta    int64 // virtual units per δ (default 1000)
	Delay    DelayModel
	DelayFn  DelayFunc
	Workload Workload
	// TickEvery is the virtual time between ticks: every live process
	// (replicas and clients, in id order) gets Tick() and then has its
	// Ready handled, once per TickEvery. 0 means Delta (one tick per δ); a
	// negative value disables ticks.
	TickEvery int64
	// MaxTime is the horizon: the run stops there even if work is left.
	// 0 means none without faults, Faults.GST+Faults.Conv with them.
	MaxTime int64
	// StallTime ends a run that has nothing of the workload in flight and
	// has seen no multicast, delivery or fault for this long (only ticks
	// and what they cause). 0 means 1000δ; with faults the check starts
	// after the fault phase and 0 means Faults.Conv.
	StallTime int64
	// MaxMessages bounds the protocol messages a run may send; past it the
	// run stops with an error wrapping ErrBudget (a livelock or a retry
	// storm). 0 means no bound.
	MaxMessages int
	// MaxFrame is the transport's frame cap: a message whose encoding is
	// longer stops the run with an error wrapping ErrFrame. 0 means
	// wire.DefaultMaxFrame, the transport's default.
	MaxFrame int
	// Faults is the fault profile; the zero value injects none.
	Faults Faults
	// NoHistory skips recording the history (and checking it).
	NoHistory bool
	// ServiceTime models CPU cost: every message a replica handles keeps it
	// busy for this many virtual units, and the messages that arrive
	// meanwhile wait in a FIFO queue, handled one after the other. 0 (the
	// default) handles messages the instant they arrive. Clients and ticks
	// cost nothing.
	ServiceTime int64
	// Inject, when set, feeds forged input to running processes (fuzz
	// targets, hostile-peer tests): it is called before every global tick
	// with the time, and each envelope it returns is handed at once to its
	// recipient (a live process of the run) as if it had just arrived from
	// From, bypassing links and codec. A refusal (Step error) of injected
	// input does not end the run: refusing it is the point. What the
	// recipient sends in answer goes out as usual (see Mute).
	Inject func(now int64) []wire.Envelope
	// Mute, when set, drops every message a process sends while it
	// returns true for it (counted in LostPartition): a replica fed input
	// forged in a correct replica's name is outside the fault model from
	// then on, and must not reach the others.
	Mute func(p wire.ProcID) bool
	// Payload, when set, makes each workload message's payload (instead
	// of Workload.PayloadSize random bytes) from the issuing client's
	// index and the message's destinations: a service's commands (kv's
	// simulator test). It is called in the run's deterministic order.
	Payload func(client int, dest []wire.GroupID) []byte
	// OnDeliver, when set, is called with every delivery at every
	// replica, in the replica's delivery order, once it is durable (also
	// the durable part of a torn crash's Ready): a replicated service's
	// driver per replica (rsm.Driver), in tests.
	OnDeliver func(p wire.ProcID, d amcast.Delivery)
	// CheckRestore: after every Ready of every replica, a replica rebuilt
	// by the protocol's Restore from the records persisted so far must
	// agree with the live one on the durable state
	// (ProtocolSpec.CompareRestored; issue #10 item 4); a difference ends
	// the run with an error. It costs a Restore per Ready with records and
	// a comparison per Ready, about 10x the run, so it is opt-in.
	CheckRestore bool
}

func (c *Config) validate(ps *ProtocolSpec) error {
	if c.Protocol == "" {
		c.Protocol = ps.Name
	}
	if c.Delta == 0 {
		c.Delta = 1000
	}
	if c.Delta < 1 {
		return fmt.Errorf("sim: Delta must be positive, got %d", c.Delta)
	}
	if c.Groups < 1 || c.Groups > 64 {
		return fmt.Errorf("sim: groups must be in [1,64], got %d", c.Groups)
	}
	if c.Replicas < 1 || c.Replicas > amcast.MaxGroupSize {
		return fmt.Errorf("sim: replicas must be in [1,%d], got %d", amcast.MaxGroupSize, c.Replicas)
	}
	if c.TickEvery == 0 {
		c.TickEvery = c.Delta
	}
	if c.MaxTime < 0 || c.StallTime < 0 || c.MaxMessages < 0 || c.ServiceTime < 0 || c.MaxFrame < 0 {
		return fmt.Errorf("sim: negative MaxTime, StallTime, MaxMessages, ServiceTime or MaxFrame")
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = wire.DefaultMaxFrame
	}
	w := &c.Workload
	if w.Clients == 0 {
		w.Clients = 1
	}
	if w.Clients < 1 {
		return fmt.Errorf("sim: clients must be positive, got %d", w.Clients)
	}
	if w.DestMin == 0 {
		w.DestMin = 1
	}
	if w.DestMax == 0 {
		w.DestMax = c.Groups
	}
	if w.DestMin < 1 || w.DestMax < w.DestMin || w.DestMax > c.Groups {
		return fmt.Errorf("sim: destination sizes [%d,%d] impossible with %d groups", w.DestMin, w.DestMax, c.Groups)
	}
	if w.Messages < 0 || w.PayloadSize < 0 {
		return fmt.Errorf("sim: negative messages or payload size")
	}
	if w.Mode == OpenLoop && w.Interval <= 0 {
		w.Interval = c.Delta
	}
	if w.Mode == Solo {
		w.Clients = 1
	}
	for _, s := range w.Script {
		if s.Client < 0 || s.Client >= w.Clients {
			return fmt.Errorf("sim: scripted multicast for client %d of %d", s.Client, w.Clients)
		}
	}
	if err := c.Faults.validate(c, ps); err != nil {
		return err
	}
	if c.CheckRestore && (!ps.CrashTolerant() || ps.CompareRestored == nil) {
		return fmt.Errorf("sim: CheckRestore: %s has no Restore or CompareRestored", ps.Name)
	}
	if c.StallTime == 0 {
		c.StallTime = 1000 * c.Delta
		if c.Faults.Enabled() {
			c.StallTime = c.Faults.Conv
		}
	}
	return nil
}

type evKind uint8

const (
	evMsg evKind = iota
	evIssue
	evTick
	evFault // a random fault of kind arg (the nemesis)
	evScript
	evHeal      // partition arg ends
	evSpikeEnd  // spike arg ends
	evRestart   // replica to restarts if still in incarnation arg
	evTornLimit // replica to crashes now if its torn crash (incarnation arg) has not struck
	evGST
	evHandle // a message that waited in its replica's queue (Config.ServiceTime) is handled
)

// event is pointer-free, so the queue costs the garbage collector nothing
// and moving events in the heap needs no write barriers: an evMsg's encoded
// message lives in the arena.
type event struct {
	at    int64
	seq   uint64
	arg   int32 // evIssue: client index or script index; see evKind
	from  wire.ProcID
	to    wire.ProcID
	epoch uint32 // evMsg: the link's epoch when sent (link resets)
	chunk uint32 // evMsg: arena chunk, offset and length of the encoded message
	off   uint32
	n     uint32
	kind  evKind
	fg    bool // workload traffic: not caused by a tick, restart or fault
}

// arena holds the encoded messages in flight in chunks of about chunkSize
// bytes, each released (for reuse) once no event refers to it.
type arena struct {
	chunks [][]byte // nil once released
	live   []int32  // per chunk: events referring to it
	free   [][]byte
}

const chunkSize = 64 << 10

// add encodes m into the current chunk and returns where it is.
func (a *arena) add(m wire.Message) (chunk, off, n uint32) {
	if len(a.chunks) == 0 || len(a.chunks[len(a.chunks)-1]) >= chunkSize {
		var b []byte
		if k := len(a.free); k > 0 {
			b, a.free = a.free[k-1], a.free[:k-1]
		}
		a.chunks = append(a.chunks, b)
		a.live = append(a.live, 0)
	}
	c := len(a.chunks) - 1
	start := len(a.chunks[c])
	a.chunks[c] = wire.Append(a.chunks[c], m)
	a.live[c]++
	return uint32(c), uint32(start), uint32(len(a.chunks[c]) - start)
}

func (a *arena) bytes(ev *event) []byte {
	return a.chunks[ev.chunk][ev.off : ev.off+ev.n]
}

// done releases ev's reference to its chunk.
func (a *arena) done(ev *event) {
	c := int(ev.chunk)
	a.live[c]--
	if a.live[c] == 0 && c != len(a.chunks)-1 {
		a.free = append(a.free, a.chunks[c][:0])
		a.chunks[c] = nil
	}
}

type msgInfo struct {
	t     int64
	gts   wire.Timestamp // of its first delivery at any replica (client-reply check)
	first uint64         // groups that delivered it at least once
	dest  []wire.GroupID
	got   int // offset in Sim.got of one member bitmask per destination group
	// injected: an outside client's message (Sim.recordInjected) or one
	// its client gave up (Sim.giveUp), tracked from its first delivery on,
	// kept out of the latency figures.
	injected bool
	hist     int // index of its multicast event in Sim.hist, or -1
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
	last    []int64 // per link (from*n+to): arrival time of the last message
	busy    []int64 // per replica: end of the work queued (Config.ServiceTime)
	issued  int
	nextSeq []uint64
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

	rc *restoreCheck // Config.CheckRestore; nil without it
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
	s.last = make([]int64, n*n)
	s.stats.Handled = make([]int, n)
	if cfg.ServiceTime > 0 {
		s.busy = make([]int64, s.nrep)
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
		if !s.up[id] || (s.f != nil && s.f.wiped[id]) {
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
			if err := s.flush(wire.ProcID(id), false); err != nil {
				return err
			}
		}
		s.push(event{at: s.now + s.cfg.TickEvery, kind: evTick})
		return nil
	}
	return s.f.handle(ev)
}

// inject hands Config.Inject's envelopes to their live recipients,
// ignoring refusals.
func (s *Sim) inject() error {
	for _, env := range s.cfg.Inject(s.now) {
		s.recordInjected(env)
		if int(env.To) >= len(s.procs) || !s.up[env.To] {
			continue
		}
		_ = s.procs[env.To].Step(env)
		if err := s.flush(env.To, false); err != nil {
			return err
		}
	}
	return nil
}

// recordInjected records in the history, as an optional multicast, a
// well-formed MULTICAST that a process outside the run sends in its own
// name (an Equivocator's): replicas may order it, and the checkers then
// hold it to every rule but termination (the sender does not retry).
// Forged ones (another client's id) are not recorded: ordering one is a
// violation.
func (s *Sim) recordInjected(env wire.Envelope) {
	mc, ok := env.Msg.(*wire.Multicast)
	if !ok || s.hist == nil || int(env.From) < s.nrep || mc.M.ID.Client != env.From ||
		mc.M.Validate(s.cfg.Groups) != nil || mc.M.CheckDigest() != nil || s.optional[mc.M.ID] {
		return
	}
	if s.optional == nil {
		s.optional = map[wire.MsgID]bool{}
	}
	s.optional[mc.M.ID] = true
	d := make([]int, len(mc.M.Dest))
	for j, g := range mc.M.Dest {
		d[j] = int(g)
	}
	s.hist.Events = append(s.hist.Events, check.Event{Ev: check.EvMulticast, ID: mc.M.ID.Full(), Dest: d, T: s.now,
		Digest: check.Digest(mc.M.Payload), Optional: true})
}

// handleMsg decodes a message and hands it to its recipient.
func (s *Sim) handleMsg(ev *event) error {
	msg, err := wire.Decode(s.msgData.bytes(ev))
	s.msgData.done(ev)
	if err != nil {
		return fmt.Errorf("sim: p%d->p%d: %w", ev.from, ev.to, err)
	}
	s.stats.Handled[ev.to]++
	if err := s.procs[ev.to].Step(wire.Envelope{From: ev.from, To: ev.to, Msg: msg}); err != nil {
		return fmt.Errorf("sim: t=%d p%d refused %s from p%d: %w", s.now, ev.to, wire.Describe(msg), ev.from, err)
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
	f := s.f
	if f != nil && rep {
		if f.torn[id] != noTorn {
			return f.tornCrash(id, &rd)
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
	n := len(s.procs)
	for _, e := range rd.Messages {
		s.kindCnt[e.Msg.Kind()]++
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
	if !rep {
		ci := int(id) - s.nrep
		for _, d := range rd.Deliveries {
			if d.Expired {
				if err := s.expired(id, d.M.ID); err != nil {
					return err
				}
			} else if err := s.checkReply(id, d); err != nil {
				return err
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

// observe tracks replica id's leadership.
func (s *Sim) observe(id wire.ProcID) {
	if r := s.obs[id].Retained(); r > s.peakRetained {
		s.peakRetained = r
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
	s.stats.Deliveries++
	if s.optional[d.M.ID] {
		if int(d.M.ID.Client) >= s.nrep+len(s.clients) {
			s.stats.InjectedDeliveries++
		}
		if s.msgs[d.M.ID] == nil {
			// Delivered once, it must be delivered everywhere (agreement,
			// check.Event.Optional): the run converges only then.
			s.track(&d.M)
			s.msgs[d.M.ID].injected = true
		}
	}
	s.lastProgress = s.now
	s.lastDelivery = s.now
	if mi := s.msgs[d.M.ID]; mi != nil {
		if mi.gts.IsZero() {
			mi.gts = d.GTS
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

// Event queue: a 4-ary min-heap on (at, seq). Four children per node halve
// the depth of a binary heap, and with it the moves of 64-byte events, which
// dominate when hundreds of thousands of messages are in flight.

func evLess(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (s *Sim) push(e event) {
	if e.fg {
		s.fg++
	}
	s.seq++
	e.seq = s.seq
	s.q = append(s.q, e)
	q := s.q
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !evLess(&e, &q[p]) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = e
}

func (s *Sim) pop() event {
	q := s.q
	top := q[0]
	n := len(q) - 1
	last := q[n]
	q[n] = event{}
	s.q = q[:n]
	q = q[:n]
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < n; j++ {
			if evLess(&q[j], &q[m]) {
				m = j
			}
		}
		if !evLess(&q[m], &last) {
			break
		}
		q[i] = q[m]
		i = m
	}
	q[i] = last
	return top
}
