//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package node

import "os"

// lockSupported: this platform has no flock(2) in package syscall; the
// LOCK file still records the holder's pid, but nothing excludes a second
// agent (lockDataDir logs a warning).
const lockSupported = false

func flockFile(*os.File) (busy bool, err error) { return false, nil }
