// Package vfs is the small filesystem interface weft's durable storage is
// written against, with two implementations:
//
//   - OS returns the real filesystem (package os). File.Sync is fdatasync on
//     Linux (file data plus the metadata needed to read it back, such as the
//     size) and falls back to (*os.File).Sync elsewhere. Directory handles
//     from OpenDir sync with fsync.
//   - NewCrashableMem returns an in-memory filesystem that remembers what has
//     been made durable. MemFS.CrashClone returns the filesystem as it would
//     be after a power loss: only synced file data and synced directory
//     entries survive, and with a seeded *rand.Rand some of the unsynced
//     state survives too, torn, in ways a real disk could produce.
//
// WithErrors wraps any FS and injects errors chosen by an Injector (for
// example FailNth: fail the Nth write or sync), so tests can check what
// storage code does when the disk fails.
//
// The durability rules the interface promises, and that MemFS enforces:
//
//   - File data and the file's size are durable after File.Sync returns nil.
//   - A file's name (created, renamed or removed) is durable only after the
//     directory holding it is synced: OpenDir(dir), Sync, Close (SyncDir does
//     that). Syncing a file does not make its name durable, and syncing a
//     directory does not make its files' data durable.
//   - After a failed Sync nothing is known about what reached the disk.
//
// Only this package imports os and syscall; code above it takes an FS.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// FS is a hierarchical filesystem. Names are slash- or OS-separated paths as
// accepted by the implementation; storage code builds them with
// path/filepath. Implementations are safe for concurrent use; a File is not
// (callers serialise operations on one File).
type FS interface {
	// Create creates the named file, or truncates it if it exists, and opens
	// it for reading and writing. The new name is not durable until the
	// parent directory is synced.
	Create(name string) (File, error)
	// Open opens the named file for reading.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing without
	// truncating it.
	OpenReadWrite(name string) (File, error)
	// OpenDir opens a directory so that it can be synced. Only Sync, Stat
	// and Close are meaningful on the result.
	OpenDir(name string) (File, error)
	// Rename renames (moves) oldname to newname, replacing newname if it is
	// a file. The change is durable once the directory (both directories,
	// if they differ) is synced.
	Rename(oldname, newname string) error
	// Remove removes the named file or empty directory.
	Remove(name string) error
	// MkdirAll creates a directory and any missing parents. New entries are
	// durable once their parent directories are synced.
	MkdirAll(dir string, perm fs.FileMode) error
	// List returns the names of the entries in dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes the named file or directory.
	Stat(name string) (fs.FileInfo, error)
}

// File is an open file. Reads and writes either move the file's offset
// (Read, Write) or take an explicit one (ReadAt, WriteAt). A File is not safe
// for concurrent use.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Sync makes the file's data and size durable (fdatasync semantics). On
	// a directory handle it makes the directory's entries durable.
	Sync() error
	// Truncate changes the file's size, discarding data past size or
	// extending the file with zeros.
	Truncate(size int64) error
	// Preallocate makes the file at least off+length bytes long, the new
	// bytes reading as zero, and reserves disk space for them where the
	// platform supports it, so that later writes in that range need not
	// allocate blocks or change the size (which keeps fdatasync cheap).
	// Like any size change it is durable after Sync.
	Preallocate(off, length int64) error
	// Stat describes the file.
	Stat() (fs.FileInfo, error)
}

// SyncDir makes the entries of directory dir durable: it opens dir, syncs it
// and closes it.
func SyncDir(fsys FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// SyncHolding is f.Sync for a caller that has nothing else to run while
// the disk works and would rather keep its thread: on Linux, for a file
// of OS(), fdatasync is made as a raw system call, which the runtime does
// not see, so it neither wakes its system monitor nor hands the
// goroutine's P to another thread (and takes it back) around the call.
// The cost is the caller's: no other goroutine runs on that P until the
// disk answers (with GOMAXPROCS 1, none in the process), however long it
// takes. Any other File (the in-memory FS, an Injector's) is synced with
// its Sync; so is every File elsewhere.
//
// Why an agent's loop uses it (through wal.Options.RawSync): its
// goroutine waits for the sync in any case, and on this VM class each
// hand-off of the P to another thread and back is a thread wake-up and a
// context switch; docs/durability.md has the measurement.
func SyncHolding(f File) error {
	if h, ok := f.(interface{ syncHolding() error }); ok {
		return h.syncHolding()
	}
	return f.Sync()
}

// ErrInjected is the error returned by operations that an Injector made fail
// (unless the Injector chose another error).
var ErrInjected = errors.New("vfs: injected error")

// Op names an FS or File operation, for error injection.
type Op uint8

// Operations, as seen by an Injector.
const (
	OpCreate Op = iota + 1
	OpOpen
	OpOpenDir
	OpRename
	OpRemove
	OpMkdirAll
	OpList
	OpStat
	OpRead        // File.Read, File.ReadAt
	OpWrite       // File.Write, File.WriteAt
	OpSync        // File.Sync on a file
	OpSyncDir     // File.Sync on a directory handle
	OpTruncate    // File.Truncate
	OpPreallocate // File.Preallocate
)

var opNames = [...]string{
	OpCreate: "create", OpOpen: "open", OpOpenDir: "opendir", OpRename: "rename",
	OpRemove: "remove", OpMkdirAll: "mkdirall", OpList: "list", OpStat: "stat",
	OpRead: "read", OpWrite: "write", OpSync: "sync", OpSyncDir: "syncdir",
	OpTruncate: "truncate", OpPreallocate: "preallocate",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}
