package wal

import (
	"time"

	"github.com/weft-dev/weft/storage/vfs"
)

// Options.RawSync's syncs, and what they do while the disk is slow.
//
// A raw fdatasync keeps the caller's thread and P until the disk answers
// (vfs.SyncHolding): in an agent at GOMAXPROCS 1 nothing else in the
// process runs meanwhile. That is the point while a sync takes a fraction
// of a millisecond (docs/durability.md, "The sync keeps the thread"), and
// a liability while the disk stalls: the agent's admin endpoint could not
// show the stall it is in. So a raw sync that takes longer than
// rawSyncSlow pauses them: the log syncs the ordinary way, during which
// the runtime runs the process's other goroutines, until an ordinary sync
// returns within rawSyncSlow again. The first slow sync still holds the
// thread; after it the process answers for as long as the disk stays
// slow.

// rawSyncSlow is the sync time past which raw syncs pause: about a
// hundred times what one takes on an idle disk here (docs/durability.md),
// and below the tens of milliseconds after which a frozen process is
// noticed.
const rawSyncSlow = 20 * time.Millisecond

// rawSync is the state of a log's raw syncs.
type rawSync struct {
	paused bool
	pauses uint64               // times a slow raw sync paused them
	hold   func(vfs.File) error // vfs.SyncHolding, set by Open (tests replace it)
	now    func() time.Time     // time.Now, set by Open (tests replace it)
}

// sync fdatasyncs f: raw unless paused, then pauses or resumes by how
// long it took.
func (r *rawSync) sync(f vfs.File) error {
	start := r.now()
	var err error
	if r.paused {
		err = f.Sync()
	} else {
		err = r.hold(f)
	}
	slow := r.now().Sub(start) > rawSyncSlow
	switch {
	case slow && !r.paused:
		r.paused = true
		r.pauses++
	case !slow && r.paused:
		r.paused = false
	}
	return err
}

// RawSyncPauses is the number of times a raw sync took so long that the
// log went back to ordinary syncs for a while (Options.RawSync).
func (w *WAL) RawSyncPauses() uint64 { return w.raw.pauses }
