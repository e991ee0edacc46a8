package node

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// lockFile is the name, in the data directory, of the lock every agent
// takes before it opens anything else there.
const lockFile = "LOCK"

// dirLock is a held data-directory lock (issue #11: a second agent on the
// same directory "repaired" the live WAL's tail and deleted the writer's
// temporary segment, losing synced records). The lock is flock(2) on
// DataDir/LOCK, which the kernel drops when the holder exits however it
// exits, so there is no stale lock to clean up after a crash; the file
// holds the holder's pid, for the refusal message only.
type dirLock struct {
	f *os.File
}

// lockDataDir takes dir's lock, creating dir and the LOCK file if needed.
// It fails at once, naming the holder's pid, if another process holds it.
func lockDataDir(dir string) (*dirLock, bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("node: data_dir: %w", err)
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("node: data_dir lock: %w", err)
	}
	busy, err := flockFile(f)
	if busy {
		holder := "an unknown pid"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(string(bytes.TrimSpace(b))); perr == nil && pid > 0 {
				holder = "pid " + strconv.Itoa(pid)
			}
		}
		f.Close()
		return nil, false, fmt.Errorf("node: data_dir %s is locked by %s (another weft agent?)", dir, holder)
	}
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("node: data_dir lock %s: %w", path, err)
	}
	// Only the holder writes the pid, after taking the lock. Not synced:
	// after a power loss nobody holds the lock and the pid is moot.
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("node: data_dir lock %s: %w", path, err)
	}
	return &dirLock{f: f}, lockSupported, nil
}

// release drops the lock (nil-safe). The LOCK file stays: removing it
// would let a process that opened the old file and one that creates a new
// one both hold "the" lock.
func (l *dirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	l.f.Close()
	l.f = nil
}
