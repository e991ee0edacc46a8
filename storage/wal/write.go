package wal

// Writing without syncing (issue #14; node/pipeline.go).
//
// Sync writes the appended records and makes them durable at once. A
// caller that may let records wait for a later sync (a WbCast leader whose
// own acknowledgements nobody waits on) writes them with Write, so that
// they are in the file, readable by the process and kept by the page
// cache if the process dies, and lets the next Sync make them durable
// with every record written before it.

// Write writes every appended record to the log's file without making it
// durable (a roll into a new segment still syncs the full one first, as
// Sync does). The next Sync makes them durable. A failure is sticky, as
// for Sync.
func (w *WAL) Write() error {
	if err := w.writable(); err != nil {
		return err
	}
	if len(w.pend) == 0 {
		return nil
	}
	if err := w.flush(false); err != nil {
		return w.fail(err)
	}
	return nil
}

// WrittenIndex returns the index of the last record written to the file,
// durable or not (0 if none).
func (w *WAL) WrittenIndex() uint64 { return w.written }
