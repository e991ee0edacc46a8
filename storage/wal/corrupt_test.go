package wal

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-dev/weft/storage/vfs"
)

func TestTornTail(t *testing.T) {
	opts := Options{SegmentSize: 1024}
	build := func() (*vfs.MemFS, []byte, int64) {
		m := vfs.NewCrashableMem()
		w := mustOpen(t, m, opts)
		for i := range 10 {
			w.Append(rec(i))
		}
		w.Sync()
		end := w.off
		w.Close()
		return m, readFile(t, m, lastSegment(t, m)), end
	}
	for _, tc := range []struct {
		name   string
		mutate func(b []byte, end int64) []byte
		want   int // records recovered
	}{
		{"garbage after end", func(b []byte, end int64) []byte { b[end+20] = 1; return b }, 10},
		{"half a frame", func(b []byte, end int64) []byte {
			copy(b[end:], []byte{20, 0, 0, 0, 1, 0, 0, 0, 1, 2, 3, 4, 'a', 'b'})
			return b
		}, 10},
		{"truncated mid-frame", func(b []byte, end int64) []byte { return b[:end-5] }, 9},
		{"truncated header", func(b []byte, end int64) []byte { return b[:end-int64(frameLen(len(rec(9))))+4] }, 9},
		{"flipped last payload", func(b []byte, end int64) []byte { b[end-10] ^= 0x40; return b }, 9},
		{"flipped padding", func(b []byte, end int64) []byte {
			// rec(9) is 18 bytes: 12+18 = 30, so 2 bytes of padding.
			b[end-1] = 7
			return b
		}, 9},
		{"bad type", func(b []byte, end int64) []byte { b[end-int64(frameLen(len(rec(9))))+4] = 9; return b }, 9},
		{"zeroed last header", func(b []byte, end int64) []byte {
			off := end - int64(frameLen(len(rec(9))))
			clear(b[off : off+frameHeaderLen])
			return b
		}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, b, end := build()
			writeFile(t, m, lastSegment(t, m), tc.mutate(b, end))
			w := mustOpen(t, m, opts)
			_, got := mustReadAll(t, w)
			wantRecs(t, got, 0, tc.want)
			if w.Repaired() == nil {
				t.Fatal("no repair reported")
			}
			t.Logf("repair: %+v", *w.Repaired())
			// The log is usable, and the repair is durable.
			w.Append(rec(100))
			if err := w.Sync(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			w = mustOpen(t, m.CrashClone(nil), opts)
			defer w.Close()
			if w.Repaired() != nil {
				t.Fatalf("second open repaired again: %+v", *w.Repaired())
			}
			_, got = mustReadAll(t, w)
			wantRecs(t, got[:tc.want], 0, tc.want)
			if len(got) != tc.want+1 || !bytes.Equal(got[tc.want], rec(100)) {
				t.Fatalf("appended record after repair lost: %d records", len(got))
			}
		})
	}
}

func TestCorruptMiddle(t *testing.T) {
	opts := Options{SegmentSize: 256}
	build := func() (*vfs.MemFS, []string) {
		m := vfs.NewCrashableMem()
		w := mustOpen(t, m, opts)
		for i := range 60 {
			w.Append(rec(i))
		}
		w.Sync()
		w.Close()
		return m, segments(t, m)
	}
	for _, tc := range []struct {
		name   string
		seg    int // index into segments
		mutate func(b []byte)
		off    int64 // wanted CorruptError.Offset, -1: don't check
		reason string
	}{
		{"payload bit flip", 2, func(b []byte) { b[segHeaderSize+frameHeaderLen+1] ^= 1 }, segHeaderSize, "checksum"},
		{"second frame", 3, func(b []byte) {
			n := binary32(b[segHeaderSize:])
			b[segHeaderSize+frameLen(int(n))+frameHeaderLen] ^= 0x80
		}, -1, "checksum"},
		{"header", 1, func(b []byte) { b[20] ^= 1 }, 0, "header"},
		{"garbage after end marker", 0, func(b []byte) { b[len(b)-1] = 1 }, -1, "after the end"},
		{"snapshot record in plain segment", 2, func(b []byte) { b[segHeaderSize+4] = byte(RecordSnapshot) }, segHeaderSize, "invalid record type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, segs := build()
			name := filepath.Join(dir, segs[tc.seg])
			b := readFile(t, m, name)
			tc.mutate(b)
			writeFile(t, m, name, b)
			_, err := Open(m, dir, opts)
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open = %v, want a CorruptError", err)
			}
			if ce.Segment != segs[tc.seg] || (tc.off >= 0 && ce.Offset != tc.off) || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("CorruptError %+v, want segment %s offset %d reason ~%q", ce, segs[tc.seg], tc.off, tc.reason)
			}
			t.Log(err)
		})
	}
	t.Run("missing segment", func(t *testing.T) {
		m, segs := build()
		m.Remove(filepath.Join(dir, segs[3]))
		if _, err := Open(m, dir, opts); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("Open = %v", err)
		}
	})
	t.Run("missing first segment", func(t *testing.T) {
		m, segs := build()
		m.Remove(filepath.Join(dir, segs[0]))
		if _, err := Open(m, dir, opts); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v", err)
		}
	})
	t.Run("segment swapped in from another log", func(t *testing.T) {
		m, segs := build()
		other, _ := build()
		// Same records, same names: the chain still matches, so this is fine...
		b := readFile(t, other, filepath.Join(dir, segs[2]))
		writeFile(t, m, filepath.Join(dir, segs[2]), b)
		if _, err := Open(m, dir, opts); err != nil {
			t.Fatalf("identical segment rejected: %v", err)
		}
		// ...but a segment whose records differ breaks the chain at the next one.
		b[segHeaderSize+frameHeaderLen] ^= 1
		crcFix(b)
		writeFile(t, m, filepath.Join(dir, segs[2]), b)
		if _, err := Open(m, dir, opts); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v", err)
		}
	})
}

func binary32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// crcFix recomputes the chained CRCs of every frame in segment b, as a
// forger would.
func crcFix(b []byte) {
	h, _ := parseSegHeader(b)
	crc := h.seed
	for off := segHeaderSize; off+frameHeaderLen <= len(b); {
		n := int(binary32(b[off:]))
		if b[off+4] == 0 {
			return
		}
		start := off
		buf := append([]byte(nil), b[start:start+frameHeaderLen+n]...)
		buf, crc = finishFrame(buf, 0, RecordType(b[off+4]), crc)
		copy(b[start:], buf)
		off += len(buf)
	}
}
