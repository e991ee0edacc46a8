package sim

import (
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/wire"
)

var _ floorReporter = (*wbcast.Process)(nil) // the swarm sees WbCast's floor

// floorProc is an echo replica whose last delivery, known floor and
// amnesia the test sets (what the budget reads of a wbcast.Process).
type floorProc struct {
	*echoProc
	maxd, floor wire.Timestamp
	amnesiac    bool
}

func (p *floorProc) MaxDelivered() wire.Timestamp { return p.maxd }
func (p *floorProc) Floor() wire.Timestamp        { return p.floor }
func (p *floorProc) Amnesiac() bool               { return p.amnesiac }

// budgetSim is a simulation of one echo group of 3 (MaxDown 1) with the
// nemesis crashing, not started: the test drives its fault state by hand.
// procs holds each replica's newest incarnation.
func budgetSim(t *testing.T) (*Sim, map[wire.ProcID]*floorProc) {
	t.Helper()
	e := &echo{}
	procs := map[wire.ProcID]*floorProc{}
	ps := e.spec()
	wrap := func(m amcast.Machine, err error) (amcast.Machine, error) {
		if err != nil {
			return nil, err
		}
		fp := &floorProc{echoProc: m.(*echoProc)}
		procs[fp.id] = fp
		return fp, nil
	}
	newEcho, restore := ps.New, ps.Restore
	ps.New = func(topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) { return wrap(newEcho(topo, id)) }
	ps.Restore = func(topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error) {
		return wrap(restore(topo, id, st))
	}
	ps.Amnesiac = func(topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error) {
		m, err := wrap(restore(topo, id, st))
		if err == nil {
			m.(*floorProc).amnesiac = true
		}
		return m, err
	}
	cfg := echoConfig(e, nil)
	cfg.Spec = ps
	cfg.Faults = Faults{GST: 1 << 40, CrashEvery: 1000, PermanentProb: 1}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, procs
}

// setFloor makes p0 report floor ts, having delivered up to it, and p1
// and p2 report their last deliveries.
func setFloor(s *Sim, procs map[wire.ProcID]*floorProc, ts wire.Timestamp, p1, p2 wire.Timestamp) {
	procs[0].maxd, procs[0].floor = ts, ts
	procs[1].maxd, procs[2].maxd = p1, p2
	for p := range wire.ProcID(3) {
		s.f.noteFloor(p)
	}
}

// TestBudgetCountsMembersBehindFloor: a member behind its group's floor
// counts against the group's f like a down one: the nemesis crashes no
// other member of the group until it caught up, and counts the crash it
// held back.
func TestBudgetCountsMembersBehindFloor(t *testing.T) {
	s, procs := budgetSim(t)
	f := s.f
	floor := wire.Timestamp{T: 50}
	setFloor(s, procs, floor, wire.Timestamp{T: 20}, floor)
	if !f.behind(1) || f.behind(0) || f.behind(2) {
		t.Fatalf("behind: p0 %v p1 %v p2 %v, want p1 only", f.behind(0), f.behind(1), f.behind(2))
	}
	for range 20 {
		f.randomCrash()
	}
	if f.stats.Crashes != 0 || f.stats.Withheld != 20 {
		t.Fatalf("p1 behind the floor: %d crashes, %d withheld; want 0 and 20", f.stats.Crashes, f.stats.Withheld)
	}
	// The floor the simulator keeps never goes down: p0 forgetting it
	// (a restart; its floor is volatile) leaves p1 behind.
	procs[0].floor = wire.Timestamp{}
	f.noteFloor(0)
	if !f.behind(1) {
		t.Fatal("the group's floor went down with p0's")
	}
	// Caught up (a SNAPSHOT installed at the floor): the group is under
	// budget again.
	procs[1].maxd = floor
	f.randomCrash()
	if f.stats.Crashes != 1 || f.stats.Withheld != 20 {
		t.Fatalf("p1 caught up: %d crashes, %d withheld; want 1 and 20", f.stats.Crashes, f.stats.Withheld)
	}
	// A crashed member is down: the group is at its budget, and that is no
	// crash withheld for a member behind.
	f.randomCrash()
	if f.stats.Crashes != 1 || f.stats.Withheld != 20 {
		t.Fatalf("one member down: %d crashes, %d withheld; want 1 and 20", f.stats.Crashes, f.stats.Withheld)
	}
}

// TestBudgetDiskLossUntilCaughtUp: a member that lost its disk counts
// against the budget while it is down, then while it rejoins (inert), then
// until it installed a snapshot reaching its group's floor.
func TestBudgetDiskLossUntilCaughtUp(t *testing.T) {
	s, procs := budgetSim(t)
	f := s.f
	floor := wire.Timestamp{T: 9}
	setFloor(s, procs, floor, floor, floor)
	f.wipe(2)
	if got := f.groupsUnderBudget(); len(got) != 0 {
		t.Fatalf("p2 wiped and down: groups under budget %v", got)
	}
	if err := f.restart(2); err != nil {
		t.Fatal(err)
	}
	if !f.down(2) || len(f.groupsUnderBudget()) != 0 {
		t.Fatal("p2 restarted amnesiac: not counted down")
	}
	procs[2].amnesiac = false // rejoined, no delivery yet
	if f.down(2) || !f.behind(2) || len(f.groupsUnderBudget()) != 0 {
		t.Fatalf("p2 rejoined below the floor: down %v, behind %v", f.down(2), f.behind(2))
	}
	procs[2].maxd = floor // installed a snapshot at the floor
	if got := f.groupsUnderBudget(); len(got) != 1 {
		t.Fatalf("p2 caught up: groups under budget %v, want [0]", got)
	}
	if f.stats.Withheld != 1 {
		t.Fatalf("withheld %d, want 1 (while p2 was behind, rejoined)", f.stats.Withheld)
	}
}

// TestBudgetGSTDownForGood: at GST a crashed member stays down for good
// only if the group's budget allows it counting members behind the floor;
// otherwise it restarts.
func TestBudgetGSTDownForGood(t *testing.T) {
	for _, behind := range []bool{false, true} {
		s, procs := budgetSim(t)
		f := s.f
		floor := wire.Timestamp{T: 7}
		p1 := floor
		if behind {
			p1 = wire.Timestamp{T: 3}
		}
		setFloor(s, procs, floor, p1, floor)
		f.crash(2, false)
		if err := f.gst(); err != nil {
			t.Fatal(err)
		}
		if got := f.permanent[2]; got == behind {
			t.Errorf("p1 behind %v: p2 down for good %v, restarted %v", behind, got, s.up[2])
		}
		if want := map[bool]int{false: 0, true: 1}[behind]; f.stats.Withheld != want {
			t.Errorf("p1 behind %v: withheld %d, want %d", behind, f.stats.Withheld, want)
		}
	}
}

// TestBudgetSwarmWithholds: in swarm runs of WbCast (collecting by a
// quorum, the default), members fall behind their group's floor and the nemesis holds
// crashes back for them (the rule is live, fed by wbcast's Floor).
func TestBudgetSwarmWithholds(t *testing.T) {
	withheld := 0
	for seed := uint64(400000); seed < 400010 && withheld == 0; seed++ {
		r := RunSwarm("wbcast", seed)
		if r.Violations() > 0 {
			t.Fatalf("seed %d: %s", seed, r.Failure())
		}
		withheld += r.Faults.Withheld
	}
	if withheld == 0 {
		t.Fatal("no fault withheld for a member behind its floor in 10 seeds")
	}
}
