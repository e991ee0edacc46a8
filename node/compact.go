package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/weft-dev/weft/storage/wal"
	"github.com/weft-dev/weft/wire"
)

// Log compaction, off the loop.
//
// A compaction writes the protocol's durable image (what the records
// persisted so far built) as a snapshot in place of the log. A WbCast
// process keeps that image itself (wbcast.Image: no second copy of the
// state, and none of the map updates that kept one, about a fifth of a
// loaded agent's throughput; docs/batching.md); for the other protocols
// the node mirrors every record it makes durable into the protocol's
// store (the process itself does not use it). When the log has grown by
// Config.CompactBytes since the last compaction began (and by
// compactRatio times the last snapshot), the loop starts one:
//
//  1. on the loop: the image is taken (a WbCast image is frozen, in time
//     proportional to the messages in flight and the client sessions, not
//     to the collected ids; a store is handed over whole), the deliveries
//     log is fsynced (the deliveries the cut drops from the WAL must be
//     durable there first), and wal.BeginSnapshot fixes the snapshot's
//     index (the log is already synced: compaction starts after a Ready)
//     and makes the next record start a new segment. No other I/O;
//  2. on a goroutine: the image is turned into records (its snapshot),
//     encoded (image.go) and written to the snapshot file,
//     which is fsynced; each record is decoded as it is encoded and the
//     records are replayed into a scratch store; only a snapshot that
//     restores, to a store holding as many messages as the image, is
//     committed (renamed into place). The loop meanwhile keeps stepping,
//     ticking, heartbeating and syncing; with a mirrored store, the
//     records it makes durable are kept aside, not mirrored, since the
//     goroutine owns the store. The goroutine yields (runtime.Gosched)
//     after every page it encodes and checks (imagePageBudget bytes): an
//     agent runs at GOMAXPROCS=1, and Go's scheduler takes the only P
//     from a goroutine that does not block only after 10 ms, so the loop
//     and the readers waited up to that long for each slice of a
//     compaction (the network is not even polled meanwhile), the top of
//     a loaded agent's latency (docs/batching.md, "A compaction that
//     lets the loop run");
//  3. on the loop again: the records kept aside are applied to the store,
//     and wal.ReleaseSnapshotLater releases the segments the snapshot
//     replaced, which another goroutine deletes.
//
// A compaction that fails (a write or sync error of the snapshot, or a
// snapshot that does not restore) is given up: the node keeps its log,
// logs the error, counts it (Stats.CompactionErrors) and tries again after
// another CompactBytes. Only the log's own failures stop the node.
type compaction struct {
	sw       *wal.SnapshotWriter
	img      coreImage      // read by the goroutine until it reports
	st       coreStore      // the mirrored store, when img is it: owned by the goroutine
	deferred []wire.Message // records made durable meanwhile, for st
	cancel   chan struct{}  // closed when the node stops
	// yield, if set, is called after every imagePageBudget bytes encoded
	// and checked: runtime.Gosched (see step 2 above).
	yield     func()
	unyielded int // bytes encoded since the last yield
	start     time.Time
	replaced  int64 // bytes of records the snapshot covers, since the last one

	// Set by the goroutine before it reports.
	size     int64
	disabled bool // the protocol's store cannot produce a snapshot
}

// mirror applies records just written to the store, or keeps them aside
// while a compaction owns it; a machine that keeps its own image has no
// store. They are durable before a compaction snapshots the store: one
// starts only once every record written is synced (maybeCompact runs
// after a sync and waits while deferred Readys are held, pipeline.go).
func (n *Node) mirror(recs []wire.Message) error {
	st := n.m.store()
	for _, r := range recs {
		n.pagesOpen = pagesOpen(r)
		if st == nil {
			continue
		}
		if c := n.compaction; c != nil && c.st != nil {
			c.deferred = append(c.deferred, r)
			continue
		}
		if err := st.Apply(r); err != nil {
			return fmt.Errorf("node: mirroring a persisted record: %w", err)
		}
	}
	return nil
}

// compactRatio: a compaction starts only once the log has grown by this
// many times the last snapshot's size, so the snapshots written (and read
// back, decoded and restored to check them) are at most 1/compactRatio of
// the bytes logged.
const compactRatio = 4

// compactSpread: each compaction waits for up to this fraction more log
// than compactThreshold asks, drawn anew for each one. The replicas of a
// group log the same records, so without it they all compact at once, and
// so did every agent of a benchmark: a wave every few seconds in which
// the nine agents' compactions took the machine's CPU for 0.3 to 0.6 s
// and the latency's p99 per 100 ms rose from about 10 ms to 60-190 ms
// (docs/batching.md). Spread, a group's compactions mostly come one at a
// time, and a quorum without the compacting member keeps its pace.
const compactSpread = 0.5

// newCompactRand is the source of a node's compactJitter, seeded by its
// id: replicas draw differently, a node the same way in every run.
func newCompactRand(id wire.ProcID) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(id), 0x636f6d70616374))
}

// drawCompactJitter draws the spread of the next compaction's threshold.
func (n *Node) drawCompactJitter() { n.compactJitter = compactSpread * n.compactRand.Float64() }

// compactThreshold is the log growth at which the next compaction starts.
func (n *Node) compactThreshold() int64 {
	base := max(n.cfg.CompactBytes, compactRatio*n.lastSnapshot)
	return base + int64(float64(base)*n.compactJitter)
}

// maybeCompact starts a compaction when the log has grown enough, and not
// in the middle of a state adopted in pages.
func (n *Node) maybeCompact() error {
	if !n.compactDue() || (n.pipe != nil && n.pipe.Len() > 0) {
		return nil // nor while deferred Readys wait for their sync (pipeline.go)
	}
	n.drawCompactJitter()
	return n.startCompaction()
}

// compactDue reports whether a compaction should start now.
func (n *Node) compactDue() bool {
	return n.cfg.CompactBytes > 0 && n.compaction == nil && !n.pagesOpen && !n.transferring() && n.sinceCut >= n.compactThreshold()
}

// pagesOpen says whether, after record r, the store holds the first pages
// of a state adopted in pages (REC_NEW_STATE with More) and waits for the
// rest. A store applies such a state only
// at its last page and a snapshot cannot carry the pages before it (WbCast's
// Store.Snapshot is the applied image): a snapshot taken between the pages
// would be followed in the log by pages that no longer follow anything, and
// the node could not restart. Like the store, any other record ends the set.
func pagesOpen(r wire.Message) bool {
	ns, ok := r.(*wire.RecNewState)
	if !ok {
		return false
	}
	return ns.More
}

// startCompaction is step 1. An error it returns stops the node.
func (n *Node) startCompaction() error {
	if n.compaction != nil {
		return nil
	}
	// The image first, before anything else can change it: the state as of
	// the cut (everything returned so far is durable).
	st := n.m.store()
	var img coreImage = st
	if st == nil {
		var ok bool
		if img, ok = n.m.image(); !ok {
			n.sinceCut = 0 // nothing to compact now: try again after another CompactBytes
			return nil
		}
	}
	if n.dlog != nil {
		if err := n.dlog.sync(); err != nil {
			return err
		}
	}
	// The state machine's snapshot first: the deliveries the cut drops
	// from the WAL must be in it (service.go). If it cannot be written the
	// log is kept, as for any failed compaction.
	if n.svc != nil {
		if err := n.snapshotService(); err != nil {
			n.stats.CompactionErrors++
			n.sinceCut = 0 // try again after another CompactBytes
			n.log.Error("compaction not started: the state machine's snapshot failed; keeping the log", "err", err)
			return nil
		}
	}
	sw, err := n.w.BeginSnapshot()
	if err != nil {
		return err // the log's sync failed: sticky
	}
	c := &compaction{sw: sw, img: img, st: st, cancel: make(chan struct{}), yield: runtime.Gosched, start: time.Now(), replaced: n.sinceCut}
	n.compaction = c
	n.sinceCut = 0
	go func() { n.compactDone <- n.writeCompaction(c) }()
	return nil
}

// errCompactionCanceled ends a compaction when the node stops.
var errCompactionCanceled = errors.New("node: compaction canceled: the node is stopping")

// cancelWriter fails writes once cancel is closed.
type cancelWriter struct {
	w      io.Writer
	cancel chan struct{}
}

func (c cancelWriter) Write(p []byte) (int, error) {
	select {
	case <-c.cancel:
		return 0, errCompactionCanceled
	default:
	}
	return c.w.Write(p)
}

// writeCompaction is step 2, on its own goroutine: it may touch only c.
func (n *Node) writeCompaction(c *compaction) error {
	// The check: each record is decoded as soon as it is encoded (the
	// bytes still in the cache), and encoded again from what was decoded:
	// the two encodings must be the same bytes, so what a restart decodes
	// from the file (restoreSnapshot) is what was written, field for
	// field. The messages decoded are counted against the image's. A
	// mirrored store's snapshot is, besides, replayed into a scratch store
	// (restoreSnapshot, then newCore's replayStore), which must hold as
	// many messages as the live one: its records are the store's own
	// transformation (FT-Skeen's log and deliveries). A WbCast image is one
	// REC_SNAPSHOT, streamed page by page (wbcast.Image.Pages, each page
	// checked as it goes) and joined back by the wire codec (whose tests
	// cover it), and the simulator checks the image's snapshot and its
	// streamed pages against the store its records built after every
	// Ready (wbcast.CompareImage): replaying it too built a second copy of
	// every collected id per compaction, to count messages, and held
	// every page decoded until the end. Not checked here: the bytes read
	// back from the page cache through the file's frames (whose checksums
	// wal's tests cover), and building the process (which fails only on
	// its configuration, the live one's). docs/batching.md has the history.
	var (
		back    imageDecoder // a mirrored store's records, for the replay
		again   = make([]byte, 0, pageRoom)
		decoded int              // messages in the REC_SNAPSHOT pages decoded
		ids     []wire.SeqDigest // an image's pages' ids are decoded into this, page after page
	)
	check := func(b []byte, rec wire.Message) error {
		var m wire.Message
		var err error
		if c.st == nil {
			m, ids, err = wire.DecodeReusing(b, ids[:0]) // the page is dropped before the next
		} else {
			m, err = wire.Decode(b) // kept for the replay
		}
		if err != nil {
			return fmt.Errorf("node: the snapshot being written does not decode: %w", err)
		}
		if again = wire.Append(again[:0], m); !bytes.Equal(again, b) {
			return fmt.Errorf("node: the snapshot being written does not decode to what was encoded: a %s of %d bytes decodes to %d", rec.Kind(), len(b), len(again))
		}
		if s, ok := m.(*wire.RecSnapshot); ok {
			decoded += len(s.Msgs)
		}
		if c.unyielded += len(b); c.unyielded >= imagePageBudget && c.yield != nil {
			c.unyielded = 0
			c.yield()
		}
		if c.st != nil {
			return back.addDecoded(m)
		}
		return nil
	}
	sw := newSnapshotWriter(cancelWriter{c.sw, c.cancel}, check)
	ok, err := c.img.snapshot(imagePageBudget, sw.record)
	if err == nil && !ok {
		c.disabled = true
		return nil
	}
	if err == nil {
		err = sw.flush()
	}
	if err != nil {
		return err
	}
	if err := c.sw.Finish(); err != nil {
		return err
	}
	if c.st == nil {
		if want := c.img.messages(); decoded != want {
			return fmt.Errorf("node: the snapshot just written restores %d messages, the image holds %d", decoded, want)
		}
	} else {
		records, err := back.records()
		if err != nil {
			return fmt.Errorf("node: the snapshot just written does not decode: %w", err)
		}
		scratch, err := replayStore(n.proto, records)
		if err != nil {
			return fmt.Errorf("node: the snapshot just written does not restore: %w", err)
		}
		if got, want := scratch.messages(), c.img.messages(); got != want {
			return fmt.Errorf("node: the snapshot just written restores %d messages, the image holds %d", got, want)
		}
	}
	select {
	case <-c.cancel:
		return errCompactionCanceled
	default:
	}
	c.size = c.sw.Size()
	return c.sw.Commit()
}

// finishCompaction is step 3, when the goroutine reported err. An error
// it returns stops the node.
func (n *Node) finishCompaction(err error) error {
	c := n.compaction
	n.compaction = nil
	for _, r := range c.deferred { // none without a mirrored store
		if aerr := c.st.Apply(r); aerr != nil {
			c.sw.Abort()
			return fmt.Errorf("node: mirroring a persisted record: %w", aerr)
		}
	}
	switch {
	case c.disabled:
		c.sw.Abort()
		n.cfg.CompactBytes = -1
		n.log.Info("log compaction disabled: the protocol's store cannot produce a snapshot", "protocol", n.proto.name)
		return nil
	case err != nil:
		c.sw.Abort()
		n.stats.CompactionErrors++
		n.log.Error("compaction failed; keeping the log", "err", err, "snapshot_index", c.sw.Index(), "took", time.Since(c.start))
		return nil
	}
	// The log lets go of the replaced segments and snapshot here; they
	// are deleted on a goroutine: unlinking a 64 MiB segment whose pages
	// are cached took 6 to 29 ms in the kernel on the test machine, a
	// stall of the loop at every compaction that showed in the latency's
	// tail (docs/batching.md).
	obs, err := n.w.ReleaseSnapshotLater(c.sw)
	if err != nil {
		if errors.Is(err, wal.ErrFailed) || errors.Is(err, wal.ErrClosed) {
			return err
		}
		n.log.Warn("compaction: releasing the replaced files failed (deleted at the next start)", "err", err)
	}
	if obs.Len() > 0 {
		n.removals.Add(1)
		go func() {
			defer n.removals.Done()
			if err := obs.Remove(); err != nil {
				n.log.Warn("compaction: deleting replaced files failed (deleted at the next start)", "err", err)
			}
		}()
	}
	n.stats.Compactions++
	n.stats.LastSnapshotBytes = c.size
	n.lastSnapshot = c.size
	n.log.Debug("compacted the log", "snapshot_bytes", c.size, "snapshot_index", c.sw.Index(),
		"replaced_bytes", c.replaced, "records_meanwhile", len(c.deferred), "took", time.Since(c.start))
	return nil
}

// abandonCompaction cancels the compaction in flight, if any, and waits
// for its goroutine and for the deletion of replaced files, when the loop
// stops.
func (n *Node) abandonCompaction() {
	defer n.removals.Wait()
	c := n.compaction
	if c == nil {
		return
	}
	close(c.cancel)
	<-n.compactDone
	c.sw.Abort() // nothing after a commit: the next start recovers from it
	n.compaction = nil
}

// restoreSnapshot reads the log's latest snapshot, if any: its records and
// its size in bytes.
func restoreSnapshot(w *wal.WAL) ([]wire.Message, int64, error) {
	r, err := w.OpenSnapshot()
	if err != nil || r == nil {
		return nil, 0, err
	}
	defer r.Close()
	cr := &countingReader{r: r}
	recs, err := readSnapshot(cr)
	if err != nil {
		idx, _ := w.SnapshotIndex()
		return nil, 0, fmt.Errorf("node: restoring from the snapshot at record %d: %w", idx, err)
	}
	return recs, cr.n, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}
