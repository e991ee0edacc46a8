package main

import (
	"runtime"
	"testing"
)

// TestSetAgentProcs: an agent runs with agentProcs Ps (at most one per
// CPU) unless the GOMAXPROCS environment variable chose, in which case
// the runtime's setting stands.
func TestSetAgentProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(3) // as if GOMAXPROCS=3 had been applied by the runtime
	if got := setAgentProcs("3"); got != 3 {
		t.Errorf("with GOMAXPROCS=3 in the environment: %d Ps, want 3", got)
	}
	if got, want := setAgentProcs(""), min(agentProcs, runtime.NumCPU()); got != want || runtime.GOMAXPROCS(0) != want {
		t.Errorf("without GOMAXPROCS in the environment: %d Ps (runtime says %d), want %d", got, runtime.GOMAXPROCS(0), want)
	}
}
