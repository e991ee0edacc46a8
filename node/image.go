package node

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/weft-dev/weft/wire"
)

// Snapshot encoding (the content of a wal snapshot file): the magic, then
// each record as a uvarint length and its wire.Append encoding. A WbCast
// image (one REC_SNAPSHOT, which can hold more entries than wire.Decode
// accepts in one message) is written as its pages (wire.SnapshotPages),
// consecutive REC_SNAPSHOTs that the reader joins back into one. Encoder
// and decoder share one set of limits: every record is at most
// maxImageRecord bytes and decodes under wire's caps, and the encoder
// refuses to write one that is not (the node then keeps its log).
//
// Version 2: REC_SNAPSHOT in pages. Version 1 (one REC_SNAPSHOT) lived in
// a WAL segment, which the log no longer reads.
var snapshotMagic = []byte("weftsnap\x02")

const (
	// maxImageRecord caps one record of a snapshot, in bytes, on both
	// ends: the largest message a node carries (a page holds at least one
	// entry, which can carry a payload of wire.MaxPayload).
	maxImageRecord = wire.DefaultMaxFrame
	// imagePageBudget is the size the encoder aims for per REC_SNAPSHOT
	// page, and the work a compaction does between two yields of the
	// loop's P (compact.go): each page is encoded, decoded, encoded again
	// and written whole: about 0.55 ms here at this size, 2.6 ms at the
	// 1 MiB it was (BenchmarkCompactionWrite: 19 MB of ids in 42 and 52
	// ms).
	imagePageBudget = 1 << 18
	// pageRoom is the capacity of the buffers a page is encoded into.
	pageRoom = 2 * imagePageBudget
)

var errBadSnapshot = errors.New("node: malformed snapshot")

// writeSnapshot encodes recs (a store's snapshot) to w. If each is not
// nil it is called with every record's encoding (wire.Append's bytes,
// without the length) and the record encoded (a REC_SNAPSHOT's page)
// right after the record is encoded, while the bytes are still in the
// cache; the slice is reused afterwards. An error from each ends the write
// with that error.
func writeSnapshot(w io.Writer, recs []wire.Message, each func(enc []byte, rec wire.Message) error) error {
	sw := newSnapshotWriter(w, each)
	if err := emitRecords(recs, imagePageBudget, sw.record); err != nil {
		return err
	}
	return sw.flush()
}

// emitRecords hands emit recs one at a time, each REC_SNAPSHOT as its
// pages of at most budget bytes (wire.SnapshotPages): the snapshot of an
// image that gives its records whole (a mirrored store).
func emitRecords(recs []wire.Message, budget int, emit func(wire.Message) error) error {
	for _, r := range recs {
		s, ok := r.(*wire.RecSnapshot)
		if !ok {
			if err := emit(r); err != nil {
				return err
			}
			continue
		}
		for _, p := range wire.SnapshotPages(s, budget) {
			if err := emit(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// snapshotWriter writes a snapshot's records as they come (writeSnapshot,
// or a compaction streaming an image's pages).
type snapshotWriter struct {
	bw   *bufio.Writer
	buf  []byte
	each func(enc []byte, rec wire.Message) error
}

func newSnapshotWriter(w io.Writer, each func(enc []byte, rec wire.Message) error) *snapshotWriter {
	sw := &snapshotWriter{
		bw: bufio.NewWriterSize(w, 256<<10),
		// Room for a page and more: grown to each larger page's size,
		// the buffer was allocated (and cleared) again for most pages.
		buf:  make([]byte, 0, pageRoom),
		each: each,
	}
	sw.bw.Write(snapshotMagic)
	return sw
}

// record encodes and writes one record: a whole one, or a REC_SNAPSHOT's
// page.
func (sw *snapshotWriter) record(p wire.Message) error {
	n := wire.Size(p)
	if n > maxImageRecord {
		return fmt.Errorf("node: snapshot: a %s of %d bytes exceeds the limit of %d bytes per record", p.Kind(), n, maxImageRecord)
	}
	sw.buf = binary.AppendUvarint(sw.buf[:0], uint64(n))
	head := len(sw.buf)
	sw.buf = wire.Append(sw.buf, p)
	if sw.each != nil {
		if err := sw.each(sw.buf[head:], p); err != nil {
			return err
		}
	}
	_, err := sw.bw.Write(sw.buf)
	return err
}

// flush writes what is buffered, after the last record.
func (sw *snapshotWriter) flush() error { return sw.bw.Flush() }

// imageDecoder turns a snapshot's records, one encoding at a time, back
// into the records writeSnapshot was given: each decoded under wire's
// caps, REC_SNAPSHOT pages joined. readSnapshot feeds it from a file; a
// compaction feeds it each record as it is written (compact.go).
type imageDecoder struct {
	out   []wire.Message
	pages []*wire.RecSnapshot
	n     int // records added
}

// add decodes one record's encoding. It keeps nothing of b.
func (d *imageDecoder) add(b []byte) error {
	m, err := wire.Decode(b)
	if err != nil {
		return fmt.Errorf("%w: record %d: %v", errBadSnapshot, d.n, err)
	}
	return d.addDecoded(m)
}

// addDecoded adds a record decoded already.
func (d *imageDecoder) addDecoded(m wire.Message) error {
	d.n++
	if p, ok := m.(*wire.RecSnapshot); ok {
		d.pages = append(d.pages, p)
		return nil
	}
	if err := d.join(); err != nil {
		return err
	}
	d.out = append(d.out, m)
	return nil
}

// join ends a run of pages.
func (d *imageDecoder) join() error {
	if len(d.pages) == 0 {
		return nil
	}
	s, err := wire.JoinSnapshotPages(d.pages)
	if err != nil {
		return fmt.Errorf("%w: %v", errBadSnapshot, err)
	}
	d.out, d.pages = append(d.out, s), nil
	return nil
}

// records returns the records decoded, after the last one was added.
func (d *imageDecoder) records() ([]wire.Message, error) {
	if err := d.join(); err != nil {
		return nil, err
	}
	return d.out, nil
}

// readSnapshot decodes a snapshot written by writeSnapshot: the records,
// with REC_SNAPSHOT pages joined.
func readSnapshot(r io.Reader) ([]wire.Message, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != string(snapshotMagic) {
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: bad magic %q (want %q)", errBadSnapshot, magic, snapshotMagic)
	}
	var d imageDecoder
	var buf []byte
	for i := 0; ; i++ {
		n, err := binary.ReadUvarint(br)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: length: %v", errBadSnapshot, i, err)
		}
		if n > maxImageRecord {
			return nil, fmt.Errorf("%w: record %d: length %d exceeds the limit of %d", errBadSnapshot, i, n, maxImageRecord)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", errBadSnapshot, i, err)
		}
		if err := d.add(buf); err != nil {
			return nil, err
		}
	}
	return d.records()
}
