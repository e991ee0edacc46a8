//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package node

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockSupported: flock(2) excludes a second agent on this platform.
const lockSupported = true

// flockFile takes an exclusive flock(2) on f without waiting. busy is
// true when another open file description holds it (the error is then
// EWOULDBLOCK). The kernel releases the lock when f is closed, also when
// the process dies (SIGKILL included), so a lock is never left stale.
func flockFile(f *os.File) (busy bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, err
	}
	if err != nil {
		return false, fmt.Errorf("flock: %w", err)
	}
	return false, nil
}
