package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/storage/wal"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// A node's configuration: the fields, their defaults and their validation.

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
	// CollectAfterAll is passed to WbCast's Config: collection waits for
	// every member of a group, not a quorum (docs/disk-loss.md).
	CollectAfterAll bool
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
	// the last compaction exceed this many bytes and four times the last
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
	// loseVote, in tests, drops the votes it returns true for instead of
	// sending them (a message lost on the way: votes.go pulls it again);
	// pulled: the vote answers a pull.
	loseVote func(to wire.ProcID, v *wire.Vote, pulled bool) bool
	// votePullGiveUp, in tests, replaces votePullGiveUp (votes.go).
	votePullGiveUp time.Duration
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
