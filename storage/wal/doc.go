// Package wal is weft's write-ahead log: a segmented, append-only log of
// opaque records with group commit, torn-write detection and tail repair on
// open, modelled on the design of etcd's server/storage/wal. It is where a
// node makes Ready.Persist durable before it sends Ready.Messages.
//
// # Use
//
// A node's Ready loop appends the whole Ready.Persist batch and syncs once:
//
//	w, err := wal.Open(vfs.OS(), dir, wal.Options{})
//	snap, err := w.OpenSnapshot()  // nil, or a reader of the latest snapshot
//	recs, err := w.ReadMessages()  // the records after it: replay both into the Store
//	...
//	for {
//		rd := m.Ready()
//		w.AppendMessages(rd.Persist...) // buffered, encoded with wire.Append
//		if err := w.Sync(); err != nil { // one write + one fdatasync
//			// stop: the log refuses writes until reopened
//		}
//		send(rd.Messages); deliver(rd.Deliveries)
//		m.Advance()
//	}
//
// Append and AppendMessages only buffer. Sync writes everything buffered
// and issues a single fdatasync, so one Ready costs one sync however many
// records it holds (group commit). Committer does the same for many
// goroutines: each calls Commit, and one flusher makes every batch waiting
// at that moment durable with one Sync.
//
// Snapshots compact the log. A snapshot is a compacted image of the
// process's state covering every record up to an index, in a file of its
// own (so it has no size limit and does not stop the log): BeginSnapshot
// (on the log's goroutine) syncs the log, fixes the index and makes the
// next record start a new segment; the returned SnapshotWriter writes,
// finishes (fsync), reads back and commits (rename, directory fsync) the
// file on any goroutine while the log keeps appending; ReleaseSnapshot (on
// the log's goroutine again) then deletes the segments and the snapshot
// it replaced, or ReleaseSnapshotLater lets go of them and leaves their
// deletion (Obsolete.Remove) to any goroutine. Cut(snapshot) does all of it in one call. Without
// snapshots the log only grows.
//
// # Guarantees
//
// When Sync (or Commit) returns nil, every record appended before it is
// durable. After a crash, Open recovers exactly a prefix of the appended
// records (in order, no gaps, nothing damaged) that contains every record
// whose Sync returned; records appended after the last successful Sync may
// or may not be in it. In amcast terms: the deliveries whose Rec lies in the
// recovered prefix happened, the others did not. Open fdatasyncs what it
// recovered before returning, so a process never acts on records that a
// second crash could still take away.
//
// Any failed write, sync or segment operation is sticky: the log refuses
// further writes with an error matching ErrFailed until it is reopened (after
// a failed fdatasync the kernel may have dropped the dirty pages, so the only
// safe view of the log is the one read back from disk).
//
// # On-disk format
//
// A log is a directory of segment files named
//
//	<seq>-<first>.wal
//
// where seq is the segment's sequence number and first the index of its first
// record, each as 16 lower-case hex digits, so that lexical order is log
// order. Segments are created as <name>.tmp, preallocated to
// Options.SegmentSize (fallocate, so that fdatasync of a write inside the
// file need not flush metadata), written, fdatasynced, renamed into place,
// and the directory is fsynced; Open deletes leftover .tmp files. All
// integers are little-endian.
//
// Segment header (40 bytes, at offset 0):
//
//	off size field
//	  0    8 magic "weftwal\x00"
//	  8    2 format version, 1
//	 10    2 flags: zero (bit 0 marked an in-segment snapshot, before format
//	         of snapshot files; refused)
//	 12    4 reserved, zero
//	 16    8 seq: segment sequence number (the first segment is 0)
//	 24    8 first: index of the segment's first record (the log starts at 1)
//	 32    4 seed: chain CRC of the record before first (0 for the first
//	         segment of a log)
//	 36    4 CRC32C of bytes 0..35
//
// Record frames follow from offset 40. Every frame starts 8-byte aligned:
//
//	off   size field
//	  0      4 n: payload length in bytes, at most 2^30
//	  4      1 type: 1 entry, 2 snapshot (0 never occurs in a frame)
//	  5      1 pad: number of padding bytes, (8 - (12+n)%8) % 8
//	  6      2 reserved, zero
//	  8      4 crc: CRC32C (Castagnoli) chained across records:
//	           crc_i = crc32c(crc_{i-1}; bytes 0..7 of header_i || payload_i),
//	           where crc_{first-1} is the segment header's seed
//	 12      n payload
//	 12+n  pad zero bytes
//
// The chain runs through the whole log, across segment boundaries: a
// segment's seed must equal the chain value after the last record of the
// segment before it. A record therefore verifies only in its own position
// after its own predecessors, so stale, reordered or spliced frames never
// pass, and the 32-bit length, the type and the padding count are all
// covered by the CRC.
//
// After the last record the rest of a segment is zero (the preallocated
// space): a frame header of twelve zero bytes marks the end of the log in
// that segment, and everything after it must be zero too. Each record gets
// an index; indexes are consecutive across segments and across Cut, which
// consumes one index for the snapshot record.
//
// Segments hold entry records only. A snapshot is a file
//
//	<index>.snap
//
// (16 lower-case hex digits: the index of the last record it covers),
// created as <name>.tmp, fsynced, renamed into place and the directory
// fsynced. Its header (32 bytes):
//
//	off size field
//	  0    8 magic "weftsnp\x00"
//	  8    2 version, 1
//	 10    6 reserved, zero
//	 16    8 index
//	 24    4 reserved, zero
//	 28    4 CRC32C of bytes 0..27
//
// then frames as in segments, chained from the header's CRC: data frames
// (type 2) of at most 1 MiB each, whose payloads concatenated are the
// snapshot, and one end frame (type 3) whose 8-byte payload counts the
// snapshot's bytes; the file ends there. Recovery starts from the latest
// snapshot (verified whole first; any damage is corruption, since it was
// fsynced before its rename) and the last segment holding the record after
// its index (earlier segments and snapshots are obsolete and deleted) or,
// if there is none, at segment 0, which must have first index 1 and seed 0.
// A segment header with flag bit 0 set is a snapshot segment of the format
// before snapshot files; such a log is refused.
//
// # Recovery
//
// Open verifies each segment's header against its name, the continuity of
// seq, first index and chain seed between consecutive segments, and every
// frame's length bounds, type, reserved bytes, padding and CRC. The rules:
//
//   - A segment other than the last was fdatasynced before the next one was
//     created, so any damage in it is corruption: Open fails with a
//     *CorruptError (ErrCorrupt) naming the segment and the frame's offset.
//   - A segment header is synced before the segment is renamed into place,
//     so a bad header is corruption too, in any segment; so is a snapshot
//     file that does not verify, or a log that ends before its index.
//   - In the last segment, the first frame that does not verify, or
//     nonzero bytes after the end marker, are taken to be a torn write: Open
//     truncates the segment there, preallocates it again (zeros) and syncs
//     it, and reports the cut with Repaired. This also discards damage to
//     synced records in the last segment, which cannot be told apart from
//     a torn write without a second copy; like etcd, the log trusts the
//     disk not to corrupt synced data silently.
//
// Rollover: when an appended record would take the current segment past
// SegmentSize (and the segment already holds a record), Sync writes the
// records that fit, fdatasyncs the segment, creates the next one (tmp,
// preallocate, header, fdatasync, rename, directory fsync) and writes the
// rest there.
package wal
