package rsm

import (
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// Defaults for zero Config fields.
const (
	// DefaultMaxReplies and DefaultMaxReplyBytes bound the results a
	// Driver keeps for clients that have not yet acknowledged them.
	DefaultMaxReplies    = 1 << 16
	DefaultMaxReplyBytes = 64 << 20
)

// Config configures a Driver.
type Config struct {
	// MaxResult is the largest result, in bytes (default and at most
	// wire.MaxPayload: a result travels in a DELIVERED reply).
	MaxResult int
	// MaxReplies and MaxReplyBytes bound the results kept for clients
	// (defaults DefaultMaxReplies, DefaultMaxReplyBytes): past either,
	// the oldest result (in apply order) is forgotten. A client's floor
	// forgets its answered results first (replies.go).
	MaxReplies    int
	MaxReplyBytes int64
	// Group is the replica's group: an Exchanger's votes are cast as its
	// (exchange.go).
	Group wire.GroupID
	// MaxPendingBytes is the size of the entries held for votes past which
	// the node stops admitting client messages (default
	// DefaultMaxPendingBytes); MaxEarlyVotes bounds the votes held for
	// messages not delivered here yet (default DefaultMaxEarlyVotes; more
	// are refused and pulled again later); VoteCache is how many applied
	// messages' votes are kept for other replicas' pulls (default
	// DefaultVoteCache; negative: none), and MaxVotesKept how many more
	// are kept past it because a destination group has not applied their
	// message yet (NoteApplied; default DefaultMaxVotesKept; past it the
	// oldest is dropped and counted, Stats.VotesDropped).
	MaxPendingBytes int64
	MaxEarlyVotes   int
	VoteCache       int
	MaxVotesKept    int
}

// Stats counts what a Driver did.
type Stats struct {
	// Applied counts the entries applied since the state began (it is part
	// of the snapshot: a restarted replica continues the count).
	Applied uint64 `json:"applied"`
	// Skipped counts entries at or below the applied gts, handed over
	// again after a restart and not applied (exactly once).
	Skipped uint64 `json:"skipped"`
	// Batches counts the calls of StateMachine.Apply.
	Batches uint64 `json:"batches"`
	// Replies is the number of results held for clients, ReplyBytes their
	// size; Evicted counts results forgotten at the bounds before their
	// client's floor passed them.
	Replies    int    `json:"replies"`
	ReplyBytes int64  `json:"reply_bytes"`
	Evicted    uint64 `json:"evicted"`
	// Held is the number of entries held for votes, HeldBytes their size;
	// VotesCast counts this replica's votes, VotesIn those received,
	// VotesRefused those refused (exchange.go).
	Held         int    `json:"held"`
	HeldBytes    int64  `json:"held_bytes"`
	VotesCast    uint64 `json:"votes_cast"`
	VotesIn      uint64 `json:"votes_in"`
	VotesRefused uint64 `json:"votes_refused"`
	// VotesKept is the number of votes kept past VoteCache because a
	// destination group has not applied their message yet; VotesDropped
	// counts those dropped at MaxVotesKept anyway.
	VotesKept    int    `json:"votes_kept"`
	VotesDropped uint64 `json:"votes_dropped"`
}

// Driver feeds a StateMachine the deliveries of one replica, exactly once,
// keeps each entry's result for the client's reply, and frames the
// application's snapshots with the applied gts (snapshot.go). It is a
// deterministic state machine itself: every replica of a group that applies
// the same deliveries holds the same results. Not safe for concurrent use.
type Driver struct {
	sm       StateMachine
	cfg      Config
	applied  wire.Timestamp
	received wire.Timestamp // the last entry handed over: applied, or held (exchange.go)
	stats    Stats
	replies  replyTable
	x        exchange
	in       []pendingEntry
	batch    []Entry
	err      error // sticky: the state machine failed
}

// NewDriver returns a driver of sm, whose state is empty (applied gts zero)
// until Restore.
func NewDriver(sm StateMachine, cfg Config) (*Driver, error) {
	if sm == nil {
		return nil, fmt.Errorf("rsm: nil StateMachine")
	}
	if cfg.MaxResult == 0 {
		cfg.MaxResult = wire.MaxPayload
	}
	if cfg.MaxReplies == 0 {
		cfg.MaxReplies = DefaultMaxReplies
	}
	if cfg.MaxReplyBytes == 0 {
		cfg.MaxReplyBytes = DefaultMaxReplyBytes
	}
	switch {
	case cfg.MaxResult < 0 || cfg.MaxResult > wire.MaxPayload:
		return nil, fmt.Errorf("rsm: MaxResult %d outside 1..%d (wire.MaxPayload)", cfg.MaxResult, wire.MaxPayload)
	case cfg.MaxReplies < 0 || cfg.MaxReplyBytes < 0:
		return nil, fmt.Errorf("rsm: negative MaxReplies or MaxReplyBytes")
	case cfg.MaxPendingBytes < 0 || cfg.MaxEarlyVotes < 0:
		return nil, fmt.Errorf("rsm: negative MaxPendingBytes or MaxEarlyVotes")
	}
	if cfg.MaxPendingBytes == 0 {
		cfg.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if cfg.MaxEarlyVotes == 0 {
		cfg.MaxEarlyVotes = DefaultMaxEarlyVotes
	}
	switch {
	case cfg.VoteCache == 0:
		cfg.VoteCache = DefaultVoteCache
	case cfg.VoteCache < 0:
		cfg.VoteCache = 0
	}
	switch {
	case cfg.MaxVotesKept == 0:
		cfg.MaxVotesKept = DefaultMaxVotesKept
	case cfg.MaxVotesKept < 0:
		cfg.MaxVotesKept = 0
	}
	d := &Driver{sm: sm, cfg: cfg}
	d.replies.init(cfg.MaxReplies, cfg.MaxReplyBytes)
	ex, _ := sm.(Exchanger)
	d.x.init(ex, cfg.Group, cfg.VoteCache, cfg.MaxVotesKept)
	return d, nil
}

// Applied returns the gts of the last entry applied (zero: none).
func (d *Driver) Applied() wire.Timestamp { return d.applied }

// Stats returns the driver's counters.
func (d *Driver) Stats() Stats {
	s := d.stats
	s.Replies, s.ReplyBytes = d.replies.len(), d.replies.bytes
	s.Evicted = d.replies.evicted
	s.Held, s.HeldBytes = d.Backlog()
	s.VotesKept, s.VotesDropped = len(d.x.kept), d.x.dropped
	return s
}

// Err returns the error that stopped the driver, if any.
func (d *Driver) Err() error { return d.err }

// Apply hands batch to the state machine: the entries above the last one
// handed over, in order (an entry at or below it, or at or below the entry
// before it, was handed over already and is skipped: replay after a
// restart). An entry that needs other groups' votes (Exchanger) is held,
// with every entry after it, until they are in (AddVote): exchange.go.
// Each result is kept for the client's reply (Result). An error is sticky:
// the state machine's state is undefined after it, and the replica must
// restart from its last snapshot.
func (d *Driver) Apply(batch []Entry) error {
	if d.err != nil {
		return d.err
	}
	d.in = d.in[:0]
	last := d.received
	for i := range batch {
		e := &batch[i]
		if e.GTS.LessEq(last) {
			d.stats.Skipped++
			continue
		}
		last = e.GTS
		p := pendingEntry{Entry: *e}
		p.Votes = nil
		p.voters = d.x.votersOf(e)
		d.in = append(d.in, p)
	}
	if len(d.in) == 0 {
		return nil
	}
	d.received = last
	var err error
	if len(d.x.pending) > 0 {
		d.hold(d.in)
		err = d.drain()
	} else {
		var n int
		n, err = d.feed(d.in)
		if err == nil && n < len(d.in) {
			d.hold(d.in[n:])
		}
	}
	clear(d.in) // drop references to payloads
	return err
}

// applyNow hands src to the state machine (every entry ready: votes in
// where needed) and keeps the results.
func (d *Driver) applyNow(src []pendingEntry) error {
	if len(src) == 0 || d.err != nil {
		return d.err
	}
	d.batch = d.batch[:0]
	for i := range src {
		d.batch = append(d.batch, src[i].Entry)
	}
	res, err := d.sm.Apply(d.batch)
	d.stats.Batches++
	switch {
	case err != nil:
		d.err = fmt.Errorf("rsm: the state machine failed applying %d entries from %s (gts %s): %w", len(d.batch), d.batch[0].ID, d.batch[0].GTS, err)
	case len(res) != len(d.batch):
		d.err = fmt.Errorf("rsm: the state machine returned %d results for %d entries", len(res), len(d.batch))
	}
	if d.err == nil {
		for i, r := range res {
			if len(r) > d.cfg.MaxResult {
				d.err = fmt.Errorf("%w: %d bytes for %s, over the limit of %d", ErrResultTooLarge, len(r), d.batch[i].ID, d.cfg.MaxResult)
				break
			}
		}
	}
	if d.err != nil {
		clear(d.batch)
		return d.err
	}
	for i := range d.batch {
		e := &d.batch[i]
		d.replies.put(e.ID, e.Floor, res[i])
	}
	d.applied = d.batch[len(d.batch)-1].GTS
	d.stats.Applied += uint64(len(d.batch))
	clear(d.batch) // drop references to payloads
	return nil
}

// Result returns the result of message id, if the driver applied it and
// still holds its result (see Config.MaxReplies and the client's floor).
func (d *Driver) Result(id wire.MsgID) ([]byte, bool) { return d.replies.get(id) }
