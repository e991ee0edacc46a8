package node

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

// The replicated service (Config.StateMachine; package rsm, docs/rsm.md).
//
// The node hands each Ready's deliveries to the rsm.Driver after they are
// durable (the contract's step 3), then answers clients with the results:
//
//   - the core's DELIVERED replies (from its group's leader, the designated
//     replier: the message's first destination group) are held back from
//     the Ready's sends until the deliveries are applied, and carry the
//     result then; the node's other messages go out first, as before;
//   - the leader of every other destination group answers too, with its
//     own group's result (the core does not: without a service one reply
//     per message is enough), so a client can wait for every group's
//     result (client.Config.AllGroups); a retried MULTICAST of a message
//     this group applied is answered the same way (handleRetry);
//   - a result the driver no longer holds (forgotten past its bounds) is
//     answered without one (wire.Delivered.HasResult false).
//
// The application's snapshot is written next to the WAL
// (DataDir/rsm.snapshot, atomically: temporary file, fsync, rename, fsync
// of the directory) when a compaction starts, before the WAL's snapshot
// index is fixed: every delivery the compaction drops from the log is then
// in the application's snapshot (the log is never cut below it). On start
// the node restores that snapshot and replays the deliveries the log holds
// above its gts; if the log's last delivery is not reached that way (a
// delivery the log no longer holds and the snapshot lacks), the node
// refuses to start rather than run a state that skipped a delivery.
const serviceSnapshotFile = "rsm.snapshot"

// errServiceFailed wraps the error of a state machine that failed (its
// Apply returned an error, or a result over rsm.Config.MaxResult): the
// node stops (Node.Err).
var errServiceFailed = errors.New("node: the state machine failed")

type service struct {
	d    *rsm.Driver
	fs   vfs.FS
	path string
	// held are the DELIVERED replies of the current Ready, sent once its
	// deliveries are applied.
	held    []wire.Envelope
	entries []rsm.Entry
	// Replayed counts the deliveries applied from the log on start.
	replayed int
	// State transfer (transfer.go): a fetch in progress, the snapshot
	// served to members, and an install found in the log on start.
	xfer           *appTransfer
	serve          *appServe
	pendingInstall wire.Timestamp
	// The vote exchange (votes.go): the wait in progress, and this
	// leader's own replies held until their entries are applied.
	wait voteWait
	own  []ownReply
	// applied is what each replica last reported it applied (APPLIED,
	// votes.go); appliedSent when this replica last reported its own.
	applied     map[wire.ProcID]wire.Timestamp
	appliedSent time.Time
	// failed is a failure outside a Ready (a replay after a transfer was
	// called off): the node stops at its next Ready.
	failed error
}

// ownReply is a reply this group's leader owes a client (replyOwn) once
// the entry is applied.
type ownReply struct {
	id  wire.MsgID
	gts wire.Timestamp
}

// serviceFloor is the gts up to which the log's snapshot records (snap)
// may no longer hold every delivery in full: WbCast's REC_SNAPSHOT keeps
// only the delivered messages not yet collected, below its MaxDelivered;
// the Paxos-based stores keep every delivery, but without its payload. The
// state machine's snapshot must reach it: only the records after the log's
// snapshot replay deliveries in full.
func serviceFloor(snap []wire.Message) wire.Timestamp {
	var f wire.Timestamp
	for _, r := range snap {
		switch r := r.(type) {
		case *wire.RecSnapshot:
			f = wire.MaxTS(f, r.MaxDelivered)
		case *wire.RecDelivered:
			f = wire.MaxTS(f, r.GTS)
		}
	}
	return f
}

// openService restores the state machine from its snapshot and the log's
// deliveries (durable, in log order); floor is serviceFloor of the log's
// snapshot.
func (n *Node) openService(durable []*wire.RecDelivered, floor, install wire.Timestamp, amnesiac bool) error {
	cfg := &n.cfg
	rcfg := cfg.RSM
	rcfg.Group = n.group
	d, err := rsm.NewDriver(cfg.StateMachine, rcfg)
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	s := &service{d: d, fs: cfg.FS, path: filepath.Join(cfg.DataDir, serviceSnapshotFile)}
	n.svc = s
	if amnesiac && install.IsZero() {
		return nil // nothing delivered yet: its state comes with its first install (transfer.go)
	}
	f, err := cfg.FS.Open(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("node: opening the state machine's snapshot: %w", err)
	default:
		err = d.Restore(bufio.NewReaderSize(f, 64<<10))
		f.Close()
		if err != nil {
			return fmt.Errorf("node: restoring the state machine from %s: %w", s.path, err)
		}
	}
	// Received, not Applied: the snapshot also holds the entries waiting
	// for other groups' votes (rsm/exchange.go).
	from, restored := d.Received(), d.Stats().Applied
	if from.Less(install) {
		// The core installed a snapshot this state does not reach: fetch a
		// member's (transfer.go) and replay the log above it then.
		s.pendingInstall = install
		n.log.Warn("the state machine's snapshot is below the log's last install: it will be fetched from a member", "snapshot_gts", from, "install", install)
		return nil
	}
	if from.Less(floor) {
		return fmt.Errorf("node: the state machine's state (snapshot at gts %s) does not reach the log's last delivery: the log's snapshot no longer holds "+
			"the deliveries up to %s in full (was %s lost or written by another run, or the service added to a data directory that delivered without one?); "+
			"the member cannot rebuild its state (state transfer is issue #12 item 2)", from, floor, s.path)
	}
	entries := make([]rsm.Entry, 0, len(durable))
	for _, r := range durable {
		entries = append(entries, rsm.EntryOf(&r.M, r.GTS))
	}
	slices.SortFunc(entries, func(a, b rsm.Entry) int {
		switch {
		case a.GTS.Less(b.GTS):
			return -1
		case b.GTS.Less(a.GTS):
			return 1
		}
		return 0
	})
	if err := d.Apply(entries); err != nil {
		return fmt.Errorf("node: replaying the log into the state machine: %w", err)
	}
	s.replayed = int(d.Stats().Applied - restored)
	if last := n.m.maxDelivered(); d.Received() != last {
		return fmt.Errorf("node: the state machine's state (snapshot at gts %s, replayed up to %s) does not reach the log's last delivery %s: "+
			"deliveries in between are in neither the application's snapshot nor the log (was %s written by another run, or the service "+
			"added to a data directory that delivered without one?); the member cannot rebuild its state (state transfer is issue #12 item 2)",
			from, d.Received(), last, s.path)
	}
	if from != (wire.Timestamp{}) || s.replayed > 0 {
		n.log.Info("restored the state machine", "snapshot_gts", from, "replayed", s.replayed, "applied_gts", d.Applied())
	}
	return nil
}

// holdReply reports whether env is a DELIVERED reply to hold until the
// Ready's deliveries are applied (and holds it).
func (s *service) holdReply(env wire.Envelope) bool {
	if s == nil {
		return false
	}
	if _, ok := env.Msg.(*wire.Delivered); !ok {
		return false
	}
	s.held = append(s.held, env)
	return true
}

// applyService hands one Ready's deliveries to the state machine and sends the
// replies: the held ones with their results, and this group's own when it
// is not the designated replier and this node leads it.
func (n *Node) applyService(ds []amcast.Delivery) error {
	s := n.svc
	s.entries = s.entries[:0]
	for i := range ds {
		if ds[i].Install {
			n.startTransfer(ds[i].GTS) // transfer.go
			s.entries = s.entries[:0]
			continue
		}
		s.entries = append(s.entries, rsm.EntryOf(&ds[i].M, ds[i].GTS))
	}
	if !n.transferring() { // else the log holds them for the replay
		if err := s.d.Apply(s.entries); err != nil {
			return fmt.Errorf("%w: %w", errServiceFailed, err)
		}
	}
	clear(s.entries)
	if n.m.leader() {
		for i := range ds {
			if m := &ds[i].M; !ds[i].Install && n.owesReply(m) {
				s.own = append(s.own, ownReply{id: m.ID, gts: ds[i].GTS})
			}
		}
	}
	n.afterApply() // votes.go
	return nil
}

// flushReplies sends the replies whose entries are applied: the held
// DELIVEREDs with their results, and this leader's own replies. An entry
// held for other groups' votes keeps its replies until it is applied.
func (n *Node) flushReplies() {
	s := n.svc
	applied := s.d.Applied()
	kept := s.held[:0]
	for _, env := range s.held {
		d := *env.Msg.(*wire.Delivered)
		// A retry of a collected message is answered with gts zero (the
		// core no longer knows it), possibly while the entry is still
		// held here: it too waits for its result.
		if !d.GTS.LessEq(applied) || s.d.Holds(d.ID) {
			kept = append(kept, env)
			continue
		}
		d.Result, d.HasResult = s.d.Result(d.ID)
		n.sendCounted(env.To, &d)
	}
	clear(s.held[len(kept):])
	s.held = kept
	if len(s.own) == 0 {
		return
	}
	leader := n.m.leader()
	keep := s.own[:0]
	for _, o := range s.own {
		switch {
		case !o.gts.LessEq(applied):
			keep = append(keep, o)
		case leader: // else the new leader answers the client's retry
			n.replyOwn(o.id, o.gts)
		}
	}
	clear(s.own[len(keep):])
	s.own = keep
}

// owesReply reports whether this group's leader answers m's client with its
// own result: m goes to this group and others, and this group is not the
// designated replier (whose answer the core sends).
func (n *Node) owesReply(m *wire.AppMsg) bool {
	return len(m.Dest) >= 2 && m.Dest[0] != n.group && m.DestIndex(n.group) >= 0 && !n.cfg.Topology.IsReplica(m.ID.Client)
}

// replyOwn answers message id's client with this group's result (the
// caller checked owesReply).
func (n *Node) replyOwn(id wire.MsgID, gts wire.Timestamp) {
	res, ok := n.svc.d.Result(id)
	n.sendCounted(id.Client, &wire.Delivered{ID: id, G: n.group, GTS: gts, Leader: n.cfg.ID, HasResult: ok, Result: res})
}

// handleRetry answers a client's MULTICAST of a message this group already
// applied, when this group is not its designated replier (the core answers
// for that one): the leader replies with the result it holds.
func (n *Node) handleRetry(env wire.Envelope) {
	mc, ok := env.Msg.(*wire.Multicast)
	if n.svc == nil || !ok || !n.m.leader() || env.From != mc.M.ID.Client {
		return
	}
	if _, applied := n.svc.d.Result(mc.M.ID); !applied || !n.owesReply(&mc.M) {
		return
	}
	// The gts is not kept with the result: zero means "delivered; the
	// timestamp is not remembered", as for a collected message (wire.Delivered).
	n.replyOwn(mc.M.ID, wire.Timestamp{})
}

// sendCounted sends msg to a client, counting it like the Ready's sends.
func (n *Node) sendCounted(to wire.ProcID, msg wire.Message) {
	n.stats.Sent++
	if err := n.out.Send(to, msg); err != nil {
		n.stats.SendErrors++
	}
}

// snapshotService writes the state machine's snapshot (see the top of this
// file). It runs on the loop, between two Readies: a delivery boundary.
func (n *Node) snapshotService() error {
	s := n.svc
	tmp := s.path + ".tmp"
	f, err := s.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("node: state machine snapshot: %w", err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	err = s.d.Snapshot(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.fs.Rename(tmp, s.path)
	}
	if err == nil {
		err = vfs.SyncDir(s.fs, filepath.Dir(s.path))
	}
	if err != nil {
		return fmt.Errorf("node: state machine snapshot %s: %w", s.path, err)
	}
	n.stats.ServiceSnapshots++
	return nil
}
