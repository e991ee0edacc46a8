package fastcast_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/amcast/fastcast"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

// durability gives replicas a fastcast.Store each and restarts them with
// fastcast.Restore and the default configuration (the one sim.NewReplica
// uses), with a fresh failure detector.
var durability = &amcasttest.Durability{
	NewStore: func(protocol string, _ *amcast.Topology, _ wire.ProcID) (amcast.Store, error) {
		if protocol != "fastcast" {
			return nil, nil
		}
		return fastcast.NewStore(), nil
	},
	Restore: func(protocol string, topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error) {
		s, ok := st.(*fastcast.Store)
		if protocol != "fastcast" || !ok {
			return nil, fmt.Errorf("cannot restore a %s replica from %T", protocol, st)
		}
		return fastcast.Restore(fastcast.Config{Topology: topo, ID: id}, s)
	},
}

// TestInteraction runs the golden scripts in testdata (see package
// amcasttest for the commands). Rewrite them with
// go test ./amcast/fastcast -run TestInteraction -rewrite.
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if strings.HasPrefix(path, filepath.Join("testdata", "fuzz")) {
			return // the fuzz corpus (FuzzStep)
		}
		env := amcasttest.New(sim.NewReplica)
		env.DefaultProtocol = "fastcast"
		env.Durability = durability
		datadriven.RunTest(t, path, env.Handle)
	})
}
