//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package node

import (
	"syscall"
	"time"
)

// processUsage is the process's CPU time (user and system) and the number
// of times the kernel took the CPU from one of its threads while it could
// have run on (involuntary context switches), from getrusage.
func processUsage() (time.Duration, int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpu, int64(ru.Nivcsw), true
}
