// Package amcast defines the contract every atomic multicast protocol in weft
// implements: a deterministic, single-threaded state machine per process,
// driven by messages and ticks, whose outputs come out as one Ready batch.
//
// The contract mirrors etcd-io/raft's RawNode. A driver (the simulator, the
// datadriven tests, the real node) loops:
//
//	m.Step(env) / m.Tick()      // inputs
//	rd := m.Ready()             // outputs produced since the last Advance
//	persist rd.Persist          // fsync if rd.MustSync
//	send rd.Messages            // only after Persist is durable
//	hand rd.Deliveries to the application, in order (also after Persist)
//	m.Advance()
//
// Persist-before-send: every record in Ready.Persist is a promise or a fact
// (a joined ballot, an accepted timestamp, a delivery) that messages in the
// same Ready rely on. A driver must make Persist durable before it sends any
// message of that Ready or hands any delivery to the application. A driver
// that crashes between the two loses the whole batch, which is safe: nothing
// that depends on the records has left the process.
//
// Machines never read the wall clock, start goroutines, touch the network or
// files, or use global randomness. Time is counted in Tick calls; randomness,
// when a protocol needs any, comes from Config.
package amcast

import (
	"errors"
	"fmt"
	"slices"

	"github.com/weft-dev/weft/wire"
)

// ErrUnknownPeer is returned by Step for a message from a process outside
// the topology.
var ErrUnknownPeer = errors.New("amcast: message from unknown process")

// ErrBadMessage is returned by Step for a message the protocol cannot
// accept (wrong kind for the protocol, out-of-range groups, ...).
var ErrBadMessage = errors.New("amcast: bad message")

// Delivery is one application message delivered at a process, with the
// global timestamp that placed it in the total order.
//
// Rec is the index in the same Ready's Persist of the record that makes the
// delivery durable, or -1 if the protocol keeps no durable record of it. A
// delivery takes effect exactly when that record is durable: a driver that
// crashes after persisting a prefix of Persist must treat the deliveries
// whose Rec lies in the prefix as done (the application replays them from
// the log), and the others as never having happened.
//
// Expired is set only by a client (Client.ExpireTicks): it gave up on M
// when its session's lease passed with no reply. M may or may not have been
// delivered; GTS is zero and the client never sends M again.
//
// Install is state transfer (wbcast, transfer.go): the process's delivered
// prefix jumped to GTS, the last delivery of a prefix of its group's order
// installed from another member; M is zero. The application must install a
// snapshot of its state taken by a member of the group at GTS or later, and
// skip the deliveries at or below that snapshot's point that follow (package
// rsm applies by gts exactly once and does both).
type Delivery struct {
	M   wire.AppMsg
	GTS wire.Timestamp
	Rec int
	// Replies, in a Client's completions only, are the DELIVERED replies
	// that completed the message: one per destination group with
	// Client.AllGroups, else the first one (with each group's result, when
	// the nodes run a replicated service: package rsm).
	Replies []*wire.Delivered
	Expired bool
	Install bool
}

// Ready is the batch of outputs a Machine produced since the last Advance.
//
// REQUIRES: Persist is durable (synced if MustSync) before any of Messages is
// sent and before Deliveries reach the application.
type Ready struct {
	// Persist lists records to append to durable storage, in order.
	Persist []wire.Message
	// MustSync is true when Persist must be fsynced before proceeding.
	MustSync bool
	// Messages lists protocol messages to send. Messages to one recipient
	// must be sent in order over a FIFO channel.
	Messages []wire.Envelope
	// Deliveries lists application deliveries, in delivery order.
	Deliveries []Delivery
	// Reads lists the read-index requests (ReadIndexer) decided since the
	// last Advance: released with their index, or failed. A driver serves
	// a released read once its application applied the deliveries up to
	// the index (those of this Ready included).
	Reads []ReadState
}

// Empty reports whether rd carries nothing.
func (rd *Ready) Empty() bool {
	return len(rd.Persist) == 0 && len(rd.Messages) == 0 && len(rd.Deliveries) == 0 && len(rd.Reads) == 0
}

// ReadIndexer is a Machine that serves linearizable reads of its group's
// state without a multicast (wbcast, readindex.go): ReadIndex asks for a
// read index under a caller-chosen ctx, and a later Ready carries the
// outcome in Reads. Reads carry no durable state: a crash forgets them,
// and their clients retry.
type ReadIndexer interface {
	ReadIndex(ctx uint64)
}

// ReadState is the outcome of one ReadIndex request: Err nil and Index,
// the group's delivered position a query must see (every delivery at or
// below it applied), or Err, wrapping ErrNotLeader (retry at the group's
// leader) or ErrReadOverloaded (back off).
type ReadState struct {
	Ctx   uint64
	Index wire.Timestamp
	Err   error
}

// Errors of ReadState.Err.
var (
	ErrNotLeader      = errors.New("amcast: not the group's leader")
	ErrReadOverloaded = errors.New("amcast: too many reads pending")
)

// Machine is one process of an atomic multicast protocol. It is a
// deterministic state machine: the same inputs in the same order give the
// same outputs. It is not safe for concurrent use.
type Machine interface {
	// ID returns this process's id.
	ID() wire.ProcID
	// Step feeds one message received from env.From. Errors report input
	// the machine refused; the machine's state is unchanged by it.
	Step(env wire.Envelope) error
	// Tick advances the machine's logical time by one tick.
	Tick()
	// HasReady reports whether Ready would return a non-empty batch.
	HasReady() bool
	// Ready returns the outputs produced since the last Advance. The slices
	// are owned by the machine until Advance.
	Ready() Ready
	// Advance tells the machine the last Ready was handled.
	Advance()
}

// Outbox accumulates a Ready; protocol cores embed it.
type Outbox struct {
	rd Ready
}

// Send queues a message.
func (o *Outbox) Send(from, to wire.ProcID, m wire.Message) {
	o.rd.Messages = append(o.rd.Messages, wire.Envelope{From: from, To: to, Msg: m})
}

// Persist queues a durable record.
func (o *Outbox) Persist(r wire.Message) {
	o.rd.Persist = append(o.rd.Persist, r)
	o.rd.MustSync = true
}

// Deliver queues an application delivery without a durable record.
func (o *Outbox) Deliver(m wire.AppMsg, gts wire.Timestamp) {
	o.rd.Deliveries = append(o.rd.Deliveries, Delivery{M: m, GTS: gts, Rec: -1})
}

// Expire queues the completion of a client's message it gave up on
// (Delivery.Expired).
func (o *Outbox) Expire(m wire.AppMsg) {
	o.rd.Deliveries = append(o.rd.Deliveries, Delivery{M: m, Rec: -1, Expired: true})
}

// DeliverDurable persists rec and queues a delivery that takes effect when
// rec is durable.
func (o *Outbox) DeliverDurable(m wire.AppMsg, gts wire.Timestamp, rec wire.Message) {
	o.Persist(rec)
	o.rd.Deliveries = append(o.rd.Deliveries, Delivery{M: m, GTS: gts, Rec: len(o.rd.Persist) - 1})
}

// Install queues a state transfer to gts (Delivery.Install) that takes
// effect when the last record queued is durable.
func (o *Outbox) Install(gts wire.Timestamp) {
	o.rd.Deliveries = append(o.rd.Deliveries, Delivery{GTS: gts, Rec: len(o.rd.Persist) - 1, Install: true})
}

// Read queues the outcome of a read-index request.
func (o *Outbox) Read(rs ReadState) { o.rd.Reads = append(o.rd.Reads, rs) }

// HasReady implements Machine.
func (o *Outbox) HasReady() bool { return !o.rd.Empty() }

// Ready implements Machine.
func (o *Outbox) Ready() Ready { return o.rd }

// Advance implements Machine. It keeps the slices' capacity.
func (o *Outbox) Advance() {
	clear(o.rd.Persist)
	clear(o.rd.Messages)
	clear(o.rd.Deliveries)
	clear(o.rd.Reads)
	o.rd = Ready{
		Persist:    o.rd.Persist[:0],
		Messages:   o.rd.Messages[:0],
		Deliveries: o.rd.Deliveries[:0],
		Reads:      o.rd.Reads[:0],
	}
}

// Topology is the static layout of replica groups.
type Topology struct {
	// Groups lists each group's members; group g is Groups[g]. The first
	// member is the initial leader.
	Groups [][]wire.ProcID

	groupOf map[wire.ProcID]wire.GroupID
	index   map[wire.ProcID]int
	// dense answers GroupOf, IsReplica and MemberIndex for the ids below
	// its length (every replica's, when the largest is below
	// maxDenseProcID) without a map lookup: a loaded agent asked about
	// nearly every message it stepped and sent, 2% of its CPU in the
	// maps (docs/batching.md). Clients' ids past its end are not
	// replicas.
	dense []member
}

// member is a replica's place in the topology (Topology.dense).
type member struct {
	group wire.GroupID
	index int32
	ok    bool
}

// maxDenseProcID bounds Topology.dense: a topology whose largest replica
// id is at or past it keeps only the maps.
const maxDenseProcID = 1 << 12

// NewTopology builds a topology of g groups of r replicas each; the members
// of group i are processes i*r .. i*r+r-1.
func NewTopology(groups, replicas int) (*Topology, error) {
	if groups < 1 || replicas < 1 {
		return nil, fmt.Errorf("amcast: need at least 1 group and 1 replica, got %d groups x %d replicas", groups, replicas)
	}
	gs := make([][]wire.ProcID, groups)
	for g := range gs {
		for i := 0; i < replicas; i++ {
			gs[g] = append(gs[g], wire.ProcID(g*replicas+i))
		}
	}
	return TopologyOf(gs)
}

// TopologyOf builds a topology from explicit member lists.
func TopologyOf(groups [][]wire.ProcID) (*Topology, error) {
	t := &Topology{Groups: groups, groupOf: map[wire.ProcID]wire.GroupID{}, index: map[wire.ProcID]int{}}
	for g, ms := range groups {
		if len(ms) == 0 {
			return nil, fmt.Errorf("amcast: group %d has no members", g)
		}
		if len(ms) > MaxGroupSize {
			return nil, fmt.Errorf("amcast: group %d has %d members, more than %d", g, len(ms), MaxGroupSize)
		}
		for i, p := range ms {
			t.index[p] = i
			if _, dup := t.groupOf[p]; dup {
				return nil, fmt.Errorf("amcast: process %d is in more than one group", p)
			}
			t.groupOf[p] = wire.GroupID(g)
		}
	}
	top := wire.ProcID(0)
	for p := range t.groupOf {
		top = max(top, p)
	}
	if top < maxDenseProcID {
		t.dense = make([]member, top+1)
		for p, g := range t.groupOf {
			t.dense[p] = member{group: g, index: int32(t.index[p]), ok: true}
		}
	}
	return t, nil
}

// MaxGroupSize bounds the members of one group (quorum tallies are bitmasks).
const MaxGroupSize = 64

// MemberIndex returns p's position in its group's member list.
func (t *Topology) MemberIndex(p wire.ProcID) int {
	if int(p) < len(t.dense) {
		return int(t.dense[p].index)
	}
	return t.index[p]
}

// NumGroups returns the number of groups.
func (t *Topology) NumGroups() int { return len(t.Groups) }

// NumReplicas returns the total number of replica processes.
func (t *Topology) NumReplicas() int { return len(t.groupOf) }

// GroupOf returns the group of replica p.
func (t *Topology) GroupOf(p wire.ProcID) (wire.GroupID, bool) {
	if int(p) < len(t.dense) {
		m := t.dense[p]
		return m.group, m.ok
	}
	if t.dense != nil {
		return 0, false // past every replica's id
	}
	g, ok := t.groupOf[p]
	return g, ok
}

// Members returns the members of group g.
func (t *Topology) Members(g wire.GroupID) []wire.ProcID { return t.Groups[g] }

// Quorum returns the majority size of group g.
func (t *Topology) Quorum(g wire.GroupID) int { return len(t.Groups[g])/2 + 1 }

// FloorOf returns the highest timestamp that at least q of ts reach (the
// q-th highest; ts, one per member, is sorted in place): a group's
// delivered or applied floor for a quorum q. q must be in 1..len(ts).
func FloorOf(ts []wire.Timestamp, q int) wire.Timestamp {
	slices.SortFunc(ts, func(a, b wire.Timestamp) int { return b.Compare(a) })
	return ts[q-1]
}

// InitialLeader returns group g's initial leader (its first member).
func (t *Topology) InitialLeader(g wire.GroupID) wire.ProcID { return t.Groups[g][0] }

// IsReplica reports whether p is a replica.
func (t *Topology) IsReplica(p wire.ProcID) bool {
	_, ok := t.GroupOf(p)
	return ok
}
