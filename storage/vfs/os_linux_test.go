package vfs

import (
	"bytes"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOSWriteAtRaw: the raw pwrite writes everything at the offset (a
// write larger than one call takes, into a hole), and fails as
// (*os.File).WriteAt does: a closed file, a file opened read-only, a
// negative offset.
func TestOSWriteAtRaw(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	f, err := OS().Create(name)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 9<<20)
	for i := range big {
		big[i] = byte(rand.Uint32())
	}
	const off = 4097
	if n, err := f.WriteAt(big, off); n != len(big) || err != nil {
		t.Fatalf("WriteAt: %d, %v", n, err)
	}
	if n, err := f.WriteAt([]byte("head"), 0); n != 4 || err != nil {
		t.Fatalf("WriteAt at 0: %d, %v", n, err)
	}
	if n, err := f.WriteAt(nil, 3); n != 0 || err != nil {
		t.Fatalf("empty WriteAt: %d, %v", n, err)
	}
	if _, err := f.WriteAt([]byte("x"), -1); err == nil {
		t.Fatal("a negative offset was accepted")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("WriteAt after Close: %v, want os.ErrClosed", err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]byte("head"), make([]byte, off-4)...), big...)
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, not what was written (%d)", len(got), len(want))
	}
	ro, err := OS().Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	_, err = ro.WriteAt([]byte("x"), 0)
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, syscall.EBADF) || pe.Path != name {
		t.Fatalf("WriteAt on a read-only file: %v, want a PathError for %s with EBADF", err, name)
	}
}

// TestOSSyncHolding: the raw fdatasync syncs an open file and fails as
// Sync does on a closed one; a File that is not the OS's (an Injector's)
// is synced with its own Sync, so injected failures still reach the
// caller.
func TestOSSyncHolding(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	f, err := OS().Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("record"), 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(interface{ syncHolding() error }); !ok {
		t.Fatal("an OS file has no raw sync: SyncHolding would fall back to Sync")
	}
	if err := SyncHolding(f); err != nil {
		t.Fatalf("SyncHolding: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := SyncHolding(f); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("SyncHolding after Close: %v, want os.ErrClosed", err)
	}
	inj, err := WithErrors(OS(), FailNth(OpSync, 1)).OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	defer inj.Close()
	if err := SyncHolding(inj); !errors.Is(err, ErrInjected) {
		t.Fatalf("SyncHolding of an injecting file: %v, want the injected error", err)
	}
}
