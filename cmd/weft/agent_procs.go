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

// benchClientsOneP: a `weft bench` client process that runs at most this
// many clients runs with one P (GOMAXPROCS 1, unless the GOMAXPROCS
// environment variable sets it), for the agents' reason: a reply wakes
// the worker waiting for it, and with one P the worker runs on the
// reader's thread once the reader parks, where with two the runtime woke
// a second thread for it (a futex wake and a cross-CPU hand-off per
// reply). A process with a client per worker (tens of clients, each with
// its connections' readers and its ticker) keeps the runtime's default:
// one P measured 7-25% fewer multicasts/s there. Measured on the 2-core
// machine, builds alternated (docs/batching.md, "One P for a bench
// client"): with shared clients the client processes' CPU per multicast
// a fifth to a half lower and 2-60% more multicasts/s; at 1 client the
// p50 0.17-0.19 ms against 0.24-0.28.
const benchClientsOneP = 2

// setAgentProcs applies agentProcs, unless env (the GOMAXPROCS
// environment variable, which the runtime has applied already) is set,
// and returns the GOMAXPROCS in force.
func setAgentProcs(env string) int { return setProcs(env, agentProcs) }

// setProcs sets GOMAXPROCS to n (at most the CPUs), unless env is set,
// and returns the GOMAXPROCS in force.
func setProcs(env string, n int) int {
	if env == "" {
		runtime.GOMAXPROCS(min(n, runtime.NumCPU()))
	}
	return runtime.GOMAXPROCS(0)
}
