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
// by Config.CompactBytes since the last compaction (and by at least twice
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
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/storage/vfs"
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

// Defaults for zero Config fields.
const (
	DefaultTick          = 10 * time.Millisecond
	DefaultElectionTicks = 30
	DefaultMaxBatch      = 512
	DefaultInboxSize     = 8192
	DefaultInboxBytes    = 64 << 20
	// Client inbox defaults: room for a burst of a few hundred clients
	// with a message or two each; beyond that, clients are told to back
	// off (OVERLOADED) rather than queued.
	DefaultClientInboxSize  = 1024
	DefaultClientInboxBytes = 8 << 20
	DefaultClientBatch      = 64
	DefaultClientShare      = 64
	DefaultCompactBytes     = 8 << 20
	// DefaultDialBackoffMax caps the transport's redial backoff: a
	// restarted peer is reached again within about this long.
	DefaultDialBackoffMax = 500 * time.Millisecond
)

// Config configures a Node. Zero fields take the defaults above.
type Config struct {
	// Cluster is the cluster name every node and client must share.
	Cluster string
	// ClusterKey, if set, is the secret every node and client of the
	// cluster shares: connections prove they hold it (transport.Config.Key)
	// and processes without it are refused. Nil: no key.
	ClusterKey []byte
	// TLS, if set, runs every connection over mutual TLS with per-node
	// identity (transport.Config.TLS): its certificate must be this
	// node's. Nil: no TLS.
	TLS *transport.TLS
	// ID is this node's process id; it must be a replica of Topology.
	ID wire.ProcID
	// Topology is the group layout, the same at every node.
	Topology *amcast.Topology
	// Protocol is the atomic multicast protocol every node of the cluster
	// runs: "wbcast" (the default, when empty), "ftskeen", "fastcast" or
	// "skeen" (see Protocols). Skeen is not fault tolerant: it needs
	// exactly 1 replica per group, and its nodes cannot restart.
	Protocol string
	// Peers maps every replica id to its address (this node's entry, if
	// present, is ignored).
	Peers map[wire.ProcID]string
	// Listen is the address to listen on for nodes and clients; Listener,
	// if set, is used instead (the node owns it).
	Listen   string
	Listener net.Listener
	// DataDir holds the WAL (DataDir/wal), the deliveries log's cursor,
	// the lock and the member's identity (see datadir.go).
	DataDir string
	// FS is the filesystem every file of the node goes through: the WAL
	// and its snapshots, the deliveries log and its cursor, the gossip
	// generation (nil: vfs.OS(), the real one). Tests pass vfs.WithErrors
	// or a crashable vfs.MemFS.
	FS vfs.FS
	// InitialState says what an empty DataDir means: InitialNew ("" is
	// the same) bootstraps a new member unless the bootstrap probe finds a
	// peer that has seen this member run; InitialExisting refuses (the
	// member's state is lost). See openDataDir.
	InitialState string
	// Rejoin starts a member whose data directory was lost through the
	// protocol's disk-loss path: inert, never voting, acking or leading
	// (wbcast.RestoreAmnesiac). Only WbCast has one; the other protocols
	// refuse it.
	Rejoin bool
	// BootstrapProbe is how long a node with an empty DataDir asks its
	// peers whether they have seen it before it bootstraps (0: it does not
	// ask; the agent's default is DefaultBootstrapProbe).
	BootstrapProbe time.Duration
	// DeliveryLog is the path of the deliveries log (see dlog.go; empty:
	// no log). DeliveryLogMaxBytes (default DefaultDeliveryLogMaxBytes)
	// and DeliveryLogFiles (default DefaultDeliveryLogFiles) bound it:
	// the file is rotated before it would outgrow the first, and at most
	// the second number of files are kept, the current one included.
	DeliveryLog         string
	DeliveryLogMaxBytes int64
	DeliveryLogFiles    int
	// Tick is the protocol's tick (default DefaultTick).
	Tick time.Duration
	// ElectionTicks: a group member silent this many ticks is suspected,
	// and its successor starts a ballot (default DefaultElectionTicks).
	ElectionTicks int
	// HeartbeatTicks and RetryTicks are passed to the protocol's Config
	// (0: the protocol defaults, 1 and 12 ticks; Skeen has no timers).
	HeartbeatTicks, RetryTicks int
	// SessionTicks is passed to WbCast's Config (0: its default).
	SessionTicks int
	// MaxBatch bounds the inputs stepped before one Ready (default
	// DefaultMaxBatch).
	MaxBatch int
	// InboxSize and InboxBytes bound the inbox of protocol messages from
	// nodes, in messages and in encoded bytes (defaults DefaultInboxSize,
	// DefaultInboxBytes); when it is full the transport's readers wait
	// (back-pressure; see inbox.go).
	InboxSize  int
	InboxBytes int64
	// ClientInboxSize and ClientInboxBytes bound the inbox of clients'
	// MULTICASTs (defaults DefaultClientInboxSize,
	// DefaultClientInboxBytes); when it is full a client's MULTICAST is
	// shed and answered OVERLOADED. ClientBatch is the most client
	// messages the loop steps per pass, after the peer inbox (default
	// DefaultClientBatch).
	ClientInboxSize  int
	ClientInboxBytes int64
	ClientBatch      int
	// ClientShare is the most messages one client may hold in the client
	// inbox (default DefaultClientShare); more are shed (OVERLOADED).
	ClientShare int
	// Reads bounds the clients' reads held (reads.go).
	Reads ReadLimits
	// Connection limits, passed to the transport (0: its defaults; see
	// transport.Config): PeerQueueBytes bounds each peer's send queue
	// (QueueBytes), ClientQueueBytes each client's reply queue;
	// MaxConns and MaxConnsPerHost cap inbound connections; the handshake
	// must finish within HandshakeTimeout; an accepted connection silent
	// for IdleTimeout is closed (negative: never). The node pings its
	// own idle connections every min(transport.DefaultPingEvery,
	// IdleTimeout/4).
	PeerQueueBytes, ClientQueueBytes int
	MaxConns, MaxConnsPerHost        int
	HandshakeTimeout, IdleTimeout    time.Duration
	// CompactBytes: the log is compacted when the records appended since
	// the last compaction exceed this many bytes and twice the last
	// snapshot (default DefaultCompactBytes; negative disables).
	CompactBytes int64
	// WAL tunes the log.
	WAL wal.Options
	// DialBackoffMax caps the wait before redialing a peer (default
	// DefaultDialBackoffMax; the transport's own default, 5s, would keep a
	// restarted peer waiting for our messages for seconds).
	DialBackoffMax time.Duration
	// OnDeliver, if set, is called with every delivery, in order, from the
	// node's goroutine, after the delivery is durable. It must not block
	// for long.
	OnDeliver func(Delivery)
	// StateMachine, if set, is the replicated service this node runs
	// (package rsm; docs/rsm.md): every delivery is applied to it exactly
	// once, across restarts, and clients are answered with its results
	// (service.go). It is called from the node's goroutine only. RSM
	// tunes its driver (the results kept for clients).
	StateMachine rsm.StateMachine
	RSM          rsm.Config
	// Logger receives node and transport events (default: discard).
	Logger *slog.Logger

	// Gossip, if set, runs gossip membership in the node (see gossip.go):
	// start from a profile (membership.Local, LAN, Cassandra); the node
	// fills ID, ClusterName, Rand and StoredGeneration, and Seeds when
	// empty (the first member of every group). Gossip's verdicts then
	// drive the protocol's failure detection (unless Detector is set).
	// Nil: no gossip; the protocol's tick timeout detects failures.
	Gossip *membership.Config
	// gossipClockSkew shifts gossip's wall clock (tests of the clock
	// skew checks: a node with a wrong clock in one process).
	gossipClockSkew time.Duration
	// ClientAddr is the address published in gossip for clients (default
	// Listen).
	ClientAddr string
	// OnLeft, if set, is called from the node's goroutine when a Leave has
	// been announced and gossip stopped; the agent exits then.
	OnLeft func()
	// Detector is the failure detector for the protocol core; nil: gossip's
	// verdicts when Gossip is set, else the protocol's tick timeout.
	Detector Detector
}

// Detector judges the liveness of a node's group members, in protocol
// ticks (amcast.Detector, which every fault-tolerant protocol takes). It is
// called from the node's goroutine only.
type Detector = amcast.Detector

// Delivery is one message delivered at this node.
type Delivery struct {
	M   wire.AppMsg
	GTS wire.Timestamp
	// Recovered marks a delivery that was durable before a crash but had
	// not reached the application; it is handed over on restart.
	Recovered bool
}

func (c *Config) validate() error {
	if c.Topology == nil {
		return errors.New("node: Config.Topology is nil")
	}
	if !c.Topology.IsReplica(c.ID) {
		return fmt.Errorf("node: id %d is not a replica of the topology", c.ID)
	}
	if c.DataDir == "" {
		return errors.New("node: Config.DataDir is empty")
	}
	if c.Protocol == "" {
		c.Protocol = DefaultProtocol
	}
	ps, err := lookupProtocol(c.Protocol)
	if err != nil {
		return err
	}
	if err := ps.checkTopology(c.Topology); err != nil {
		return err
	}
	switch c.InitialState {
	case "":
		c.InitialState = InitialNew
	case InitialNew, InitialExisting:
	default:
		return fmt.Errorf("node: Config.InitialState %q is not %q or %q", c.InitialState, InitialNew, InitialExisting)
	}
	if c.Rejoin && ps.amnesiac == nil {
		return fmt.Errorf("node: --rejoin: %s has no disk-loss path: a replica that lost its data directory cannot come back inert (only wbcast can); the member stays down (docs/disk-loss.md)", ps.name)
	}
	if c.BootstrapProbe < 0 {
		return fmt.Errorf("node: negative BootstrapProbe %v", c.BootstrapProbe)
	}
	for g := range c.Topology.Groups {
		for _, p := range c.Topology.Members(wire.GroupID(g)) {
			if p != c.ID && c.Peers[p] == "" {
				return fmt.Errorf("node: no address for replica %d", p)
			}
		}
	}
	if c.Tick == 0 {
		c.Tick = DefaultTick
	}
	if c.ElectionTicks == 0 {
		c.ElectionTicks = DefaultElectionTicks
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if err := c.Reads.withDefaults(c.ElectionTicks); err != nil {
		return err
	}
	if c.InboxSize == 0 {
		c.InboxSize = DefaultInboxSize
	}
	if c.InboxBytes == 0 {
		c.InboxBytes = DefaultInboxBytes
	}
	if c.ClientInboxSize == 0 {
		c.ClientInboxSize = DefaultClientInboxSize
	}
	if c.ClientInboxBytes == 0 {
		c.ClientInboxBytes = DefaultClientInboxBytes
	}
	if c.ClientBatch == 0 {
		c.ClientBatch = DefaultClientBatch
	}
	if c.ClientShare == 0 {
		c.ClientShare = DefaultClientShare
	}
	if c.CompactBytes == 0 {
		c.CompactBytes = DefaultCompactBytes
	}
	if c.DialBackoffMax == 0 {
		c.DialBackoffMax = DefaultDialBackoffMax
	}
	switch {
	case c.Tick < time.Millisecond:
		return fmt.Errorf("node: Tick %v below 1ms", c.Tick)
	case c.ElectionTicks < 2:
		return fmt.Errorf("node: ElectionTicks %d below 2", c.ElectionTicks)
	case c.HeartbeatTicks < 0 || c.RetryTicks < 0 || c.SessionTicks < 0:
		return errors.New("node: negative HeartbeatTicks, RetryTicks or SessionTicks")
	case c.MaxBatch < 1 || c.InboxSize < 1 || c.ClientInboxSize < 1 || c.ClientBatch < 1 || c.ClientShare < 1:
		return errors.New("node: MaxBatch, InboxSize, ClientInboxSize, ClientBatch and ClientShare must be positive")
	case c.InboxBytes < 1 || c.ClientInboxBytes < 1:
		return errors.New("node: InboxBytes and ClientInboxBytes must be positive")
	}
	if c.DeliveryLogMaxBytes == 0 {
		c.DeliveryLogMaxBytes = DefaultDeliveryLogMaxBytes
	}
	if c.DeliveryLogFiles == 0 {
		c.DeliveryLogFiles = DefaultDeliveryLogFiles
	}
	if c.DeliveryLogMaxBytes < 0 || c.DeliveryLogFiles < 0 {
		return errors.New("node: negative DeliveryLogMaxBytes or DeliveryLogFiles")
	}
	if c.FS == nil {
		c.FS = vfs.OS()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Node runs one process of Config.Protocol. See the package documentation.
type Node struct {
	cfg   Config
	log   *slog.Logger
	group wire.GroupID
	proto *protocolSpec
	m     core     // the process, with its durable image (mirrored to write snapshots)
	lock  *dirLock // the data directory's lock, held until Close
	ident identity // the data directory's identity
	w     *wal.WAL
	tr    *transport.Transport
	out   *transport.Batch // the loop's sends (ready, replies), flushed once a pass
	dlog  *deliveryLog
	svc   *service  // the replicated service (service.go); nil without Config.StateMachine
	reads readQueue // clients' linearizable reads pending (reads.go)
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

	// Compaction (compact.go): the one in flight, if any, and where its
	// goroutine reports.
	cc          coreConfig
	compaction  *compaction
	compactDone chan error
	pagesOpen   bool // a paged state's last page is not durable yet

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

// Stats counts what the node's loop did.
type Stats struct {
	Steps, StepErrors, Ticks uint64
	Readies, Syncs, Records  uint64
	Sent, SendErrors         uint64
	Delivered, Recovered     uint64
	Compactions              uint64
	// ServiceSnapshots counts the state machine's snapshots written
	// (service.go).
	ServiceSnapshots uint64
	// StateTransfers counts the application state fetches started after
	// the core installed a SNAPSHOT (transfer.go); TransferBytes the bytes
	// fetched, TransferChunksServed the chunks sent to members.
	StateTransfers, TransferBytes, TransferChunksServed uint64
	// CompactionErrors counts compactions given up (the node kept its
	// log; see compact.go).
	CompactionErrors          uint64
	LastSnapshotBytes         int64
	RestoredRecords           int // records replayed on start (snapshot records included)
	RestoredSnapshotBytes     int // size of the snapshot restored from (0: none)
	Started                   time.Time
	MaxBatchSeen, InboxQueued int
	// SideDrops counts gossip frames dropped because the side queue was
	// full, ViewDrops clients' view requests dropped because their queue
	// was full (the client asks again).
	SideDrops, ViewDrops uint64
	// InboxBytes is the encoded size of the messages in the peer inbox,
	// InboxPeakBytes the most it ever held (at most Config.InboxBytes,
	// plus one message when it was empty).
	InboxBytes, InboxPeakBytes int64
	// InboxWaits counts the messages whose reader had to wait for room in
	// the peer inbox (back-pressure on that connection).
	InboxWaits uint64
	// ClientQueued, ClientInboxBytes and ClientInboxPeakBytes describe the
	// client inbox likewise. ClientSteps counts the client messages
	// stepped; ClientShed those shed because the client inbox was full,
	// ClientShedShare those shed because their client held its share
	// (each answered OVERLOADED).
	// MaxClientBatchSeen is the most client messages stepped in one pass
	// (at most Config.ClientBatch).
	ClientQueued, MaxClientBatchSeen         int
	ClientInboxBytes, ClientInboxPeakBytes   int64
	ClientSteps, ClientShed, ClientShedShare uint64
	// Reads counts clients' reads by outcome (reads.go).
	Reads ReadStats
}

// Status is a snapshot of the node's state, as served by the agent's
// status endpoint.
type Status struct {
	ID           wire.ProcID     `json:"id"`
	Group        wire.GroupID    `json:"group"`
	Protocol     string          `json:"protocol"`
	Role         string          `json:"role"`
	Leader       bool            `json:"leader"`
	Ballot       wire.Ballot     `json:"ballot"`
	CBallot      wire.Ballot     `json:"cballot"`
	Clock        uint64          `json:"clock"`
	MaxDelivered wire.Timestamp  `json:"max_delivered"`
	Retained     int             `json:"retained"`
	Coverage     amcast.Coverage `json:"coverage"`
	WALFirst     uint64          `json:"wal_first"`
	WALLast      uint64          `json:"wal_last"`
	Stats        Stats           `json:"stats"`
	// LeaderSince is when this node last became its group's leader (zero
	// when it is not the leader).
	LeaderSince time.Time `json:"leader_since"`
	Addr        string    `json:"addr"`
	// Gossip holds the gossip core's counters (nil without gossip).
	Gossip *membership.Stats `json:"gossip,omitempty"`
	Pid    int               `json:"pid"`
	// Incarnation is the data directory's (see identity).
	Incarnation uint64 `json:"incarnation"`
	// Amnesiac: the member lost its data directory and has not rejoined
	// its group yet: it is inert (never votes, acks, leads or delivers)
	// until then (docs/disk-loss.md). Incarnation above 1 tells a member
	// that rejoined.
	Amnesiac bool `json:"amnesiac,omitempty"`
	// Service holds the state machine driver's counters and its applied
	// gts (nil without Config.StateMachine).
	Service *ServiceStatus `json:"service,omitempty"`
}

// ServiceStatus describes the replicated service (service.go).
type ServiceStatus struct {
	rsm.Stats
	AppliedGTS wire.Timestamp `json:"applied_gts"`
	// Replayed is how many deliveries the last start applied from the log.
	Replayed int `json:"replayed"`
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
		pid:         os.Getpid(),
	}
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
		ElectionTicks: cfg.ElectionTicks, RetryTicks: cfg.RetryTicks, SessionTicks: cfg.SessionTicks}
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
			"wal_first", n.w.FirstIndex(), "wal_last", n.w.LastIndex(), "messages", n.m.store().messages(),
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
		n.err = err
		n.publish()
		close(n.done)
	}()
	ticker := time.NewTicker(n.cfg.Tick)
	defer ticker.Stop()
	defer n.gossip.stop()
	defer n.abandonCompaction()
	for {
		tick := false
		select {
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
			n.drain(1, 0)
		case in := <-n.clients.ch:
			n.take(n.clients, in)
			n.drain(0, 1)
		case <-ticker.C:
			n.m.Tick()
			n.stats.Ticks++
			n.tickTransfer()
			n.expireReads()
			n.drain(0, 0)
			tick = true
		}
		if n.m.HasReady() {
			if err = n.ready(); err != nil {
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
	rd := n.m.Ready()
	n.stats.Readies++
	if len(rd.Persist) > 0 {
		start := time.Now()
		if err := n.w.AppendMessages(rd.Persist...); err != nil {
			return err
		}
		if err := n.w.Sync(); err != nil {
			return err
		}
		n.met.synced(time.Since(start), rd.Persist)
		n.stats.Syncs++
		n.stats.Records += uint64(len(rd.Persist))
		if err := n.mirror(rd.Persist); err != nil {
			return err
		}
	}
	for _, env := range rd.Messages {
		if n.svc.holdReply(env) {
			continue // sent with its result once the deliveries are applied
		}
		n.stats.Sent++
		if err := n.out.Send(env.To, env.Msg); err != nil {
			n.stats.SendErrors++
		}
	}
	n.out.Flush() // before the deliveries: the other processes wait on these
	if len(rd.Deliveries) > 0 {
		now := time.Now()
		for i := range rd.Deliveries {
			d := &rd.Deliveries[i]
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
		if n.svc != nil {
			if err := n.applyService(rd.Deliveries); err != nil {
				return err
			}
		}
		if n.cfg.OnDeliver != nil {
			for i := range rd.Deliveries {
				if d := &rd.Deliveries[i]; !d.Install {
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
	n.serveReads(rd.Reads) // after the deliveries: a read waits for its index
	n.m.Advance()
	return n.maybeCompact()
}

// coreAmnesiac reports whether the core still waits to rejoin after a
// disk loss (wbcast.Process.Amnesiac).
func (n *Node) coreAmnesiac() bool {
	a, ok := n.m.(interface{ Amnesiac() bool })
	return ok && a.Amnesiac()
}
