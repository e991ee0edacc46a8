package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory filesystem that tracks durability: for every file
// the content as of its last Sync, and for every directory its entries as of
// its last sync plus the changes made since, in order. CrashClone turns that
// into the filesystem a power loss would leave behind.
//
// Paths are slash-separated (OS separators are converted) and relative to a
// single root; "a/b" and "/a/b" name the same file. MemFS is safe for
// concurrent use.
type MemFS struct {
	mu   sync.Mutex
	root *memNode
}

// NewCrashableMem returns an empty in-memory filesystem whose CrashClone
// simulates power loss.
func NewCrashableMem() *MemFS {
	return &MemFS{root: newMemDir()}
}

var _ FS = (*MemFS)(nil)

// memNode is a file or a directory (an inode). Names live in the parent
// directory, so a node can be renamed while open.
type memNode struct {
	isDir bool

	// Files. INVARIANT: if !dirty, data and synced hold the same bytes; if
	// dirty, data[:dirtyFrom] == synced[:dirtyFrom] and both are at least
	// dirtyFrom long: only bytes at or after dirtyFrom changed since the
	// last Sync.
	data      []byte
	synced    []byte
	dirty     bool
	dirtyFrom int

	// Directories: the entries now, the entries as of the last sync, and the
	// entry changes since then, oldest first.
	children       map[string]*memNode
	syncedChildren map[string]*memNode
	pending        []dirOp
}

// dirOp is one change to a directory's entries: remove del and/or add add
// (which replaces an existing entry). A rename within a directory is one op,
// so it is atomic across a crash.
type dirOp struct {
	del  string
	add  string
	node *memNode
}

func newMemDir() *memNode {
	return &memNode{isDir: true, children: map[string]*memNode{}, syncedChildren: map[string]*memNode{}}
}

// touch records that bytes at or after off changed.
func (n *memNode) touch(off int) {
	if !n.dirty || off < n.dirtyFrom {
		n.dirtyFrom = off
	}
	n.dirty = true
}

// resize sets the file's length to size, zero-filling any extension.
func (n *memNode) resize(size int) {
	if size == len(n.data) {
		return
	}
	n.touch(min(size, len(n.data)))
	if size < len(n.data) {
		n.data = n.data[:size]
		return
	}
	n.data = append(n.data, make([]byte, size-len(n.data))...)
}

func (n *memNode) writeAt(p []byte, off int) {
	if end := off + len(p); end > len(n.data) {
		n.resize(end)
	}
	n.touch(off)
	copy(n.data[off:], p)
}

func (n *memNode) syncFile() {
	if !n.dirty {
		return
	}
	n.synced = append(n.synced[:n.dirtyFrom], n.data[n.dirtyFrom:]...)
	n.dirty = false
}

func (n *memNode) syncDir() {
	n.syncedChildren = make(map[string]*memNode, len(n.children))
	for k, v := range n.children {
		n.syncedChildren[k] = v
	}
	n.pending = nil
}

// apply performs op on the current entries and records it as pending.
func (n *memNode) apply(op dirOp) {
	if op.del != "" {
		delete(n.children, op.del)
	}
	if op.add != "" {
		n.children[op.add] = op.node
	}
	n.pending = append(n.pending, op)
}

// clean splits a name into its path elements below the root.
func clean(name string) []string {
	p := path.Clean("/" + filepath.ToSlash(name))
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

var errNotDir = errors.New("not a directory")
var errIsDir = errors.New("is a directory")

// lookup returns the node at elems. REQUIRES: fs.mu held.
func (m *MemFS) lookup(elems []string) (*memNode, error) {
	n := m.root
	for _, e := range elems {
		if !n.isDir {
			return nil, errNotDir
		}
		c, ok := n.children[e]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = c
	}
	return n, nil
}

// parent returns the directory holding elems and the last element.
// REQUIRES: fs.mu held and len(elems) > 0.
func (m *MemFS) parent(elems []string) (*memNode, string, error) {
	dir, err := m.lookup(elems[:len(elems)-1])
	if err != nil {
		return nil, "", err
	}
	if !dir.isDir {
		return nil, "", errNotDir
	}
	return dir, elems[len(elems)-1], nil
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	elems := clean(name)
	if len(elems) == 0 {
		return nil, pathErr("create", name, errIsDir)
	}
	dir, base, err := m.parent(elems)
	if err != nil {
		return nil, pathErr("create", name, err)
	}
	n, ok := dir.children[base]
	switch {
	case ok && n.isDir:
		return nil, pathErr("create", name, errIsDir)
	case ok:
		n.resize(0)
	default:
		n = &memNode{}
		dir.apply(dirOp{add: base, node: n})
	}
	return &memFile{fs: m, n: n, name: name, read: true, write: true}, nil
}

func (m *MemFS) open(op, name string, write, wantDir bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(clean(name))
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	switch {
	case wantDir && !n.isDir:
		return nil, pathErr(op, name, errNotDir)
	case write && n.isDir:
		return nil, pathErr(op, name, errIsDir)
	}
	return &memFile{fs: m, n: n, name: name, read: !n.isDir, write: write}, nil
}

// Open implements FS. Opening a directory returns a directory handle.
func (m *MemFS) Open(name string) (File, error) { return m.open("open", name, false, false) }

// OpenReadWrite implements FS.
func (m *MemFS) OpenReadWrite(name string) (File, error) {
	return m.open("open", name, true, false)
}

// OpenDir implements FS.
func (m *MemFS) OpenDir(name string) (File, error) { return m.open("opendir", name, false, true) }

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	oe, ne := clean(oldname), clean(newname)
	if len(oe) == 0 || len(ne) == 0 {
		return pathErr("rename", oldname, fs.ErrInvalid)
	}
	od, ob, err := m.parent(oe)
	if err != nil {
		return pathErr("rename", oldname, err)
	}
	n, ok := od.children[ob]
	if !ok {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	nd, nb, err := m.parent(ne)
	if err != nil {
		return pathErr("rename", newname, err)
	}
	if slices.Equal(oe, ne) {
		return nil
	}
	if n.isDir && len(ne) > len(oe) && slices.Equal(ne[:len(oe)], oe) {
		return pathErr("rename", newname, fs.ErrInvalid)
	}
	if t, ok := nd.children[nb]; ok && t.isDir && (!n.isDir || len(t.children) > 0) {
		return pathErr("rename", newname, fs.ErrExist)
	}
	if od == nd {
		od.apply(dirOp{del: ob, add: nb, node: n})
		return nil
	}
	od.apply(dirOp{del: ob})
	nd.apply(dirOp{add: nb, node: n})
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	elems := clean(name)
	if len(elems) == 0 {
		return pathErr("remove", name, fs.ErrInvalid)
	}
	dir, base, err := m.parent(elems)
	if err != nil {
		return pathErr("remove", name, err)
	}
	n, ok := dir.children[base]
	if !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.isDir && len(n.children) > 0 {
		return pathErr("remove", name, errors.New("directory not empty"))
	}
	dir.apply(dirOp{del: base})
	return nil
}

// MkdirAll implements FS. The permission bits are ignored.
func (m *MemFS) MkdirAll(dir string, _ fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, e := range clean(dir) {
		c, ok := n.children[e]
		switch {
		case !ok:
			c = newMemDir()
			n.apply(dirOp{add: e, node: c})
		case !c.isDir:
			return pathErr("mkdir", dir, errNotDir)
		}
		n = c
	}
	return nil
}

// List implements FS.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(clean(dir))
	if err != nil {
		return nil, pathErr("list", dir, err)
	}
	if !n.isDir {
		return nil, pathErr("list", dir, errNotDir)
	}
	names := make([]string, 0, len(n.children))
	for k := range n.children {
		names = append(names, k)
	}
	slices.Sort(names)
	return names, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	elems := clean(name)
	n, err := m.lookup(elems)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	base := "/"
	if len(elems) > 0 {
		base = elems[len(elems)-1]
	}
	return memInfo{name: base, size: int64(len(n.data)), dir: n.isDir}, nil
}

// CrashClone returns the filesystem as a power loss at this instant would
// leave it. m itself is unchanged and stays usable (files open on m keep
// referring to m); the clone starts with everything durable.
//
// With rng == nil the crash is the minimal one: every file holds exactly
// the bytes of its last Sync (files never synced are empty) and every
// directory exactly the entries of its last sync.
//
// With a seeded rng, unsynced state may partly survive, as on a real disk.
// Each directory keeps a random prefix of the entry changes made since its
// last sync (journaled filesystems commit metadata in order); a rename
// within one directory is a single change, so it survives whole or not at
// all, while a rename across directories may leave both names or neither
// unless both directories are synced. Each file with
// unsynced changes independently gets one of: all unsynced changes lost; all
// kept; a random prefix of the changed range kept (a torn write); a random
// prefix kept followed by a short run of random garbage (a torn sector); or
// each 512-byte sector of the changed range kept or lost independently
// (out-of-order writeback). Bytes not changed since the file's last Sync
// always survive. The same rng state gives the same crash.
func (m *MemFS) CrashClone(rng *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &crasher{rng: rng, memo: map[*memNode]*memNode{}}
	return &MemFS{root: c.dir(m.root)}
}

type crasher struct {
	rng  *rand.Rand
	memo map[*memNode]*memNode
}

func (c *crasher) node(n *memNode) *memNode {
	if d, ok := c.memo[n]; ok {
		return d
	}
	var d *memNode
	if n.isDir {
		d = c.dir(n)
	} else {
		d = &memNode{data: c.file(n)}
		d.synced = slices.Clone(d.data)
	}
	c.memo[n] = d
	return d
}

func (c *crasher) dir(n *memNode) *memNode {
	d := newMemDir()
	c.memo[n] = d
	ents := make(map[string]*memNode, len(n.syncedChildren))
	for k, v := range n.syncedChildren {
		ents[k] = v
	}
	keep := 0
	if c.rng != nil && len(n.pending) > 0 {
		keep = c.rng.IntN(len(n.pending) + 1)
	}
	for _, op := range n.pending[:keep] {
		if op.del != "" {
			delete(ents, op.del)
		}
		if op.add != "" {
			ents[op.add] = op.node
		}
	}
	names := make([]string, 0, len(ents))
	for k := range ents {
		names = append(names, k)
	}
	slices.Sort(names) // deterministic rng consumption
	for _, k := range names {
		d.children[k] = c.node(ents[k])
		d.syncedChildren[k] = d.children[k]
	}
	return d
}

// sectorSize is the granularity of out-of-order writeback in CrashClone.
const sectorSize = 512

// file returns the content a crash leaves in file n.
func (c *crasher) file(n *memNode) []byte {
	if !n.dirty || c.rng == nil {
		return slices.Clone(n.synced)
	}
	from, data, synced := n.dirtyFrom, n.data, n.synced
	// overlay returns synced with data[from:end] written over it.
	overlay := func(end int) []byte {
		out := slices.Clone(synced[:from])
		out = append(out, data[from:end]...)
		if len(synced) > end {
			out = append(out, synced[end:]...)
		}
		return out
	}
	switch c.rng.IntN(5) {
	case 0: // everything unsynced lost
		return slices.Clone(synced)
	case 1: // everything kept
		return slices.Clone(data)
	case 2: // torn: a prefix of the changed range
		return overlay(from + c.rng.IntN(len(data)-from+1))
	case 3: // torn sector: a prefix, then garbage
		end := from + c.rng.IntN(len(data)-from+1)
		out := overlay(end)
		g := min(1+c.rng.IntN(64), len(data)-end)
		for i := range g {
			b := byte(c.rng.Uint32())
			if end+i < len(out) {
				out[end+i] = b
			} else {
				out = append(out, b)
			}
		}
		return out
	default: // out-of-order writeback, sector by sector
		out := slices.Clone(synced)
		for s := from - from%sectorSize; s < len(data); s += sectorSize {
			if c.rng.IntN(2) == 0 {
				continue
			}
			lo, hi := max(s, from), min(s+sectorSize, len(data))
			if len(out) < hi {
				out = append(out, make([]byte, hi-len(out))...)
			}
			copy(out[lo:hi], data[lo:hi])
		}
		return out
	}
}

// memFile is an open file or directory handle on a MemFS.
type memFile struct {
	fs          *MemFS
	n           *memNode
	name        string
	pos         int64
	read, write bool
	closed      bool
}

func (f *memFile) check(op string, write bool) error {
	switch {
	case f.closed:
		return pathErr(op, f.name, fs.ErrClosed)
	case f.n.isDir:
		return pathErr(op, f.name, errIsDir)
	case write && !f.write:
		return pathErr(op, f.name, fs.ErrPermission)
	case !write && !f.read:
		return pathErr(op, f.name, fs.ErrPermission)
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, fs.ErrInvalid)
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	n, err := f.WriteAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("write", f.name, fs.ErrInvalid)
	}
	f.n.writeAt(p, int(off))
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("sync", f.name, fs.ErrClosed)
	}
	if f.n.isDir {
		f.n.syncDir()
	} else {
		f.n.syncFile()
	}
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, fs.ErrInvalid)
	}
	f.n.resize(int(size))
	return nil
}

func (f *memFile) Preallocate(off, length int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("preallocate", true); err != nil {
		return err
	}
	if off < 0 || length < 0 {
		return pathErr("preallocate", f.name, fs.ErrInvalid)
	}
	if end := int(off + length); end > len(f.n.data) {
		f.n.resize(end)
	}
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, pathErr("stat", f.name, fs.ErrClosed)
	}
	return memInfo{name: path.Base("/" + filepath.ToSlash(f.name)), size: int64(len(f.n.data)), dir: f.n.isDir}, nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (fi memInfo) Name() string { return fi.name }
func (fi memInfo) Size() int64  { return fi.size }
func (fi memInfo) Mode() fs.FileMode {
	if fi.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (fi memInfo) ModTime() time.Time { return time.Time{} }
func (fi memInfo) IsDir() bool        { return fi.dir }
func (fi memInfo) Sys() any           { return nil }
