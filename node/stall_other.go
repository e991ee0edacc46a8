//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package node

import "time"

// processUsage cannot tell here.
func processUsage() (time.Duration, int64, bool) { return 0, 0, false }
