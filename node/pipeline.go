package node

import (
	"time"

	"github.com/weft-dev/weft/amcast"
)

// The sync off the loop (issue #14; docs/durability.md, "The sync off the
// loop"; amcast/pipeline.go).
//
// With the fsync'd WAL a loaded agent spent most of its loop in its own
// fdatasync (a leader 85-87% of it), stepping nothing meanwhile. So a
// fault-tolerant protocol's node writes each Ready's records at once and
// lets a goroutine of its own sync them (wal.WAL.SyncWritten), while the
// loop steps what arrives and writes the next Readys' records; the next
// sync covers them all. What a Ready releases (the messages that wait for
// its sync, its deliveries, its reads) waits in an amcast.Pipeline until
// the sync that covers its records returns. Unsafe_no_fsync has nothing to
// wait for and keeps the loop's own (unsyncing) path.
//
// Bounds: at most one sync is in flight; the pipeline holds at most
// amcast.PipelineBytes (past it the loop steps nothing until a sync
// returns); and a compaction, which snapshots what has been applied, waits
// until the pipeline is empty, so the loop stops stepping input when one is
// due until the syncs in flight have released everything.

// syncer is the loop's side of the sync goroutine.
type syncer struct {
	kick     chan struct{}   // to the goroutine: sync what is written
	done     chan syncResult // from it
	exited   chan struct{}
	inFlight bool
	started  time.Time
	written  int64 // record bytes written since the last sync began
	syncing  int64 // record bytes the sync in flight covers
}

type syncResult struct {
	idx uint64 // the last record index it made durable
	err error
}

// startPipeline starts the pipeline and its sync goroutine.
func (n *Node) startPipeline() {
	n.pipe = amcast.NewPipeline(n.proto.sendsBeforeSync)
	s := &syncer{kick: make(chan struct{}, 1), done: make(chan syncResult, 1), exited: make(chan struct{})}
	n.syncer = s
	w := n.w
	go func() {
		defer close(s.exited)
		for range s.kick {
			idx, err := w.SyncWritten()
			s.done <- syncResult{idx, err}
		}
	}()
}

// syncDone is the channel the loop waits on for a sync's end (nil, which
// never receives, without a sync goroutine).
func (n *Node) syncDone() <-chan syncResult {
	if n.syncer == nil {
		return nil
	}
	return n.syncer.done
}

// kickSync starts a sync of what is written, unless one is in flight
// (its end starts the next). If everything written is durable already (a
// Ready without records, a roll's or a snapshot's own sync), it releases
// what waits instead.
func (n *Node) kickSync() error {
	s := n.syncer
	if s.inFlight {
		return nil
	}
	if n.w.WrittenIndex() <= n.w.SyncedIndex() {
		return n.release(n.w.SyncedIndex())
	}
	s.inFlight, s.started = true, time.Now()
	s.syncing, s.written = s.written, 0
	s.kick <- struct{}{}
	return nil
}

// synced handles a sync's end: what it made durable is released, in
// order, the next sync starts if more was written meanwhile, and a due
// compaction starts once nothing waits.
func (n *Node) synced(r syncResult) error {
	s := n.syncer
	s.inFlight = false
	if r.err != nil {
		return r.err
	}
	n.met.synced(time.Since(s.started), s.syncing)
	n.stats.Syncs++
	if err := n.release(r.idx); err != nil {
		return err
	}
	if err := n.kickSync(); err != nil || n.pipe.Len() > 0 {
		return err
	}
	return n.maybeCompact()
}

// release does, in order, what the Readys durable up to idx released.
func (n *Node) release(idx uint64) error {
	for _, e := range n.pipe.Release(idx) {
		if err := n.afterSync(e.Messages, e.Deliveries, e.Reads); err != nil {
			return err
		}
	}
	return nil
}

// mustAwaitSync reports whether the loop must wait for the sync in flight
// before it steps more input: the pipeline is full, or a compaction is due
// and waits for it to empty.
func (n *Node) mustAwaitSync() bool {
	return n.syncer != nil && n.syncer.inFlight && (n.pipe.Full() || n.compactDue())
}

// awaitSync waits for the sync in flight to end and handles it.
func (n *Node) awaitSync() error {
	n.stats.SyncWaits++
	return n.synced(<-n.syncer.done)
}

// readyPipelined handles a Ready of a pipelined node: its records are
// written, not synced; what may leave before their sync leaves now, and
// the rest waits in the pipeline for the sync that covers them.
func (n *Node) readyPipelined(rd *amcast.Ready) error {
	if len(rd.Persist) > 0 {
		bytes, err := n.w.AppendMessages(rd.Persist...)
		if err != nil {
			return err
		}
		if err := n.w.Write(); err != nil {
			return err
		}
		n.stats.Records += uint64(len(rd.Persist))
		n.sinceCut += bytes
		n.syncer.written += bytes
		if err := n.mirror(rd.Persist); err != nil {
			return err
		}
	}
	if now := n.pipe.Add(rd, n.w.WrittenIndex()); len(now) > 0 {
		held := n.sendHolding(now)
		n.stats.SentBeforeSync += uint64(len(now) - held)
	}
	n.m.Advance()
	return n.kickSync()
}

// finishPipeline, as the loop ends, waits for the sync in flight and,
// unless storage failed, makes every record written durable and releases
// what waited for them; then the sync goroutine exits.
func (n *Node) finishPipeline(failed bool) {
	s := n.syncer
	if s == nil {
		return
	}
	if s.inFlight {
		if r := <-s.done; r.err != nil {
			failed = true
		}
		s.inFlight = false
	}
	close(s.kick)
	<-s.exited
	if failed || n.pipe.Len() == 0 || n.w.Sync() != nil {
		return
	}
	n.release(n.w.SyncedIndex())
}
