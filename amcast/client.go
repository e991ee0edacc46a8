package amcast

import (
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// Client is the client side of every multicast protocol in weft, as a
// deterministic state machine. It sends MULTICAST(m) to its view of the
// leader of each destination group and completes m on the first DELIVERED
// reply. Completions come out as Ready.Deliveries.
type Client struct {
	Outbox
	id      wire.ProcID
	topo    *Topology
	leaders []wire.ProcID
	out     map[wire.MsgID]*wire.AppMsg
}

// NewClient returns a client whose leader view is every group's initial
// leader.
func NewClient(topo *Topology, id wire.ProcID) (*Client, error) {
	if topo.IsReplica(id) {
		return nil, fmt.Errorf("amcast: client id %d is a replica id", id)
	}
	c := &Client{id: id, topo: topo, out: map[wire.MsgID]*wire.AppMsg{}}
	for g := range topo.Groups {
		c.leaders = append(c.leaders, topo.InitialLeader(wire.GroupID(g)))
	}
	return c, nil
}

var _ Machine = (*Client)(nil)

// ID implements Machine.
func (c *Client) ID() wire.ProcID { return c.id }

// Tick implements Machine.
func (c *Client) Tick() {}

// Outstanding returns the number of messages awaiting a reply.
func (c *Client) Outstanding() int { return len(c.out) }

// Multicast submits m. Its id must carry this client's id.
func (c *Client) Multicast(m wire.AppMsg) error {
	if m.ID.Client != c.id {
		return fmt.Errorf("amcast: client %d cannot multicast message %s of another client", c.id, m.ID)
	}
	if err := m.Validate(c.topo.NumGroups()); err != nil {
		return err
	}
	if _, dup := c.out[m.ID]; dup {
		return fmt.Errorf("amcast: message %s is already outstanding", m.ID)
	}
	c.out[m.ID] = &m
	mc := &wire.Multicast{M: m}
	for _, g := range m.Dest {
		c.Send(c.id, c.leaders[g], mc)
	}
	return nil
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
	m, ok := c.out[d.ID]
	if !ok {
		return nil // a late duplicate reply
	}
	delete(c.out, d.ID)
	c.Deliver(*m, d.GTS)
	return nil
}
