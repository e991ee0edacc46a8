// Package node is weft's real node: it drives one process of an atomic
// multicast protocol (Config.Protocol: WbCast, amcast/wbcast, by default;
// the FT-Skeen, FastCast and Skeen baselines; see core.go) with the
// network (transport), a write-ahead log (storage/wal) and the wall clock.
//
// One goroutine owns the process, and the gossip core when Config.Gossip is
// set (gossip.go). It feeds the process the messages the transport
// receives (through inboxes bounded in messages and bytes, inbox.go: the
// other nodes' protocol messages, served first; clients' MULTICASTs, shed
// with an OVERLOADED answer when full; gossip frames and clients' view
// requests, so a protocol backlog cannot delay them) and a tick every
// Config.Tick, and handles each Ready in the order the amcast contract
// requires:
//
//  1. append Ready.Persist to the WAL and fdatasync once (group commit: when
//     inputs are queued, up to Config.MaxBatch of them are stepped before
//     one Ready, so one sync covers all of them);
//  2. then send Ready.Messages through the transport (one transport.Batch:
//     each peer's share leaves with one write, a message to several
//     members is encoded once);
//  3. then hand Ready.Deliveries to the application: the deliveries log
//     (one write per Ready) and Config.OnDeliver;
//  4. then Advance.
//
// On start the node replays its WAL (the latest snapshot and the records
// after it) into the protocol's store (wbcast.Store, or ftskeen.Store for
// both Paxos-based baselines) and restores the process from it; a node
// whose data directory has no log yet starts fresh. When the log has grown
// by Config.CompactBytes since the last compaction (and by at least four times
// the last snapshot), the node writes a snapshot of the store and cuts
// the log (wal.Cut). Skeen is not fault tolerant: it runs one replica per
// group, persists nothing, and a Skeen node refuses to restart from a data
// directory an earlier run used.
//
// The deliveries log (Config.DeliveryLog, off by default; dlog.go) is what
// test harnesses check after a SIGKILL. A delivery is written there only
// after its record is durable. After a crash between the WAL sync and the
// write, the WAL holds deliveries the file lacks: on restart the node
// writes those (and only those: deliveries are in increasing gts order, so
// the ones above the log's cursor) and hands them to OnDeliver with
// Recovered set.
package node

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/storage/wal"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// sideQueue and sideBytes bound the queue of gossip frames (a few rounds
// of a large cluster's gossip); viewQueue bounds clients' view requests
// (which carry no payload).
const (
	sideQueue = 1024
	sideBytes = 16 << 20
	viewQueue = 256
)

// Node runs one process of Config.Protocol. See the package documentation.
type Node struct {
	cfg     Config
	log     *slog.Logger
	group   wire.GroupID
	proto   *protocolSpec
	m       core     // the process, with its durable image (mirrored to write snapshots)
	lock    *dirLock // the data directory's lock, held until Close
	ident   identity // the data directory's identity
	w       *wal.WAL
	tr      *transport.Transport
	out     *transport.Batch // the loop's sends (ready, replies), flushed once a pass
	sendBuf []wire.Envelope  // scratch for a Ready's messages (send)
	lateIn  []wire.Envelope  // scratch for a Ready's messages sent after its sync (ready)
	lateBuf []wire.Envelope  // afterSync's scratch
	// pipe holds what the Readys whose sync was deferred release once
	// durable (pipeline.go); nil when no sync is deferred (unsafe_no_fsync,
	// or a protocol that lets nothing leave before its sync). unsynced
	// counts the record bytes written since the last sync.
	pipe     *amcast.Pipeline
	unsynced int64
	// self holds the core's messages to itself (a WbCast leader's own
	// ACCEPT_ACK), stepped at the start of the next pass: they leave
	// after their Ready's sync, as every acknowledgement does.
	self    []wire.Envelope
	batcher amcast.Coalescer // send's batching; n.out encodes what it returns at once
	held    amcast.Held      // messages held for the next one to their peer (lazy.go)
	dlog    *deliveryLog
	svc     *service  // the replicated service (service.go); nil without Config.StateMachine
	reads   readQueue // clients' linearizable reads pending (reads.go)
	// The inboxes (inbox.go): protocol messages from nodes, clients'
	// MULTICASTs, the side queue, which carries gossip past the protocol's
	// backlog (a deep inbox must not delay heartbeat arrivals into phi
	// convictions of live members), and clients' view requests (apart, so
	// that clients cannot crowd gossip out).
	inbox, clients, side, views *inbox

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	err      error // set before done is closed

	// Loop-owned counters.
	sinceCut     int64 // bytes appended since the last snapshot began
	lastSnapshot int64
	stats        Stats
	stall        stallWatch // stall.go

	// Compaction (compact.go): the one in flight, if any, and where its
	// goroutine reports.
	cc          coreConfig
	compaction  *compaction
	compactDone chan error
	removals    sync.WaitGroup // deletions of the files compactions replaced
	// compactJitter is the share of compactThreshold the next compaction
	// waits for in addition (compactSpread), from compactRand.
	compactJitter float64
	compactRand   *rand.Rand
	pagesOpen     bool // a paged state's last page is not durable yet

	leaderSince time.Time

	gossip *gossiper       // nil without Config.Gossip
	det    *gossipDetector // gossip's detector, if it is the core's
	ctl    chan func()     // operator requests run on the loop
	dep    *departure      // a planned departure or hand-over (leave.go)

	shares                                                        shares // client inbox messages by client (inbox.go)
	sideDrops, viewDrops, clientShed, clientShedShare, inboxWaits atomic.Uint64

	met *metrics // Prometheus metrics and readiness (metrics.go)

	pid       int // os.Getpid, once: the status is rebuilt often
	published struct {
		role   string
		leader bool
		ballot wire.Ballot
	} // what the last publish saw (changed)
	mu     sync.Mutex
	status Status // the last published (status.go)
}

// New opens the node's log, restores its process and starts it.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger.With("node", uint32(cfg.ID)),
		inbox:   newInbox(cfg.InboxSize, cfg.InboxBytes),
		clients: newInbox(cfg.ClientInboxSize, cfg.ClientInboxBytes),
		side:    newInbox(sideQueue, sideBytes),
		views:   newInbox(viewQueue, 64<<10),
		shares:  shares{max: cfg.ClientShare},
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		ctl:     make(chan func()),

		compactDone: make(chan error, 1),
		stall:       stallWatch{usage: processUsage},
		compactRand: newCompactRand(cfg.ID),
		pid:         os.Getpid(),
	}
	n.drawCompactJitter()
	n.met = newMetrics(n)
	if cfg.Gossip != nil && cfg.Detector == nil {
		n.det = newGossipDetector(cfg.ElectionTicks)
		n.cfg.Detector = n.det
	}
	n.group, _ = cfg.Topology.GroupOf(cfg.ID)
	n.proto, _ = lookupProtocol(cfg.Protocol) // validated
	n.stats.Started = time.Now()
	err := n.open()
	if err == nil {
		err = n.openGossip()
	}
	if err != nil {
		n.closeStorage()
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, err
	}
	tr, err := transport.New(transport.Config{
		ClusterName:    cfg.Cluster,
		Self:           cfg.ID,
		Listen:         cfg.Listen,
		Listener:       cfg.Listener,
		Peers:          cfg.Peers,
		Handler:        n.handle,
		Logger:         cfg.Logger,
		DialBackoffMax: cfg.DialBackoffMax,
		Seed:           uint64(time.Now().UnixNano()),
		Key:            cfg.ClusterKey,
		TLS:            cfg.TLS,
		// Limits (inbox.go has the node's own).
		QueueBytes:       cfg.PeerQueueBytes,
		ClientQueueBytes: cfg.ClientQueueBytes,
		MaxConns:         cfg.MaxConns,
		MaxConnsPerHost:  cfg.MaxConnsPerHost,
		HandshakeTimeout: cfg.HandshakeTimeout,
		IdleTimeout:      cfg.IdleTimeout,
		PingEvery:        pingEvery(cfg.IdleTimeout),
	})
	if err != nil {
		n.closeStorage()
		return nil, err
	}
	n.tr = tr
	n.out = tr.NewBatch()
	if n.gossip != nil {
		if err := n.gossip.start(); err != nil {
			tr.Close()
			n.closeStorage()
			return nil, err
		}
	}
	n.publish()
	go n.run()
	return n, nil
}

// open locks the data directory and checks its identity (datadir.go),
// opens the WAL and the deliveries log and restores the process.
func (n *Node) open() error {
	cfg := &n.cfg
	mode, pending, err := n.openDataDir()
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(filepath.Join(cfg.DataDir, walDir))
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	fresh := mode == startNew
	n.w, err = wal.Open(cfg.FS, dir, cfg.WAL)
	if err != nil {
		return err
	}
	// A new member's identity is written once its WAL exists (see
	// openDataDir: a crash in between leaves a WAL without an identity,
	// which is adopted).
	if pending != nil {
		if err := writeIdentity(cfg.FS, cfg.DataDir, pending); err != nil {
			return err
		}
	}
	if r := n.w.Repaired(); r != nil {
		n.log.Warn("wal: cut a torn tail", "segment", r.Segment, "offset", r.Offset, "reason", r.Reason)
	}
	recs, snapBytes, err := restoreSnapshot(n.w)
	if err != nil {
		return err
	}
	svcFloor := serviceFloor(recs) // what the log can no longer replay in full (service.go)
	n.lastSnapshot = snapBytes
	msgs, err := n.w.ReadMessages()
	if err != nil {
		return err
	}
	recs = append(recs, msgs...)
	durable := durableDeliveries(recs)
	n.stats.RestoredRecords = len(recs)
	n.stats.RestoredSnapshotBytes = int(snapBytes)
	n.cc = coreConfig{Topology: cfg.Topology, ID: cfg.ID, HeartbeatTicks: cfg.HeartbeatTicks,
		ElectionTicks: cfg.ElectionTicks, RetryTicks: cfg.RetryTicks, SessionTicks: cfg.SessionTicks,
		CollectAfterAll: cfg.CollectAfterAll}
	if mode == startAmnesiac {
		// The store was lost: this directory's log holds only what the
		// member persisted since (nothing until it rejoined).
		st, err := replayStore(n.proto, recs)
		if err != nil {
			return err
		}
		if n.m, err = n.proto.amnesiac(n.cc, cfg.Detector, st); err != nil {
			return err
		}
		n.log.Warn("AMNESIAC: this member lost its data directory: it is inert (it never votes, acks, leads or delivers) "+
			"until it has rejoined: it asks its group's leader for a ballot established without it, adopts that ballot's "+
			"state, and installs a snapshot of the delivered prefix; see docs/disk-loss.md", "member", uint32(cfg.ID), "incarnation", n.ident.Incarnation)
	} else if n.m, err = newCore(n.proto, n.cc, cfg.Detector, fresh, recs); err != nil {
		return err
	}
	if mode == startNew {
		n.log.Info("bootstrapped a new member", "identity", n.ident.String())
	}
	if cfg.StateMachine != nil {
		if err := n.openService(durable, svcFloor, installPoint(recs), mode == startAmnesiac); err != nil {
			return err
		}
	}
	if mode == startRestore {
		b, cb := n.m.ballots()
		n.log.Info("restored from the log", "protocol", n.proto.name, "records", len(recs), "snapshot_bytes", snapBytes,
			"wal_first", n.w.FirstIndex(), "wal_last", n.w.LastIndex(), "messages", n.m.retained(),
			"ballot", b, "cballot", cb, "max_delivered", n.m.maxDelivered())
	}
	return n.openDeliveryLog(durable, durableInstalls(recs))
}

func (n *Node) closeStorage() {
	if n.w != nil {
		n.w.Close()
		n.w = nil
	}
	if n.dlog != nil {
		n.dlog.close()
		n.dlog = nil
	}
	n.lock.release()
}

// ID returns the node's id.
func (n *Node) ID() wire.ProcID { return n.cfg.ID }

// Addr returns the address the node listens on.
func (n *Node) Addr() net.Addr { return n.tr.Addr() }

// Done is closed when the node's loop has stopped (Close, or a fatal
// storage error; see Err).
func (n *Node) Done() <-chan struct{} { return n.done }

// Err returns the error that stopped the node, or nil (also before Done).
func (n *Node) Err() error {
	select {
	case <-n.done:
		return n.err
	default:
		return nil
	}
}

// TransportStats returns the transport's counters.
func (n *Node) TransportStats() transport.Stats { return n.tr.Stats() }

// Close stops the node: its loop, then the transport, then the logs. It
// returns the error that stopped the node, if any, or the error closing
// the logs.
func (n *Node) Close() error {
	n.stopOnce.Do(func() { close(n.stop) })
	<-n.done
	n.tr.Close()
	err := n.err
	if errors.Is(err, errClosed) {
		err = nil
	}
	if n.w != nil {
		if cerr := n.w.Close(); err == nil && !errors.Is(cerr, wal.ErrClosed) {
			err = cerr
		}
	}
	if n.dlog != nil {
		if cerr := n.dlog.close(); err == nil {
			err = cerr
		}
	}
	n.lock.release() // last: nothing in the directory is open any more
	return err
}

func (n *Node) run() {
	var err error
	defer func() {
		// What is held (lazy.go) leaves with the loop: commit news a
		// stopping leader decided is worth its followers' knowing now,
		// not at a new leader's recovery (a group whose state machine
		// fails stops on every member this way, TestServiceResultBound).
		// Before it, what waits for a deferred sync (pipeline.go).
		if err == nil {
			if err = n.syncWritten(); err == nil {
				err = n.releaseDeferred()
			}
		}
		n.flushHeld()
		n.out.Flush()
		n.err = err
		n.publish()
		close(n.done)
	}()
	ticker := time.NewTicker(n.cfg.Tick)
	defer ticker.Stop()
	defer n.gossip.stop()
	defer n.abandonCompaction()
	if n.proto.faultTolerant && n.proto.sendsBeforeSync != nil && !n.cfg.WAL.UnsafeNoSync {
		n.pipe = amcast.NewPipeline(n.early)
	}
	for {
		tick := false
		peers, clients := 0, 0 // inputs this pass stepped (drain)
		// The core's messages to itself, if any, make the select return
		// at once, among whatever else is ready (a closed channel: the
		// ticker, a stop or an operator's request still get their turns).
		var selfC <-chan struct{}
		if len(n.self) > 0 {
			selfC = closedC
		}
		select {
		case <-selfC:
			n.stepSelf()
			peers, clients = n.drain(0, 0)
		case <-n.stop:
			err = errClosed
			return
		case cerr := <-n.compactDone:
			if err = n.finishCompaction(cerr); err != nil {
				n.log.Error("stopping: storage failed", "err", err)
				return
			}
		case <-n.gossip.tickC():
			if err = n.gossip.tick(); err != nil {
				n.log.Error("stopping: storing the gossip generation failed", "err", err)
				return
			}
		case f := <-n.ctl:
			f()
		case in := <-n.side.ch:
			n.take(n.side, in)
		case in := <-n.views.ch:
			n.take(n.views, in)
		case in := <-n.inbox.ch:
			n.take(n.inbox, in)
			peers, clients = n.drain(1, 0)
		case in := <-n.clients.ch:
			n.take(n.clients, in)
			peers, clients = n.drain(0, 1)
		case <-ticker.C:
			now := time.Now()
			n.ticked(now)
			if err = n.syncDeferred(); err != nil { // at least once a tick (pipeline.go)
				n.log.Error("stopping: storage failed", "err", err)
				return
			}
			n.m.Tick()
			n.stats.Ticks++
			n.flushHeld() // commit news that nothing carried since (lazy.go)
			n.tickTransfer()
			n.tickVotes(now)
			n.expireReads()
			peers, clients = n.drain(0, 0)
			tick = true
		}
		if n.m.HasReady() {
			// Yield once before the Ready (not a timer: with nothing else
			// runnable it returns at once) so the readers that woke while
			// this pass stepped queue their messages, and step them too,
			// within the pass's bounds (MaxBatch, ClientBatch): one Ready,
			// one sync and one batch per peer (docs/batching.md) for them
			// instead of a pass each. Measured at 90 clients, three
			// alternations: about 5% more multicasts/s without fsync
			// (within this machine's noise), 15-20% more with it, up to
			// one read/write system call fewer per multicast; the same at
			// 1 client.
			runtime.Gosched()
			n.drain(peers, clients)
			start := time.Now()
			err = n.ready()
			n.stall.readyTook(time.Since(start))
			if err != nil {
				what := "stopping: storage failed"
				if errors.Is(err, errServiceFailed) {
					what = "stopping: the state machine failed (a restart rebuilds it from its snapshot and the log)"
				}
				n.log.Error(what, "err", err)
				return
			}
		}
		n.out.Flush() // what the pass sent outside the Ready (replies to clients)
		if err = n.checkDeparture(); err != nil {
			n.log.Error("stopping: storing the gossip generation failed", "err", err)
			return
		}
		if tick || n.changed() {
			n.publish()
		}
	}
}

func (n *Node) step(env wire.Envelope) {
	switch m := env.Msg.(type) {
	case *wire.Batch:
		// Another replica's messages of one Ready (amcast.Coalesce), each
		// stepped as if it had come alone; a batch from elsewhere is
		// refused whole.
		if !n.cfg.Topology.IsReplica(env.From) {
			n.stats.StepErrors++
			n.log.Debug("refused a batch from a non-replica", "from", uint32(env.From))
			return
		}
		for e := range amcast.Unbatch(env) {
			n.step(e)
		}
		return
	case *wire.Gossip:
		if n.gossip != nil {
			if err := n.gossip.step(env.From, m); err != nil {
				n.log.Error("gossip: storing the generation failed", "err", err)
			}
		}
		return
	case *wire.ViewRequest:
		v := &wire.View{}
		if n.gossip != nil {
			v = n.gossip.view()
		}
		n.tr.Send(env.From, v)
		return
	case *wire.AppSnapRequest, *wire.AppSnapChunk:
		n.stepTransfer(env) // transfer.go
		return
	case *wire.Read:
		n.stepRead(env, m) // reads.go
		return
	case *wire.Vote:
		n.stepVote(env, m) // votes.go
		return
	case *wire.VotePull:
		n.stepVotePull(env, m)
		return
	case *wire.Applied:
		n.stepApplied(env, m)
		return
	}
	if n.shedForVotes(env) {
		return
	}
	n.stats.Steps++
	n.met.observe(env)
	if err := n.m.Step(env); err != nil {
		n.stats.StepErrors++
		n.log.Debug("refused a message", "from", uint32(env.From), "msg", wire.Describe(env.Msg), "err", err)
		return
	}
	n.handleRetry(env)
}

// ready handles one Ready: persist and sync, send, deliver, advance.
func (n *Node) ready() error {
	if n.svc != nil && n.svc.d.Err() != nil { // failed applying on a vote (votes.go)
		return fmt.Errorf("%w: %w", errServiceFailed, n.svc.d.Err())
	}
	if n.svc != nil && n.svc.failed != nil {
		return n.svc.failed
	}
	rd := n.m.Ready()
	n.stats.Readies++
	if n.deferSync(&rd) {
		return n.readyDeferred(&rd) // a leader's own sync, deferred (pipeline.go)
	}
	// The messages that promise nothing about this Ready's records leave
	// first, so the sync overlaps their trip and the receivers' own syncs
	// (wbcast/pipeline.go has the argument; docs/durability.md).
	// Not to a peer that deferred Readys still hold messages for: links
	// stay FIFO (amcast.Pipeline).
	late := n.lateIn[:0]
	if n.proto.sendsBeforeSync == nil || len(rd.Persist) == 0 {
		late = append(late, rd.Messages...)
	} else {
		out := n.sendBuf[:0]
		for _, env := range rd.Messages {
			if n.early(env.Msg) && (n.pipe == nil || !n.pipe.Holds(env.To)) {
				out = append(out, env)
			} else {
				late = append(late, env)
			}
		}
		if len(out) > 0 {
			held := n.sendHolding(out)
			n.stats.SentBeforeSync += uint64(len(out) - held) // a held one leaves later
			n.out.Flush()
			if n.cfg.WAL.RawSync && !n.cfg.WAL.UnsafeNoSync {
				// Let the writers, woken by the Flush, send them now:
				// with one P and a raw fdatasync they would not run
				// before it returned, and the overlap would be lost.
				// With nothing else runnable it returns at once.
				runtime.Gosched()
			}
		}
		clear(out)
		n.sendBuf = out[:0]
	}
	if err := n.appendRecords(rd.Persist); err != nil {
		return err
	}
	// The sync covers the records of the Readys whose sync was deferred
	// too, and what they released goes first (pipeline.go).
	if err := n.syncWritten(); err != nil {
		return err
	}
	if err := n.releaseDeferred(); err != nil {
		return err
	}
	err := n.afterSync(late, rd.Deliveries, rd.Reads, false)
	clear(late)
	n.lateIn = late[:0]
	if err != nil {
		return err
	}
	n.m.Advance()
	return n.maybeCompact()
}

// afterSync does what a Ready releases once its records are durable: its
// messages leave (replies to clients with their results, once the
// deliveries are applied), then its deliveries reach the deliveries log,
// the state machine (unless applied: it applied them before their sync,
// applyNow) and Config.OnDeliver, then its reads are served.
func (n *Node) afterSync(msgs []wire.Envelope, deliveries []amcast.Delivery, reads []amcast.ReadState, applied bool) error {
	out := n.lateBuf[:0]
	for _, env := range msgs {
		if n.svc.holdReply(env) {
			continue // sent with its result once the deliveries are applied
		}
		out = append(out, env)
	}
	n.sendHolding(out)
	clear(out)
	n.lateBuf = out[:0]
	n.out.Flush() // before the deliveries: the other processes wait on these
	if len(deliveries) > 0 {
		now := time.Now()
		for i := range deliveries {
			d := &deliveries[i]
			if d.Install { // a state transfer, not a message (applyService)
				if n.dlog != nil {
					n.dlog.install(d.GTS, now)
				}
				continue
			}
			n.stats.Delivered++
			n.met.delivered(d.M.ID, now)
			if n.dlog != nil {
				n.dlog.add(&d.M, d.GTS, now)
			}
		}
		if n.dlog != nil {
			if err := n.dlog.flush(); err != nil {
				return err
			}
		}
		if n.svc != nil && !applied {
			if err := n.applyService(deliveries); err != nil {
				return err
			}
		}
		if n.cfg.OnDeliver != nil {
			for i := range deliveries {
				if d := &deliveries[i]; !d.Install {
					n.cfg.OnDeliver(Delivery{M: d.M, GTS: d.GTS})
				}
			}
		}
	}
	if n.svc != nil && len(n.svc.held) > 0 {
		if err := n.applyService(nil); err != nil { // replies without deliveries (retries)
			return err
		}
	}
	n.serveReads(reads) // after the deliveries: a read waits for its index
	return nil
}

// send queues a Ready's messages on the transport's batch, those to each
// other replica combined into BATCH messages (amcast.Coalesce: one frame,
// decode and inbox hand-off per peer and Ready, not per message).
func (n *Node) send(msgs []wire.Envelope) {
	msgs = n.keepSelf(msgs)
	n.stats.Sent += uint64(len(msgs))
	for _, env := range n.batcher.Coalesce(msgs, n.cfg.Topology.IsReplica, 0) {
		if b, ok := env.Msg.(*wire.Batch); ok {
			n.stats.Batches++
			n.stats.Batched += uint64(len(b.Msgs))
		}
		if err := n.out.Send(env.To, env.Msg); err != nil {
			n.stats.SendErrors++
		}
	}
}

// early reports whether m may leave before the records of its Ready are
// durable (protocolSpec.sendsBeforeSync), but for a state machine's
// replies, which leave with their results once the deliveries are applied
// (service.go).
func (n *Node) early(m wire.Message) bool {
	if n.svc != nil {
		if _, ok := m.(*wire.Delivered); ok {
			return false
		}
	}
	return n.proto.sendsBeforeSync(m)
}

// keepSelf moves the messages of msgs addressed to this node to n.self
// and returns the others (msgs' own array, when there are any to itself).
func (n *Node) keepSelf(msgs []wire.Envelope) []wire.Envelope {
	if !slices.ContainsFunc(msgs, func(env wire.Envelope) bool { return env.To == n.cfg.ID }) {
		return msgs
	}
	return slices.DeleteFunc(msgs, func(env wire.Envelope) bool {
		if env.To == n.cfg.ID {
			n.self = append(n.self, env)
			return true
		}
		return false
	})
}

// closedC is always ready to receive: the loop's select takes it when
// the core has messages to itself.
var closedC = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// stepSelf steps the messages the core sent itself.
func (n *Node) stepSelf() {
	for _, env := range n.self {
		n.step(env)
	}
	clear(n.self)
	n.self = n.self[:0]
}

// coreAmnesiac reports whether the core still waits to rejoin after a
// disk loss (wbcast.Process.Amnesiac).
func (n *Node) coreAmnesiac() bool {
	a, ok := n.m.(interface{ Amnesiac() bool })
	return ok && a.Amnesiac()
}
