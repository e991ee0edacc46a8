package vfs

import (
	"io/fs"
	"sync"
)

// Injector decides whether an operation fails. MaybeError is called before
// each operation with the operation and the path it applies to (for File
// operations, the name the file was opened with); a non-nil result is
// returned to the caller instead of performing the operation.
// Implementations must be safe for concurrent use.
type Injector interface {
	MaybeError(op Op, path string) error
}

// InjectorFunc adapts a function to Injector.
type InjectorFunc func(op Op, path string) error

// MaybeError implements Injector.
func (f InjectorFunc) MaybeError(op Op, path string) error { return f(op, path) }

// FailNth returns an Injector that fails the nth call (counting from 1) of
// operation op with ErrInjected, and no other call. Use it to fail, say,
// the third data sync: FailNth(OpSync, 3).
func FailNth(op Op, n int) Injector {
	var mu sync.Mutex
	seen := 0
	return InjectorFunc(func(o Op, path string) error {
		if o != op {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		seen++
		if seen == n {
			return &fs.PathError{Op: op.String(), Path: path, Err: ErrInjected}
		}
		return nil
	})
}

// WithErrors returns an FS that asks inj before every operation on inner
// and on the files opened through it, and fails the operation if inj
// returns an error. A failed operation has no effect. Close is never
// failed.
func WithErrors(inner FS, inj Injector) FS {
	return &errorFS{inner: inner, inj: inj}
}

type errorFS struct {
	inner FS
	inj   Injector
}

func (e *errorFS) Create(name string) (File, error) {
	if err := e.inj.MaybeError(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{f: f, name: name, inj: e.inj}, nil
}

func (e *errorFS) Open(name string) (File, error) {
	if err := e.inj.MaybeError(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{f: f, name: name, inj: e.inj}, nil
}

func (e *errorFS) OpenReadWrite(name string) (File, error) {
	if err := e.inj.MaybeError(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.inner.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{f: f, name: name, inj: e.inj}, nil
}

func (e *errorFS) OpenDir(name string) (File, error) {
	if err := e.inj.MaybeError(OpOpenDir, name); err != nil {
		return nil, err
	}
	f, err := e.inner.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{f: f, name: name, inj: e.inj, dir: true}, nil
}

func (e *errorFS) Rename(oldname, newname string) error {
	if err := e.inj.MaybeError(OpRename, oldname); err != nil {
		return err
	}
	return e.inner.Rename(oldname, newname)
}

func (e *errorFS) Remove(name string) error {
	if err := e.inj.MaybeError(OpRemove, name); err != nil {
		return err
	}
	return e.inner.Remove(name)
}

func (e *errorFS) MkdirAll(dir string, perm fs.FileMode) error {
	if err := e.inj.MaybeError(OpMkdirAll, dir); err != nil {
		return err
	}
	return e.inner.MkdirAll(dir, perm)
}

func (e *errorFS) List(dir string) ([]string, error) {
	if err := e.inj.MaybeError(OpList, dir); err != nil {
		return nil, err
	}
	return e.inner.List(dir)
}

func (e *errorFS) Stat(name string) (fs.FileInfo, error) {
	if err := e.inj.MaybeError(OpStat, name); err != nil {
		return nil, err
	}
	return e.inner.Stat(name)
}

type errorFile struct {
	f    File
	name string
	inj  Injector
	dir  bool
}

func (e *errorFile) Read(p []byte) (int, error) {
	if err := e.inj.MaybeError(OpRead, e.name); err != nil {
		return 0, err
	}
	return e.f.Read(p)
}

func (e *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := e.inj.MaybeError(OpRead, e.name); err != nil {
		return 0, err
	}
	return e.f.ReadAt(p, off)
}

func (e *errorFile) Write(p []byte) (int, error) {
	if err := e.inj.MaybeError(OpWrite, e.name); err != nil {
		return 0, err
	}
	return e.f.Write(p)
}

func (e *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := e.inj.MaybeError(OpWrite, e.name); err != nil {
		return 0, err
	}
	return e.f.WriteAt(p, off)
}

func (e *errorFile) Sync() error {
	op := OpSync
	if e.dir {
		op = OpSyncDir
	}
	if err := e.inj.MaybeError(op, e.name); err != nil {
		return err
	}
	return e.f.Sync()
}

func (e *errorFile) Truncate(size int64) error {
	if err := e.inj.MaybeError(OpTruncate, e.name); err != nil {
		return err
	}
	return e.f.Truncate(size)
}

func (e *errorFile) Preallocate(off, length int64) error {
	if err := e.inj.MaybeError(OpPreallocate, e.name); err != nil {
		return err
	}
	return e.f.Preallocate(off, length)
}

func (e *errorFile) Stat() (fs.FileInfo, error) {
	if err := e.inj.MaybeError(OpStat, e.name); err != nil {
		return nil, err
	}
	return e.f.Stat()
}

func (e *errorFile) Close() error { return e.f.Close() }
