//go:build linux

package vfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// datasync is fdatasync(2): it flushes the file's data and the metadata
// needed to read it back (the size), but not timestamps.
func datasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return f.Sync()
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &fs.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
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
