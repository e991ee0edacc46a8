//go:build linux

package vfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"unsafe"
)

// datasync is fdatasync(2): it flushes the file's data and the metadata
// needed to read it back (the size), but not timestamps. With raw it is a
// raw system call (SyncHolding): the runtime does not see it, so the
// goroutine keeps its thread and its P until the disk answers; without,
// an ordinary one, during which the runtime may run other goroutines.
// Both go through the RawConn taken at open.
func (f osFile) datasync(raw bool) error {
	if f.rc == nil {
		return f.File.Sync()
	}
	var errno syscall.Errno
	if err := f.rc.Control(func(fd uintptr) {
		for {
			if raw {
				_, _, errno = syscall.RawSyscall(syscall.SYS_FDATASYNC, fd, 0, 0)
			} else {
				_, _, errno = syscall.Syscall(syscall.SYS_FDATASYNC, fd, 0, 0)
			}
			if errno != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		// The descriptor's lock refused the call: the file is closed.
		return &fs.PathError{Op: "fdatasync", Path: f.Name(), Err: os.ErrClosed}
	}
	if errno != 0 {
		return &fs.PathError{Op: "fdatasync", Path: f.Name(), Err: errno}
	}
	return nil
}

// preallocate is fallocate(2) with mode 0: it allocates blocks for
// [off, off+length) and extends the size if needed. Filesystems without
// fallocate get a plain size extension.
func preallocate(f *os.File, off, length int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return extendTo(f, off+length)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fallocate(int(fd), 0, off, length)
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	switch {
	case serr == nil:
		return nil
	case errors.Is(serr, syscall.EOPNOTSUPP), errors.Is(serr, syscall.ENOSYS):
		return extendTo(f, off+length)
	default:
		return &fs.PathError{Op: "fallocate", Path: f.Name(), Err: serr}
	}
}

// WriteAt is pwrite(2) as a raw system call (syscall.RawSyscall6), which
// the runtime does not see as a system call.
//
// Why: (*os.File).WriteAt enters the call as a possibly blocking one, and
// entering one wakes the runtime's system monitor from its deep sleep and
// resets it to its shortest period (20 µs): on an agent, whose every
// Ready writes the WAL and the deliveries log, the monitor then polled
// all the time the process was busy (21% of a follower's CPU in a
// profile at saturation, each poll a nanosleep and a context switch on
// this class of VM), and took the P from the loop whenever a write
// outlasted its period. The transport's socket calls are raw for the same
// reason (transport/rawio_linux.go). Measured with weft bench at 90
// shared clients (nofsync, 1 group, alternated): 22,920 and 29,207
// against 15,954 and 18,040 multicasts/s; 83 and 65 against 120 and 104
// µs of CPU per multicast (docs/batching.md, "Raw file writes").
//
// The cost: a write to the page cache returns in microseconds, but one
// the kernel throttles (dirty pages over the limit) holds this process's
// P until it returns, where the runtime would have run the process's
// other goroutines (network, gossip) meanwhile. The loop waits for the
// write either way. Sync (fdatasync) stays an ordinary call (SyncHolding
// is the raw one, for a caller that chose it: it waits for the disk).
func (f osFile) WriteAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "writeat", Path: f.Name(), Err: errors.New("negative offset")}
	}
	if f.rc == nil {
		return f.File.WriteAt(b, off)
	}
	done := 0
	var errno syscall.Errno
	if err := f.rc.Write(func(fd uintptr) bool {
		for done < len(b) {
			p := b[done:]
			r, _, e := syscall.RawSyscall6(syscall.SYS_PWRITE64, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)), uintptr(off+int64(done)), 0, 0)
			switch {
			case e == syscall.EINTR:
				continue
			case e != 0:
				errno = e
				return true
			case r == 0:
				errno = syscall.EIO // no progress: never loop for ever
				return true
			}
			done += int(r)
		}
		return true
	}); err != nil {
		// The descriptor's lock refused the call: the file is closed
		// (what os.File reports as os.ErrClosed).
		return done, &fs.PathError{Op: "write", Path: f.Name(), Err: os.ErrClosed}
	}
	if errno != 0 {
		return done, &fs.PathError{Op: "write", Path: f.Name(), Err: errno}
	}
	return done, nil
}
