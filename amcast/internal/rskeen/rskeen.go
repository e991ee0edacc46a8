// Package rskeen is what the black-box baselines share: a Skeen process
// replicated by a per-group Multi-Paxos log (package paxos). Core holds the
// per-message records, Skeen's delivery rule, client replies, liveness
// re-multicasts and the durable delivery records; the protocol packages
// (ftskeen, fastcast) decide which commands go into the log and when a
// message commits.
package rskeen

import (
	"bytes"
	"fmt"
	"slices"
	"sort"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/internal/paxos"
	"github.com/weft-dev/weft/amcast/internal/tsheap"
	"github.com/weft-dev/weft/wire"
)

// Phase is a message's phase at a replica.
type Phase uint8

// Phases.
const (
	Start     Phase = iota // unknown to the log
	Assigned               // the group's local timestamp is chosen (pending)
	Committed              // the global timestamp is final
)

// Rec is a replica's state for one message.
type Rec struct {
	M     wire.AppMsg
	Known bool
	Phase Phase
	LTS   wire.Timestamp // the group's local timestamp
	GTS   wire.Timestamp

	Delivered bool
	// TS holds, per destination (indexed like M.Dest), the local timestamp
	// each destination group chose, as far as this replica knows.
	TS []wire.Timestamp
	// Soft holds FastCast's proposed (not yet chosen) local timestamps.
	Soft []wire.Timestamp
	// Finals lists the values of FINAL commands executed after the
	// message's ASSIGN (FastCast: the commit needs one equal to the gts).
	Finals []wire.Timestamp

	// Leader bookkeeping: commands of this leadership in flight.
	AssignInFlight bool
	FinalInFlight  bool
	FinalVal       wire.Timestamp
	SpecDone       bool // FastCast: the speculative FINAL was proposed

	// Room for TS and Soft of a message to at most two groups (nearly
	// every message): a record then costs one allocation, not three.
	tsInline, softInline [2]wire.Timestamp

	early   []early // timestamps received before the message itself
	since   uint64  // tick of the last progress (liveness re-multicast)
	sentAt  uint64  // tick (+1) of the last re-send of our timestamp
	restore *delivered
}

type early struct {
	g    wire.GroupID
	ts   wire.Timestamp
	soft bool
}

type delivered struct {
	lts, gts wire.Timestamp
}

// Config configures one replica of a protocol built on Core (FT-Skeen's
// and FastCast's Config). Zero durations take defaults.
type Config struct {
	Topology *amcast.Topology
	ID       wire.ProcID
	// HeartbeatTicks, ElectionTicks, CatchUpBatch and Detector configure
	// the group's Paxos log (package paxos; defaults 1, 10, 256, timeout).
	HeartbeatTicks, ElectionTicks, CatchUpBatch int
	Detector                                    paxos.Detector
	// RetryTicks: a message known here but not delivered after this many
	// ticks without progress is re-multicast to its destination groups
	// (default 12).
	RetryTicks int
	// Mutation breaks rules of the protocol on purpose to prove the
	// checkers catch it (paxos.Mutation; the knobs are MutSkipDeliveryBlocking
	// and the others in this package and in paxos). Test only: never set
	// outside tests.
	Mutation paxos.Mutation
}

func (c Config) paxos() paxos.Config {
	return paxos.Config{Topology: c.Topology, ID: c.ID, HeartbeatTicks: c.HeartbeatTicks,
		ElectionTicks: c.ElectionTicks, CatchUpBatch: c.CatchUpBatch, Detector: c.Detector, Mutation: c.Mutation}
}

// Core is the shared state of one replica.
type Core struct {
	amcast.Outbox
	Log  *paxos.Log
	ID   wire.ProcID
	G    wire.GroupID
	GI   int
	Topo *amcast.Topology

	retryTicks   int
	recs         map[wire.MsgID]*Rec
	open         map[wire.MsgID]*Rec   // known and not committed: what re-multicasts scan
	pending      tsheap.Heap[struct{}] // Assigned messages by local timestamp (lazy)
	committed    tsheap.Heap[struct{}] // Committed, undelivered messages by global timestamp
	maxDelivered wire.Timestamp
	hint         []wire.ProcID // per group: its leader as far as we know
	cov          amcast.Coverage
	rejects      amcast.Rejects // refused remote input, by reason
	mut          paxos.Mutation // test-only knobs (Config.Mutation)
}

// Init sets up the core of replica id (the protocol then sets Log).
func (c *Core) Init(topo *amcast.Topology, id wire.ProcID, cfg Config) {
	if cfg.RetryTicks == 0 {
		cfg.RetryTicks = 12
	}
	g, _ := topo.GroupOf(id)
	c.ID, c.G, c.GI, c.Topo = id, g, topo.MemberIndex(id), topo
	c.retryTicks = max(cfg.RetryTicks, 1)
	c.mut = cfg.Mutation
	c.recs = map[wire.MsgID]*Rec{}
	c.open = map[wire.MsgID]*Rec{}
	for gg := range topo.Groups {
		c.hint = append(c.hint, topo.InitialLeader(wire.GroupID(gg)))
	}
}

// Open sets up the core of a replica and its Paxos log, fresh (st nil)
// or restored from st after a crash: the replica comes back as a follower,
// re-executes the chosen prefix of its log and does not deliver again what
// it delivered durably. host is the protocol embedding the core.
func (c *Core) Open(host paxos.Host, cfg Config, st *Store) error {
	pc := cfg.paxos()
	if err := pc.WithDefaults(); err != nil {
		return err
	}
	c.Init(pc.Topology, pc.ID, cfg)
	var err error
	if st == nil {
		c.Log, err = paxos.New(pc, host, &c.Outbox)
		return err
	}
	if c.Log, err = paxos.Restore(pc, host, &c.Outbox, st.Log); err != nil {
		return err
	}
	c.RestoreDelivered(st)
	c.Log.Replay()
	return nil
}

// RestoreDelivered marks the deliveries of a restored store as done.
func (c *Core) RestoreDelivered(st *Store) {
	for id, d := range st.delivered {
		r := c.Rec(id)
		dd := d
		r.restore = &dd
	}
	c.maxDelivered = st.maxDelivered
}

// Ballot returns the replica's Paxos ballot twice (the status line's
// ballot and cballot).
func (c *Core) Ballot() (wire.Ballot, wire.Ballot) { return c.Log.Ballot(), c.Log.Ballot() }

// Role is the replica's Paxos status ("LEADER", "FOLLOWER", ...).
func (c *Core) Role() string { return c.Log.Status().String() }

// Tick implements amcast.Machine: the Paxos log's timers, then
// re-multicasts of stuck messages.
func (c *Core) Tick() {
	c.Log.Tick()
	c.Remulticast()
}

// IsLeader implements amcast.Observable.
func (c *Core) IsLeader() bool { return c.Log.IsLeader() }

// Retained implements amcast.Observable.
func (c *Core) Retained() int { return len(c.recs) }

// Coverage implements amcast.Observable.
func (c *Core) Coverage() amcast.Coverage {
	cov := c.cov
	lc := c.Log.Counters()
	cov.BallotsStarted += lc.BallotsStarted
	cov.LeaderChanges += lc.LeaderChanges
	cov.RecoveriesWithAccepted += lc.RecoveriesWithValues
	cov.CatchUps += lc.CatchUps
	return cov
}

// Rejected returns the refused inputs of this incarnation by reason: the
// protocol's and its Paxos log's.
func (c *Core) Rejected() map[string]uint64 {
	n := c.rejects.Counts()
	if n == nil {
		n = map[string]uint64{}
	}
	for k, v := range c.Log.Rejected() {
		n[k] += v
	}
	return n
}

// conflict counts, under reason log_conflict, a chosen log command that
// contradicts what this replica executed before (a second FINAL with
// another global timestamp, a global timestamp below the last delivery).
// Honest groups never choose one: Skeen's rule makes every commit land
// above the deliveries and every FINAL of a message carries the maximum of
// the chosen local timestamps. But the log holds values that peers claimed
// were chosen (catch-up, commit notices), so a forged or corrupted claim
// lands here; the replica keeps what it executed first and does not crash.
// Rejected() reports it, so drivers and the swarm see it.
func (c *Core) conflict(format string, args ...any) {
	_ = c.rejects.Reject("log_conflict", format, args...)
}

// Reject counts a refused input under reason and returns the error Step
// returns (amcast.Rejects). The caller must not have changed any state.
func (c *Core) Reject(reason, format string, args ...any) error {
	return c.rejects.Reject(reason, format, args...)
}

// AddRetried counts commands a new leader re-proposed or re-sent.
func (c *Core) AddRetried(n int) { c.cov.Retried += n }

// Status returns the replica's role.
func (c *Core) Status() paxos.Status { return c.Log.Status() }

// MaxDelivered returns the global timestamp of the last delivery.
func (c *Core) MaxDelivered() wire.Timestamp { return c.maxDelivered }

// Recs returns the records (read-only use).
func (c *Core) Recs() map[wire.MsgID]*Rec { return c.recs }

// Ticks returns the replica's ticks.
func (c *Core) Ticks() uint64 { return c.Log.Ticks() }

// SendTo sends m (never to self: protocols handle their own copies).
func (c *Core) SendTo(to wire.ProcID, m wire.Message) {
	if to != c.ID {
		c.Send(c.ID, to, m)
	}
}

// SendGroup sends m to every member of group g but this replica.
func (c *Core) SendGroup(g wire.GroupID, m wire.Message) {
	for _, q := range c.Topo.Members(g) {
		c.SendTo(q, m)
	}
}

// Hint returns the presumed leader of group g.
func (c *Core) Hint(g wire.GroupID) wire.ProcID { return c.hint[g] }

// SetHint records that p led group g (it sent something only leaders send).
func (c *Core) SetHint(g wire.GroupID, p wire.ProcID) {
	if int(g) < len(c.hint) {
		c.hint[g] = p
	}
}

// CheckMulticast validates a MULTICAST of m from process from: m must be
// well formed and addressed to this group, the sender must be m's own
// client or a replica of one of its destination groups (a re-multicast;
// amcast.CheckMulticastSender, the rule every protocol shares), and a message this replica already
// knows must come with the same destinations and payload (a client that
// reuses an id, or a forger, never replaces the first copy).
func (c *Core) CheckMulticast(from wire.ProcID, m *wire.AppMsg) error {
	if err := c.checkAppMsg(m); err != nil {
		return err
	}
	if err := amcast.CheckMulticastSender(c.Topo, &c.rejects, from, m); err != nil {
		return err
	}
	if r := c.recs[m.ID]; r != nil && r.Known {
		return c.checkSame(&r.M, m)
	}
	return nil
}

// checkAppMsg rejects a malformed message or one not addressed to this
// group.
func (c *Core) checkAppMsg(m *wire.AppMsg) error {
	if err := m.Validate(c.Topo.NumGroups()); err != nil {
		return c.Reject("bad_dest", "%v", err)
	}
	if err := m.CheckDigest(); err != nil {
		return c.Reject("bad_digest", "%v", err)
	}
	if m.DestIndex(c.G) < 0 {
		return c.Reject("not_destination", "message %s is not addressed to group %d", m.ID, c.G)
	}
	return nil
}

// checkSame rejects a copy of a known message with other destinations or
// another payload.
func (c *Core) checkSame(known, m *wire.AppMsg) error {
	if !slices.Equal(known.Dest, m.Dest) {
		return c.Reject("dest_mismatch", "%s with destinations %v, known with %v", m.ID, m.Dest, known.Dest)
	}
	if !bytes.Equal(known.Payload, m.Payload) {
		return c.Reject("payload_mismatch", "%s with another payload (%d bytes, known %d)", m.ID, len(m.Payload), len(known.Payload))
	}
	return nil
}

// CheckCommand implements paxos.Host's check of a peer's log command: an
// ASSIGN carries a valid message addressed to this group (and, if any, a
// timestamp of this group); a FINAL a valid message id and destinations
// addressed to this group and a global timestamp of one of them.
func (c *Core) CheckCommand(cmd *wire.Command) error {
	switch cmd.Op {
	case wire.CmdNoop:
		return nil
	case wire.CmdAssign, wire.CmdFinal:
	default:
		return fmt.Errorf("op %s", cmd.Op)
	}
	if err := cmd.M.Validate(c.Topo.NumGroups()); err != nil {
		return err
	}
	if cmd.M.DestIndex(c.G) < 0 {
		return fmt.Errorf("%s of %s not addressed to group %d", cmd.Op, cmd.M.ID, c.G)
	}
	if cmd.Op == wire.CmdAssign {
		if err := cmd.M.CheckDigest(); err != nil {
			return err // a FINAL carries no payload; an ASSIGN the whole message
		}
		if !cmd.TS.IsZero() && (cmd.TS.G != c.G || cmd.TS.T == 0) {
			return fmt.Errorf("ASSIGN of %s with timestamp %s", cmd.M.ID, cmd.TS)
		}
		return nil
	}
	if cmd.TS.T == 0 || cmd.M.DestIndex(cmd.TS.G) < 0 {
		return fmt.Errorf("FINAL of %s dest=%v with gts %s", cmd.M.ID, cmd.M.Dest, cmd.TS)
	}
	return nil
}

// Step is the Step of a protocol built on Core: it rejects an envelope
// addressed to another process or claiming to come from this one, hands
// the group's Paxos messages (from members only) to the log and the rest
// to handle, and tells the failure detector about members it accepted a
// message from.
func (c *Core) Step(env wire.Envelope, handle func(wire.Envelope) error) error {
	if env.To != c.ID {
		return c.Reject("wrong_recipient", "envelope for p%d delivered to p%d", env.To, c.ID)
	}
	if env.From == c.ID {
		return c.Reject("from_self", "%s from self p%d", env.Msg.Kind(), c.ID)
	}
	g, ok := c.Topo.GroupOf(env.From)
	member := ok && g == c.G
	var err error
	if isPaxos(env.Msg) {
		if !member {
			return c.Reject("not_member", "%s from p%d, not a member of group %d", env.Msg.Kind(), env.From, c.G)
		}
		_, err = c.Log.Step(env.From, env.Msg)
	} else {
		err = handle(env)
	}
	if err == nil && member {
		c.Log.Heard(env.From)
	}
	return err
}

// Unexpected rejects a message kind the protocol does not handle.
func (c *Core) Unexpected(env wire.Envelope) error {
	return c.Reject("unexpected_kind", "%s from p%d", env.Msg.Kind(), env.From)
}

func isPaxos(m wire.Message) bool {
	switch m.(type) {
	case *wire.PaxosPrepare, *wire.PaxosPromise, *wire.PaxosAccept, *wire.PaxosAccepted,
		*wire.PaxosDecided, *wire.PaxosHeartbeat:
		return true
	}
	return false
}

// Rec returns the record of id, creating it.
func (c *Core) Rec(id wire.MsgID) *Rec {
	r := c.recs[id]
	if r == nil {
		r = &Rec{since: c.Ticks()}
		c.recs[id] = r
	}
	return r
}

// Lookup returns the record of id or nil.
func (c *Core) Lookup(id wire.MsgID) *Rec { return c.recs[id] }

// Learn makes r hold m (the first copy wins) and files the timestamps that
// arrived before it.
func (c *Core) Learn(r *Rec, m *wire.AppMsg) {
	if r.Known {
		return
	}
	c.learn(r, m)
}

// Adopt makes r hold the copy of m that the log chose (an executed ASSIGN):
// the log is authoritative, so a copy learned first from a MULTICAST with
// other destinations or payload (the client reused the id) is replaced,
// keeping the timestamps of the groups that are destinations of both.
func (c *Core) Adopt(r *Rec, m *wire.AppMsg) {
	if !r.Known {
		c.learn(r, m)
		return
	}
	if slices.Equal(r.M.Dest, m.Dest) {
		r.M.Payload = m.Payload
		return
	}
	old := r.M
	ts, soft := r.TS, r.Soft
	r.M = *m
	r.TS = make([]wire.Timestamp, len(m.Dest))
	r.Soft = make([]wire.Timestamp, len(m.Dest))
	for i, g := range old.Dest {
		if j := m.DestIndex(g); j >= 0 {
			r.TS[j], r.Soft[j] = ts[i], soft[i]
		}
	}
}

func (c *Core) learn(r *Rec, m *wire.AppMsg) {
	r.M, r.Known = *m, true
	if r.Phase != Committed {
		c.open[m.ID] = r
	}
	if n := len(m.Dest); n <= len(r.tsInline) {
		r.tsInline, r.softInline = [2]wire.Timestamp{}, [2]wire.Timestamp{}
		r.TS, r.Soft = r.tsInline[:n:n], r.softInline[:n:n]
	} else {
		r.TS = make([]wire.Timestamp, n)
		r.Soft = make([]wire.Timestamp, n)
	}
	for _, e := range r.early {
		if i := m.DestIndex(e.g); i >= 0 {
			if e.soft {
				r.Soft[i] = e.ts
			} else {
				r.TS[i] = e.ts
			}
		}
	}
	r.early = nil
}

// CheckTS validates a timestamp message for id from process from claiming
// to speak for group g (another destination group): the sender must be a
// member of g, the timestamp g's, g a destination of the message as far as
// this replica knows it and, for a chosen (hard) timestamp, the same as
// the one g chose before (a group chooses one local timestamp per message).
func (c *Core) CheckTS(from wire.ProcID, id wire.MsgID, g wire.GroupID, ts wire.Timestamp, hard bool) error {
	if sg, ok := c.Topo.GroupOf(from); !ok || sg != g {
		return c.Reject("sender_not_in_group", "timestamp of %s for group %d from p%d", id, g, from)
	}
	if g == c.G {
		return c.Reject("own_group_ts", "timestamp of %s for this replica's group %d from p%d", id, g, from)
	}
	if ts.G != g || ts.T == 0 {
		return c.Reject("bad_timestamp", "timestamp %s of group %d for %s", ts, g, id)
	}
	r := c.recs[id]
	if r == nil {
		return nil
	}
	if !r.Known {
		if hard {
			for _, e := range r.early {
				if !e.soft && e.g == g && e.ts != ts {
					return c.Reject("ts_mismatch", "group %d chose %s for %s, now claims %s", g, e.ts, id, ts)
				}
			}
		}
		return nil
	}
	i := r.M.DestIndex(g)
	if i < 0 {
		return c.Reject("not_destination", "timestamp for %s from group %d, not a destination", id, g)
	}
	if hard && !r.TS[i].IsZero() && r.TS[i] != ts {
		return c.Reject("ts_mismatch", "group %d chose %s for %s, now claims %s", g, r.TS[i], id, ts)
	}
	return nil
}

// SetTS files group g's chosen local timestamp for r. A group chooses one
// local timestamp per message; CheckTS rejected any other claim, so two
// different ones here are this replica's bug.
func (c *Core) SetTS(r *Rec, g wire.GroupID, ts wire.Timestamp) {
	if !r.Known {
		r.early = append(r.early, early{g: g, ts: ts})
		return
	}
	i := r.M.DestIndex(g)
	if !r.TS[i].IsZero() && r.TS[i] != ts {
		panic(fmt.Sprintf("rskeen: p%d: group %d chose local timestamps %s and %s for %s", c.ID, g, r.TS[i], ts, r.M.ID))
	}
	r.TS[i] = ts
}

// SetSoft files group g's proposed local timestamp for r (latest wins).
func (c *Core) SetSoft(r *Rec, g wire.GroupID, ts wire.Timestamp) {
	if !r.Known {
		r.early = append(r.early, early{g: g, ts: ts, soft: true})
		return
	}
	r.Soft[r.M.DestIndex(g)] = ts
}

// MaxTS returns the maximum of ts and whether every entry is set.
func MaxTS(ts []wire.Timestamp) (wire.Timestamp, bool) {
	var m wire.Timestamp
	for _, t := range ts {
		if t.IsZero() {
			return wire.Timestamp{}, false
		}
		m = wire.MaxTS(m, t)
	}
	return m, true
}

// Assign records that the log chose lts as the group's local timestamp of
// r: r becomes pending (or, when a restored store says it was delivered
// before the crash, committed and delivered).
func (c *Core) Assign(r *Rec, lts wire.Timestamp) {
	r.Phase = Assigned
	r.LTS = lts
	r.TS[r.M.DestIndex(c.G)] = lts
	r.since = c.Ticks()
	if d := r.restore; d != nil {
		if d.lts != lts {
			panic(fmt.Sprintf("rskeen: p%d: %s re-executed with lts %s, delivered with %s", c.ID, r.M.ID, lts, d.lts))
		}
		r.Phase, r.GTS, r.Delivered, r.restore = Committed, d.gts, true, nil
		delete(c.open, r.M.ID)
		return
	}
	c.pending.Push(tsheap.Entry[struct{}]{TS: lts, ID: r.M.ID})
}

// Commit fixes r's global timestamp and delivers what the delivery rule
// allows.
func (c *Core) Commit(r *Rec, gts wire.Timestamp) {
	if r.Phase == Committed {
		if r.GTS != gts {
			c.conflict("%s committed with %s, then %s", r.M.ID, r.GTS, gts)
		}
		return
	}
	r.Phase, r.GTS = Committed, gts
	r.since = c.Ticks()
	delete(c.open, r.M.ID)
	c.committed.Push(tsheap.Entry[struct{}]{TS: gts, ID: r.M.ID})
	c.tryDeliver()
}

// tryDeliver is Skeen's delivery rule: deliver committed messages in
// global-timestamp order while no pending message has a local timestamp at
// or below the next one's.
func (c *Core) tryDeliver() {
	for c.committed.Len() > 0 {
		top := c.committed.Top()
		r := c.recs[top.ID]
		if r == nil || r.Delivered || r.Phase != Committed || r.GTS != top.TS {
			c.committed.Pop()
			continue
		}
		for c.pending.Len() > 0 {
			e := c.pending.Top()
			if pr := c.recs[e.ID]; pr != nil && pr.Phase == Assigned && pr.LTS == e.TS {
				break
			}
			c.pending.Pop()
		}
		if c.pending.Len() > 0 && c.pending.Top().TS.LessEq(top.TS) && !c.Has(MutSkipDeliveryBlocking) {
			return
		}
		c.committed.Pop()
		if !c.maxDelivered.Less(r.GTS) {
			c.conflict("%s committed with gts %s, at or below the last delivery's %s: not delivered", r.M.ID, r.GTS, c.maxDelivered)
			continue
		}
		r.Delivered = true
		c.maxDelivered = r.GTS
		c.DeliverDurable(r.M, r.GTS, &wire.RecDelivered{M: r.M, LTS: r.LTS, GTS: r.GTS})
		c.Reply(r)
	}
}

// Reply answers the client if this replica leads the message's first
// destination group.
func (c *Core) Reply(r *Rec) {
	if c.Log.IsLeader() && r.M.Dest[0] == c.G && !c.Topo.IsReplica(r.M.ID.Client) {
		c.SendTo(r.M.ID.Client, &wire.Delivered{ID: r.M.ID, G: c.G, GTS: r.GTS, Leader: c.ID})
	}
}

// MayResend reports whether r's timestamp may be re-sent now (at most once
// per two ticks: retries from many processes cost one re-send) and notes
// the re-send.
func (c *Core) MayResend(r *Rec) bool {
	t := c.Ticks()
	if r.sentAt != 0 && t < r.sentAt-1+2 {
		return false
	}
	r.sentAt = t + 1
	return true
}

// Touch notes progress on r (its re-multicast timer restarts).
func (c *Core) Touch(r *Rec) { r.since = c.Ticks() }

// SortedIDs returns the ids of the records in id order.
func (c *Core) SortedIDs() []wire.MsgID { return wire.SortedIDs(c.recs) }

// remulticastBatch bounds the messages one replica re-multicasts per round.
const remulticastBatch = 8

// Remulticast is the liveness timer: a message known here, not committed,
// without progress for RetryTicks (leaders; followers wait longer,
// staggered by their position) is sent again as MULTICAST to every member
// of its destination groups, lowest local timestamp first, a few per round.
// A leader handles a MULTICAST it knows by re-sending its group's timestamp.
func (c *Core) Remulticast() {
	t := c.Ticks()
	if t%uint64(max(c.retryTicks/2, 1)) != 0 || c.Log.Status() == paxos.Candidate {
		return
	}
	rt := uint64(c.retryTicks)
	if !c.Log.IsLeader() {
		rt *= uint64(2 + c.GI)
	}
	type stuck struct {
		key wire.Timestamp
		id  wire.MsgID
	}
	var ss []stuck
	for id, r := range c.open {
		if r.Known && !r.Delivered && r.Phase != Committed && t >= r.since+rt {
			ss = append(ss, stuck{r.LTS, id})
		}
	}
	sort.Slice(ss, func(i, j int) bool {
		if ss[i].key != ss[j].key {
			return ss[i].key.Less(ss[j].key)
		}
		return ss[i].id.Less(ss[j].id)
	})
	if len(ss) > remulticastBatch {
		ss = ss[:remulticastBatch]
	}
	for _, s := range ss {
		r := c.recs[s.id]
		r.since = t
		c.cov.Remulticasts++
		mc := &wire.Multicast{M: r.M}
		for _, g := range r.M.Dest {
			c.SendGroup(g, mc)
		}
	}
}

// Store is the durable image of a replica of a replicated-Skeen protocol:
// its Paxos log and its deliveries.
type Store struct {
	Log          *paxos.Store
	delivered    map[wire.MsgID]delivered
	maxDelivered wire.Timestamp
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{Log: paxos.NewStore(), delivered: map[wire.MsgID]delivered{}}
}

var _ amcast.Store = (*Store)(nil)

// Apply implements amcast.Store.
func (st *Store) Apply(rec wire.Message) error {
	if st.Log.Apply(rec) {
		return nil
	}
	r, ok := rec.(*wire.RecDelivered)
	if !ok {
		return fmt.Errorf("rskeen: store cannot apply %s", rec.Kind())
	}
	st.delivered[r.M.ID] = delivered{lts: r.LTS, gts: r.GTS}
	st.maxDelivered = wire.MaxTS(st.maxDelivered, r.GTS)
	return nil
}

// Messages returns the number of log slots the store holds.
func (st *Store) Messages() int { return st.Log.Slots() }

// Snapshot returns records from which Apply, on an empty store, rebuilds
// this store: the Paxos log's snapshot (paxos.Store.Snapshot), then one
// REC_DELIVERED per delivered message, in id order. The store keeps only
// the id and timestamps of a delivery, so those records carry the
// message's id without its destinations or payload (the log's ASSIGN
// command holds the message itself).
func (st *Store) Snapshot() []wire.Message {
	out := st.Log.Snapshot()
	for _, id := range wire.SortedIDs(st.delivered) {
		d := st.delivered[id]
		out = append(out, &wire.RecDelivered{M: wire.AppMsg{ID: id}, LTS: d.lts, GTS: d.gts})
	}
	return out
}
