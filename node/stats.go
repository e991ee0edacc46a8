package node

import (
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/wire"
)

// What a node reports about itself: its loop's counters (Stats) and its
// status (Status, built by status.go).

// Stats counts what the node's loop did.
type Stats struct {
	Steps, StepErrors, Ticks uint64
	Readies, Syncs, Records  uint64
	// RawSyncPauses counts the raw WAL syncs so slow that the log went
	// back to ordinary ones until the disk was fast again
	// (wal.Options.RawSync; the agent's admin endpoint answers meanwhile).
	RawSyncPauses    uint64
	Sent, SendErrors uint64
	// SentBeforeSync counts the messages sent while their Ready's records
	// were being synced (wbcast/pipeline.go).
	SentBeforeSync uint64
	// DeferredSyncs counts the Readys whose records were written without
	// a sync of their own (pipeline.go).
	DeferredSyncs uint64
	// AppliedBeforeSync counts the deliveries the state machine applied,
	// and answered, before their records were durable (pipeline.go,
	// applyBeforeSync).
	AppliedBeforeSync uint64
	// Batches counts the BATCH messages sent (amcast.Coalesce), Batched
	// the messages they carried (counted in Sent too).
	Batches, Batched uint64
	// Held counts the messages held for the next message to their peer
	// (lazy.go; counted in Sent too, once sent), HeldByTick those of them
	// a tick sent because nothing else went to their peer first.
	Held, HeldByTick     uint64
	Delivered, Recovered uint64
	Compactions          uint64
	// ServiceSnapshots counts the state machine's snapshots written
	// (service.go).
	ServiceSnapshots uint64
	// StateTransfers counts the application state fetches started after
	// the core installed a SNAPSHOT (transfer.go); TransferBytes the bytes
	// fetched, TransferChunksServed the chunks sent to members.
	StateTransfers, TransferBytes, TransferChunksServed uint64
	// Votes counts the vote exchange between groups (votes.go).
	Votes VoteStats
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
	// LoopStalls counts the ticks the loop handled more than stallTicks
	// ticks after the one before; LongestStall is the longest such gap
	// (stall.go).
	LoopStalls   uint64
	LongestStall time.Duration
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
	// Transport holds the transport's traffic counters.
	Transport TransportTraffic `json:"transport"`
}

// TransportTraffic is the part of transport.Stats a status carries: frames
// and the system calls that moved them (FramesOut/Writes and
// FramesIn/Reads are the batching achieved on each side).
type TransportTraffic struct {
	FramesIn     uint64 `json:"frames_in"`
	FramesOut    uint64 `json:"frames_out"`
	Writes       uint64 `json:"writes"`
	Reads        uint64 `json:"reads"`
	ReadsRecvmsg uint64 `json:"reads_recvmsg"` // not counted by /proc/<pid>/io
}

// ServiceStatus describes the replicated service (service.go).
type ServiceStatus struct {
	rsm.Stats
	AppliedGTS wire.Timestamp `json:"applied_gts"`
	// Replayed is how many deliveries the last start applied from the log.
	Replayed int `json:"replayed"`
}
