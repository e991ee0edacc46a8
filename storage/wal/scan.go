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

// scanner reads and verifies the frames of one segment, in order.
type scanner struct {
	seg    segment
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

// newScanner positions a scanner on the first frame of seg, whose chain
// starts at seed. f must stay open while the scanner is used.
func newScanner(f vfs.File, size int64, seg segment, seed uint32, maxRec int) *scanner {
	return &scanner{
		seg:    seg,
		r:      bufio.NewReaderSize(io.NewSectionReader(f, segHeaderSize, size-segHeaderSize), int(min(max(size, 4<<10), 64<<10))),
		size:   size,
		maxRec: maxRec,
		off:    segHeaderSize,
		crc:    seed,
		index:  seg.first,
	}
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
	if bytes.Equal(h, zeroPage[:frameHeaderLen]) {
		// End-of-log marker: the rest of a preallocated segment is zero.
		return 0, nil, false, s.zerosToEnd(remaining-frameHeaderLen, "data after the end-of-log marker")
	}
	n := int64(binary.LittleEndian.Uint32(h[0:]))
	typ = RecordType(h[4])
	pad := int64(h[5])
	switch {
	case typ != RecordEntry && typ != RecordSnapshot:
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
	snapSeg := s.seg.flags&flagSnapshot != 0
	switch {
	case typ == RecordSnapshot && (!snapSeg || s.count > 0):
		return s.invalid("snapshot record that does not begin a snapshot segment")
	case typ != RecordSnapshot && snapSeg && s.count == 0:
		return s.invalid("snapshot segment does not begin with a snapshot record")
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
	return fmt.Errorf("wal: reading segment %s at offset %d: %w", s.seg.name, s.off, err)
}

func (s *scanner) corrupt() error {
	return &CorruptError{Segment: s.seg.name, Offset: s.off, Reason: s.bad}
}
