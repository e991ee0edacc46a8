package amcast

import (
	"fmt"
	"slices"

	"github.com/weft-dev/weft/wire"
)

// Client is the client side of every multicast protocol in weft, as a
// deterministic state machine. It sends MULTICAST(m) to its view of the
// leader of each destination group and completes m on the first DELIVERED
// reply, or, with AllGroups, once every destination group replied.
// Completions come out as Ready.Deliveries, with the replies
// (Delivery.Replies).
//
// Retries: a message without a reply after RetryTicks ticks is sent again,
// with the same id, to every member of its destination groups (the leader
// may have changed; followers ignore it), with exponential backoff up to
// 8 x RetryTicks.
type Client struct {
	// outbox is unexported (issue #10 item 8): an embedded Outbox would let any
	// caller complete messages that were never answered.
	outbox Outbox
	// RetryTicks is the reply timeout in ticks (default 20; 0 disables).
	RetryTicks int
	// AllGroups makes a message complete only once every destination
	// group replied, each with its own result: what a replicated service
	// needs from a message to several shards (docs/rsm.md). Only nodes
	// that run a service (node.Config.StateMachine) answer from every
	// destination group; the protocols alone answer from the first one,
	// the designated replier, so a client of such nodes must leave it off.
	AllGroups bool
	// ExpireTicks, when positive, is the client's side of the session
	// lease (docs/sessions.md): a message still unanswered ExpireTicks
	// ticks after it was first sent is given up. It completes with
	// Delivery.Expired set (client.ErrSessionExpired for the real client):
	// it may or may not have been delivered, and it is never sent again.
	// Replicas remember a collected id for their lease (wbcast
	// Config.SessionTicks) after collecting it; a client that stops
	// retrying well within that lease of the first send cannot have a late
	// retry ordered a second time. 0 (the default) retries forever.
	ExpireTicks int
	id          wire.ProcID
	session     wire.SessionID
	maxSeq      uint64 // highest sequence number multicast
	topo        *Topology
	leaders     []wire.ProcID
	out         map[wire.MsgID]*outstanding
	// order holds the ids multicast, in sequence order, from the oldest
	// still outstanding on (floor); ids no longer outstanding are dropped
	// from its front as they get there, and all at once when it holds
	// more than twice as many as out (bounded by out's size).
	order   []wire.MsgID
	ticks   uint64
	retries int
	expired int
}

type outstanding struct {
	m       wire.AppMsg
	due     uint64
	backoff uint64
	replies []*wire.Delivered // one per destination group answered (AllGroups)
	sent    uint64            // tick of the first send
}

// NewClient returns a client of session 0 whose leader view is every
// group's initial leader (simulations and tests, whose clients never
// restart).
func NewClient(topo *Topology, id wire.ProcID) (*Client, error) {
	return NewSessionClient(topo, id, wire.SessionID{})
}

// NewSessionClient returns a client whose messages belong to session (see
// wire.MsgID): a real client draws a fresh random session each time it
// starts, so replies meant for an earlier incarnation never complete one
// of its messages.
func NewSessionClient(topo *Topology, id wire.ProcID, session wire.SessionID) (*Client, error) {
	if topo.IsReplica(id) {
		return nil, fmt.Errorf("amcast: client id %d is a replica id", id)
	}
	c := &Client{id: id, session: session, topo: topo, out: map[wire.MsgID]*outstanding{}, RetryTicks: 20}
	for g := range topo.Groups {
		c.leaders = append(c.leaders, topo.InitialLeader(wire.GroupID(g)))
	}
	return c, nil
}

var _ Machine = (*Client)(nil)

// ID implements Machine.
func (c *Client) ID() wire.ProcID { return c.id }

// HasReady implements Machine.
func (c *Client) HasReady() bool { return c.outbox.HasReady() }

// Ready implements Machine.
func (c *Client) Ready() Ready { return c.outbox.Ready() }

// Advance implements Machine.
func (c *Client) Advance() { c.outbox.Advance() }

// Session returns the client's session.
func (c *Client) Session() wire.SessionID { return c.session }

// Retries returns how many times the client re-sent a message.
func (c *Client) Retries() int { return c.retries }

// Tick implements Machine: it gives up on messages past ExpireTicks and
// re-sends messages whose reply is overdue.
func (c *Client) Tick() {
	c.ticks++
	c.expire()
	if c.RetryTicks <= 0 {
		return
	}
	var due []*outstanding
	for _, o := range c.out {
		if c.ticks >= o.due {
			due = append(due, o)
		}
	}
	// Deterministic order: by message id.
	for i := 1; i < len(due); i++ {
		for j := i; j > 0 && due[j].m.ID.Less(due[j-1].m.ID); j-- {
			due[j], due[j-1] = due[j-1], due[j]
		}
	}
	for _, o := range due {
		c.retries++
		o.backoff = min(o.backoff*2, 8*uint64(c.RetryTicks))
		o.due = c.ticks + o.backoff
		mc := &wire.Multicast{M: o.m}
		for _, g := range o.m.Dest {
			for _, q := range c.topo.Members(g) {
				c.outbox.Send(c.id, q, mc)
			}
		}
	}
}

// expire gives up on the messages unanswered ExpireTicks after their first
// send, in id order.
func (c *Client) expire() {
	if c.ExpireTicks <= 0 {
		return
	}
	var ids []wire.MsgID
	for id, o := range c.out {
		if c.ticks-o.sent >= uint64(c.ExpireTicks) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, wire.MsgID.Compare)
	for _, id := range ids {
		c.outbox.Expire(c.out[id].m)
		delete(c.out, id)
		c.expired++
	}
}

// OutstandingIDs returns the ids of the messages awaiting a reply, sorted.
func (c *Client) OutstandingIDs() []wire.MsgID { return wire.SortedIDs(c.out) }

// Expired returns how many messages the client gave up on (ExpireTicks).
func (c *Client) Expired() int { return c.expired }

// SetLeader sets the client's view of group g's leader to p (from a
// membership view); new messages to g go to p. p must be a member of g.
func (c *Client) SetLeader(g wire.GroupID, p wire.ProcID) error {
	if int(g) >= len(c.leaders) {
		return fmt.Errorf("amcast: no group %d", g)
	}
	if pg, ok := c.topo.GroupOf(p); !ok || pg != g {
		return fmt.Errorf("amcast: p%d is not a member of group %d", p, g)
	}
	c.leaders[g] = p
	return nil
}

// Leader returns the client's view of group g's leader.
func (c *Client) Leader(g wire.GroupID) wire.ProcID { return c.leaders[g] }

// Outstanding returns the number of messages awaiting a reply.
func (c *Client) Outstanding() int { return len(c.out) }

// Multicast submits m. Its id must carry this client's id, and its
// digest must be its content's (AppMsg.Seal).
func (c *Client) Multicast(m wire.AppMsg) error {
	if err := m.CheckDigest(); err != nil {
		return fmt.Errorf("amcast: %w (seal the message: AppMsg.Seal)", err)
	}
	return c.MulticastSealed(m)
}

// MulticastSealed is Multicast for a message its caller has just sealed
// itself (AppMsg.Seal, as client.Client does for every message): the
// digest is not hashed again, which was about 2% of a benchmark client's
// CPU. Every other check is Multicast's; a message sealed elsewhere goes
// through Multicast.
func (c *Client) MulticastSealed(m wire.AppMsg) error {
	if m.ID.Client != c.id || m.ID.Session != c.session {
		return fmt.Errorf("amcast: client %d (session %s) cannot multicast message %s of another client or session", c.id, c.session, m.ID)
	}
	if err := m.Validate(c.topo.NumGroups()); err != nil {
		return err
	}
	if _, dup := c.out[m.ID]; dup {
		return fmt.Errorf("amcast: message %s is already outstanding", m.ID)
	}
	if m.ID.Seq <= c.maxSeq {
		return fmt.Errorf("amcast: message %s: sequence numbers of a session must increase (last was %d)", m.ID, c.maxSeq)
	}
	c.maxSeq = m.ID.Seq
	m.Floor = c.floor(m.ID.Seq)
	rt := uint64(max(c.RetryTicks, 1))
	c.out[m.ID] = &outstanding{m: m, due: c.ticks + rt, backoff: rt, sent: c.ticks}
	c.order = append(c.order, m.ID)
	mc := &wire.Multicast{M: m}
	for _, g := range m.Dest {
		c.outbox.Send(c.id, c.leaders[g], mc)
	}
	return nil
}

// Abandon forgets outstanding message id without completing it: it is not
// retried and no reply completes it any more. The caller promises never to
// send it again (a node shed it: wire.Overloaded), so later floors may
// pass it. A copy already sent may still be ordered; the id is never
// reused, so it is delivered at most once. It reports whether id was
// outstanding.
func (c *Client) Abandon(id wire.MsgID) bool {
	if _, ok := c.out[id]; !ok {
		return false
	}
	delete(c.out, id)
	return true
}

// floor is the AppMsg.Floor of a new message seq: every sequence number
// below the lowest unanswered one is answered (or was never used, and never
// will be: sequence numbers only increase), so the client can promise never
// to send any of them again. Replicas then forget those messages' ids
// (bounded duplicate suppression, wbcast/sessions.go).
//
// It was a scan of every outstanding message per multicast: with a client
// shared by many workers (90 in weft bench --shared-clients 1), 6% of a
// client process's CPU. Sequence numbers only increase, so the oldest
// outstanding message is the first of order that is still outstanding.
func (c *Client) floor(seq uint64) uint64 {
	for len(c.order) > 0 {
		if _, ok := c.out[c.order[0]]; ok {
			break
		}
		c.order = c.order[1:]
	}
	if len(c.order) > 2*len(c.out)+64 {
		live := make([]wire.MsgID, 0, 2*len(c.out)+1)
		for _, id := range c.order {
			if _, ok := c.out[id]; ok {
				live = append(live, id)
			}
		}
		c.order = live
	}
	if len(c.order) == 0 {
		return seq - 1
	}
	return min(seq, c.order[0].Seq) - 1
}

// Step implements Machine: it handles DELIVERED replies.
func (c *Client) Step(env wire.Envelope) error {
	d, ok := env.Msg.(*wire.Delivered)
	if !ok {
		return fmt.Errorf("%w: client does not handle %s", ErrBadMessage, env.Msg.Kind())
	}
	if int(d.G) >= len(c.leaders) || !c.topo.IsReplica(d.Leader) {
		return fmt.Errorf("%w: DELIVERED for group %d with leader %d", ErrBadMessage, d.G, d.Leader)
	}
	c.leaders[d.G] = d.Leader
	o, ok := c.out[d.ID]
	if !ok {
		return nil // a late duplicate reply
	}
	if o.m.DestIndex(d.G) < 0 {
		return fmt.Errorf("%w: DELIVERED %s from group %d, not a destination", ErrBadMessage, d.ID, d.G)
	}
	for _, r := range o.replies {
		if r.G == d.G {
			return nil // this group answered already
		}
	}
	o.replies = append(o.replies, d)
	if c.AllGroups && len(o.replies) < len(o.m.Dest) {
		return nil
	}
	delete(c.out, d.ID)
	// The destination groups agree on the gts; a zero one means "delivered
	// and collected, the timestamp is not remembered" (wire.Delivered).
	var gts wire.Timestamp
	for _, r := range o.replies {
		if gts.IsZero() {
			gts = r.GTS
		}
	}
	c.outbox.Deliver(o.m, gts)
	c.outbox.rd.Deliveries[len(c.outbox.rd.Deliveries)-1].Replies = o.replies
	return nil
}
