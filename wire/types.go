// Package wire holds weft's identifiers, every protocol message and durable
// record, and their hand-rolled binary encoding. It is the only package that
// knows byte layouts. It is pure: no I/O, no clock, no randomness.
package wire

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// ProcID identifies a process (replica or client). Replica ids are unique
// across all groups.
type ProcID uint32

// GroupID identifies a replica group. Groups are numbered 0..G-1.
type GroupID uint32

// MsgID identifies an application message: (Client, Session, Seq) is unique
// and stays the same across client retries.
//
// Client is the process the message must come from: replicas accept a
// client's MULTICAST only from the connection authenticated as Client.
// Session names one incarnation of that client: a client draws a fresh,
// random 128-bit session every time it starts (SessionID), so a client
// restarted with a fixed Client id never reuses an id of an earlier
// incarnation and is never answered with another incarnation's result.
// Seq counts the session's messages from 1. The zero session is used by
// replicas' own test clients and the simulator, whose clients never
// restart.
//
// Digest binds the id to the message's content (ContentDigest of its
// destinations and payload; AppMsg.Seal sets it, AppMsg.CheckDigest
// verifies it). A message's identity is therefore its content: a client
// that reuses one of its (Client, Session, Seq) with other destinations or
// another payload sends a second, distinct message, which is ordered like
// any other. Without it, a destination group that saw only the second copy
// proposed it while a group holding the first refused it, and the message
// blocked the proposing group's deliveries forever (docs/sessions.md).
//
// pad fills the four bytes the compiler would otherwise leave between
// Client and Session, and is always zero: a struct without padding is
// hashed and compared as one block of memory, where a padded one is hashed
// field by field. Ids key the protocol's maps, and hashing and comparing
// them field by field was about 3% of a loaded agent's CPU
// (docs/batching.md). Values are built with field names, so pad stays
// zero; outside this package it cannot be set.
type MsgID struct {
	Client  ProcID
	pad     uint32
	Session SessionID
	Seq     uint64
	Digest  Digest
}

// SessionID names one incarnation of a client: 128 bits, drawn from
// crypto/rand when a client starts (client.New), so that two incarnations
// of one client never share a session (the chance that any two of a
// billion incarnations collide is below 2^-68). The zero value is the
// session of replicas' own test clients and of the simulator's, whose
// clients never restart by accident.
type SessionID struct{ Hi, Lo uint64 }

// Session returns the session with the low 64 bits n (tests and the
// simulator number their sessions).
func Session(n uint64) SessionID { return SessionID{Lo: n} }

// IsZero reports whether s is the zero session.
func (s SessionID) IsZero() bool { return s == SessionID{} }

// Compare returns -1, 0 or +1 (high bits first).
func (s SessionID) Compare(o SessionID) int {
	if c := cmp.Compare(s.Hi, o.Hi); c != 0 {
		return c
	}
	return cmp.Compare(s.Lo, o.Lo)
}

// ParseSession parses a session as String renders it: 1 to 32 hex digits.
func ParseSession(s string) (SessionID, error) {
	if len(s) == 0 || len(s) > 32 {
		return SessionID{}, fmt.Errorf("wire: session %q: want 1 to 32 hex digits", s)
	}
	var hi, lo string
	if len(s) > 16 {
		hi, lo = s[:len(s)-16], s[len(s)-16:]
	} else {
		lo = s
	}
	var out SessionID
	var err error
	if hi != "" {
		if out.Hi, err = strconv.ParseUint(hi, 16, 64); err != nil {
			return SessionID{}, fmt.Errorf("wire: session %q: %w", s, err)
		}
	}
	if out.Lo, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return SessionID{}, fmt.Errorf("wire: session %q: %w", s, err)
	}
	return out, nil
}

// String renders the session in hex without leading zeros ("0" for the
// zero session).
func (s SessionID) String() string {
	if s.Hi == 0 {
		return fmt.Sprintf("%x", s.Lo)
	}
	return fmt.Sprintf("%x%016x", s.Hi, s.Lo)
}

// Digest is the first 16 bytes of a SHA-256 of a message's content: hard
// enough to collide that a client cannot make two contents share an id.
type Digest [16]byte

// ContentDigest is the digest of a message with destinations dest and
// payload payload: the SHA-256 of uvarint(len(dest)), each destination as
// 4 big-endian bytes, then the payload.
func ContentDigest(dest []GroupID, payload []byte) Digest {
	var sum [sha256.Size]byte
	// The usual message fits a buffer on the stack and is hashed by one
	// Sum256: no hash object allocated, no Write per destination. (The
	// hashing itself is most of the cost either way: about 6% of a bench
	// client process's CPU before and after, docs/batching.md, "A
	// client's wait".)
	var small [256]byte
	if binary.MaxVarintLen64+4*len(dest)+len(payload) <= len(small) {
		b := binary.AppendUvarint(small[:0], uint64(len(dest)))
		for _, g := range dest {
			b = binary.BigEndian.AppendUint32(b, uint32(g))
		}
		sum = sha256.Sum256(append(b, payload...))
	} else {
		h := sha256.New()
		var b [binary.MaxVarintLen64]byte
		h.Write(binary.AppendUvarint(b[:0], uint64(len(dest))))
		for _, g := range dest {
			h.Write(binary.BigEndian.AppendUint32(b[:0], uint32(g)))
		}
		h.Write(payload)
		h.Sum(sum[:0])
	}
	return Digest(sum[:len(Digest{})])
}

// ErrDigest reports a message whose id's digest is not the digest of its
// content.
var ErrDigest = errors.New("wire: content digest does not match the message")

// String renders the id as used in histories: "<client>.<seq>", or
// "<client>.<seq>@<session hex>" when the session is not 0.
func (id MsgID) String() string {
	if id.Session.IsZero() {
		return fmt.Sprintf("%d.%d", id.Client, id.Seq)
	}
	return fmt.Sprintf("%d.%d@%s", id.Client, id.Seq, id.Session)
}

// Full renders the id with the first 4 bytes of its digest,
// "<client>.<seq>[@<session hex>]#<8 hex digits>": histories
// (internal/check) name messages this way, so that a client's reuse of a
// sequence number for other content shows as two messages. An id with no
// digest (a test's unsealed message) renders as String does.
func (id MsgID) Full() string {
	if id.Digest == (Digest{}) {
		return id.String()
	}
	return fmt.Sprintf("%s#%x", id, id.Digest[:4])
}

// SessionKey identifies one session of one client. pad is MsgID's.
type SessionKey struct {
	Client  ProcID
	pad     uint32
	Session SessionID
}

func (k SessionKey) String() string { return fmt.Sprintf("%d@%s", k.Client, k.Session) }

// Compare orders session keys (client, then session).
func (k SessionKey) Compare(o SessionKey) int {
	if c := cmp.Compare(uint64(k.Client), uint64(o.Client)); c != 0 {
		return c
	}
	return k.Session.Compare(o.Session)
}

// Key returns the session id belongs to.
func (id MsgID) Key() SessionKey { return SessionKey{Client: id.Client, Session: id.Session} }

// Less orders message ids (client, session, sequence, then digest).
func (id MsgID) Less(o MsgID) bool {
	if id.Client != o.Client {
		return id.Client < o.Client
	}
	if id.Session != o.Session {
		return id.Session.Compare(o.Session) < 0
	}
	if id.Seq != o.Seq {
		return id.Seq < o.Seq
	}
	return bytes.Compare(id.Digest[:], o.Digest[:]) < 0
}

// Compare returns -1, 0 or +1 (client, session, sequence, then digest).
func (id MsgID) Compare(o MsgID) int {
	switch {
	case id.Less(o):
		return -1
	case o.Less(id):
		return 1
	}
	return 0
}

// SortedIDs returns the keys of m in id order (map order is random; outputs
// of deterministic state machines must not depend on it).
func SortedIDs[V any](m map[MsgID]V) []MsgID {
	ids := make([]MsgID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, MsgID.Compare)
	return ids
}

// Timestamp is a Skeen timestamp (time, group). Timestamps are ordered
// lexicographically; ties on time are broken by group id. The zero value is
// the bottom timestamp ⊥: real timestamps have T >= 1.
type Timestamp struct {
	T uint64
	G GroupID
}

// Less reports whether ts < o.
func (ts Timestamp) Less(o Timestamp) bool {
	if ts.T != o.T {
		return ts.T < o.T
	}
	return ts.G < o.G
}

// LessEq reports whether ts <= o.
func (ts Timestamp) LessEq(o Timestamp) bool { return !o.Less(ts) }

// IsZero reports whether ts is ⊥.
func (ts Timestamp) IsZero() bool { return ts == Timestamp{} }

// Compare returns -1, 0 or +1.
func (ts Timestamp) Compare(o Timestamp) int {
	switch {
	case ts.Less(o):
		return -1
	case o.Less(ts):
		return 1
	}
	return 0
}

func (ts Timestamp) String() string { return fmt.Sprintf("%d.g%d", ts.T, ts.G) }

// MaxTS returns the larger of two timestamps.
func MaxTS(a, b Timestamp) Timestamp {
	if a.Less(b) {
		return b
	}
	return a
}

// Ballot is a per-group Paxos ballot (N, P). Ballots are totally ordered by
// (N, P) and the leader of a ballot is P, so every ballot has one leader.
type Ballot struct {
	N uint32
	P ProcID
}

// Less reports whether b < o.
func (b Ballot) Less(o Ballot) bool {
	if b.N != o.N {
		return b.N < o.N
	}
	return b.P < o.P
}

// Leader returns the process that leads ballot b.
func (b Ballot) Leader() ProcID { return b.P }

func (b Ballot) String() string { return fmt.Sprintf("%d.p%d", b.N, b.P) }

// AppMsg is an application message: an id, its destination groups (sorted,
// without duplicates) and an opaque payload.
//
// Floor is the client's acknowledgement, fixed when the message is first
// sent: every message of the same session with Seq <= Floor has been
// answered, and the client will never send any of them again. Replicas use
// it to forget the ids of those messages (duplicate suppression stays
// bounded) and to recognise late copies of them. It is a claim of the
// client: a wrong one can only hurt that client's own messages.
type AppMsg struct {
	ID      MsgID
	Floor   uint64
	Dest    []GroupID
	Payload []byte
}

// Validate checks Dest is non-empty, sorted and duplicate-free and every
// group is below numGroups (numGroups <= 0 skips the range check).
func (m *AppMsg) Validate(numGroups int) error {
	if len(m.Dest) == 0 {
		return fmt.Errorf("wire: message %s has no destination groups", m.ID)
	}
	for i, g := range m.Dest {
		if i > 0 && m.Dest[i-1] >= g {
			return fmt.Errorf("wire: message %s: destination groups %v not strictly increasing", m.ID, m.Dest)
		}
		if numGroups > 0 && int(g) >= numGroups {
			return fmt.Errorf("wire: message %s: destination group %d out of range [0,%d)", m.ID, g, numGroups)
		}
	}
	return nil
}

// NewAppMsg returns the message with id (its Digest set from the content),
// destinations dest and payload payload.
func NewAppMsg(id MsgID, dest []GroupID, payload []byte) AppMsg {
	m := AppMsg{ID: id, Dest: dest, Payload: payload}
	m.Seal()
	return m
}

// Seal sets m.ID.Digest to the digest of m's content. Whoever creates a
// message seals it once; copies and retries carry the same id.
func (m *AppMsg) Seal() { m.ID.Digest = ContentDigest(m.Dest, m.Payload) }

// CheckDigest returns an error wrapping ErrDigest unless m.ID.Digest is the
// digest of m's content. Protocols check every full message they receive
// (MULTICAST, ACCEPT, recovery state); records that carry only an id and
// destinations (the Paxos baselines' CmdFinal) are not full messages.
func (m *AppMsg) CheckDigest() error {
	if m.ID.Digest != ContentDigest(m.Dest, m.Payload) {
		return fmt.Errorf("%w: %s (%d destinations, %d payload bytes)", ErrDigest, m.ID, len(m.Dest), len(m.Payload))
	}
	return nil
}

// DestIndex returns the index of g in m.Dest, or -1.
func (m *AppMsg) DestIndex(g GroupID) int {
	i, ok := slices.BinarySearch(m.Dest, g)
	if !ok {
		return -1
	}
	return i
}

// Kind is the one-byte message type on the wire. ONLY APPEND: the values are
// part of the protocol.
type Kind uint8

// Message kinds. Records (durable state) use the range 100 and above.
const (
	KindInvalid Kind = iota
	KindMulticast
	KindPropose
	KindAccept
	KindAcceptAck
	KindDeliver
	KindDelivered
	KindNewLeader
	KindNewLeaderAck
	KindNewState
	KindNewStateAck
	KindHeartbeat
	KindPaxosPrepare
	KindPaxosPromise
	KindPaxosAccept
	KindPaxosAccepted
	KindPaxosDecided
	KindPaxosHeartbeat
	KindSoftTS
	KindHardTS
	KindGossip
	KindViewRequest
	KindView
	KindOverloaded
	KindSnapshot
	KindRejoin
	KindAppSnapRequest
	KindAppSnapChunk
	KindHandOver
	KindReadIndex
	KindReadIndexAck
	KindRead
	KindReadReply
	KindVote
	KindVotePull
	KindBatch
	KindApplied
	kindEndMessages
)

// Record kinds.
const (
	KindRecBallot Kind = 100 + iota
	KindRecAccepted
	KindRecDelivered
	KindRecNewState
	KindRecCollected
	KindRecSnapshot
	KindRecSlotAccepted
	KindRecSlotDecided
	KindRecExpired
	KindRecInstall
	kindEndRecords
)

var kindNames = map[Kind]string{
	KindMulticast:    "MULTICAST",
	KindPropose:      "PROPOSE",
	KindAccept:       "ACCEPT",
	KindAcceptAck:    "ACCEPT_ACK",
	KindDeliver:      "DELIVER",
	KindDelivered:    "DELIVERED",
	KindNewLeader:    "NEW_LEADER",
	KindNewLeaderAck: "NEW_LEADER_ACK",
	KindNewState:     "NEW_STATE",
	KindNewStateAck:  "NEW_STATE_ACK",
	KindHeartbeat:    "HEARTBEAT",
	KindRecBallot:    "REC_BALLOT",
	KindRecAccepted:  "REC_ACCEPTED",
	KindRecDelivered: "REC_DELIVERED",
	KindRecNewState:  "REC_NEW_STATE",
	KindRecCollected: "REC_COLLECTED",
	KindRecSnapshot:  "REC_SNAPSHOT",

	KindPaxosPrepare:    "PAXOS_PREPARE",
	KindPaxosPromise:    "PAXOS_PROMISE",
	KindPaxosAccept:     "PAXOS_ACCEPT",
	KindPaxosAccepted:   "PAXOS_ACCEPTED",
	KindPaxosDecided:    "PAXOS_DECIDED",
	KindPaxosHeartbeat:  "PAXOS_HEARTBEAT",
	KindSoftTS:          "SOFT_TS",
	KindHardTS:          "HARD_TS",
	KindGossip:          "GOSSIP",
	KindViewRequest:     "VIEW_REQUEST",
	KindView:            "VIEW",
	KindOverloaded:      "OVERLOADED",
	KindRecSlotAccepted: "REC_SLOT_ACCEPTED",
	KindRecSlotDecided:  "REC_SLOT_DECIDED",
	KindRecExpired:      "REC_EXPIRED",
	KindSnapshot:        "SNAPSHOT",
	KindRejoin:          "REJOIN",
	KindHandOver:        "HANDOVER",
	KindAppSnapRequest:  "APP_SNAPSHOT_REQUEST",
	KindAppSnapChunk:    "APP_SNAPSHOT_CHUNK",
	KindRecInstall:      "REC_INSTALL",
	KindReadIndex:       "READ_INDEX",
	KindReadIndexAck:    "READ_INDEX_ACK",
	KindRead:            "READ",
	KindReadReply:       "READ_REPLY",
	KindVote:            "VOTE",
	KindVotePull:        "VOTE_PULL",
	KindBatch:           "BATCH",
	KindApplied:         "APPLIED",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Message is any protocol message or durable record.
type Message interface {
	Kind() Kind
}

// Envelope is a message with its sender and recipient.
type Envelope struct {
	From, To ProcID
	Msg      Message
}

// Multicast (MULTICAST) carries a client's message to a destination group's
// leader (WbCast) or process (Skeen). Also used by replicas to re-multicast.
type Multicast struct {
	M AppMsg
}

// Propose (Skeen's PROPOSE) carries group G's local timestamp for message ID.
type Propose struct {
	ID  MsgID
	G   GroupID
	LTS Timestamp
}

// Accept (WbCast ACCEPT) is the leader of group G proposing local timestamp
// LTS for M under ballot B. It goes to every member of every destination group.
type Accept struct {
	M    AppMsg
	G    GroupID
	B    Ballot
	LTS  Timestamp
	Linf Timestamp // the sender's view of group G's delivered floor (GC)
}

// AcceptAck (WbCast ACCEPT_ACK) is sent by a member of group G, which holds
// ACCEPTs for message ID from every destination group with ballots Ballots
// (aligned with the message's sorted Dest), to the leaders of those ballots.
// GTS is the maximum of the accepted local timestamps. Linf is the sender's
// view of group G's delivered floor: every member of G delivered every
// message addressed to G with a global timestamp at or below it (for
// garbage collection).
type AcceptAck struct {
	ID      MsgID
	G       GroupID
	Ballots []Ballot
	GTS     Timestamp
	Linf    Timestamp
}

// Deliver (WbCast DELIVER) tells the members of the leader's group to deliver
// message ID with global timestamp GTS. B is the leader's cballot. Prev is
// the global timestamp of the group's delivery just before this one: a
// follower delivers only if Prev equals its own last delivery, so a lost
// DELIVER is noticed instead of skipped. M carries the message when the
// follower may not hold it (catch-up after loss, crash or recovery). Linf is
// the group's delivered floor (for garbage collection).
type Deliver struct {
	ID   MsgID
	B    Ballot
	LTS  Timestamp
	GTS  Timestamp
	Prev Timestamp
	Linf Timestamp
	M    *AppMsg
}

// Delivered is the reply to the client: message ID was delivered in group G
// with global timestamp GTS. Leader is the sender's view of G's leader. A
// zero GTS means the message was delivered long ago and garbage-collected:
// the leader remembers that it was delivered, not its timestamp.
//
// Result is the application's result for the message in group G (the
// replicated state machine's, package rsm; at most MaxPayload bytes), or
// empty: a node without a state machine, or one that no longer holds the
// result (see docs/rsm.md). HasResult tells the two apart from an empty
// result.
type Delivered struct {
	ID        MsgID
	G         GroupID
	GTS       Timestamp
	Leader    ProcID
	HasResult bool
	Result    []byte
}

// NewLeader (NEW_LEADER) starts ballot B in a group.
type NewLeader struct {
	B Ballot
}

// Phase is a message's phase at a process.
type Phase uint8

// Phases, in increasing order of progress.
const (
	PhaseStart Phase = iota
	PhaseProposed
	PhaseAccepted
	PhaseCommitted
)

func (p Phase) String() string {
	switch p {
	case PhaseStart:
		return "START"
	case PhaseProposed:
		return "PROPOSED"
	case PhaseAccepted:
		return "ACCEPTED"
	case PhaseCommitted:
		return "COMMITTED"
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// MsgState is one message's state as shipped in recovery messages and
// records: the message, its phase, the group's local timestamp, the global
// timestamp, and the latest ACCEPT held from each destination group
// (Ballots and LTSs, aligned with M.Dest; zero entries where none is held).
type MsgState struct {
	M       AppMsg
	Phase   Phase
	LTS     Timestamp
	GTS     Timestamp
	Ballots []Ballot
	LTSs    []Timestamp
}

// NewLeaderAck (NEW_LEADER_ACK) is a member's promise for ballot B with its
// last adopted ballot CBallot, clock, max delivered gts and message states.
// A large state is split into pages (see Paged) that repeat the other
// fields; the promise counts once every page arrived.
type NewLeaderAck struct {
	B            Ballot
	CBallot      Ballot
	Clock        uint64
	MaxDelivered Timestamp
	// Linf is the member's view of the group's delivered floor: it may
	// have collected delivered messages up to it, which its State then
	// leaves out (a candidate below it cannot lead: wbcast, transfer.go).
	Linf  Timestamp
	State []MsgState
	Paged
}

// NewState (NEW_STATE) is the new leader's merged state for ballot B, in
// pages (see Paged) that repeat B and Clock; a member adopts the whole
// state once every page arrived.
type NewState struct {
	B     Ballot
	Clock uint64
	State []MsgState
	Paged
}

// Paged numbers one page of a state split across several messages or
// records, so each stays under a byte budget and the transport's frame cap
// (DefaultMaxFrame). Page counts from 0; More is set on every page but the
// last. The zero value is a whole state in one page.
type Paged struct {
	Page uint32
	More bool
}

// NewStateAck (NEW_STATE_ACK) confirms a member adopted ballot B's state.
type NewStateAck struct {
	B            Ballot
	MaxDelivered Timestamp
}

// Heartbeat is a liveness beacon between members of a group. B and CBallot
// are the sender's ballot and adopted ballot; Leader is true if the sender
// currently leads B. MaxDelivered is the sender's last delivery; Linf its
// view of the group's delivered floor (the leader computes it).
type Heartbeat struct {
	B            Ballot
	CBallot      Ballot
	Leader       bool
	MaxDelivered Timestamp
	Linf         Timestamp
}

// RecBallot records a promise: the process joined Ballot and last adopted
// CBallot. It must be durable before any message acting on the ballot.
type RecBallot struct {
	Ballot  Ballot
	CBallot Ballot
}

// RecAccepted records that the process accepted message state S (phase
// ACCEPTED with its local and global timestamps and ballot vector). It must be
// durable before the ACCEPT_ACK that reports it is sent.
type RecAccepted struct {
	S MsgState
}

// RecDelivered records that message M was delivered with local timestamp
// LTS and global timestamp GTS. It must be durable before the delivery is
// handed to the application.
type RecDelivered struct {
	M   AppMsg
	LTS Timestamp
	GTS Timestamp
}

// RecCollected records that messages IDs were garbage-collected: every
// process of every destination group delivered them. The process keeps
// only their ids (for duplicate suppression).
type RecCollected struct {
	IDs []MsgID
}

// RecSnapshot is a process's whole durable image, written when a log is
// compacted: applying it replaces everything applied before. Msgs lists the
// retained messages and Delivered says which of them were delivered here;
// Done lists, per client, the collected sequence numbers as a high-water
// mark W (every seq in [1, W]) plus the sequence numbers above it.
type RecSnapshot struct {
	Ballot, CBallot Ballot
	Clock           uint64
	MaxDelivered    Timestamp
	Msgs            []MsgState
	Delivered       []bool
	Done            []ClientDone
}

// ClientDone is one client session's duplicate-suppression state: the
// collected ids remembered and the highest Floor the client declared
// (AppMsg.Floor).
type ClientDone struct {
	Client  ProcID
	Session SessionID
	Floor   uint64
	// Collected holds the session's collected ids remembered here, as
	// (Seq, Digest) pairs sorted by Seq then Digest.
	Collected []SeqDigest
}

// SeqDigest is the part of a MsgID below its session.
type SeqDigest struct {
	Seq    uint64
	Digest Digest
}

// RecExpired records what client sessions' duplicate suppression forgot:
// whole sessions that expired, and single collected ids below their
// client's floor.
type RecExpired struct {
	Sessions []SessionKey
	IDs      []MsgID
}

// RecNewState records an adopted NEW_STATE (ballot, clock, messages), in
// pages like NEW_STATE itself (Paged): the state counts as adopted only
// once its last page is durable.
type RecNewState struct {
	B     Ballot
	Clock uint64
	State []MsgState
	Paged
}

// Kind implementations.
func (*Multicast) Kind() Kind    { return KindMulticast }
func (*Propose) Kind() Kind      { return KindPropose }
func (*Accept) Kind() Kind       { return KindAccept }
func (*AcceptAck) Kind() Kind    { return KindAcceptAck }
func (*Deliver) Kind() Kind      { return KindDeliver }
func (*Delivered) Kind() Kind    { return KindDelivered }
func (*NewLeader) Kind() Kind    { return KindNewLeader }
func (*NewLeaderAck) Kind() Kind { return KindNewLeaderAck }
func (*NewState) Kind() Kind     { return KindNewState }
func (*NewStateAck) Kind() Kind  { return KindNewStateAck }
func (*Heartbeat) Kind() Kind    { return KindHeartbeat }
func (*RecBallot) Kind() Kind    { return KindRecBallot }
func (*RecAccepted) Kind() Kind  { return KindRecAccepted }
func (*RecDelivered) Kind() Kind { return KindRecDelivered }
func (*RecNewState) Kind() Kind  { return KindRecNewState }
func (*RecCollected) Kind() Kind { return KindRecCollected }

// Kind implements Message.
func (*RecExpired) Kind() Kind  { return KindRecExpired }
func (*RecSnapshot) Kind() Kind { return KindRecSnapshot }
