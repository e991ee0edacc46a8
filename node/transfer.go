package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

// Application state transfer (issue #12 item 2; docs/rsm.md).
//
// When the core installs a SNAPSHOT (amcast.Delivery.Install: its
// delivered prefix jumped to a point P, because its group collected what
// it had not delivered), the service's state no longer follows the
// deliveries: it needs the state of a member that applied at least to P.
// The node then:
//
//  1. stops applying (the deliveries it makes meanwhile are in its log),
//     and asks a member of its group (its leader first, then each other in
//     turn when one does not answer within transferRetry) for its
//     application snapshot, chunk by chunk (APP_SNAPSHOT_REQUEST; a chunk
//     of at most wire.MaxAppChunk bytes per request, so a large state
//     streams without a burst and nothing holds it in memory);
//  2. the member writes its rsm snapshot, taken at its applied gts S >= P,
//     to DataDir/rsm.serve (one at a time; a request for another point
//     replaces it) and answers each request with the chunk asked for;
//  3. the node writes the chunks to DataDir/rsm.transfer, and with the
//     last one fsyncs it and renames it to DataDir/rsm.snapshot (the
//     service's own snapshot file), restores the state machine from it and
//     replays the deliveries its log holds above S. Until then it does not
//     compact its log (the replay needs those records).
//
// A node that restarts in the middle finds a REC_INSTALL in its log above
// its service's snapshot and starts again at step 1.
const (
	transferFile  = "rsm.transfer"
	serveFile     = "rsm.serve"
	transferRetry = 2 * time.Second
)

// appTransfer is a fetch in progress (the requesting side).
type appTransfer struct {
	point  wire.Timestamp // the state must reach it (the install point)
	from   wire.ProcID    // the member asked
	tries  int            // members asked so far (rotates through the group)
	snap   wire.Timestamp // the member's snapshot being fetched (zero: none yet)
	offset uint64
	total  uint64
	f      vfs.File // DataDir/rsm.transfer, open while chunks arrive
	asked  time.Time
	// forVotes: started because a held entry's votes could not be had
	// (votes.go); called off if they come meanwhile.
	forVotes bool
}

// appServe is the snapshot file a member serves (the answering side).
type appServe struct {
	snap wire.Timestamp
	size uint64
}

// startTransfer begins (or moves to a later point) the fetch of the
// application state after an install at point.
func (n *Node) startTransfer(point wire.Timestamp) {
	s := n.svc
	if x := s.xfer; x != nil && !x.point.Less(point) {
		return
	}
	if s.xfer != nil && s.xfer.f != nil {
		s.xfer.f.Close()
	}
	s.xfer = &appTransfer{point: point}
	n.stats.StateTransfers++
	n.log.Warn("state transfer: this member's core installed a snapshot of its group's delivered prefix (the group collected what it had not delivered); "+
		"fetching the application state from a member", "point", point)
	n.askTransfer()
}

// startVoteTransfer begins the fetch of the application state past point,
// the gts of a held entry whose votes could not be had (votes.go).
func (n *Node) startVoteTransfer(point wire.Timestamp) {
	s := n.svc
	if s.xfer != nil {
		return
	}
	s.xfer = &appTransfer{point: point, forVotes: true}
	n.stats.StateTransfers++
	n.askTransfer()
}

// cancelVoteTransfer calls off a fetch started for votes that came after
// all: the service applies again, from the deliveries the log kept while
// it waited.
func (n *Node) cancelVoteTransfer() {
	s := n.svc
	if s.xfer.f != nil {
		s.xfer.f.Close()
	}
	s.xfer = nil
	if err := n.replayLog(); err != nil {
		s.failed = fmt.Errorf("%w: replaying the log after a state transfer was called off: %w", errServiceFailed, err)
		return
	}
	n.stats.Votes.CalledOff++
	n.log.Info("state transfer called off: the votes came", "applied_gts", s.d.Applied())
}

// askTransfer sends the next request of the fetch, to the member asked, or
// to the next one when starting over.
func (n *Node) askTransfer() {
	x := n.svc.xfer
	if x.from == 0 || x.snap.IsZero() {
		x.from = n.transferSource(x.tries)
		x.tries++
	}
	x.asked = time.Now()
	n.tr.Send(x.from, &wire.AppSnapRequest{Point: x.point, Snap: x.snap, Offset: x.offset})
}

// transferSource picks the member to ask on the k-th try: the leader the
// core follows first, then the other members in group order.
func (n *Node) transferSource(k int) wire.ProcID {
	_, cb := n.m.ballots() // a ballot of this group: its leader is a member
	var order []wire.ProcID
	if l := cb.Leader(); l != n.cfg.ID {
		order = append(order, l)
	}
	for _, q := range n.cfg.Topology.Members(n.group) {
		if q != n.cfg.ID && q != cb.Leader() {
			order = append(order, q)
		}
	}
	if len(order) == 0 {
		return n.cfg.ID
	}
	return order[k%len(order)]
}

// tickTransfer re-asks when the member asked has not answered in time
// (down, partitioned, or not yet applied far enough): the next member.
func (n *Node) tickTransfer() {
	if n.svc == nil {
		return
	}
	if p := n.svc.pendingInstall; !p.IsZero() {
		n.svc.pendingInstall = wire.Timestamp{}
		n.startTransfer(p)
		return
	}
	x := n.svc.xfer
	if x == nil || time.Since(x.asked) < transferRetry {
		return
	}
	x.snap, x.offset, x.total = wire.Timestamp{}, 0, 0
	n.askTransfer()
}

// transferring reports whether the service waits for a state transfer (it
// applies nothing and the log is not compacted meanwhile).
func (n *Node) transferring() bool {
	return n.svc != nil && (n.svc.xfer != nil || !n.svc.pendingInstall.IsZero())
}

// stepTransfer handles APP_SNAPSHOT_REQUEST and APP_SNAPSHOT_CHUNK from a
// member of the group; anything else of theirs is refused.
func (n *Node) stepTransfer(env wire.Envelope) {
	if g, ok := n.cfg.Topology.GroupOf(env.From); !ok || g != n.group || env.From == n.cfg.ID || n.svc == nil {
		n.stats.StepErrors++
		n.log.Debug("refused a state transfer message", "from", uint32(env.From), "msg", wire.Describe(env.Msg))
		return
	}
	var err error
	switch m := env.Msg.(type) {
	case *wire.AppSnapRequest:
		err = n.serveTransfer(env.From, m)
	case *wire.AppSnapChunk:
		err = n.takeChunk(env.From, m)
	}
	if err != nil {
		n.log.Warn("state transfer", "peer", uint32(env.From), "err", err)
	}
}

// serveTransfer answers a member's request with a chunk of this member's
// application snapshot, taken now if the request names no snapshot or
// another one. A member that has not applied up to the point, or is
// fetching its own state, does not answer (the requester asks another).
func (n *Node) serveTransfer(from wire.ProcID, r *wire.AppSnapRequest) error {
	s := n.svc
	if n.transferring() || s.d.Applied().Less(r.Point) {
		return nil
	}
	path := filepath.Join(n.cfg.DataDir, serveFile)
	if r.Snap.IsZero() || s.serve == nil || s.serve.snap != r.Snap {
		size, err := n.writeServiceSnapshot(path)
		if err != nil {
			return err
		}
		s.serve = &appServe{snap: s.d.Applied(), size: size}
		r = &wire.AppSnapRequest{Point: r.Point, Snap: s.serve.snap}
	}
	if r.Offset > s.serve.size {
		return fmt.Errorf("a request for offset %d of a %d-byte snapshot", r.Offset, s.serve.size)
	}
	f, err := s.fs.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, min(uint64(wire.MaxAppChunk), s.serve.size-r.Offset))
	if _, err := f.ReadAt(buf, int64(r.Offset)); err != nil && !(errors.Is(err, io.EOF) && len(buf) == 0) {
		return err
	}
	n.stats.TransferChunksServed++
	return n.tr.Send(from, &wire.AppSnapChunk{Snap: s.serve.snap, Offset: r.Offset, Total: s.serve.size, Data: buf})
}

// takeChunk writes a chunk of the fetch and asks for the next, or finishes.
func (n *Node) takeChunk(from wire.ProcID, c *wire.AppSnapChunk) error {
	x := n.svc.xfer
	if x == nil || from != x.from {
		return nil // not asked (any more)
	}
	if c.Snap.Less(x.point) {
		return fmt.Errorf("a snapshot at %s, below the install point %s", c.Snap, x.point)
	}
	if c.Offset == 0 && c.Snap != x.snap {
		// A new snapshot (the first chunk, or the member replaced it).
		if x.f != nil {
			x.f.Close()
		}
		f, err := n.svc.fs.Create(filepath.Join(n.cfg.DataDir, transferFile))
		if err != nil {
			return err
		}
		x.f, x.snap, x.offset, x.total = f, c.Snap, 0, c.Total
	}
	if c.Snap != x.snap || c.Offset != x.offset || c.Total != x.total || c.Offset+uint64(len(c.Data)) > c.Total ||
		(len(c.Data) == 0 && c.Offset < c.Total) {
		return nil // out of order or stale: the retry timer asks again
	}
	if _, err := x.f.Write(c.Data); err != nil {
		return err
	}
	x.offset += uint64(len(c.Data))
	n.stats.TransferBytes += uint64(len(c.Data))
	if x.offset < x.total {
		n.askTransfer()
		return nil
	}
	return n.finishTransfer()
}

// finishTransfer makes the fetched snapshot the service's, restores the
// state machine from it and replays the log's deliveries above it.
func (n *Node) finishTransfer() error {
	s := n.svc
	x := s.xfer
	err := x.f.Sync()
	if cerr := x.f.Close(); err == nil {
		err = cerr
	}
	x.f = nil
	if err == nil {
		err = s.fs.Rename(filepath.Join(n.cfg.DataDir, transferFile), s.path)
	}
	if err == nil {
		err = vfs.SyncDir(s.fs, n.cfg.DataDir)
	}
	if err != nil {
		return fmt.Errorf("%w: keeping the fetched snapshot: %w", errServiceFailed, err)
	}
	s.xfer = nil
	if err := n.restoreService(); err != nil {
		return fmt.Errorf("%w: %w", errServiceFailed, err)
	}
	n.afterApply() // replies and votes the replay released (votes.go)
	n.log.Info("state transfer done: restored the state machine from a member's snapshot and replayed the log above it",
		"snapshot_gts", x.snap, "bytes", x.total, "applied_gts", s.d.Applied())
	return nil
}

// restoreService rebuilds the state machine from DataDir/rsm.snapshot and
// the deliveries the log holds above it; they must reach the core's last
// delivery.
func (n *Node) restoreService() error {
	s := n.svc
	f, err := s.fs.Open(s.path)
	if err != nil {
		return err
	}
	err = s.d.Restore(bufio.NewReaderSize(f, 64<<10))
	f.Close()
	if err != nil {
		return fmt.Errorf("restoring the state machine from %s: %w", s.path, err)
	}
	return n.replayLog()
}

// replayLog hands the state machine the deliveries the log holds above
// what it received; they must reach the core's last delivery.
func (n *Node) replayLog() error {
	s := n.svc
	recs, _, err := restoreSnapshot(n.w)
	if err != nil {
		return err
	}
	msgs, err := n.w.ReadMessages()
	if err != nil {
		return err
	}
	var entries []rsm.Entry
	for _, r := range durableDeliveries(append(recs, msgs...)) {
		if s.d.Received().Less(r.GTS) {
			entries = append(entries, rsm.EntryOf(&r.M, r.GTS))
		}
	}
	if err := s.d.Apply(entries); err != nil {
		return err
	}
	if last := n.m.maxDelivered(); s.d.Received().Less(last) {
		return errors.New("the state and the log's deliveries above it do not reach the last delivery " + last.String())
	}
	return nil
}

// writeServiceSnapshot writes the state machine's snapshot to path and
// returns its size.
func (n *Node) writeServiceSnapshot(path string) (uint64, error) {
	s := n.svc
	f, err := s.fs.Create(path)
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: f}
	bw := bufio.NewWriterSize(cw, 64<<10)
	err = s.d.Snapshot(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n uint64
}

func (c *countWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n += uint64(k)
	return k, err
}

// installPoint is the point of the last install the log records (the last
// page of a REC_INSTALL), or zero.
func installPoint(recs []wire.Message) wire.Timestamp {
	var p wire.Timestamp
	for _, r := range recs {
		if in, ok := r.(*wire.RecInstall); ok && !in.More {
			p = wire.MaxTS(p, in.Image.MaxDelivered)
		}
	}
	return p
}
