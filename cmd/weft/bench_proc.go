package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procSample is one process's resource counters from /proc (Linux; zero
// elsewhere or once the process is gone).
type procSample struct {
	// CPU is user + system time in clock ticks (/proc/<pid>/stat fields
	// 14 and 15, every thread of the process).
	CPU uint64
	// Syscalls counts the read- and write-type system calls
	// (/proc/<pid>/io syscr + syscw: read, write, pread, pwrite, readv,
	// writev; not sendmsg or recvmsg, whose socket reads the bench adds
	// from the transports' counters). fsync, epoll and futex calls are
	// not counted there, and nothing else gives the total without perf or
	// strace.
	Syscalls uint64
	// CtxSwitches holds the voluntary plus involuntary context switches
	// of each live thread (/proc/<pid>/task/<tid>/status), by pid and tid:
	// unlike the times, a thread's switches leave the counts when it
	// exits.
	CtxSwitches map[[2]int]uint64
}

// since returns the CPU ticks, syscalls and context switches from o to s.
// The context switches count each thread alive at s from o's count (from
// zero if it started since); a thread that exited in between is lost.
func (s procSample) since(o procSample) (cpu, syscalls, ctxSwitches uint64) {
	for t, n := range s.CtxSwitches {
		if n >= o.CtxSwitches[t] {
			ctxSwitches += n - o.CtxSwitches[t]
		}
	}
	return s.CPU - o.CPU, s.Syscalls - o.Syscalls, ctxSwitches
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procCPU returns pid's user + system time in clock ticks (0 if gone).
func procCPU(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: fields after the last
	// ')' start at field 3.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) <= 12 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	k, _ := strconv.ParseUint(f[12], 10, 64)
	return u + k
}

// cpuTicks sums procCPU over pids (the timeline's per-interval CPU: only
// /proc/<pid>/stat, cheap enough for short intervals).
func cpuTicks(pids []int) (n uint64) {
	for _, p := range pids {
		n += procCPU(p)
	}
	return n
}

// sampleProc adds pid's counters to s.
func (s *procSample) sampleProc(pid int) {
	if s.CtxSwitches == nil {
		s.CtxSwitches = map[[2]int]uint64{}
	}
	dir := "/proc/" + strconv.Itoa(pid)
	s.CPU += procCPU(pid)
	if b, err := os.ReadFile(dir + "/io"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "syscr" || k == "syscw") {
				n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				s.Syscalls += n
			}
		}
	}
	tasks, _ := filepath.Glob(dir + "/task/*/status")
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		tid, _ := strconv.Atoi(filepath.Base(filepath.Dir(t)))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				s.CtxSwitches[[2]int{pid, tid}] += n
			}
		}
	}
}

// sampleProcs sums the counters of pids.
func sampleProcs(pids []int) procSample {
	var s procSample
	for _, p := range pids {
		s.sampleProc(p)
	}
	return s
}
