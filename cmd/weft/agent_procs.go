package main

import "runtime"

// agentProcs is the GOMAXPROCS of a `weft agent` unless the GOMAXPROCS
// environment variable sets one. An agent's work is one loop goroutine
// that owns the protocol, plus I/O goroutines that mostly wait; with two
// Ps the runtime wakes a second OS thread for nearly every hand-off
// between them (futex wake-ups, idle spinning, context switches), which
// costs more CPU than the parallelism gives back when several agents
// share the machine. Measured with `weft bench` on the 2-core test
// machine (9 agents): docs/operations.md#gomaxprocs.
const agentProcs = 1

// setAgentProcs applies agentProcs, unless env (the GOMAXPROCS
// environment variable, which the runtime has applied already) is set,
// and returns the GOMAXPROCS in force.
func setAgentProcs(env string) int {
	if env == "" {
		runtime.GOMAXPROCS(min(agentProcs, runtime.NumCPU()))
	}
	return runtime.GOMAXPROCS(0)
}
