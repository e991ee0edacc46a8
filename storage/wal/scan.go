package wal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/weft-dev/weft/storage/vfs"
)

// zeroPage is compared against to check that a range of a segment is zero.
var zeroPage [32 << 10]byte

// scanKind says what a scanner reads: a segment or a snapshot file.
type scanKind uint8

const (
	scanSegment  scanKind = iota // entry frames, then the zero end marker or EOF
	scanSnapshot                 // snapshot data frames, then an end frame
)

// scanner reads and verifies the frames of one segment or snapshot file,
// in order.
type scanner struct {
	kind   scanKind
	name   string // base name, for errors
	r      *bufio.Reader
	size   int64 // file size
	maxRec int

	off   int64  // offset of the next frame
	crc   uint32 // chain value after the last valid frame
	index uint64 // index of the next record
	count int    // valid frames so far

	bad string // why the frame at off is invalid, once next returned false
	buf []byte
	hdr [frameHeaderLen]byte
}

// newScanner positions a scanner on the first frame of a file of the
// given kind, at offset start, whose chain starts at seed and whose first
// record has index first. f must stay open while the scanner is used.
func newScanner(f vfs.File, size int64, kind scanKind, name string, start int64, first uint64, seed uint32, maxRec int) *scanner {
	return &scanner{
		kind:   kind,
		name:   name,
		r:      bufio.NewReaderSize(io.NewSectionReader(f, start, size-start), int(min(max(size, 4<<10), 64<<10))),
		size:   size,
		maxRec: maxRec,
		off:    start,
		crc:    seed,
		index:  first,
	}
}

// segScanner positions a scanner on the first frame of segment seg.
func segScanner(f vfs.File, size int64, seg segment, seed uint32, maxRec int) *scanner {
	return newScanner(f, size, scanSegment, seg.name, segHeaderSize, seg.first, seed, maxRec)
}

// next reads the next frame. It returns ok with the record's type and
// payload (valid until the following call), or !ok at the end of the
// segment: s.bad is empty for a clean end (end of file, or an all-zero
// remainder) and otherwise says why the frame at s.off is invalid. err
// reports I/O errors only.
func (s *scanner) next() (typ RecordType, payload []byte, ok bool, err error) {
	remaining := s.size - s.off
	if remaining == 0 {
		return 0, nil, false, nil
	}
	if remaining < frameHeaderLen {
		return 0, nil, false, s.zerosToEnd(remaining, "truncated frame header")
	}
	if _, err := io.ReadFull(s.r, s.hdr[:]); err != nil {
		return 0, nil, false, s.ioErr(err)
	}
	h := s.hdr[:]
	if s.kind == scanSegment && bytes.Equal(h, zeroPage[:frameHeaderLen]) {
		// End-of-log marker: the rest of a preallocated segment is zero.
		return 0, nil, false, s.zerosToEnd(remaining-frameHeaderLen, "data after the end-of-log marker")
	}
	n := int64(binary.LittleEndian.Uint32(h[0:]))
	typ = RecordType(h[4])
	pad := int64(h[5])
	switch {
	case s.kind == scanSegment && typ != RecordEntry,
		s.kind == scanSnapshot && typ != RecordSnapshot && typ != recordSnapshotEnd:
		return s.invalid("invalid record type %d", h[4])
	case h[6] != 0 || h[7] != 0:
		return s.invalid("nonzero reserved header bytes")
	case pad != int64(padFor(int(n%frameAlign))):
		return s.invalid("padding %d does not match length %d", pad, n)
	case n > int64(s.maxRec):
		return s.invalid("record length %d exceeds the maximum %d", n, s.maxRec)
	case frameHeaderLen+n+pad > remaining:
		return s.invalid("frame of %d bytes runs past the end of the file (%d bytes left)", frameHeaderLen+n+pad, remaining)
	}
	if int64(cap(s.buf)) < n+pad {
		s.buf = make([]byte, n+pad)
	}
	s.buf = s.buf[:n+pad]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		return 0, nil, false, s.ioErr(err)
	}
	payload = s.buf[:n]
	if !bytes.Equal(s.buf[n:], zeros[:pad]) {
		return s.invalid("nonzero padding")
	}
	crc := crc32.Update(s.crc, castagnoli, h[:8])
	crc = crc32.Update(crc, castagnoli, payload)
	if crc != binary.LittleEndian.Uint32(h[8:]) {
		return s.invalid("checksum mismatch")
	}
	s.crc = crc
	s.off += frameHeaderLen + n + pad
	s.index++
	s.count++
	return typ, payload, true, nil
}

func (s *scanner) invalid(format string, args ...any) (RecordType, []byte, bool, error) {
	s.bad = fmt.Sprintf(format, args...)
	return 0, nil, false, nil
}

// zerosToEnd consumes n more bytes and sets s.bad to reason if any is
// nonzero.
func (s *scanner) zerosToEnd(n int64, reason string) error {
	for n > 0 {
		chunk := zeroPage[:min(n, int64(len(zeroPage)), int64(s.r.Size()))]
		b, err := s.r.Peek(len(chunk))
		if err != nil {
			return s.ioErr(err)
		}
		if !bytes.Equal(b, chunk) {
			s.bad = reason
			return nil
		}
		s.r.Discard(len(b))
		n -= int64(len(b))
	}
	return nil
}

func (s *scanner) ioErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		err = io.ErrUnexpectedEOF // the file shrank under us
	}
	return fmt.Errorf("wal: reading %s at offset %d: %w", s.name, s.off, err)
}

func (s *scanner) corrupt() error {
	return &CorruptError{Segment: s.name, Offset: s.off, Reason: s.bad}
}
