package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/wire"
)

// The fault mechanisms are tested on "echo", a toy single-group protocol
// whose every step is predictable: the group's first member delivers a
// MULTICAST at once, persisting extra+1 records (the last one makes the
// delivery durable), and forwards it in an ACCEPT to the other members,
// which deliver it. Members heartbeat their group on every tick.

type echoStore struct{ recs []wire.Message }

func (s *echoStore) Apply(r wire.Message) error {
	s.recs = append(s.recs, r)
	return nil
}

type echoProc struct {
	amcast.Outbox
	id        wire.ProcID
	g         wire.GroupID
	topo      *amcast.Topology
	extra     int // records persisted before the delivery record
	heartbeat bool
	clock     uint64
	delivered map[wire.MsgID]bool
	heard     map[wire.ProcID]int
	accepts   int
	ticks     int
	// onAccept, if set, runs when an ACCEPT arrives (persist-before-send).
	onAccept func(p *echoProc, a *wire.Accept)
}

var _ amcast.Observable = (*echoProc)(nil)

func (p *echoProc) ID() wire.ProcID           { return p.id }
func (p *echoProc) IsLeader() bool            { return p.topo.InitialLeader(p.g) == p.id }
func (p *echoProc) Retained() int             { return len(p.delivered) }
func (p *echoProc) Coverage() amcast.Coverage { return amcast.Coverage{Retried: 1} }

func (p *echoProc) Tick() {
	p.ticks++
	if !p.heartbeat {
		return
	}
	for _, q := range p.topo.Members(p.g) {
		if q != p.id {
			p.Send(p.id, q, &wire.Heartbeat{})
		}
	}
}

// deliveryRecord encodes "m delivered" in a RecBallot.
func deliveryRecord(id wire.MsgID) *wire.RecBallot {
	return &wire.RecBallot{Ballot: wire.Ballot{N: uint32(id.Seq), P: id.Client}, CBallot: wire.Ballot{N: 1}}
}

func (p *echoProc) Step(env wire.Envelope) error {
	switch m := env.Msg.(type) {
	case *wire.Multicast:
		if !p.IsLeader() || p.delivered[m.M.ID] {
			return nil
		}
		p.clock++
		gts := wire.Timestamp{T: p.clock, G: p.g}
		for i := 0; i < p.extra; i++ {
			p.Persist(&wire.RecBallot{Ballot: wire.Ballot{N: uint32(i + 1)}})
		}
		p.delivered[m.M.ID] = true
		p.DeliverDurable(m.M, gts, deliveryRecord(m.M.ID))
		for _, q := range p.topo.Members(p.g) {
			if q != p.id {
				p.Send(p.id, q, &wire.Accept{M: m.M, G: p.g, B: wire.Ballot{P: p.id}, LTS: gts})
			}
		}
		p.Send(p.id, m.M.ID.Client, &wire.Delivered{ID: m.M.ID, G: p.g, GTS: gts, Leader: p.id})
	case *wire.Accept:
		p.accepts++
		if p.onAccept != nil {
			p.onAccept(p, m)
		}
		if !p.delivered[m.M.ID] {
			p.delivered[m.M.ID] = true
			p.DeliverDurable(m.M, m.LTS, deliveryRecord(m.M.ID))
		}
	case *wire.Heartbeat:
		p.heard[env.From]++
	default:
		return fmt.Errorf("%w: echo does not handle %s", amcast.ErrBadMessage, env.Msg.Kind())
	}
	return nil
}

// echo is a protocol spec whose machines and stores the test can inspect.
type echo struct {
	extra     int
	heartbeat bool
	onAccept  func(p *echoProc, a *wire.Accept)
	procs     []*echoProc  // every incarnation, in creation order
	stores    []*echoStore // by replica id
	restored  [][]wire.Message
}

func (e *echo) newProc(topo *amcast.Topology, id wire.ProcID) *echoProc {
	g, _ := topo.GroupOf(id)
	p := &echoProc{id: id, g: g, topo: topo, extra: e.extra, heartbeat: e.heartbeat, onAccept: e.onAccept,
		delivered: map[wire.MsgID]bool{}, heard: map[wire.ProcID]int{}}
	e.procs = append(e.procs, p)
	return p
}

func (e *echo) spec() *ProtocolSpec {
	return &ProtocolSpec{
		Name: "echo",
		New: func(topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) {
			return e.newProc(topo, id), nil
		},
		NewStore: func() amcast.Store {
			st := &echoStore{}
			e.stores = append(e.stores, st)
			return st
		},
		Restore: func(topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error) {
			es := st.(*echoStore)
			e.restored = append(e.restored, slices.Clone(es.recs))
			p := e.newProc(topo, id)
			for _, r := range es.recs {
				if b := r.(*wire.RecBallot); b.CBallot.N == 1 {
					p.delivered[wire.MsgID{Client: b.Ballot.P, Seq: uint64(b.Ballot.N)}] = true
				}
			}
			return p, nil
		},
	}
}

// lastIncarnation returns the newest machine of replica id.
func (e *echo) lastIncarnation(id wire.ProcID) *echoProc {
	for i := len(e.procs) - 1; i >= 0; i-- {
		if e.procs[i].id == id {
			return e.procs[i]
		}
	}
	return nil
}

// echoConfig: one group of 3 replicas (p0 leads), one client (p3), fixed
// δ = 1000, no ticks, multicasts scripted at the given times.
func echoConfig(e *echo, faults []Fault, at ...int64) Config {
	cfg := Config{Spec: e.spec(), Groups: 1, Replicas: 3, Seed: 1, Delta: 1000, Delay: DelayFixed, TickEvery: -1,
		Workload: Workload{Mode: Script, Clients: 1}}
	for _, t := range at {
		cfg.Workload.Script = append(cfg.Workload.Script, Scripted{At: t, Client: 0, Dest: []wire.GroupID{0}})
	}
	cfg.Faults.Script = faults
	return cfg
}

func mustRun(t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// deliveries returns "p<proc>:<id>@<t>" for every deliver event, the id
// without its digest suffix (MsgID.Full), as the tests name messages.
func deliveries(h *check.History) []string {
	var ds []string
	for _, ev := range h.Events {
		if ev.Ev == check.EvDeliver {
			id, _, _ := strings.Cut(ev.ID, "#")
			ds = append(ds, fmt.Sprintf("p%d:%s@%d", ev.Proc, id, ev.T))
		}
	}
	return ds
}

func events(h *check.History, kind string) []string {
	var es []string
	for _, ev := range h.Events {
		if ev.Ev == kind {
			es = append(es, fmt.Sprintf("p%d@%d", ev.Proc, ev.T))
		}
	}
	return es
}

func wantStrings(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// TestEchoBaseline: without faults every replica delivers, at 1δ (leader)
// and 2δ (followers), and the run converges.
func TestEchoBaseline(t *testing.T) {
	e := &echo{}
	res := mustRun(t, echoConfig(e, nil, 0))
	wantStrings(t, "deliveries", deliveries(res.History), "p0:3.1@1000", "p1:3.1@2000", "p2:3.1@2000")
	if !res.Converged || CheckResult(res) != nil {
		t.Fatalf("converged=%v check=%v", res.Converged, CheckResult(res))
	}
}

// TestFaultLinkReset: the message in flight on a reset link is dropped;
// later messages on the link arrive.
func TestFaultLinkReset(t *testing.T) {
	e := &echo{}
	reset := Fault{At: 1500, Kind: FaultReset, From: []wire.ProcID{0}, To: []wire.ProcID{1}}
	res := mustRun(t, echoConfig(e, []Fault{reset}, 0, 1600))
	wantStrings(t, "deliveries", deliveries(res.History),
		"p0:3.1@1000", "p2:3.1@2000", "p0:3.2@2600", "p1:3.2@3600", "p2:3.2@3600")
	if res.Stats.LostReset != 1 || res.Faults.LinkResets != 1 {
		t.Fatalf("lost %d, resets %d", res.Stats.LostReset, res.Faults.LinkResets)
	}
	if res.Converged {
		t.Fatal("converged though p1 never delivered 3.1")
	}
	if err := CheckResult(res); err == nil {
		t.Fatal("p1 lacks 3.1 but the checks passed")
	}
}

// TestFaultPartitionOneWay: a one-way partition drops what is sent in its
// direction only, and nothing after it heals.
func TestFaultPartitionOneWay(t *testing.T) {
	e := &echo{heartbeat: true}
	cut := Fault{At: 0, Kind: FaultPartition, From: []wire.ProcID{0}, To: []wire.ProcID{1}, OneWay: true, For: 5000}
	cfg := echoConfig(e, []Fault{cut}, 0, 6000)
	cfg.TickEvery = 1000
	cfg.StallTime = 20000
	res := mustRun(t, cfg)
	wantStrings(t, "deliveries", deliveries(res.History),
		"p0:3.1@1000", "p2:3.1@2000", "p0:3.2@7000", "p1:3.2@8000", "p2:3.2@8000")
	p0, p1, p2 := e.lastIncarnation(0), e.lastIncarnation(1), e.lastIncarnation(2)
	// Heartbeats sent at ticks 1000..5000 from p0 to p1 are lost (4 of
	// them: the one at t=5000 is sent after the heal).
	if p1.accepts != 1 || res.Stats.LostPartition != 4+1 {
		t.Fatalf("p1 accepts %d, lost %d", p1.accepts, res.Stats.LostPartition)
	}
	if p0.heard[1] != p0.heard[2] || p2.heard[0] != p1.heard[0]+4 {
		t.Fatalf("heartbeats p0<-p1 %d p0<-p2 %d p2<-p0 %d p1<-p0 %d", p0.heard[1], p0.heard[2], p2.heard[0], p1.heard[0])
	}
	if res.Faults.AsymPartitions != 1 || res.Faults.Partitions != 0 {
		t.Fatalf("faults %+v", res.Faults)
	}
}

// TestFaultPartitionSymmetric: a partition isolating p2 loses messages in
// both directions until it heals.
func TestFaultPartitionSymmetric(t *testing.T) {
	e := &echo{heartbeat: true}
	cut := Fault{At: 0, Kind: FaultPartition, From: []wire.ProcID{2}, To: []wire.ProcID{0, 1, 3}, For: 3500}
	cfg := echoConfig(e, []Fault{cut}, 0)
	cfg.TickEvery = 1000
	cfg.StallTime = 10000
	res := mustRun(t, cfg)
	p0, p2 := e.lastIncarnation(0), e.lastIncarnation(2)
	if p2.accepts != 0 || p2.heard[0] != p0.heard[2] || p2.heard[1] == 0 || p2.heard[0] >= e.lastIncarnation(1).heard[0] {
		t.Fatalf("p2 accepts %d heard %v, p0 heard %v", p2.accepts, p2.heard, p0.heard)
	}
	if res.Faults.Partitions != 1 {
		t.Fatalf("faults %+v", res.Faults)
	}
}

// TestFaultCrashedReceivesNothing: messages arriving at a crashed replica
// are dropped; it delivers nothing, the others converge without it, and
// the checks excuse it (it is down for good).
func TestFaultCrashedReceivesNothing(t *testing.T) {
	e := &echo{heartbeat: true}
	cfg := echoConfig(e, []Fault{{At: 500, Kind: FaultCrash, Proc: 2}}, 0)
	cfg.TickEvery = 1000
	res := mustRun(t, cfg)
	wantStrings(t, "deliveries", deliveries(res.History), "p0:3.1@1000", "p1:3.1@2000")
	wantStrings(t, "crashes", events(res.History, check.EvCrash), "p2@500")
	old := e.lastIncarnation(2)
	if old.accepts != 0 || len(old.heard) != 0 || old.ticks != 0 {
		t.Fatalf("crashed p2 got input: accepts %d heard %v ticks %d", old.accepts, old.heard, old.ticks)
	}
	if res.Stats.LostDown == 0 || !slices.Equal(res.Down, []wire.ProcID{2}) || !res.Converged {
		t.Fatalf("lost %d down %v converged %v", res.Stats.LostDown, res.Down, res.Converged)
	}
	if err := CheckResult(res); err != nil {
		t.Fatal(err)
	}
}

// TestFaultTornReady: a torn crash lets only a prefix of Ready.Persist
// reach the store, sends nothing, and keeps only the deliveries made
// durable by the prefix. The restart restores from exactly that prefix.
func TestFaultTornReady(t *testing.T) {
	for _, keep := range []int{0, 1, 3, 4} {
		t.Run(fmt.Sprint("keep", keep), func(t *testing.T) {
			e := &echo{extra: 3} // Persist: 3 records, then the delivery record (Rec 3)
			cfg := echoConfig(e, []Fault{
				{At: 500, Kind: FaultTornCrash, Proc: 0, Keep: keep},
				{At: 5000, Kind: FaultRestart, Proc: 0},
			}, 0)
			res := mustRun(t, cfg)
			if got := len(e.stores[0].recs); got != min(keep, 4) {
				t.Fatalf("store holds %d records, want %d", got, min(keep, 4))
			}
			for i, r := range e.stores[0].recs[:min(keep, 3)] {
				if b := r.(*wire.RecBallot); b.Ballot.N != uint32(i+1) {
					t.Fatalf("record %d is %s: not a prefix", i, wire.Describe(r))
				}
			}
			var want []string
			if keep >= 4 {
				want = []string{"p0:3.1@1000"}
			}
			wantStrings(t, "deliveries", deliveries(res.History), want...)
			wantStrings(t, "crashes", events(res.History, check.EvCrash), "p0@1000")
			wantStrings(t, "restarts", events(res.History, check.EvRestart), "p0@5000")
			if res.Stats.ByKind["ACCEPT"] != 0 || e.lastIncarnation(1).accepts != 0 {
				t.Fatalf("messages left the torn Ready: %v", res.Stats.ByKind)
			}
			if len(e.restored) != 1 || len(e.restored[0]) != min(keep, 4) {
				t.Fatalf("restored from %d records", len(e.restored[0]))
			}
			if res.Faults.Crashes != 1 || res.Faults.TornCrashes != 1 || res.Faults.Restarts != 1 {
				t.Fatalf("faults %+v", res.Faults)
			}
		})
	}
}

// TestFaultTornRandomPrefix: with Keep < 0 the prefix is random, and
// replayable.
func TestFaultTornRandomPrefix(t *testing.T) {
	seen := map[int]bool{}
	for seed := uint64(1); seed <= 40; seed++ {
		n := -1
		for range 2 {
			e := &echo{extra: 5}
			cfg := echoConfig(e, []Fault{{At: 500, Kind: FaultTornCrash, Proc: 0, Keep: -1}}, 0)
			cfg.Seed = seed
			mustRun(t, cfg)
			got := len(e.stores[0].recs)
			if n >= 0 && got != n {
				t.Fatalf("seed %d: prefix %d then %d", seed, n, got)
			}
			n = got
		}
		seen[n] = true
	}
	if len(seen) < 4 {
		t.Fatalf("prefix lengths %v: not random", seen)
	}
}

// TestPersistBeforeSend: when a follower receives the leader's ACCEPT, the
// leader's store already holds the records of the Ready that sent it.
func TestPersistBeforeSend(t *testing.T) {
	e := &echo{extra: 2}
	checked := 0
	e.onAccept = func(p *echoProc, a *wire.Accept) {
		recs := e.stores[0].recs
		if len(recs) != 3 || !slices.ContainsFunc(recs, func(r wire.Message) bool {
			b := r.(*wire.RecBallot)
			return b.CBallot.N == 1 && uint64(b.Ballot.N) == a.M.ID.Seq
		}) {
			t.Errorf("p%d got ACCEPT %s but the leader's store holds %d records", p.id, a.M.ID, len(recs))
		}
		checked++
	}
	// A crash long after the workload makes the run crash-capable: stores
	// exist.
	res := mustRun(t, echoConfig(e, []Fault{{At: 1e6, Kind: FaultCrash, Proc: 2}}, 0))
	if checked != 2 || res.Stats.Deliveries != 3 {
		t.Fatalf("checked %d, deliveries %d", checked, res.Stats.Deliveries)
	}
}

// TestFaultSpike: a spiked link multiplies the delay of what is sent on it.
func TestFaultSpike(t *testing.T) {
	e := &echo{}
	sp := Fault{At: 0, Kind: FaultSpike, From: []wire.ProcID{0}, To: []wire.ProcID{1}, OneWay: true, Factor: 10, For: 5000}
	res := mustRun(t, echoConfig(e, []Fault{sp}, 0, 8000))
	wantStrings(t, "deliveries", deliveries(res.History),
		"p0:3.1@1000", "p2:3.1@2000", "p0:3.2@9000", "p2:3.2@10000",
		"p1:3.1@11000", "p1:3.2@11000") // 3.1 sent at 1000 with a 10δ delay; FIFO: 3.2 waits for it
	if res.Faults.Spikes != 1 {
		t.Fatalf("faults %+v", res.Faults)
	}
}

// TestTicks: ticks reach every live process once per TickEvery; a run
// whose ticks keep producing messages still ends once everything is
// delivered; TickEvery < 0 disables ticks.
func TestTicks(t *testing.T) {
	e := &echo{heartbeat: true}
	cfg := echoConfig(e, nil, 0, 10000)
	cfg.TickEvery = 500
	res := mustRun(t, cfg)
	if !res.Converged || res.Stats.VirtualTime > 12000 {
		t.Fatalf("converged %v at t=%d", res.Converged, res.Stats.VirtualTime)
	}
	if p := e.lastIncarnation(1); p.ticks != res.Stats.Ticks || p.ticks < 20 || res.Stats.ByKind["HEARTBEAT"] == 0 {
		t.Fatalf("p1 ticks %d, global %d, %v", p.ticks, res.Stats.Ticks, res.Stats.ByKind)
	}
	e = &echo{heartbeat: true}
	cfg = echoConfig(e, nil, 0)
	res = mustRun(t, cfg)
	if res.Stats.Ticks != 0 || e.procs[0].ticks != 0 {
		t.Fatalf("ticks disabled but %d happened", res.Stats.Ticks)
	}
}

// TestSoloWithTickTraffic: Solo mode issues the next message once the
// workload is quiet, even though ticks keep messages in flight.
func TestSoloWithTickTraffic(t *testing.T) {
	e := &echo{heartbeat: true}
	cfg := Config{Spec: e.spec(), Groups: 1, Replicas: 3, Seed: 1, Delay: DelayFixed, Workload: Workload{Mode: Solo, Messages: 5}}
	res := mustRun(t, cfg)
	if res.Stats.Multicasts != 5 || !res.Converged {
		t.Fatalf("multicasts %d converged %v", res.Stats.Multicasts, res.Converged)
	}
	// Each solo message: MULTICAST δ, ACCEPT δ, then 1δ of quiet.
	if lat := Summarize(res.Stats.FollowerLat, 1000); lat.Max != 2 || res.Stats.VirtualTime != 5*3000-1000 {
		t.Fatalf("follower latency %.1fδ, end %d", lat.Max, res.Stats.VirtualTime)
	}
}

// TestLeaderChangesAndCoverage: a restarted leader counts as a leader
// change; coverage sums every incarnation.
func TestLeaderChangesAndCoverage(t *testing.T) {
	e := &echo{}
	cfg := echoConfig(e, []Fault{{At: 500, Kind: FaultCrash, Proc: 0}, {At: 800, Kind: FaultRestart, Proc: 0}}, 0)
	res := mustRun(t, cfg)
	if res.LeaderChanges != 1 || res.Coverage.Retried != 4 {
		t.Fatalf("leader changes %d, coverage %+v", res.LeaderChanges, res.Coverage)
	}
	wantStrings(t, "crash/restart", append(events(res.History, check.EvCrash), events(res.History, check.EvRestart)...), "p0@500", "p0@800")
}

// TestGSTHealsAndRestarts: at GST partitions heal and crashed replicas
// restart; the run then converges.
func TestGSTHealsAndRestarts(t *testing.T) {
	e := &echo{}
	cfg := echoConfig(e, []Fault{
		{At: 0, Kind: FaultPartition, From: []wire.ProcID{0}, To: []wire.ProcID{1}},
		{At: 100, Kind: FaultCrash, Proc: 2},
	}, 0, 6000)
	cfg.Faults.GST = 5000
	res := mustRun(t, cfg)
	wantStrings(t, "restarts", events(res.History, check.EvRestart), "p2@5000")
	wantStrings(t, "deliveries", deliveries(res.History), "p0:3.1@1000", "p0:3.2@7000", "p1:3.2@8000", "p2:3.2@8000")
	if res.Converged || len(res.Down) != 0 {
		t.Fatalf("converged %v (3.1 is lost at p1, p2), down %v", res.Converged, res.Down)
	}
	if res.Stats.VirtualTime != 8000 {
		t.Fatalf("ended at %d: without ticks nothing can happen after the last message", res.Stats.VirtualTime)
	}
	// With ticks the run waits for the horizon: the liveness phase (Conv)
	// counted from the later of GST and the last multicast (at 6000).
	cfg.TickEvery = 1000
	res = mustRun(t, cfg)
	if res.Converged || res.Stats.VirtualTime != 6000+DefaultConv(&cfg) {
		t.Fatalf("converged %v, ended at %d, want the horizon %d", res.Converged, res.Stats.VirtualTime, 6000+DefaultConv(&cfg))
	}
}

func TestFaultConfigErrors(t *testing.T) {
	e := &echo{}
	bad := []Config{
		echoConfig(e, []Fault{{Kind: FaultCrash, Proc: 3}}),                                     // a client
		echoConfig(e, []Fault{{Kind: FaultPartition, From: []wire.ProcID{9}}}),                  // unknown
		echoConfig(e, []Fault{{Kind: FaultSpike, From: []wire.ProcID{0}, Factor: 0}}),           // factor
		echoConfig(e, []Fault{{Kind: 99}}),                                                      // kind
		{Protocol: "skeen", Groups: 2, Replicas: 1, Faults: Faults{GST: 1000, CrashEvery: 100}}, // no store
		{Protocol: "wbcast", Groups: 2, Replicas: 3, Faults: Faults{CrashEvery: 100}},           // no GST
		{Protocol: "wbcast", Groups: 2, Replicas: 3, Faults: Faults{GST: 10, TornProb: 2}},      // probability
	}
	for i, cfg := range bad {
		if _, err := Run(cfg); err == nil {
			t.Errorf("config %d: no error", i)
		}
	}
}
