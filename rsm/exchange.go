package rsm

import (
	"errors"
	"fmt"
	"slices"

	"github.com/weft-dev/weft/wire"
)

// Exchange between groups (issue #12 item 3; docs/rsm.md "Entries that
// need other groups' state").
//
// Atomic multicast delivers a message to several groups at the same place
// of one global order, but each group holds only its own state. A command
// whose effect at one group depends on another group's state (a
// transaction whose condition on one shard decides its writes on another)
// needs that state: scalable state-machine replication (S-SMR, Bezerra,
// Pedone, van Renesse, DSN 2014) has each group's replicas send the other
// groups what they read at the command's position, and every group wait for
// it before executing the command. rsm does the same with votes:
//
//   - An Exchanger says which destination groups of an entry vote on it
//     (Voters, decided from the entry alone so that every destination group
//     agrees: none for most entries) and casts this group's vote on the
//     state after every entry before it (Vote).
//   - The Driver applies entries in order up to one with voters, casts its
//     own vote if it is one (TakeVotes: the node sends it to every replica
//     of the other destination groups), and holds that entry and every
//     later one until every other voter's vote is in (AddVote). The entry
//     then reaches Apply with Entry.Votes, in Dest's order (nil for a group
//     that does not vote). A group that is the only voter waits for no one;
//     a group that does not vote waits for the voters.
//
// Why it cannot deadlock: the entries held at any replica are delivered
// messages; a group holding entry m waits only for groups that deliver m.
// Among the messages held anywhere, the one lowest in the global order has
// every destination group at it (each applied everything before it, which
// holds no votes they wait for) and casting, so it completes; induction.
//
// Why a vote can be taken from any replica of its group: every replica of
// a group applies the same entries in the same order, so all cast the same
// vote on the same entry. A replica that restarted, or whose votes were
// lost, asks again (the node's VOTE_PULL); recent votes are kept for that
// (Config.VoteCache); older ones are gone and a replica that needs one
// catches up by state transfer from its own group instead (docs/rsm.md).

// Exchanger is a StateMachine some of whose entries to several groups need
// the votes of some of their destination groups (Voters).
type Exchanger interface {
	StateMachine
	// Voters returns the destination groups of e that vote on it
	// (increasing; none: e needs no votes). It must depend on the entry
	// alone (its payload and destinations), never on the state: every
	// destination group must agree, or one would wait for a vote that is
	// never cast. Groups outside e.Dest are ignored; an entry to a single
	// group is never exchanged. A group whose part of a command cannot fail
	// need not vote (weft-kv: a shard with only puts), so it does not hold
	// up the others.
	Voters(e Entry) []wire.GroupID
	// Vote returns this group's vote on e, on the state after every entry
	// before it. It must be deterministic (every replica of the group casts
	// the same vote) and at most MaxVote bytes. The state must not change.
	Vote(e Entry) []byte
}

// MaxVote is the largest vote, in bytes.
const MaxVote = wire.MaxVote

// Vote is one group's vote on a message, as replicas exchange it.
type Vote struct {
	ID  wire.MsgID
	GTS wire.Timestamp // the message's gts (the same at every group)
	G   wire.GroupID   // the group whose vote this is
	// To lists the groups that need it (TakeVotes; the other destination
	// groups).
	To   []wire.GroupID
	Vote []byte
}

// Reasons AddVote refuses a vote (counted in Stats.VotesRefused).
var (
	ErrVoteTooLarge = errors.New("rsm: vote too large")
	ErrVoteConflict = errors.New("rsm: a second, different vote of the same group on the same message")
	ErrVoteNotDest  = errors.New("rsm: a vote of a group that is not a voter on the message")
	ErrVoteFull     = errors.New("rsm: too many votes held for messages not yet delivered here")
)

// Defaults for the exchange's bounds.
const (
	DefaultMaxPendingBytes = 64 << 20
	DefaultMaxEarlyVotes   = 1 << 16
	DefaultVoteCache       = 1 << 14
	DefaultMaxVotesKept    = 1 << 16
)

// voteKey names one group's vote on one message.
type voteKey struct {
	id wire.MsgID
	g  wire.GroupID
}

// pendingEntry is an entry on its way to Apply; held entries are copies
// (the caller's payload is not the driver's to keep).
type pendingEntry struct {
	Entry
	voters []wire.GroupID // the Exchanger's Voters (Apply asks once per entry); nil: none
	cast   bool           // this group's vote is cast (in votes)
}

// exchange is the Driver's state for votes.
type exchange struct {
	ex    Exchanger // nil: the state machine exchanges nothing
	group wire.GroupID
	// pending are the entries held behind one that waits for votes (the
	// first), in order; ids indexes them; bytes is their size.
	pending []pendingEntry
	ids     map[wire.MsgID]wire.Timestamp
	bytes   int64
	// votes holds the votes cast or received for messages not yet
	// applied; early counts those whose message is not held here yet
	// (bounded: Config.MaxEarlyVotes).
	votes map[voteKey]voteVal
	early int
	out   []Vote
	// decided keeps the votes of the last Config.VoteCache messages
	// applied, in a ring, to answer other replicas' pulls.
	decided map[wire.MsgID]decidedVotes
	ring    []wire.MsgID
	next    int
	// kept are the messages, oldest first, whose votes left the ring while
	// one of their destination groups had not applied them (retire): they
	// stay in decided, for that group's pulls, until NoteApplied says every
	// destination has, at most maxKept of them (then the oldest goes,
	// counted in dropped). A group entirely down cannot have new messages
	// delivered, so what it may still need is what was in flight when it
	// went down: kept stays small.
	kept    []wire.MsgID
	maxKept int
	dropped uint64
	applied map[wire.GroupID]wire.Timestamp // each group's applied floor (NoteApplied)
}

type voteVal struct {
	v     []byte
	gts   wire.Timestamp
	early bool
}

type decidedVotes struct {
	gts   wire.Timestamp
	dest  []wire.GroupID
	votes [][]byte
}

// pendingOverhead is what a held entry counts beyond its payload and
// destinations.
const pendingOverhead = 128

func (x *exchange) init(ex Exchanger, group wire.GroupID, cache, kept int) {
	*x = exchange{ex: ex, group: group, ids: map[wire.MsgID]wire.Timestamp{}, votes: map[voteKey]voteVal{},
		maxKept: kept, applied: map[wire.GroupID]wire.Timestamp{}}
	if cache > 0 {
		x.decided = map[wire.MsgID]decidedVotes{}
		x.ring = make([]wire.MsgID, 0, cache)
	}
}

// feed applies src in order up to the first entry that needs votes it
// does not have (casting this group's vote on it), and returns how many
// entries it applied.
func (d *Driver) feed(src []pendingEntry) (int, error) {
	start := 0
	for i := range src {
		p := &src[i]
		if p.voters == nil || p.Votes != nil {
			continue
		}
		// The vote must see the state after every entry before this one.
		if err := d.applyNow(src[start:i]); err != nil {
			return start, err
		}
		start = i
		if !d.collect(p) {
			return i, d.err
		}
	}
	return len(src), d.applyNow(src[start:])
}

// hold appends copies of src to the held entries.
func (d *Driver) hold(src []pendingEntry) {
	x := &d.x
	for _, p := range src {
		p.Payload = slices.Clone(p.Payload)
		p.Dest = slices.Clone(p.Dest)
		x.pending = append(x.pending, p)
		x.ids[p.ID] = p.GTS
		x.bytes += int64(len(p.Payload)+4*len(p.Dest)) + pendingOverhead
		for _, g := range p.Dest { // its early votes are early no more
			k := voteKey{p.ID, g}
			if v, ok := x.votes[k]; ok && v.early {
				x.early--
				if !slices.Contains(p.voters, g) || v.gts != p.GTS {
					delete(x.votes, k) // a vote it does not take (AddVote refuses these once held)
					d.stats.VotesRefused++
					continue
				}
				v.early = false
				x.votes[k] = v
			}
		}
	}
}

// drain applies the held entries that can be, and releases them.
func (d *Driver) drain() error {
	x := &d.x
	n, err := d.feed(x.pending)
	for i := range x.pending[:n] {
		p := &x.pending[i]
		delete(x.ids, p.ID)
		x.bytes -= int64(len(p.Payload)+4*len(p.Dest)) + pendingOverhead
		*p = pendingEntry{}
	}
	x.pending = x.pending[n:]
	if len(x.pending) == 0 {
		x.pending = nil // let the array go
	}
	return err
}

// collect casts this group's vote on p if it has not, and fills p.Votes
// if every destination group's vote is in.
func (d *Driver) collect(p *pendingEntry) bool {
	x := &d.x
	if !p.cast && slices.Contains(p.voters, x.group) {
		v := x.ex.Vote(p.Entry)
		if len(v) > MaxVote {
			d.err = fmt.Errorf("%w: %d bytes on %s, the limit is %d", ErrVoteTooLarge, len(v), p.ID, MaxVote)
			return false
		}
		v = slices.Clone(v)
		x.votes[voteKey{p.ID, x.group}] = voteVal{v: v, gts: p.GTS}
		to := make([]wire.GroupID, 0, len(p.Dest)-1)
		for _, g := range p.Dest {
			if g != x.group {
				to = append(to, g)
			}
		}
		x.out = append(x.out, Vote{ID: p.ID, GTS: p.GTS, G: x.group, To: to, Vote: v})
		p.cast = true
		d.stats.VotesCast++
	}
	for _, g := range p.voters {
		if _, ok := x.votes[voteKey{p.ID, g}]; !ok {
			return false
		}
	}
	p.Votes = make([][]byte, len(p.Dest))
	for i, g := range p.Dest {
		if k := (voteKey{p.ID, g}); slices.Contains(p.voters, g) {
			p.Votes[i] = x.votes[k].v
			delete(x.votes, k)
		}
	}
	x.remember(p)
	return true
}

// remember keeps p's votes for pulls, forgetting the oldest past the
// cache's size.
func (x *exchange) remember(p *pendingEntry) {
	if x.decided == nil {
		return
	}
	if len(x.ring) < cap(x.ring) {
		x.ring = append(x.ring, p.ID)
	} else {
		x.retire(x.ring[x.next])
		x.ring[x.next] = p.ID
		x.next = (x.next + 1) % len(x.ring)
	}
	x.decided[p.ID] = decidedVotes{gts: p.GTS, dest: slices.Clone(p.Dest), votes: p.Votes}
}

// retire takes message id's votes out of the ring: forgotten if every
// destination group applied the message, else kept (bounded).
func (x *exchange) retire(id wire.MsgID) {
	dv, ok := x.decided[id]
	if !ok || x.appliedEverywhere(dv) || x.maxKept == 0 {
		delete(x.decided, id)
		return
	}
	if len(x.kept) >= x.maxKept {
		delete(x.decided, x.kept[0])
		x.kept = x.kept[1:]
		x.dropped++
	}
	x.kept = append(x.kept, id)
}

// appliedEverywhere reports whether every destination group of dv applied
// its message, as far as NoteApplied told.
func (x *exchange) appliedEverywhere(dv decidedVotes) bool {
	for _, g := range dv.dest {
		if x.applied[g].Less(dv.gts) {
			return false
		}
	}
	return true
}

// NoteApplied tells the driver that group g applied every entry up to gts
// (the node: what a quorum of g's replicas report; a replica of g behind
// that floor catches up by state transfer from its group). The votes kept
// past VoteCache for messages every destination group applied are
// forgotten. A floor lower than one noted before is ignored.
func (d *Driver) NoteApplied(g wire.GroupID, gts wire.Timestamp) {
	x := &d.x
	if !x.applied[g].Less(gts) {
		return
	}
	x.applied[g] = gts
	k := 0
	for _, id := range x.kept {
		if dv, ok := x.decided[id]; ok && !x.appliedEverywhere(dv) {
			x.kept[k] = id
			k++
		} else {
			delete(x.decided, id)
		}
	}
	clear(x.kept[k:])
	x.kept = x.kept[:k]
}

// AddVote takes a vote another replica sent (or answered a pull with). A
// vote that contradicts what the driver knows is refused with a reason
// (counted in Stats.VotesRefused); one for a message already applied here
// is ignored. The error is the driver's own (sticky) failure, or the
// reason the vote was refused.
func (d *Driver) AddVote(v Vote) error {
	if d.err != nil {
		return d.err
	}
	x := &d.x
	refuse := func(err error, format string, args ...any) error {
		d.stats.VotesRefused++
		return fmt.Errorf("%w: %s", err, fmt.Sprintf(format, args...))
	}
	if len(v.Vote) > MaxVote {
		return refuse(ErrVoteTooLarge, "%d bytes of group %d on %s", len(v.Vote), v.G, v.ID)
	}
	d.stats.VotesIn++
	if x.ex == nil || v.G == x.group || v.GTS.LessEq(d.applied) {
		return nil // this group's own (it casts it), or applied already
	}
	k := voteKey{v.ID, v.G}
	if old, ok := x.votes[k]; ok {
		if !slices.Equal(old.v, v.Vote) || old.gts != v.GTS {
			return refuse(ErrVoteConflict, "group %d on %s", v.G, v.ID)
		}
		return nil
	}
	gts, held := x.ids[v.ID]
	switch {
	case held && gts != v.GTS:
		return refuse(ErrVoteNotDest, "group %d's vote on %s at gts %s, delivered here at %s", v.G, v.ID, v.GTS, gts)
	case held:
		if !slices.Contains(x.held(v.ID).voters, v.G) {
			return refuse(ErrVoteNotDest, "group %d on %s, not one of its voters", v.G, v.ID)
		}
	case v.GTS.LessEq(d.received):
		return nil // delivered and applied here before any vote was needed: nothing waits for it
	default:
		if x.early >= d.cfg.MaxEarlyVotes {
			x.sweepEarly(d.received)
		}
		if x.early >= d.cfg.MaxEarlyVotes {
			return refuse(ErrVoteFull, "%d held", x.early)
		}
		x.early++
	}
	x.votes[k] = voteVal{v: slices.Clone(v.Vote), gts: v.GTS, early: !held}
	if held && len(x.pending) > 0 && x.pending[0].ID == v.ID {
		return d.drain()
	}
	return nil
}

// HeldDest returns the destinations of held message id (nil if it is not
// held): the node pulls a missing vote from every one of them, since every
// destination's replicas receive every voter's vote.
func (d *Driver) HeldDest(id wire.MsgID) []wire.GroupID {
	if p := d.x.held(id); p != nil {
		return p.Dest
	}
	return nil
}

// held returns held message id's entry, or nil.
func (x *exchange) held(id wire.MsgID) *pendingEntry {
	if _, ok := x.ids[id]; !ok {
		return nil
	}
	for i := range x.pending {
		if x.pending[i].ID == id {
			return &x.pending[i]
		}
	}
	return nil
}

// votersOf asks the Exchanger which groups vote on e: nil unless e goes to
// several groups and at least one of them votes; only destinations count.
func (x *exchange) votersOf(e *Entry) []wire.GroupID {
	if x.ex == nil || len(e.Dest) < 2 {
		return nil
	}
	var vs []wire.GroupID
	for _, g := range x.ex.Voters(*e) {
		if slices.Contains(e.Dest, g) && !slices.Contains(vs, g) {
			vs = append(vs, g)
		}
	}
	return vs
}

// sweepEarly forgets early votes for messages at or below received: this
// replica passed them without holding them (a vote with a wrong gts, or
// for a message to other groups), so nothing will claim them.
func (x *exchange) sweepEarly(received wire.Timestamp) {
	for k, v := range x.votes {
		if v.early && v.gts.LessEq(received) {
			delete(x.votes, k)
			x.early--
		}
	}
}

// TakeVotes returns the votes this replica cast since the last call: the
// node sends each to every replica of its To groups.
func (d *Driver) TakeVotes() []Vote {
	out := d.x.out
	d.x.out = nil
	return out
}

// Waiting reports the entry the driver holds for votes, if any: its id and
// gts, and the groups whose votes are missing (the node asks their
// replicas again after a while: VOTE_PULL).
func (d *Driver) Waiting() (id wire.MsgID, gts wire.Timestamp, missing []wire.GroupID, ok bool) {
	x := &d.x
	if len(x.pending) == 0 {
		return id, gts, nil, false
	}
	p := &x.pending[0]
	for _, g := range p.voters {
		if _, in := x.votes[voteKey{p.ID, g}]; !in {
			missing = append(missing, g)
		}
	}
	return p.ID, p.GTS, missing, true
}

// VoteOf returns group g's vote on message id if this replica holds it
// (cast or received and not yet applied, or applied recently: the vote
// cache), to answer another replica's pull.
func (d *Driver) VoteOf(id wire.MsgID, g wire.GroupID) (Vote, bool) {
	x := &d.x
	if v, ok := x.votes[voteKey{id, g}]; ok && !v.early {
		return Vote{ID: id, GTS: v.gts, G: g, Vote: v.v}, true
	}
	if dv, ok := x.decided[id]; ok {
		if i := slices.Index(dv.dest, g); i >= 0 {
			return Vote{ID: id, GTS: dv.gts, G: g, Vote: dv.votes[i]}, true
		}
	}
	return Vote{}, false
}

// Holds reports whether message id is delivered here and held for votes.
func (d *Driver) Holds(id wire.MsgID) bool {
	_, ok := d.x.ids[id]
	return ok
}

// Received returns the gts of the last entry handed to the driver: applied,
// or held for votes. The node's log must keep (or the snapshot hold) every
// delivery above it; a snapshot holds the held entries (snapshot.go).
func (d *Driver) Received() wire.Timestamp { return d.received }

// Backlog returns the entries held for votes and their size in bytes. The
// node stops admitting new client messages while it is over
// Config.MaxPendingBytes: the held entries are deliveries (already
// durable) and cannot be refused.
func (d *Driver) Backlog() (int, int64) { return len(d.x.pending), d.x.bytes }

// OverBacklog reports whether the entries held for votes are over
// Config.MaxPendingBytes.
func (d *Driver) OverBacklog() bool { return d.x.bytes > d.cfg.MaxPendingBytes }
