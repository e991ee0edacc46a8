// Package sim is weft's deterministic simulator: it runs protocol machines
// (amcast.Machine) of any protocol on virtual time with a seeded PRNG,
// per-link FIFO channels with delay models, and client processes with a
// configurable workload. Every protocol message passes through the wire
// codec. The same Config (seed included) gives a byte-identical history.
//
// Time is an int64 count of virtual units; Config.Delta units make one
// message delay δ, so latencies divide by Delta to be read in δ.
package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/skeen"
	"github.com/weft-dev/weft/amcast/wbcast"
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
}

// DelayFunc overrides the delay of one message; ok=false keeps the model's.
type DelayFunc func(now int64, from, to wire.ProcID, m wire.Message) (d int64, ok bool)

// Config is one simulation.
type Config struct {
	Protocol string
	Groups   int
	Replicas int
	Seed     uint64
	Delta    int64 // virtual units per δ (default 1000)
	Delay    DelayModel
	DelayFn  DelayFunc
	Workload Workload
	// NoHistory skips recording the history (and checking it).
	NoHistory bool
}

// Protocols lists the protocols the simulator can run.
var Protocols = []string{"skeen", "wbcast"}

// NewReplica builds a replica of the named protocol.
func NewReplica(protocol string, topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) {
	switch protocol {
	case "skeen":
		return skeen.New(topo, id)
	case "wbcast":
		return wbcast.New(wbcast.Config{Topology: topo, ID: id})
	}
	return nil, fmt.Errorf("sim: unknown protocol %q (want one of %v)", protocol, Protocols)
}

func (c *Config) validate() error {
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
	return nil
}

type evKind uint8

const (
	evMsg evKind = iota
	evIssue
)

type event struct {
	at   int64
	seq  uint64
	kind evKind
	from wire.ProcID
	to   wire.ProcID
	arg  int // evIssue: client index or script index
	data []byte
}

type msgInfo struct {
	t     int64
	first uint64 // groups that delivered it at least once
}

// Stats counts what a run did.
type Stats struct {
	Multicasts  int
	Deliveries  int
	Messages    int            // protocol messages sent between processes
	Bytes       int64          // their encoded size
	ByKind      map[string]int // messages by kind
	VirtualTime int64          // time of the last event
	// Latencies in virtual units: first delivery per destination group
	// (leaders) and every later delivery in the group (followers).
	LeaderLat   []int64
	FollowerLat []int64
}

// Result is the outcome of a run.
type Result struct {
	Config  Config
	Stats   Stats
	History *check.History // nil with NoHistory
}

// Sim is one simulation in progress.
type Sim struct {
	cfg     Config
	rng     *rand.Rand
	topo    *amcast.Topology
	now     int64
	seq     uint64
	q       []event
	procs   []amcast.Machine // replicas then clients, indexed by ProcID
	clients []*amcast.Client
	nrep    int
	last    []int64 // per link (from*n+to): arrival time of the last message
	issued  int
	nextSeq []uint64
	msgs    map[wire.MsgID]*msgInfo
	hist    *check.History
	stats   Stats
	buf     []byte
	kindCnt [256]int
}

// New prepares a simulation.
func New(cfg Config) (*Sim, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	topo, err := amcast.NewTopology(cfg.Groups, cfg.Replicas)
	if err != nil {
		return nil, err
	}
	s := &Sim{
		cfg:  cfg,
		rng:  rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		topo: topo,
		nrep: topo.NumReplicas(),
		msgs: map[wire.MsgID]*msgInfo{},
	}
	for id := 0; id < s.nrep; id++ {
		m, err := NewReplica(cfg.Protocol, topo, wire.ProcID(id))
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
		s.procs = append(s.procs, c)
		s.clients = append(s.clients, c)
	}
	s.nextSeq = make([]uint64, len(s.clients))
	n := len(s.procs)
	s.last = make([]int64, n*n)
	if !cfg.NoHistory {
		s.hist = &check.History{Config: check.Config{Protocol: cfg.Protocol, Groups: cfg.Groups, Replicas: cfg.Replicas, Seed: cfg.Seed}}
	}
	return s, nil
}

// Run simulates until no event is left and returns the result.
func Run(cfg Config) (res *Result, err error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sim: seed %d: panic at t=%d: %v", cfg.Seed, s.now, r)
		}
	}()
	if err := s.run(); err != nil {
		return nil, err
	}
	s.stats.VirtualTime = s.now
	s.stats.ByKind = map[string]int{}
	for k, c := range s.kindCnt {
		if c > 0 {
			s.stats.ByKind[wire.Kind(k).String()] = c
		}
	}
	return &Result{Config: s.cfg, Stats: s.stats, History: s.hist}, nil
}

func (s *Sim) run() error {
	w := &s.cfg.Workload
	switch w.Mode {
	case ClosedLoop:
		for i := range s.clients {
			s.push(event{at: 0, kind: evIssue, arg: i})
		}
	case OpenLoop:
		for i := range s.clients {
			s.push(event{at: s.expDelay(w.Interval), kind: evIssue, arg: i})
		}
	case Solo:
		s.push(event{at: 0, kind: evIssue, arg: 0})
	case Script:
		for i, sc := range w.Script {
			s.push(event{at: sc.At, kind: evIssue, arg: i})
		}
	}
	for {
		if len(s.q) == 0 {
			if w.Mode == Solo && s.issued < w.Messages {
				s.push(event{at: s.now + s.cfg.Delta, kind: evIssue, arg: 0})
				continue
			}
			return nil
		}
		ev := s.pop()
		s.now = ev.at
		switch ev.kind {
		case evMsg:
			msg, err := wire.Decode(ev.data)
			if err != nil {
				return fmt.Errorf("sim: p%d->p%d: %w", ev.from, ev.to, err)
			}
			if err := s.procs[ev.to].Step(wire.Envelope{From: ev.from, To: ev.to, Msg: msg}); err != nil {
				return fmt.Errorf("sim: t=%d p%d refused %s from p%d: %w", s.now, ev.to, wire.Describe(msg), ev.from, err)
			}
			s.flush(ev.to)
		case evIssue:
			if err := s.issue(ev.arg); err != nil {
				return err
			}
		}
	}
}

// issue multicasts the next message of a client (or script entry i).
func (s *Sim) issue(i int) error {
	w := &s.cfg.Workload
	var ci int
	var dest []wire.GroupID
	if w.Mode == Script {
		sc := w.Script[i]
		ci, dest = sc.Client, append([]wire.GroupID(nil), sc.Dest...)
	} else {
		if s.issued >= w.Messages {
			return nil
		}
		ci = i
		dest = s.randomDest()
	}
	c := s.clients[ci]
	s.nextSeq[ci]++
	m := wire.AppMsg{ID: wire.MsgID{Client: c.ID(), Seq: s.nextSeq[ci]}, Dest: dest}
	if w.PayloadSize > 0 {
		m.Payload = make([]byte, w.PayloadSize)
		for j := range m.Payload {
			m.Payload[j] = byte(s.rng.Uint32())
		}
	}
	s.issued++
	s.stats.Multicasts++
	s.msgs[m.ID] = &msgInfo{t: s.now}
	if s.hist != nil {
		d := make([]int, len(dest))
		for j, g := range dest {
			d[j] = int(g)
		}
		s.hist.Events = append(s.hist.Events, check.Event{Ev: "multicast", ID: m.ID.String(), Dest: d, T: s.now, Digest: check.Digest(m.Payload)})
	}
	if err := c.Multicast(m); err != nil {
		return err
	}
	s.flush(c.ID())
	if w.Mode == OpenLoop && s.issued < w.Messages {
		s.push(event{at: s.now + s.expDelay(w.Interval), kind: evIssue, arg: ci})
	}
	return nil
}

func (s *Sim) randomDest() []wire.GroupID {
	w := &s.cfg.Workload
	k := w.DestMin + s.rng.IntN(w.DestMax-w.DestMin+1)
	perm := s.rng.Perm(s.cfg.Groups)[:k]
	dest := make([]wire.GroupID, k)
	for i, g := range perm {
		dest[i] = wire.GroupID(g)
	}
	sortGroups(dest)
	return dest
}

func sortGroups(d []wire.GroupID) {
	for i := 1; i < len(d); i++ {
		for j := i; j > 0 && d[j] < d[j-1]; j-- {
			d[j], d[j-1] = d[j-1], d[j]
		}
	}
}

func (s *Sim) expDelay(mean int64) int64 {
	return 1 + int64(s.rng.ExpFloat64()*float64(mean))
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

// flush drains process id's Ready: records are dropped (no crashes here),
// messages are scheduled on their links, deliveries are recorded.
func (s *Sim) flush(id wire.ProcID) {
	m := s.procs[id]
	if !m.HasReady() {
		return
	}
	rd := m.Ready()
	n := len(s.procs)
	for _, e := range rd.Messages {
		start := len(s.buf)
		s.buf = wire.Append(s.buf, e.Msg)
		data := s.buf[start:len(s.buf):len(s.buf)]
		if len(s.buf) > 1<<16 {
			s.buf = nil // start a new arena; old events keep theirs
		}
		s.kindCnt[e.Msg.Kind()]++
		s.stats.Messages++
		s.stats.Bytes += int64(len(data))
		at := s.now + s.delay(e.From, e.To, e.Msg)
		link := int(e.From)*n + int(e.To)
		if at < s.last[link] {
			at = s.last[link] // FIFO
		}
		s.last[link] = at
		s.push(event{at: at, kind: evMsg, from: e.From, to: e.To, data: data})
	}
	if int(id) >= s.nrep {
		ci := int(id) - s.nrep
		for range rd.Deliveries {
			if s.cfg.Workload.Mode == ClosedLoop {
				s.push(event{at: s.now, kind: evIssue, arg: ci})
			}
		}
	} else {
		g, _ := s.topo.GroupOf(id)
		for _, d := range rd.Deliveries {
			s.recordDelivery(id, g, d)
		}
	}
	m.Advance()
}

func (s *Sim) recordDelivery(id wire.ProcID, g wire.GroupID, d amcast.Delivery) {
	s.stats.Deliveries++
	if mi := s.msgs[d.M.ID]; mi != nil {
		lat := s.now - mi.t
		if mi.first&(1<<g) == 0 {
			mi.first |= 1 << g
			s.stats.LeaderLat = append(s.stats.LeaderLat, lat)
		} else {
			s.stats.FollowerLat = append(s.stats.FollowerLat, lat)
		}
	}
	if s.hist != nil {
		s.hist.Events = append(s.hist.Events, check.Event{
			Ev: "deliver", Proc: int(id), Group: int(g), ID: d.M.ID.String(),
			GTS: check.GTS{T: d.GTS.T, G: int(d.GTS.G)}, T: s.now, Digest: check.Digest(d.M.Payload),
		})
	}
}

// Event queue: a binary min-heap on (at, seq).

func evLess(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (s *Sim) push(e event) {
	s.seq++
	e.seq = s.seq
	s.q = append(s.q, e)
	i := len(s.q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !evLess(&s.q[i], &s.q[p]) {
			break
		}
		s.q[i], s.q[p] = s.q[p], s.q[i]
		i = p
	}
}

func (s *Sim) pop() event {
	top := s.q[0]
	n := len(s.q) - 1
	s.q[0] = s.q[n]
	s.q[n] = event{}
	s.q = s.q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && evLess(&s.q[r], &s.q[l]) {
			m = r
		}
		if !evLess(&s.q[m], &s.q[i]) {
			break
		}
		s.q[i], s.q[m] = s.q[m], s.q[i]
		i = m
	}
	return top
}
