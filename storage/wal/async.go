package wal

import (
	"fmt"

	"github.com/weft-dev/weft/storage/vfs"
)

// Syncing on another goroutine (issue #14; docs/durability.md, "The sync
// off the loop").
//
// Sync writes and syncs on the caller's goroutine, which waits for the
// disk. A caller with other work to do while the disk answers (a node's
// loop, stepping the input that arrived meanwhile: group commit) splits
// it in two: Write, on the log's goroutine, writes the appended records
// to the file without syncing them; SyncWritten, on a goroutine of its
// own, makes everything written before it was called durable, while the
// log's goroutine goes on appending and writing. Records written after
// SyncWritten began may or may not be made durable by it: it reports the
// index it covers, and the caller trusts no more than that.
//
// Only SyncWritten, WrittenIndex and SyncedIndex may be called
// concurrently with the log's other methods, and SyncWritten from one
// goroutine at a time. The log's goroutine replaces or closes the file
// only holding syncMu (a roll, Close), which SyncWritten holds while it
// syncs; a roll syncs the full segment itself, so a record written before
// a roll is durable once the roll returns (its index then counts as
// synced only after the next Sync or SyncWritten).

// Write writes every appended record to the log's file without making it
// durable (a roll into a new segment still syncs the full one first, as
// Sync does). A failure is sticky, as for Sync.
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
func (w *WAL) WrittenIndex() uint64 { return w.written.Load() }

// SyncWritten makes every record written (Write, Sync) before the call
// durable, and returns the index of the last of them: the log's
// SyncedIndex from then on is at least that. It may run on another
// goroutine than the log's, one call at a time. It syncs the ordinary way
// even with Options.RawSync: the goroutine that waits for it is not the
// one with work to do. With Options.UnsafeNoSync it syncs nothing. A
// failure is sticky: every later write of the log fails with it.
func (w *WAL) SyncWritten() (uint64, error) {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	if err := w.syncErr.Load(); err != nil {
		return w.synced.Load(), *err
	}
	idx := w.written.Load()
	if idx <= w.synced.Load() {
		return w.synced.Load(), nil
	}
	if !w.opts.UnsafeNoSync && w.f != nil {
		if err := w.f.Sync(); err != nil {
			err = fmt.Errorf("%w: %w", ErrFailed, err)
			w.syncErr.Store(&err)
			return w.synced.Load(), err
		}
	}
	// Another sync (the log's own, or a roll's) may have covered more
	// meanwhile: synced only grows.
	for {
		old := w.synced.Load()
		if idx <= old || w.synced.CompareAndSwap(old, idx) {
			break
		}
	}
	return w.synced.Load(), nil
}

// replaceFile makes f the file being written, closing the previous one,
// while no SyncWritten holds it.
func (w *WAL) replaceFile(f vfs.File) {
	w.syncMu.Lock()
	w.f.Close()
	w.f, w.off = f, segHeaderSize
	w.syncMu.Unlock()
}
