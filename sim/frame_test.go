package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// TestFrameCap: a message whose encoding exceeds Config.MaxFrame is not
// delivered and fails the run with ErrFrame; messages under the cap pass.
func TestFrameCap(t *testing.T) {
	run := func(payload, frame int) (*Result, error) {
		return Run(Config{Protocol: "wbcast", Groups: 1, Replicas: 3, Seed: 1, MaxFrame: frame,
			Workload: Workload{Messages: 5, PayloadSize: payload}})
	}
	// An ACCEPT or a catch-up DELIVER (which carries its message, id and
	// digest included) with a 1,900-byte payload encodes to under 2,000
	// bytes.
	res, err := run(1900, 2048)
	if err != nil || !res.Converged {
		t.Fatalf("payload 1900 under a 2048-byte cap: converged=%v, %v", res != nil && res.Converged, err)
	}
	res, err = run(2100, 2048)
	if !errors.Is(err, ErrFrame) {
		t.Fatalf("payload 2100 under a 2048-byte cap: got %v, want ErrFrame", err)
	}
	if !strings.Contains(err.Error(), "MULTICAST") {
		t.Errorf("error %q does not name the message kind", err)
	}
	if res == nil || res.Stats.Deliveries != 0 || res.Converged {
		t.Fatalf("the oversized multicast went through: %+v", res)
	}
	// The default cap is the transport's.
	if _, err := run(wire.MaxPayload, 0); err != nil {
		t.Fatalf("a maximal payload under the default cap: %v", err)
	}
	if _, err := Run(Config{Protocol: "wbcast", Groups: 1, Replicas: 3, MaxFrame: -1}); err == nil {
		t.Fatal("a negative MaxFrame was accepted")
	}
}
