package main

import "runtime"

// agentProcs is the GOMAXPROCS of a `weft agent` unless the GOMAXPROCS
// environment variable sets one (at most one per CPU). An agent's work is
// one loop goroutine that owns the protocol, plus reader and writer
// goroutines that mostly wait. With one P those cost fewer thread
// wake-ups and context switches, but they also wait whenever the loop is
// in a system call, the WAL's fdatasync above all, until the runtime's
// monitor hands the P over: with the fsync'd WAL that doubled the p99
// latency. A second P lets them run meanwhile; the loop being one
// goroutine, more are not needed for it. Measured with `weft bench` on the
// 2-core test machine (9 agents): docs/operations.md#gomaxprocs.
const agentProcs = 2

// setAgentProcs applies agentProcs, unless env (the GOMAXPROCS
// environment variable, which the runtime has applied already) is set,
// and returns the GOMAXPROCS in force.
func setAgentProcs(env string) int {
	if env == "" {
		runtime.GOMAXPROCS(min(agentProcs, runtime.NumCPU()))
	}
	return runtime.GOMAXPROCS(0)
}
