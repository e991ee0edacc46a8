package main

import "runtime"

// agentProcs is the GOMAXPROCS of a `weft agent` unless the GOMAXPROCS
// environment variable sets one. An agent's work is one loop goroutine
// that owns the protocol, plus reader and writer goroutines that mostly
// wait on the network; with one P the hand-offs between them need no
// thread wake-ups, no idle P sends threads spinning for work, and the
// socket reads and writes, raw system calls that never block
// (transport/rawio_linux.go), keep the P. Two Ps used to pay off with the
// fsync'd WAL: readers and writers waited while the loop was in fdatasync
// until the runtime's monitor handed the P over, which doubled the p99;
// since socket calls stopped entering the runtime's system-call state the
// monitor no longer backs off that far, and one P measured at least as
// good with fsync and far better without (docs/operations.md#gomaxprocs).
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
