package wal

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-dev/weft/storage/vfs"
)

const dir = "/wal"

func rec(i int) []byte {
	return []byte(fmt.Sprintf("record-%d-%s", i, strings.Repeat("x", i%23)))
}

func mustOpen(t testing.TB, fsys vfs.FS, opts Options) *WAL {
	t.Helper()
	w, err := Open(fsys, dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return w
}

func mustReadAll(t testing.TB, w *WAL) ([]byte, [][]byte) {
	t.Helper()
	snap, recs, err := w.ReadAll()
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	return snap, recs
}

func wantRecs(t testing.TB, got [][]byte, from, to int) {
	t.Helper()
	if len(got) != to-from {
		t.Fatalf("got %d records, want %d (records %d..%d)", len(got), to-from, from, to-1)
	}
	for i, g := range got {
		if !bytes.Equal(g, rec(from+i)) {
			t.Fatalf("record %d = %q, want %q", i, g, rec(from+i))
		}
	}
}

func segments(t testing.TB, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, n := range names {
		if strings.HasSuffix(n, segSuffix) {
			segs = append(segs, n)
		}
	}
	return segs
}

func readFile(t testing.TB, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t testing.TB, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func snapshots(t testing.TB, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.Contains(n, snapSuffix) {
			out = append(out, n)
		}
	}
	return out
}

func lastSegment(t testing.TB, fsys vfs.FS) string {
	segs := segments(t, fsys)
	return filepath.Join(dir, segs[len(segs)-1])
}
