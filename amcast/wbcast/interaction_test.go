package wbcast_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

// durability gives WbCast replicas a wbcast.Store each and restarts them
// with wbcast.Restore and the configuration they were built with (see
// config), with a fresh failure detector.
func durability(all bool) *amcasttest.Durability {
	return &amcasttest.Durability{
		NewStore: func(protocol string, _ *amcast.Topology, _ wire.ProcID) (amcast.Store, error) {
			if protocol != "wbcast" {
				return nil, nil
			}
			return wbcast.NewStore(), nil
		},
		Restore: func(protocol string, topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error) {
			ws, ok := st.(*wbcast.Store)
			if protocol != "wbcast" || !ok {
				return nil, fmt.Errorf("cannot restore a %s replica from %T", protocol, st)
			}
			return wbcast.Restore(config(topo, id, all), ws)
		},
	}
}

// config is the default configuration (the one sim.NewReplica uses), with
// collection waiting for every member if all.
func config(topo *amcast.Topology, id wire.ProcID, all bool) wbcast.Config {
	return wbcast.Config{Topology: topo, ID: id, CollectAfterAll: all}
}

// collectAll lists the scripts written when garbage collection waited for
// every member (each says so): they show DELIVER catch-up and recovery
// with every message still held, which collection by a quorum (the
// default) would replace by a SNAPSHOT; they run with
// wbcast.Config.CollectAfterAll. The others run with the default.
var collectAll = map[string]bool{
	"asymmetric_partition": true, "clock_after_recovery": true, "deposed_leader": true,
	"follower_restart_catchup": true, "leader_crash_before_deliver": true,
}

// TestInteraction runs the golden scripts in testdata (see package
// amcasttest for the commands). Rewrite them with
// go test ./amcast/wbcast -run TestInteraction -rewrite.
// The scripts are the files directly in testdata (its fuzz directory is the
// fuzz corpus).
func TestInteraction(t *testing.T) {
	files, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.IsDir() {
			continue
		}
		t.Run(f.Name(), func(t *testing.T) {
			all := collectAll[f.Name()]
			env := amcasttest.New(func(protocol string, topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) {
				if protocol != "wbcast" {
					return sim.NewReplica(protocol, topo, id)
				}
				p, err := wbcast.New(config(topo, id, all))
				if err != nil {
					return nil, err
				}
				return p, nil
			})
			env.DefaultProtocol = "wbcast"
			env.Durability = durability(all)
			env.Commands["rejected"] = cmdRejected
			env.Commands["handover"] = cmdHandOver
			datadriven.RunTest(t, filepath.Join("testdata", f.Name()), env.Handle)
		})
	}
}

// cmdHandOver asks replica p (handover p=N) to hand its leadership over
// (amcast.HandOverer) and prints the member asked, or the error, and what
// the replica sends.
func cmdHandOver(t *testing.T, env *amcasttest.Env, d *datadriven.TestData) string {
	var p int
	d.ScanArgs(t, "p", &p)
	h, ok := env.Machine(wire.ProcID(p)).(amcast.HandOverer)
	if !ok {
		d.Fatalf(t, "p%d does not hand over", p)
	}
	var sb strings.Builder
	if to, err := h.HandOver(); err != nil {
		fmt.Fprintf(&sb, "p%d: %v\n", p, err)
	} else {
		fmt.Fprintf(&sb, "p%d hands over to p%d\n", p, to)
	}
	env.Drain(t, wire.ProcID(p), &sb, "  ")
	return sb.String()
}

// cmdRejected prints, per replica that refused anything, its reject
// counters by reason (amcast.RejectCounter), sorted.
func cmdRejected(_ *testing.T, env *amcasttest.Env, _ *datadriven.TestData) string {
	var sb strings.Builder
	for id, m := range env.Procs {
		rc, ok := m.(amcast.RejectCounter)
		if !ok {
			continue
		}
		counts := rc.Rejected()
		if len(counts) == 0 {
			continue
		}
		fmt.Fprintf(&sb, "%s:", env.Name(wire.ProcID(id)))
		for _, r := range slices.Sorted(maps.Keys(counts)) {
			fmt.Fprintf(&sb, " %s=%d", r, counts[r])
		}
		sb.WriteString("\n")
	}
	if sb.Len() == 0 {
		return "no rejects\n"
	}
	return sb.String()
}
