package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// On-disk constants; see the package documentation for the layout.
const (
	segMagic       = "weftwal\x00"
	formatVersion  = 1
	segHeaderSize  = 40
	frameHeaderLen = 12
	frameAlign     = 8

	// flagLegacySnapshot marked a segment whose first record was a
	// snapshot, before snapshots became files of their own (snapshot.go).
	// Such a log is refused with a clear reason.
	flagLegacySnapshot = 1 << 0

	segSuffix = ".wal"
	tmpSuffix = ".tmp"
)

// castagnoli is the CRC32C table (hardware accelerated on amd64 and arm64).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var zeros [frameAlign]byte

// RecordType distinguishes log records.
type RecordType uint8

// Record types. The values are part of the on-disk format.
const (
	// RecordEntry is an ordinary record appended with Append.
	RecordEntry RecordType = 1
	// RecordSnapshot is a frame of a snapshot file (snapshot.go); it never
	// occurs in a segment.
	RecordSnapshot RecordType = 2
)

func (t RecordType) String() string {
	switch t {
	case RecordEntry:
		return "entry"
	case RecordSnapshot:
		return "snapshot"
	case recordSnapshotEnd:
		return "snapshot end"
	}
	return fmt.Sprintf("RecordType(%d)", uint8(t))
}

// segment describes one segment file, from its name and header.
type segment struct {
	name  string // base name
	seq   uint64 // segment sequence number
	first uint64 // index of the segment's first record
	seed  uint32 // chain CRC of the record before first (0 at the log's start)
	flags uint16
}

// segName is the file name of segment seq whose first record is first.
func segName(seq, first uint64) string {
	return fmt.Sprintf("%016x-%016x%s", seq, first, segSuffix)
}

// parseSegName parses a name made by segName.
func parseSegName(name string) (seq, first uint64, ok bool) {
	base, found := strings.CutSuffix(name, segSuffix)
	if !found || len(base) != 33 || base[16] != '-' {
		return 0, 0, false
	}
	seq, err1 := strconv.ParseUint(base[:16], 16, 64)
	first, err2 := strconv.ParseUint(base[17:], 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return seq, first, segName(seq, first) == name // rejects upper case
}

// appendSegHeader appends the 40-byte header of s.
func appendSegHeader(buf []byte, s segment) []byte {
	start := len(buf)
	buf = append(buf, segMagic...)
	buf = binary.LittleEndian.AppendUint16(buf, formatVersion)
	buf = binary.LittleEndian.AppendUint16(buf, s.flags)
	buf = binary.LittleEndian.AppendUint32(buf, 0)
	buf = binary.LittleEndian.AppendUint64(buf, s.seq)
	buf = binary.LittleEndian.AppendUint64(buf, s.first)
	buf = binary.LittleEndian.AppendUint32(buf, s.seed)
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf[start:], castagnoli))
}

// parseSegHeader decodes and checks a segment header, returning a reason on
// failure.
func parseSegHeader(b []byte) (segment, string) {
	var s segment
	if len(b) < segHeaderSize {
		return s, "short segment header"
	}
	b = b[:segHeaderSize]
	if crc32.Checksum(b[:36], castagnoli) != binary.LittleEndian.Uint32(b[36:]) {
		return s, "segment header checksum mismatch"
	}
	if string(b[:8]) != segMagic {
		return s, "bad magic"
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != formatVersion {
		return s, fmt.Sprintf("unsupported format version %d", v)
	}
	s.flags = binary.LittleEndian.Uint16(b[10:])
	if s.flags == flagLegacySnapshot {
		return s, "a snapshot segment of an earlier weft (snapshots are now separate .snap files); this log cannot be read"
	}
	if s.flags != 0 || binary.LittleEndian.Uint32(b[12:]) != 0 {
		return s, "unknown header flags"
	}
	s.seq = binary.LittleEndian.Uint64(b[16:])
	s.first = binary.LittleEndian.Uint64(b[24:])
	s.seed = binary.LittleEndian.Uint32(b[32:])
	return s, ""
}

// padFor returns the number of zero bytes that follow an n-byte payload.
func padFor(n int) int {
	return (frameAlign - (frameHeaderLen+n)%frameAlign) % frameAlign
}

// frameLen returns the size on disk of a frame with an n-byte payload.
func frameLen(n int) int { return frameHeaderLen + n + padFor(n) }

// finishFrame completes the frame that starts at buf[start]: a header of
// frameHeaderLen placeholder bytes followed by the payload. It fills in the
// header with the chain CRC continued from crc, appends the padding, and
// returns the buffer and the new chain value.
func finishFrame(buf []byte, start int, typ RecordType, crc uint32) ([]byte, uint32) {
	n := len(buf) - start - frameHeaderLen
	pad := padFor(n)
	h := buf[start : start+frameHeaderLen]
	binary.LittleEndian.PutUint32(h[0:], uint32(n))
	h[4], h[5], h[6], h[7] = byte(typ), byte(pad), 0, 0
	crc = crc32.Update(crc, castagnoli, h[:8])
	crc = crc32.Update(crc, castagnoli, buf[start+frameHeaderLen:])
	binary.LittleEndian.PutUint32(h[8:], crc)
	return append(buf, zeros[:pad]...), crc
}

// Errors.
var (
	// ErrCorrupt reports a log that cannot be recovered without losing
	// records that were durable: a damaged record before the tail of the
	// last segment, a damaged segment header, or a missing segment. Errors
	// matching it are *CorruptError values.
	ErrCorrupt = errors.New("wal: corrupt log")
	// ErrFailed reports a log that refuses writes because an earlier write,
	// sync or segment operation failed; what reached the disk is unknown
	// until the log is reopened. Errors matching it also wrap the original
	// failure.
	ErrFailed = errors.New("wal: log failed; reopen it")
	// ErrClosed reports use of a closed log or Committer.
	ErrClosed = errors.New("wal: closed")
	// ErrTooLarge reports a record longer than Options.MaxRecordSize. It is
	// not sticky: the record is not appended and the log stays usable.
	ErrTooLarge = errors.New("wal: record too large")
)

// CorruptError locates corruption found by Open or Records.
type CorruptError struct {
	Segment string // base name of the segment or snapshot file
	Offset  int64  // byte offset of the bad header or frame in the segment
	Reason  string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: corrupt segment %s at offset %d: %s", e.Segment, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }
