package sim

import (
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/wire"
)

// naiveDiskLoss is WbCast whose replica restarts after a disk loss as if
// new (wbcast.New): the amnesia hazard RestoreAmnesiac prevents.
func naiveDiskLoss() *ProtocolSpec {
	ps := *wbcastSpec(nil)
	ps.Amnesiac = func(topo *amcast.Topology, id wire.ProcID, _ amcast.Store) (amcast.Machine, error) {
		return machine(wbcast.New(wbcast.Config{Topology: topo, ID: id}))
	}
	return &ps
}

// diskLossConfig is swarm seed seed with a disk lost on most crashes.
func diskLossConfig(seed uint64, ps *ProtocolSpec) Config {
	cfg := SwarmConfig("wbcast", seed)
	if cfg.Faults.CrashEvery > 0 {
		cfg.Faults.DiskLossProb = 0.8
	}
	cfg.Spec = ps
	return cfg
}

// TestDiskLoss: swarm seeds where most crashes lose the disk pass every
// checker with RestoreAmnesiac (the lost member stays inert), and the same
// seeds catch a replica that restarts on its wiped disk as if new
// (issue #10 item 5).
func TestDiskLoss(t *testing.T) {
	const seeds = 40
	losses, caught := 0, 0
	first := uint64(0)
	for seed := uint64(1); seed <= seeds; seed++ {
		r := RunSwarmConfig(diskLossConfig(seed, wbcastSpec(nil)))
		if r.Violations() > 0 {
			t.Fatalf("seed %d with disk loss: %s", seed, r.Failure())
		}
		losses += r.Faults.DiskLosses
		if n := RunSwarmConfig(diskLossConfig(seed, naiveDiskLoss())); n.Violations() > 0 {
			caught++
			if first == 0 {
				first = seed
				t.Logf("restart as new, seed %d: %s", seed, n.Failure())
			}
		}
	}
	if losses == 0 {
		t.Fatal("no disk was lost")
	}
	t.Logf("%d seeds, %d disks lost; restarting as new caught in %d seeds (first %d)", seeds, losses, caught, first)
	if caught == 0 {
		t.Errorf("restarting a wiped replica as new was caught by no seed of %d", seeds)
	}
}
