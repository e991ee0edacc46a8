package wbcast_test

import (
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/sim"
)

// TestInteraction runs the golden scripts in testdata (see package
// amcasttest for the commands). Rewrite them with
// go test ./amcast/wbcast -run TestInteraction -rewrite.
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		env := amcasttest.New(sim.NewReplica)
		env.DefaultProtocol = "wbcast"
		datadriven.RunTest(t, path, env.Handle)
	})
}
