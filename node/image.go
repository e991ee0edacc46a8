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
	// page.
	imagePageBudget = 1 << 20
)

var errBadSnapshot = errors.New("node: malformed snapshot")

// writeSnapshot encodes recs (a store's snapshot) to w.
func writeSnapshot(w io.Writer, recs []wire.Message) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	bw.Write(snapshotMagic)
	var buf []byte
	for _, r := range recs {
		pages := []wire.Message{r}
		if s, ok := r.(*wire.RecSnapshot); ok {
			pages = pages[:0]
			for _, p := range wire.SnapshotPages(s, imagePageBudget) {
				pages = append(pages, p)
			}
		}
		for _, p := range pages {
			if n := wire.Size(p); n > maxImageRecord {
				return fmt.Errorf("node: snapshot: a %s of %d bytes exceeds the limit of %d bytes per record", p.Kind(), n, maxImageRecord)
			}
			buf = binary.AppendUvarint(buf[:0], uint64(wire.Size(p)))
			buf = wire.Append(buf, p)
			if _, err := bw.Write(buf); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
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
	var out []wire.Message
	var pages []*wire.RecSnapshot
	join := func() error {
		if len(pages) == 0 {
			return nil
		}
		s, err := wire.JoinSnapshotPages(pages)
		if err != nil {
			return fmt.Errorf("%w: %v", errBadSnapshot, err)
		}
		out, pages = append(out, s), nil
		return nil
	}
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
		m, err := wire.Decode(buf)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", errBadSnapshot, i, err)
		}
		if p, ok := m.(*wire.RecSnapshot); ok {
			pages = append(pages, p)
			continue
		}
		if err := join(); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if err := join(); err != nil {
		return nil, err
	}
	return out, nil
}
