package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// testFS runs the same behavioural checks against every implementation.
func testFS(t *testing.T, fsys FS, root string) {
	t.Helper()
	dir := filepath.Join(root, "a", "b")
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("MkdirAll on existing dir: %v", err)
	}
	name := filepath.Join(dir, "f")
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello ")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("W"), 6); err != nil {
		t.Fatal(err)
	}
	if err := f.Preallocate(0, 64); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 64 {
		t.Fatalf("size after Preallocate = %v, %v; want 64", fi.Size(), err)
	}
	if err := f.Preallocate(0, 8); err != nil { // never shrinks
		t.Fatal(err)
	}
	if err := f.Truncate(11); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if n, err := f.ReadAt(buf, 6); n != 5 || err != nil || string(buf) != "World" {
		t.Fatalf("ReadAt = %d %v %q", n, err, buf)
	}
	if n, err := f.ReadAt(buf, 9); n != 2 || err != io.EOF {
		t.Fatalf("short ReadAt = %d %v, want 2 EOF", n, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	r, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(r)
	if err != nil || string(all) != "hello World" {
		t.Fatalf("ReadAll = %q %v", all, err)
	}
	if _, err := r.Write([]byte("x")); err == nil {
		t.Fatal("Write on read-only file succeeded")
	}
	r.Close()

	rw, err := fsys.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.WriteAt([]byte("H"), 0); err != nil {
		t.Fatal(err)
	}
	rw.Close()

	name2 := filepath.Join(dir, "g")
	if err := fsys.Rename(name, name2); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat(old) err = %v, want ErrNotExist", err)
	}
	if fi, err := fsys.Stat(name2); err != nil || fi.Size() != 11 || fi.IsDir() {
		t.Fatalf("Stat(new) = %v %v", fi, err)
	}
	if fi, err := fsys.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("Stat(dir) = %v %v", fi, err)
	}
	for _, n := range []string{"c", "a"} {
		f, err := fsys.Create(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	names, err := fsys.List(dir)
	if err != nil || !slices.Equal(names, []string{"a", "c", "g"}) {
		t.Fatalf("List = %v %v", names, err)
	}
	if err := SyncDir(fsys, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.OpenDir(name2); err == nil {
		t.Fatal("OpenDir on a file succeeded")
	}
	if err := fsys.Remove(filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(filepath.Join(dir, "c")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("second Remove err = %v, want ErrNotExist", err)
	}
	if _, err := fsys.Open(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open(missing) err = %v, want ErrNotExist", err)
	}
	rf, _ := fsys.Open(name2)
	all, _ = io.ReadAll(rf)
	rf.Close()
	if string(all) != "Hello World" {
		t.Fatalf("content after OpenReadWrite+Rename = %q", all)
	}
}

func TestOS(t *testing.T) { testFS(t, OS(), t.TempDir()) }

func TestMem(t *testing.T) { testFS(t, NewCrashableMem(), "/x") }

func readFile(t *testing.T, fsys FS, name string) ([]byte, error) {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

func TestCrashDropsUnsynced(t *testing.T) {
	m := NewCrashableMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	// The directory itself is not durable until / is synced.
	if c := m.CrashClone(nil); func() bool { _, err := c.Stat("/d"); return err == nil }() {
		t.Fatal("unsynced mkdir survived the crash")
	}
	if err := SyncDir(m, "/"); err != nil {
		t.Fatal(err)
	}
	f, _ := m.Create("/d/f")
	f.Write([]byte("synced"))
	f.Sync()
	// Synced data, unsynced name: the file is gone after a crash.
	if _, err := m.CrashClone(nil).Stat("/d/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("file with unsynced dir entry survived: %v", err)
	}
	SyncDir(m, "/d")
	f.Write([]byte("+tail"))
	c := m.CrashClone(nil)
	if got, err := readFile(t, c, "/d/f"); err != nil || string(got) != "synced" {
		t.Fatalf("after crash = %q %v, want %q", got, err, "synced")
	}
	// The original keeps everything.
	if got, _ := readFile(t, m, "/d/f"); string(got) != "synced+tail" {
		t.Fatalf("original = %q", got)
	}
	// Rename without dir sync is lost; with it, kept.
	m.Rename("/d/f", "/d/g")
	if _, err := m.CrashClone(nil).Stat("/d/f"); err != nil {
		t.Fatalf("unsynced rename lost the old name: %v", err)
	}
	SyncDir(m, "/d")
	c = m.CrashClone(nil)
	if _, err := c.Stat("/d/g"); err != nil {
		t.Fatalf("synced rename lost: %v", err)
	}
	// A clone starts fully durable.
	if got, _ := readFile(t, c.CrashClone(nil), "/d/g"); string(got) != "synced" {
		t.Fatalf("crash of a crash clone = %q", got)
	}
	// Unsynced truncation is undone by a crash.
	f.Truncate(2)
	if got, _ := readFile(t, m.CrashClone(nil), "/d/g"); string(got) != "synced" {
		t.Fatalf("after unsynced truncate = %q", got)
	}
}

func TestCrashTornRandom(t *testing.T) {
	// Whatever the rng does, a crashed file holds the synced bytes as a
	// prefix up to the first changed byte, and is no longer than the data
	// written plus the synced length allows.
	seen := map[string]bool{}
	for seed := range uint64(500) {
		m := NewCrashableMem()
		f, _ := m.Create("/f")
		synced := bytes.Repeat([]byte("s"), 700)
		f.Write(synced)
		f.Sync()
		SyncDir(m, "/")
		tail := bytes.Repeat([]byte("t"), 1500)
		f.Write(tail)
		want := append(slices.Clone(synced), tail...)
		rng := rand.New(rand.NewPCG(seed, 1))
		got, err := readFile(t, m.CrashClone(rng), "/f")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) < len(synced) || !bytes.Equal(got[:len(synced)], synced) {
			t.Fatalf("seed %d: synced prefix damaged", seed)
		}
		if len(got) > len(want) {
			t.Fatalf("seed %d: crash grew the file to %d > %d", seed, len(got), len(want))
		}
		kind := "prefix"
		for i := len(synced); i < len(got); i++ {
			switch {
			case got[i] == 0:
				kind = "holes"
			case got[i] != 't':
				kind = "garbage"
			}
		}
		switch {
		case len(got) == len(synced):
			kind = "dropped"
		case bytes.Equal(got, want):
			kind = "kept"
		}
		seen[kind] = true
	}
	for _, k := range []string{"dropped", "kept", "prefix", "garbage", "holes"} {
		if !seen[k] {
			t.Errorf("no crash of kind %q in 500 seeds", k)
		}
	}
}

func TestCrashDeterministic(t *testing.T) {
	build := func() *MemFS {
		m := NewCrashableMem()
		for i := range 20 {
			f, _ := m.Create(filepath.Join("/", string(rune('a'+i))))
			f.Write(bytes.Repeat([]byte{byte(i)}, 100*i))
			if i%3 == 0 {
				f.Sync()
			}
			f.Write([]byte("more"))
		}
		return m
	}
	snap := func(m *MemFS) map[string]string {
		out := map[string]string{}
		names, _ := m.List("/")
		for _, n := range names {
			b, _ := readFile(t, m, "/"+n)
			out[n] = string(b)
		}
		return out
	}
	a := snap(build().CrashClone(rand.New(rand.NewPCG(7, 7))))
	b := snap(build().CrashClone(rand.New(rand.NewPCG(7, 7))))
	if len(a) == 0 {
		t.Log("no entries survived (fine, but unlikely)")
	}
	for k, v := range a {
		if b[k] != v {
			t.Fatalf("same seed, different crash for %s", k)
		}
	}
	if len(a) != len(b) {
		t.Fatal("same seed, different directory")
	}
}

func TestFailNth(t *testing.T) {
	m := NewCrashableMem()
	e := WithErrors(m, FailNth(OpSync, 2))
	f, err := e.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("a"))
	if err := f.Sync(); err != nil {
		t.Fatalf("first sync: %v", err)
	}
	f.Write([]byte("b"))
	if err := f.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("second sync err = %v, want ErrInjected", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("third sync: %v", err)
	}
	// Directory syncs are counted separately.
	e = WithErrors(m, FailNth(OpSyncDir, 1))
	if err := SyncDir(e, "/"); !errors.Is(err, ErrInjected) {
		t.Fatalf("SyncDir err = %v, want ErrInjected", err)
	}
	e = WithErrors(m, FailNth(OpWrite, 1))
	g, _ := e.OpenReadWrite("/f")
	if _, err := g.WriteAt([]byte("zz"), 0); !errors.Is(err, ErrInjected) {
		t.Fatalf("write err = %v", err)
	}
	if got, _ := readFile(t, m, "/f"); string(got) != "ab" {
		t.Fatalf("failed write had an effect: %q", got)
	}
	if OpPreallocate.String() != "preallocate" || Op(200).String() != "Op(200)" {
		t.Fatal("Op.String")
	}
}

func TestCrashRenameAtomicWithinDir(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(100) {
		m := NewCrashableMem()
		m.MkdirAll("/d", 0o755)
		SyncDir(m, "/")
		f, _ := m.Create("/d/a.tmp")
		f.Write([]byte("x"))
		f.Sync()
		SyncDir(m, "/d")
		m.Rename("/d/a.tmp", "/d/a")
		g, _ := m.Create("/d/other")
		g.Close()
		c := m.CrashClone(rand.New(rand.NewPCG(seed, 2)))
		names, _ := c.List("/d")
		switch {
		case slices.Equal(names, []string{"a.tmp"}), slices.Equal(names, []string{"a"}), slices.Equal(names, []string{"a", "other"}):
			seen[fmt.Sprint(names)] = true
		default:
			t.Fatalf("seed %d: directory after crash = %v", seed, names)
		}
		if got, _ := readFile(t, c, "/d/"+names[0]); string(got) != "x" {
			t.Fatalf("seed %d: synced file content %q", seed, got)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("saw only %v", seen)
	}
}
