package vfs

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OS returns the operating system's filesystem.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return newOSFile(f), nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return newOSFile(f), nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return newOSFile(f), nil
}

func (osFS) OpenDir(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.IsDir() {
		f.Close()
		return nil, &fs.PathError{Op: "opendir", Path: name, Err: fmt.Errorf("not a directory")}
	}
	return osDir{f}, nil
}

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// osFile is a regular file. Sync is fdatasync where available. rc is
// the file's syscall.RawConn (nil if it has none), taken once at open:
// WriteAt uses it on every write where writes are raw (os_linux.go).
type osFile struct {
	*os.File
	rc syscall.RawConn
}

func newOSFile(f *os.File) osFile {
	rc, _ := f.SyscallConn()
	return osFile{File: f, rc: rc}
}

func (f osFile) Sync() error { return f.datasync(false) }

// syncHolding is Sync as a raw system call where there is one
// (SyncHolding).
func (f osFile) syncHolding() error { return f.datasync(true) }

func (f osFile) Preallocate(off, length int64) error {
	if off < 0 || length < 0 {
		return &fs.PathError{Op: "preallocate", Path: f.Name(), Err: fs.ErrInvalid}
	}
	if length == 0 {
		return nil
	}
	return preallocate(f.File, off, length)
}

// extendTo is the portable fallback for Preallocate: it grows the file to
// size with ftruncate (a hole, reading as zeros) if it is smaller.
func extendTo(f *os.File, size int64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() >= size {
		return nil
	}
	return f.Truncate(size)
}

// osDir is a directory handle. Sync is a full fsync, which is what makes
// directory entries durable.
type osDir struct{ *os.File }

func (d osDir) Sync() error { return d.File.Sync() }

func (d osDir) Preallocate(off, length int64) error {
	return &fs.PathError{Op: "preallocate", Path: d.Name(), Err: fmt.Errorf("is a directory")}
}
