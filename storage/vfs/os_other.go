//go:build !linux

package vfs

import "os"

// datasync falls back to (*os.File).Sync, which is fsync (F_FULLFSYNC on
// macOS).
func datasync(f *os.File) error { return f.Sync() }

// preallocate falls back to extending the file's size.
func preallocate(f *os.File, off, length int64) error { return extendTo(f, off+length) }

// syncHolding is Sync: only Linux has the raw call (os_linux.go).
func (f osFile) syncHolding() error { return datasync(f.File) }
