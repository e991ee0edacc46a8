//go:build !linux

package vfs

import "os"

// datasync falls back to (*os.File).Sync, which is fsync (F_FULLFSYNC on
// macOS); only Linux has the raw call (os_linux.go).
func (f osFile) datasync(bool) error { return f.File.Sync() }

// preallocate falls back to extending the file's size.
func preallocate(f *os.File, off, length int64) error { return extendTo(f, off+length) }
