// Package paxos is the per-group Multi-Paxos replicated log under weft's
// black-box baselines (FT-Skeen, FastCast): every member of a group runs
// one Log; the leader proposes commands, every member executes the chosen
// commands in slot order through its Host. It is a pure, deterministic
// state machine like the protocol cores that embed it: messages and ticks
// in, messages and durable records out through the host's amcast.Outbox.
//
// # Normal case (phase 2)
//
// The leader of ballot b assigns each command the next slot, accepts it
// itself (its vote) and sends PAXOS_ACCEPT (2a) to the other members. A
// member that has not promised a higher ballot accepts, records the value
// durably and sends PAXOS_ACCEPTED (2b) to every other member. A member
// learns that a slot is chosen when it holds the value of ballot b and the
// votes of a quorum for b. The leader counts its own vote; the other members
// count only 2b messages, not the leader's 2a: every learner then decides
// 2δ after the 2a, the accounting of the WbCast paper's FT-Skeen (counting
// the 2a as the leader's vote would let members of 3-replica groups decide
// after δ, an optimisation left out so that the baselines are the ones the
// paper measures). Members execute chosen commands in slot order.
//
// # Leader change (phase 1)
//
// Heartbeats feed a failure detector. When the leader is suspected, the
// first live member after it (in group order) starts a higher ballot with
// PAXOS_PREPARE, asking for everything at or above the first slot it has
// not executed. Members that join the ballot persist the promise and answer
// PAXOS_PROMISE with their accepted values (chosen ones marked). With a
// quorum of promises the candidate leads: at every slot from its execution
// point to the highest reported one it proposes the chosen value if one was
// reported, else the value accepted with the highest ballot, else a no-op,
// and new commands go after them. A candidate that does not win in time
// retries higher; a leader that loses touch with a quorum steps down.
//
// # Catch-up and commit notices
//
// A leader's heartbeat carries its execution point: below it every slot is
// chosen, so a member that accepted the leader's ballot's value there takes
// it as chosen (this is how members learn when a quorum cannot be heard
// directly). A member whose execution point stalls below the leader's gets
// the chosen values in PAXOS_DECIDED batches.
//
// # Durability
//
// Promises (REC_BALLOT), accepted values (REC_SLOT_ACCEPTED) and learned
// choices (REC_SLOT_DECIDED) are persisted before any message that relies
// on them leaves (the amcast.Ready contract). Logs are not compacted.
package paxos

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// Status is a member's role in its group.
type Status uint8

// Roles.
const (
	Follower Status = iota
	Leader
	Candidate
)

func (s Status) String() string {
	switch s {
	case Follower:
		return "FOLLOWER"
	case Leader:
		return "LEADER"
	case Candidate:
		return "CANDIDATE"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Host is the state machine that executes the log.
type Host interface {
	// Execute applies the command chosen at slot. It is called once per
	// slot, in slot order.
	Execute(slot uint64, c *wire.Command)
	// Lead is called when the member starts (true) or stops (false)
	// leading its group.
	Lead(leading bool)
	// CheckCommand reports whether c is a command the host could have
	// proposed (a message addressed to its group, a timestamp of the right
	// group, ...). A peer's command that fails it is rejected before the
	// log accepts, learns or adopts it: the host executes only commands it
	// can execute.
	CheckCommand(c *wire.Command) error
}

// Detector judges the liveness of group members (amcast.Detector).
type Detector = amcast.Detector

// NewTimeoutDetector returns amcast's fixed-timeout detector.
func NewTimeoutDetector(timeout uint64) *amcast.TimeoutDetector {
	return amcast.NewTimeoutDetector(timeout)
}

// Config configures one member's log. Zero durations take the defaults.
type Config struct {
	Topology *amcast.Topology
	ID       wire.ProcID
	// HeartbeatTicks: ticks between heartbeats (default 1).
	HeartbeatTicks int
	// ElectionTicks: silence after which a member is suspected; a candidate
	// that has not won after twice this retries (default 10).
	ElectionTicks int
	// CatchUpBatch: chosen values per catch-up message (default 256).
	CatchUpBatch int
	// Detector: default a TimeoutDetector with ElectionTicks.
	Detector Detector
	// Mutation breaks Paxos rules on purpose. Test only (see Mutation):
	// never set outside tests.
	Mutation Mutation
}

// WithDefaults validates c and fills in its defaults; protocols call it
// before building their own state.
func (c *Config) WithDefaults() error {
	if err := amcast.ReplicaDefaults("paxos", c.Topology, c.ID,
		amcast.IntDefault{V: &c.HeartbeatTicks, Default: 1, Name: "HeartbeatTicks"},
		amcast.IntDefault{V: &c.ElectionTicks, Default: 10, Name: "ElectionTicks"},
		amcast.IntDefault{V: &c.CatchUpBatch, Default: 256, Name: "CatchUpBatch"}); err != nil {
		return err
	}
	if c.Detector == nil {
		c.Detector = NewTimeoutDetector(uint64(c.ElectionTicks))
	}
	return nil
}

// Counters are the log's coverage counters.
type Counters struct {
	BallotsStarted int // PAXOS_PREPARE sent
	LeaderChanges  int // ballots won
	// RecoveriesWithValues counts ballots won whose merged log held a
	// command that was not yet chosen here (a real recovery, not an empty
	// takeover).
	RecoveriesWithValues int
	CatchUps             int // PAXOS_DECIDED batches sent
}

type slot struct {
	accB    wire.Ballot
	cmd     wire.Command
	has     bool // a value was accepted (or learned)
	decided bool
	voteB   wire.Ballot
	votes   uint64 // member-index bitmask of votes for voteB
	sentAt  uint64 // leader: tick of the last PAXOS_ACCEPT sent
}

type peer struct {
	ballot     wire.Ballot
	claimsLead bool
	heardHB    bool
	executed   uint64
	// Leader: target is the leader's execution point when the member was
	// first seen behind it (at tick targetAt); a member still below it two
	// ticks later is missing chosen values, not merely waiting for votes
	// in flight, and gets them.
	target   uint64
	targetAt uint64
}

type candidate struct {
	b        wire.Ballot
	start    uint64
	promises map[wire.ProcID]*wire.PaxosPromise
}

// maxSlotAhead bounds how far past its log a member accepts a slot number
// (a slot is allocated for every number up to it). A leader proposes at its
// own next slot, so a member this far behind is missing chosen values,
// which catch-up (PAXOS_DECIDED) brings, not proposals to vote on.
const maxSlotAhead = 1 << 16

// Log is one member's replica of its group's log.
type Log struct {
	cfg     Config
	host    Host
	out     *amcast.Outbox
	id      wire.ProcID
	g       wire.GroupID
	gi      int
	members []wire.ProcID
	quorum  int

	status   Status
	ballot   wire.Ballot // highest ballot joined (a promise)
	slots    []slot
	executed uint64 // first slot not executed
	next     uint64 // leader: first free slot
	ticks    uint64

	peers     []peer
	cand      *candidate
	lastStart uint64
	started   bool
	executing bool
	cov       Counters
	rejects   amcast.Rejects // refused remote input, by reason
}

// New returns the log of a member in its initial state: the group's first
// member leads ballot (0, first member).
func New(cfg Config, host Host, out *amcast.Outbox) (*Log, error) {
	if err := cfg.WithDefaults(); err != nil {
		return nil, err
	}
	l := newLog(cfg, host, out)
	l.ballot = wire.Ballot{N: 0, P: cfg.Topology.InitialLeader(l.g)}
	if l.ballot.Leader() == l.id {
		l.status = Leader
	}
	return l, nil
}

func newLog(cfg Config, host Host, out *amcast.Outbox) *Log {
	g, _ := cfg.Topology.GroupOf(cfg.ID)
	ms := cfg.Topology.Members(g)
	return &Log{cfg: cfg, host: host, out: out, id: cfg.ID, g: g, gi: cfg.Topology.MemberIndex(cfg.ID),
		members: ms, quorum: cfg.Topology.Quorum(g), peers: make([]peer, len(ms))}
}

// Restore rebuilds a member's log from its store after a crash. It comes
// back as a follower of its last promised ballot with every accepted and
// learned value; call Replay to re-execute the chosen prefix.
func Restore(cfg Config, host Host, out *amcast.Outbox, st *Store) (*Log, error) {
	if err := cfg.WithDefaults(); err != nil {
		return nil, err
	}
	l := newLog(cfg, host, out)
	l.ballot = st.Ballot
	if st.Ballot == (wire.Ballot{}) {
		l.ballot = wire.Ballot{N: 0, P: cfg.Topology.InitialLeader(l.g)}
	}
	l.status = Follower
	for _, s := range st.sortedSlots() {
		e := st.slots[s]
		sl := l.at(s)
		sl.accB, sl.cmd, sl.has, sl.decided = e.accB, e.cmd, e.has, e.decided
	}
	return l, nil
}

// Replay executes the chosen prefix of a restored log (Host.Execute for
// each slot, in order).
func (l *Log) Replay() { l.executeReady() }

// ID returns the member's id.
func (l *Log) ID() wire.ProcID { return l.id }

// Group returns the member's group.
func (l *Log) Group() wire.GroupID { return l.g }

// Status returns the member's role.
func (l *Log) Status() Status { return l.status }

// IsLeader reports whether the member leads its group.
func (l *Log) IsLeader() bool { return l.status == Leader }

// Ballot returns the highest ballot the member joined.
func (l *Log) Ballot() wire.Ballot { return l.ballot }

// Executed returns the first slot not executed.
func (l *Log) Executed() uint64 { return l.executed }

// Counters returns the coverage counters.
func (l *Log) Counters() Counters { return l.cov }

// Rejected returns the refused inputs of this incarnation by reason.
func (l *Log) Rejected() map[string]uint64 { return l.rejects.Counts() }

// Ticks returns the ticks seen.
func (l *Log) Ticks() uint64 { return l.ticks }

func (l *Log) at(s uint64) *slot {
	for uint64(len(l.slots)) <= s {
		l.slots = append(l.slots, slot{})
	}
	return &l.slots[s]
}

func (l *Log) sendOthers(m wire.Message) {
	for _, q := range l.members {
		if q != l.id {
			l.out.Send(l.id, q, m)
		}
	}
}

// Propose appends cmd to the log. It returns false if the member does not
// lead its group. In a group of one the command is chosen, and executed
// (Host.Execute), before Propose returns, unless the host is executing:
// hosts update their own state before they propose.
func (l *Log) Propose(cmd wire.Command) (uint64, bool) {
	if l.status != Leader {
		return 0, false
	}
	s := l.next
	l.next++
	l.proposeAt(s, cmd)
	return s, true
}

func (l *Log) proposeAt(s uint64, cmd wire.Command) {
	sl := l.at(s)
	sl.accB, sl.cmd, sl.has = l.ballot, cmd, true
	sl.voteB, sl.votes = l.ballot, 1<<l.gi
	sl.sentAt = l.ticks
	l.out.Persist(&wire.RecSlotAccepted{B: l.ballot, Slot: s, Cmd: cmd})
	l.sendOthers(&wire.PaxosAccept{B: l.ballot, Slot: s, Cmd: cmd})
	l.checkChosen(s)
}

// Pending calls fn for every slot at or above the execution point that
// holds a value not yet executed, in slot order: the leader's commands in
// flight.
func (l *Log) Pending(fn func(slot uint64, c *wire.Command)) {
	for s := l.executed; s < uint64(len(l.slots)); s++ {
		if sl := &l.slots[s]; sl.has {
			fn(s, &sl.cmd)
		}
	}
}

// Heard records that member from was heard (any message). Hosts call it for
// every message from a member of the group.
func (l *Log) Heard(from wire.ProcID) {
	if from != l.id {
		l.cfg.Detector.Heard(from, l.ticks)
	}
}

// member returns the index of from in the group, rejecting a sender that
// is not a member (or is this member: a process never sends itself a
// message over the network).
func (l *Log) member(from wire.ProcID) (int, error) {
	if g, ok := l.cfg.Topology.GroupOf(from); !ok || g != l.g {
		return 0, l.rejects.Reject("not_member", "paxos message from p%d, not a member of group %d", from, l.g)
	}
	if from == l.id {
		return 0, l.rejects.Reject("from_self", "paxos message from self p%d", from)
	}
	return l.cfg.Topology.MemberIndex(from), nil
}

// checkBallot rejects a ballot whose leader is not a member of the group:
// no member can lead it, and its leader's index would be out of range.
func (l *Log) checkBallot(what string, b wire.Ballot) error {
	if g, ok := l.cfg.Topology.GroupOf(b.Leader()); !ok || g != l.g {
		return l.rejects.Reject("ballot_not_member", "%s ballot %s led by p%d, not a member of group %d", what, b, b.Leader(), l.g)
	}
	return nil
}

// checkSender rejects a ballot that from claims to lead but does not: only
// a ballot's leader proposes (2a), prepares (1a) or claims to lead it.
func (l *Log) checkSender(what string, from wire.ProcID, b wire.Ballot) error {
	if b.Leader() != from {
		return l.rejects.Reject("ballot_sender_mismatch", "%s ballot %s from p%d", what, b, from)
	}
	return nil
}

// checkCommand rejects a command the host could not have proposed and,
// when the sender claims c was chosen at slot s, one that contradicts the
// value this member knows was chosen there (a chosen value never changes).
func (l *Log) checkCommand(what string, s uint64, c *wire.Command, chosen bool) error {
	if err := l.host.CheckCommand(c); err != nil {
		return l.rejects.Reject("bad_command", "%s slot %d: %v", what, s, err)
	}
	if chosen && s < uint64(len(l.slots)) && l.slots[s].decided && !CommandEqual(&l.slots[s].cmd, c) {
		return l.rejects.Reject("decided_mismatch", "%s slot %d: %s, but %s was chosen", what, s,
			wire.DescribeCommand(c), wire.DescribeCommand(&l.slots[s].cmd))
	}
	return nil
}

// CommandEqual reports whether two commands are the same value (payload
// bytes compared).
func CommandEqual(a, b *wire.Command) bool {
	return a.Op == b.Op && a.TS == b.TS && a.M.ID == b.M.ID &&
		slices.Equal(a.M.Dest, b.M.Dest) && bytes.Equal(a.M.Payload, b.M.Payload)
}

// Step handles a Paxos message from a member of the group. It returns
// false for messages that are not the log's.
func (l *Log) Step(from wire.ProcID, m wire.Message) (bool, error) {
	var err error
	switch m := m.(type) {
	case *wire.PaxosPrepare:
		err = l.onPrepare(from, m)
	case *wire.PaxosPromise:
		err = l.onPromise(from, m)
	case *wire.PaxosAccept:
		err = l.onAccept(from, m)
	case *wire.PaxosAccepted:
		err = l.onAccepted(from, m)
	case *wire.PaxosDecided:
		err = l.onDecided(from, m)
	case *wire.PaxosHeartbeat:
		err = l.onHeartbeat(from, m)
	default:
		return false, nil
	}
	return true, err
}

// checkSlot rejects a slot number too far beyond the log (n slots from s
// on, overflow-safe).
func (l *Log) checkSlot(s, n uint64) error {
	limit := uint64(len(l.slots)) + maxSlotAhead
	if s >= limit || n > limit-s {
		return l.rejects.Reject("slot_out_of_range", "slots %d..+%d far beyond the log (%d slots)", s, n, len(l.slots))
	}
	return nil
}

// join promises ballot b (b > l.ballot), stepping down if this member led
// or was establishing a lower ballot.
func (l *Log) join(b wire.Ballot) {
	l.ballot = b
	if b.Leader() != l.id {
		l.stepDown()
	}
	if l.cfg.Mutation.Has(MutForgetPromise) {
		return
	}
	l.out.Persist(&wire.RecBallot{Ballot: b})
}

func (l *Log) stepDown() {
	was := l.status
	l.status = Follower
	l.cand = nil
	if was == Leader {
		l.host.Lead(false)
	}
}
