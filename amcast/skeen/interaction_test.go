package skeen_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/sim"
)

// TestInteraction runs the golden scripts in testdata (see package
// amcasttest for the commands). Rewrite them with
// go test ./amcast/skeen -run TestInteraction -rewrite.
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if strings.HasPrefix(path, filepath.Join("testdata", "fuzz")) {
			return // the fuzz corpus (FuzzStep)
		}
		env := amcasttest.New(sim.NewReplica)
		env.DefaultProtocol = "skeen"
		datadriven.RunTest(t, path, env.Handle)
	})
}
