package wal

import (
	"errors"
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// AppendMessages appends each message as one entry record encoded with
// wire.Append, straight into the log's buffer, and returns the messages'
// encoded bytes (wire.Size, frames not counted): what a caller that
// meters its log by message bytes counts, sized here once for the record
// limit. It is the persistence half of a Ready loop:
//
//	w.AppendMessages(rd.Persist...)
//	w.Sync() // once per Ready, before sending rd.Messages
//
// Either all messages are appended or, on error, none.
func (w *WAL) AppendMessages(ms ...wire.Message) (int64, error) {
	if err := w.writable(); err != nil {
		return 0, err
	}
	var bytes int64
	for _, m := range ms {
		n := wire.Size(m)
		if n > w.opts.MaxRecordSize {
			return 0, fmt.Errorf("%w: %s of %d bytes, maximum %d", ErrTooLarge, m.Kind(), n, w.opts.MaxRecordSize)
		}
		bytes += int64(n)
	}
	for _, m := range ms {
		start := len(w.pend)
		w.pend = append(w.pend, frameHeaderPlaceholder[:]...)
		w.pend = wire.Append(w.pend, m)
		w.endFrame(start)
	}
	return bytes, nil
}

// DecodeMessage decodes an entry record written by AppendMessages.
func DecodeMessage(r Record) (wire.Message, error) {
	if r.Type != RecordEntry {
		return nil, fmt.Errorf("wal: record %d is a %s, not an entry", r.Index, r.Type)
	}
	m, err := wire.Decode(r.Data)
	if err != nil {
		hint := ""
		if errors.Is(err, wire.ErrVersion) {
			// Wire versions are not read across (docs/operations.md, "Data
			// directory and member identity"): say what the operator can do.
			hint = " (the data directory was written by another release of weft, which this one cannot read; keep running that release, or bring this member back with an empty data directory and --rejoin)"
		}
		return nil, fmt.Errorf("wal: record %d: %w%s", r.Index, err, hint)
	}
	return m, nil
}

// ReadMessages returns the durable entry records after the latest
// snapshot, decoded with wire.Decode, in order: what a restarting process
// replays into its amcast.Store after the snapshot (OpenSnapshot).
func (w *WAL) ReadMessages() ([]wire.Message, error) {
	var msgs []wire.Message
	for r, err := range w.Records() {
		if err != nil {
			return nil, err
		}
		m, err := DecodeMessage(r)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}
