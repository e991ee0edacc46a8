package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/wire"
)

const noTorn = -1 << 30 // faultState.torn: no torn crash pending

type spike struct {
	id     int
	links  []int
	factor int32
}

// faultState is a run's fault machinery. Random choices come from its own
// PRNG stream (seeded from Config.Seed), so runs without faults draw
// exactly what they drew before faults existed.
type faultState struct {
	s      *Sim
	cfg    *Faults
	rng    *rand.Rand
	hrng   *rand.Rand // hand-overs' own stream (Faults.HandOverEvery)
	n      int        // processes
	stores []amcast.Store

	cut    []uint16 // per link: active partitions cutting it
	epoch  []uint32 // per link: bumped by resets
	mult   []int32  // per link: delay multiplier (0: none)
	parts  map[int][]int
	spikes []spike
	nextID int

	torn      []int  // per replica: records kept by a pending torn crash, or noTorn
	auto      []bool // per replica: crashed by the nemesis (restarts by itself)
	inc       []int  // per replica: crashes so far (stale restart events)
	permanent []bool
	wiped     []bool           // per replica: lost its disk (restarts through ProtocolSpec.Amnesiac from then on)
	floors    []wire.Timestamp // per group: the highest delivered floor a member reported (budget.go)

	gstDone    bool
	scriptLeft int
	recBuf     []byte
	stats      FaultStats
}

func newFaultState(s *Sim) *faultState {
	cfg := &s.cfg.Faults
	n := len(s.procs)
	f := &faultState{
		s: s, cfg: cfg, n: n,
		rng:       rand.New(rand.NewPCG(s.cfg.Seed^0x6a09e667f3bcc908, s.cfg.Seed+0xbb67ae8584caa73b)),
		hrng:      rand.New(rand.NewPCG(s.cfg.Seed^0x3c6ef372fe94f82b, s.cfg.Seed+0xa54ff53a5f1d36f1)),
		cut:       make([]uint16, n*n),
		epoch:     make([]uint32, n*n),
		mult:      make([]int32, n*n),
		parts:     map[int][]int{},
		torn:      make([]int, s.nrep),
		auto:      make([]bool, s.nrep),
		inc:       make([]int, s.nrep),
		permanent: make([]bool, s.nrep),
		wiped:     make([]bool, s.nrep),
		floors:    make([]wire.Timestamp, s.cfg.Groups),
	}
	for i := range f.torn {
		f.torn[i] = noTorn
	}
	if s.spec.NewStore != nil && cfg.crashes() {
		f.stores = make([]amcast.Store, s.nrep)
		for i := range f.stores {
			f.stores[i] = s.spec.NewStore()
		}
	}
	return f
}

func (f *faultState) start() {
	s := f.s
	for i, sf := range f.cfg.Script {
		s.push(event{at: sf.At, kind: evScript, arg: int32(i)})
	}
	f.scriptLeft = len(f.cfg.Script)
	if f.cfg.GST == 0 {
		return
	}
	s.push(event{at: f.cfg.GST, kind: evGST})
	for _, k := range []FaultKind{FaultCrash, FaultPartition, FaultReset, FaultSpike, FaultHandOver} {
		f.scheduleNemesis(k)
	}
}

func (f *faultState) every(k FaultKind) int64 {
	switch k {
	case FaultCrash:
		return f.cfg.CrashEvery
	case FaultPartition:
		return f.cfg.PartitionEvery
	case FaultReset:
		return f.cfg.ResetEvery
	case FaultSpike:
		return f.cfg.SpikeEvery
	case FaultHandOver:
		return f.cfg.HandOverEvery
	}
	return 0
}

func (f *faultState) exp(mean int64) int64 { return expOn(f.rng, mean) }

// expOn draws an exponential wait of mean mean (at least 1) from rng.
func expOn(rng *rand.Rand, mean int64) int64 { return 1 + int64(rng.ExpFloat64()*float64(mean)) }

func (f *faultState) scheduleNemesis(k FaultKind) {
	if e := f.every(k); e > 0 {
		rng := f.rng
		if k == FaultHandOver {
			rng = f.hrng // their own stream: the other faults stay where they were
		}
		wait := expOn(rng, e)
		if at := f.s.now + wait; at < f.cfg.GST {
			f.s.push(event{at: at, kind: evFault, arg: int32(k)})
		}
	}
}

// over reports whether the fault phase is over and every scripted fault
// has struck (the run may then end).
func (f *faultState) over() bool {
	return (f.cfg.GST == 0 || f.gstDone) && f.scriptLeft == 0
}

func (f *faultState) handle(ev *event) error {
	s := f.s
	switch ev.kind {
	case evFault:
		if f.gstDone {
			return nil
		}
		k := FaultKind(ev.arg)
		if err := f.random(k); err != nil {
			return err
		}
		f.scheduleNemesis(k)
	case evScript:
		f.scriptLeft--
		return f.apply(&f.cfg.Script[ev.arg])
	case evHeal:
		f.heal(int(ev.arg))
	case evSpikeEnd:
		f.endSpike(int(ev.arg))
	case evRestart:
		if p := ev.to; !s.up[p] && f.inc[p] == int(ev.arg) && !f.permanent[p] {
			return f.restart(p)
		}
	case evTornLimit:
		if p := ev.to; f.torn[p] != noTorn && f.inc[p] == int(ev.arg) {
			f.crash(p, false)
		}
	case evGST:
		return f.gst()
	default:
		return fmt.Errorf("sim: unknown event kind %d", ev.kind)
	}
	return nil
}

// links lists the links from every member of from to every member of to,
// and back unless oneWay.
func (f *faultState) links(from, to []wire.ProcID, oneWay bool) []int {
	var ls []int
	for _, a := range from {
		for _, b := range to {
			if a == b {
				continue
			}
			ls = append(ls, int(a)*f.n+int(b))
			if !oneWay {
				ls = append(ls, int(b)*f.n+int(a))
			}
		}
	}
	return ls
}

func (f *faultState) apply(sf *Fault) error {
	s := f.s
	switch sf.Kind {
	case FaultCrash:
		if s.up[sf.Proc] {
			f.crash(sf.Proc, false)
		}
		if sf.ForGood && !f.permanent[sf.Proc] {
			f.permanent[sf.Proc] = true
			f.stats.Permanent++
		}
	case FaultTornCrash:
		if s.up[sf.Proc] && f.torn[sf.Proc] == noTorn {
			f.torn[sf.Proc] = max(sf.Keep, -1)
		}
	case FaultRestart:
		if !s.up[sf.Proc] {
			return f.restart(sf.Proc)
		}
	case FaultDiskLoss:
		if s.up[sf.Proc] {
			f.wipe(sf.Proc)
		}
	case FaultHandOver:
		return f.handOver(sf.Proc)
	case FaultPartition:
		f.partition(f.links(sf.From, sf.To, sf.OneWay), sf.For, sf.OneWay)
	case FaultReset:
		f.reset(f.links(sf.From, sf.To, sf.OneWay))
	case FaultSpike:
		f.spike(f.links(sf.From, sf.To, sf.OneWay), sf.Factor, sf.For)
	}
	return nil
}

// handOver asks replica p, if it is up and leads, to hand its leadership
// over (FaultHandOver).
func (f *faultState) handOver(p wire.ProcID) error {
	s := f.s
	h, ok := s.procs[p].(amcast.HandOverer)
	if !s.up[p] || !ok {
		return nil
	}
	if _, err := h.HandOver(); err != nil {
		return nil // not the leader, or no live member to take over
	}
	f.stats.HandOvers++
	return s.flush(p, false)
}

// randomHandOver asks a random current leader to hand over.
func (f *faultState) randomHandOver() error {
	s := f.s
	var leaders []wire.ProcID
	for p := range wire.ProcID(s.nrep) {
		if s.up[p] && s.leader[p] {
			leaders = append(leaders, p)
		}
	}
	if len(leaders) == 0 {
		return nil
	}
	return f.handOver(leaders[f.hrng.IntN(len(leaders))])
}

// crash discards replica p's machine.
func (f *faultState) crash(p wire.ProcID, torn bool) {
	s := f.s
	if o := s.obs[p]; o != nil {
		s.cov.Add(o.Coverage())
	}
	s.procs[p], s.obs[p] = nil, nil
	s.up[p], s.leader[p] = false, false
	if s.held != nil {
		s.held[p].Drop() // lost with the process
	}
	if s.pipes != nil {
		if !torn { // a torn crash counted what it kept and lost
			s.stats.Pipeline.LostUnsynced += len(s.pipes[p].unsynced)
		}
		if ps := s.pipes[p]; ps.applied != ps.appliedDurable {
			s.stats.Pipeline.LostApplied++
		}
		s.pipes[p].reset() // its unsynced records and what waited for them
	}
	f.torn[p] = noTorn
	f.inc[p]++
	g, _ := s.topo.GroupOf(p)
	s.remaining -= s.addressed[g] - s.delivered[p]
	f.stats.Crashes++
	if torn {
		f.stats.TornCrashes++
	}
	s.lastProgress = s.now
	if s.hist != nil {
		s.hist.Events = append(s.hist.Events, check.Event{Ev: check.EvCrash, Proc: int(p), T: s.now})
	}
	if f.auto[p] {
		f.auto[p] = false
		if !f.gstDone {
			s.push(event{at: s.now + f.exp(f.cfg.DownFor), kind: evRestart, to: p, arg: int32(f.inc[p])})
		}
	}
}

// inert reports whether replica p lost its disk and has not rejoined its
// group yet (wbcast's RestoreAmnesiac): it is as good as down.
func (f *faultState) inert(p wire.ProcID) bool {
	if !f.wiped[p] {
		return false
	}
	a, ok := f.s.procs[p].(interface{ Amnesiac() bool })
	return !ok || a.Amnesiac()
}

// restart rebuilds replica p from its store.
// wipe crashes p and loses its store: it restarts amnesiac (FaultDiskLoss).
func (f *faultState) wipe(p wire.ProcID) {
	f.crash(p, false)
	f.stores[p] = f.s.spec.NewStore()
	f.wiped[p] = true
	f.s.forget(p)
	if s := f.s; s.hist != nil {
		s.hist.Events = append(s.hist.Events, check.Event{Ev: check.EvWipe, Proc: int(p), T: s.now})
	}
	f.stats.DiskLosses++
}

func (f *faultState) restart(p wire.ProcID) error {
	s := f.s
	var m amcast.Machine
	var err error
	if f.wiped[p] {
		m, err = s.spec.Amnesiac(s.topo, p, f.stores[p])
	} else {
		m, err = s.spec.Restore(s.topo, p, f.stores[p])
	}
	if err != nil {
		return fmt.Errorf("sim: t=%d restoring p%d: %w", s.now, p, err)
	}
	s.procs[p], s.up[p], s.leader[p] = m, true, false
	if o, ok := m.(amcast.Observable); ok {
		s.obs[p] = o
	}
	f.permanent[p] = false
	g, _ := s.topo.GroupOf(p)
	s.remaining += s.addressed[g] - s.delivered[p] // an amnesiac one too, once it rejoined
	f.stats.Restarts++
	s.lastProgress = s.now
	if s.hist != nil {
		s.hist.Events = append(s.hist.Events, check.Event{Ev: check.EvRestart, Proc: int(p), T: s.now})
	}
	return s.flush(p, false)
}

// persist applies records to replica p's store, through the codec (the
// store holds a durable image, sharing no memory with the machine).
func (f *faultState) persist(p wire.ProcID, recs []wire.Message) error {
	if f.stores == nil {
		return nil
	}
	for _, r := range recs {
		f.recBuf = wire.Append(f.recBuf[:0], r)
		if err := f.applyRecord(p, f.recBuf); err != nil {
			return err
		}
	}
	return nil
}

// applyRecord decodes an encoded record and applies it to replica p's store.
func (f *faultState) applyRecord(p wire.ProcID, b []byte) error {
	rec, err := wire.Decode(b)
	if err != nil {
		return fmt.Errorf("sim: t=%d p%d persisted a record the codec refuses: %w", f.s.now, p, err)
	}
	if err := f.stores[p].Apply(rec); err != nil {
		return fmt.Errorf("sim: t=%d p%d store refused %s: %w", f.s.now, p, wire.Describe(rec), err)
	}
	return nil
}

// tornKeep returns how many of n records a torn crash of p lets reach the
// store: the scripted number (Fault.Keep), or a random one.
func (f *faultState) tornKeep(p wire.ProcID, n int) int {
	keep := f.torn[p]
	if keep < 0 {
		keep = f.rng.IntN(n + 1)
	}
	return min(keep, n)
}

// tornCrash crashes p in the middle of handling rd: the messages the
// protocol sends before its sync leave (ProtocolSpec.SendsBeforeSync), a
// prefix of its Persist reaches the store and the deliveries made durable
// by it happen; nothing else leaves.
func (f *faultState) tornCrash(p wire.ProcID, rd *amcast.Ready, fg bool) error {
	if early := f.s.spec.SendsBeforeSync; early != nil && len(rd.Persist) > 0 {
		if err := f.s.send(rd.Messages, fg, early); err != nil {
			return err
		}
	}
	keep := f.tornKeep(p, len(rd.Persist))
	if err := f.persist(p, rd.Persist[:keep]); err != nil {
		return err
	}
	g, _ := f.s.topo.GroupOf(p)
	for _, d := range rd.Deliveries {
		if d.Rec >= 0 && d.Rec < keep {
			f.s.recordDelivery(p, g, d)
		}
	}
	f.crash(p, true)
	return nil
}

func (f *faultState) partition(links []int, dur int64, oneWay bool) {
	if oneWay {
		f.stats.AsymPartitions++
	} else {
		f.stats.Partitions++
	}
	id := f.nextID
	f.nextID++
	for _, l := range links {
		f.cut[l]++
	}
	f.parts[id] = links
	f.s.lastProgress = f.s.now
	if dur > 0 {
		f.s.push(event{at: f.s.now + dur, kind: evHeal, arg: int32(id)})
	}
}

func (f *faultState) heal(id int) {
	links, ok := f.parts[id]
	if !ok {
		return
	}
	for _, l := range links {
		f.cut[l]--
	}
	delete(f.parts, id)
	f.s.lastProgress = f.s.now
}

func (f *faultState) reset(links []int) {
	f.stats.LinkResets++
	for _, l := range links {
		f.epoch[l]++
		f.s.last[l] = min(f.s.last[l], f.s.now) // new messages do not queue behind dropped ones
	}
	f.s.lastProgress = f.s.now
}

func (f *faultState) spike(links []int, factor int, dur int64) {
	f.stats.Spikes++
	id := f.nextID
	f.nextID++
	f.spikes = append(f.spikes, spike{id: id, links: links, factor: int32(factor)})
	f.remult()
	f.s.lastProgress = f.s.now
	if dur > 0 {
		f.s.push(event{at: f.s.now + dur, kind: evSpikeEnd, arg: int32(id)})
	}
}

func (f *faultState) endSpike(id int) {
	for i, sp := range f.spikes {
		if sp.id == id {
			f.spikes = append(f.spikes[:i], f.spikes[i+1:]...)
			f.remult()
			f.s.lastProgress = f.s.now
			return
		}
	}
}

func (f *faultState) remult() {
	clear(f.mult)
	for _, sp := range f.spikes {
		for _, l := range sp.links {
			f.mult[l] = max(f.mult[l], sp.factor)
		}
	}
}

// spiked returns the arrival time of a message sent now on link, arriving
// at `at` without a spike.
func (f *faultState) spiked(link int, at int64) int64 {
	m := int64(f.mult[link])
	if m <= 1 {
		return at
	}
	s := f.s
	d := at - s.now
	return s.now + max(d, min(d*m, 100*s.cfg.Delta))
}

// gst ends the fault phase.
func (f *faultState) gst() error {
	s := f.s
	f.gstDone = true
	// After GST message delays are bounded by δ (the paper's model): the
	// heavy-tailed model's 50δ stalls would otherwise keep any fixed-timeout
	// failure detector suspecting live leaders forever. Before GST they are
	// one more fault.
	if s.cfg.Delay == DelayHeavy {
		s.cfg.Delay = DelayUniform
	}
	clear(f.cut)
	clear(f.parts)
	f.spikes = nil
	f.remult()
	for p := range f.torn {
		f.torn[p] = noTorn
		f.auto[p] = false
	}
	s.lastProgress = s.now
	for g := range s.topo.Groups {
		kept, behind := 0, 0
		for _, p := range s.topo.Members(wire.GroupID(g)) {
			switch {
			case f.inert(p) || (!s.up[p] && f.permanent[p]):
				kept++ // an amnesiac member is as good as down
			case s.up[p] && f.behind(p):
				behind++ // and so is one being caught up (budget.go)
			}
		}
		for _, p := range s.topo.Members(wire.GroupID(g)) {
			if s.up[p] || f.permanent[p] {
				continue
			}
			if kept < f.cfg.MaxDown && f.rng.Float64() < f.cfg.PermanentProb {
				if kept+behind >= f.cfg.MaxDown {
					f.stats.Withheld++ // it restarts instead
				} else {
					f.permanent[p] = true
					f.stats.Permanent++
					kept++
					continue
				}
			}
			if err := f.restart(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// isLeader reports whether up replica p leads its group, as far as the
// simulator can tell: IsLeader for Observable machines, else the initial
// leader.
func (f *faultState) isLeader(p wire.ProcID) bool {
	s := f.s
	if s.obs[p] != nil {
		return s.leader[p]
	}
	g, _ := s.topo.GroupOf(p)
	return s.topo.InitialLeader(g) == p
}

// pickReplica returns a random replica among cands, a leader among them
// with probability LeaderBias (if there is one). ok is false if cands is
// empty.
func (f *faultState) pickReplica(cands []wire.ProcID) (p wire.ProcID, ok bool) {
	if len(cands) == 0 {
		return 0, false
	}
	if f.rng.Float64() < f.cfg.LeaderBias {
		var ls []wire.ProcID
		for _, q := range cands {
			if f.s.up[q] && f.isLeader(q) {
				ls = append(ls, q)
			}
		}
		if len(ls) > 0 {
			return ls[f.rng.IntN(len(ls))], true
		}
	}
	return cands[f.rng.IntN(len(cands))], true
}

func (f *faultState) allReplicas() []wire.ProcID {
	ps := make([]wire.ProcID, f.s.nrep)
	for i := range ps {
		ps[i] = wire.ProcID(i)
	}
	return ps
}

func (f *faultState) othersThan(p wire.ProcID) []wire.ProcID {
	var ps []wire.ProcID
	for q := 0; q < f.n; q++ {
		if wire.ProcID(q) != p {
			ps = append(ps, wire.ProcID(q))
		}
	}
	return ps
}

// random injects one random fault of kind k (the nemesis).
func (f *faultState) random(k FaultKind) error {
	s := f.s
	switch k {
	case FaultCrash:
		f.randomCrash()
	case FaultHandOver:
		return f.randomHandOver()
	case FaultPartition:
		f.randomPartition()
	case FaultReset:
		a := wire.ProcID(f.rng.IntN(s.nrep))
		b := wire.ProcID(f.rng.IntN(f.n - 1))
		if b >= a {
			b++
		}
		f.reset(f.links([]wire.ProcID{a}, []wire.ProcID{b}, false))
	case FaultSpike:
		factor := f.cfg.SpikeMin + f.rng.IntN(f.cfg.SpikeMax-f.cfg.SpikeMin+1)
		dur := f.exp(f.cfg.SpikeFor)
		if f.rng.IntN(2) == 0 {
			p, _ := f.pickReplica(f.allReplicas())
			f.spike(f.links([]wire.ProcID{p}, f.othersThan(p), false), factor, dur)
		} else {
			a := wire.ProcID(f.rng.IntN(s.nrep))
			b := wire.ProcID(f.rng.IntN(f.n - 1))
			if b >= a {
				b++
			}
			f.spike(f.links([]wire.ProcID{a}, []wire.ProcID{b}, false), factor, dur)
		}
	}
	return nil
}

// randomCrash crashes a replica of a group with fewer than MaxDown
// replicas unavailable (down, about to be, or behind the floor: budget.go),
// a leader with probability LeaderBias.
func (f *faultState) randomCrash() {
	s := f.s
	groups := f.groupsUnderBudget()
	if len(groups) == 0 {
		return
	}
	g := groups[f.rng.IntN(len(groups))]
	var cands []wire.ProcID
	for _, p := range s.topo.Members(g) {
		// A member behind the floor may crash (it is counted already).
		if !f.down(p) {
			cands = append(cands, p)
		}
	}
	p, ok := f.pickReplica(cands)
	if !ok {
		return
	}
	f.auto[p] = true
	if f.rng.Float64() < f.cfg.TornProb {
		f.torn[p] = -1
		// A replica that stays idle crashes plainly after 10δ.
		s.push(event{at: s.now + 10*s.cfg.Delta, kind: evTornLimit, to: p, arg: int32(f.inc[p])})
		return
	}
	if f.cfg.DiskLossProb > 0 && f.rng.Float64() < f.cfg.DiskLossProb {
		f.wipe(p)
		return
	}
	f.crash(p, false)
}

// randomPartition cuts a random set of links: a replica (a leader with
// probability LeaderBias) from everyone, a group in two, one direction
// between a leader and the rest of its group, or a client from the
// replicas. Partitions other than the leader's one-way cut are one-way
// with probability AsymProb.
func (f *faultState) randomPartition() {
	s := f.s
	oneWay := f.rng.Float64() < f.cfg.AsymProb
	dur := f.exp(f.cfg.PartitionFor)
	var from, to []wire.ProcID
	switch shape := f.rng.IntN(10); {
	case shape < 4 || s.cfg.Replicas == 1: // isolate a replica
		p, _ := f.pickReplica(f.allReplicas())
		from, to = []wire.ProcID{p}, f.othersThan(p)
	case shape < 7: // split a group
		g := wire.GroupID(f.rng.IntN(s.cfg.Groups))
		ms := append([]wire.ProcID(nil), s.topo.Members(g)...)
		f.rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		k := 1 + f.rng.IntN(len(ms)-1)
		from, to = ms[:k], ms[k:]
	case shape < 9: // one direction between a leader and the rest of its group
		g := wire.GroupID(f.rng.IntN(s.cfg.Groups))
		l := s.topo.InitialLeader(g)
		for _, p := range s.topo.Members(g) {
			if s.up[p] && f.isLeader(p) {
				l = p
				break
			}
		}
		from = []wire.ProcID{l}
		for _, p := range s.topo.Members(g) {
			if p != l {
				to = append(to, p)
			}
		}
		oneWay = true
	default: // a client from the replicas
		c := wire.ProcID(s.nrep + f.rng.IntN(len(s.clients)))
		from, to = []wire.ProcID{c}, f.allReplicas()
	}
	if oneWay && f.rng.IntN(2) == 0 {
		from, to = to, from
	}
	f.partition(f.links(from, to, oneWay), dur, oneWay)
}
