package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"

	"github.com/weft-dev/weft/storage/vfs"
)

// fuzzOpts keep segments small so the fuzzer's inputs cover whole segments.
var fuzzOpts = Options{SegmentSize: 512, MaxRecordSize: 1024}

// fuzzBase builds a log of records rec(0..n) over several segments and
// returns it (fully durable), the last segment's path and bytes, and how
// many records precede the last segment.
func fuzzBase(t testing.TB) (base *vfs.MemFS, last string, lastBytes []byte, before int) {
	base = vfs.NewCrashableMem()
	w := mustOpen(t, base, fuzzOpts)
	for i := range 40 {
		w.Append(rec(i))
		if i%4 == 3 {
			w.Sync()
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	last = lastSegment(t, base)
	_, first, _ := parseSegName(filepath.Base(last))
	return base, last, readFile(t, base, last), int(first - 1)
}

// FuzzOpenLastSegment replaces the last segment of a valid log with the
// fuzzer's bytes (after the segment's real header if keepHeader, so the
// fuzzer need not forge the header checksum to reach the frames). Open must not panic; it either fails with ErrCorrupt or
// recovers the records of the earlier segments followed by a prefix of the
// records the real last segment held (the chained CRC makes any other
// outcome, such as a forged or reordered record, a failure). A recovered log
// must then accept appends that survive a reopen.
func FuzzOpenLastSegment(f *testing.F) {
	base, last, orig, before := fuzzBase(f)
	body := orig[segHeaderSize:]
	f.Add(false, orig)
	f.Add(false, orig[:segHeaderSize])
	f.Add(false, []byte{})
	f.Add(true, body)
	f.Add(true, body[:len(body)/2])
	for _, off := range []int{3, 30, segHeaderSize + 2, segHeaderSize + 13, 100, 200} {
		b := bytes.Clone(orig)
		b[off] ^= 0x10
		f.Add(false, b)
		f.Add(true, b[segHeaderSize:])
	}
	// A frame with a huge length, and garbage after the end.
	b := bytes.Clone(body)
	binary.LittleEndian.PutUint32(b, 1<<30)
	f.Add(true, b)
	b = bytes.Clone(body)
	b[len(b)-1] = 0xff
	f.Add(true, b)

	f.Fuzz(func(t *testing.T, keepHeader bool, data []byte) {
		m := base.CrashClone(nil)
		if keepHeader {
			data = append(bytes.Clone(orig[:segHeaderSize]), data...)
		}
		writeFile(t, m, last, data)
		w, err := Open(m, dir, fuzzOpts)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open failed without ErrCorrupt: %v", err)
			}
			return
		}
		_, got, err := w.ReadAll()
		if err != nil {
			t.Fatalf("ReadAll after a successful Open: %v", err)
		}
		if len(got) < before || len(got) > 40 {
			t.Fatalf("recovered %d records; %d precede the last segment, 40 were written", len(got), before)
		}
		wantRecs(t, got, 0, len(got))
		n := len(got)
		if err := w.Append([]byte("after")); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		w, err = Open(m.CrashClone(nil), dir, fuzzOpts)
		if err != nil {
			t.Fatalf("reopen after repair and append: %v", err)
		}
		_, got, err = w.ReadAll()
		if err != nil || len(got) != n+1 || string(got[n]) != "after" {
			t.Fatalf("after reopen: %d records (want %d), %v", len(got), n+1, err)
		}
		wantRecs(t, got[:n], 0, n)
	})
}
