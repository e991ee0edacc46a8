package amcast

import (
	"math/rand/v2"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// TestClientAbandon: an abandoned message is neither retried nor completed
// by a late reply, and the next message's floor passes it.
func TestClientAbandon(t *testing.T) {
	topo, err := NewTopology(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewSessionClient(topo, 100, wire.Session(9))
	if err != nil {
		t.Fatal(err)
	}
	c.RetryTicks = 2
	msg := func(seq uint64) wire.AppMsg {
		return wire.NewAppMsg(wire.MsgID{Client: 100, Session: wire.Session(9), Seq: seq}, []wire.GroupID{0}, nil)
	}
	id := func(seq uint64) wire.MsgID { return msg(seq).ID }
	for seq := uint64(1); seq <= 2; seq++ {
		if err := c.Multicast(msg(seq)); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance()
	if !c.Abandon(id(1)) || c.Abandon(id(1)) || c.Outstanding() != 1 {
		t.Fatalf("Abandon: outstanding %d", c.Outstanding())
	}
	c.Tick()
	c.Tick()
	for _, env := range c.Ready().Messages {
		if env.Msg.(*wire.Multicast).M.ID == id(1) {
			t.Errorf("abandoned message retried to p%d", env.To)
		}
	}
	c.Advance()
	if err := c.Step(wire.Envelope{From: 0, To: 100, Msg: &wire.Delivered{ID: id(1), G: 0, GTS: wire.Timestamp{T: 1}, Leader: 0}}); err != nil {
		t.Fatal(err)
	}
	if rd := c.Ready(); len(rd.Deliveries) != 0 {
		t.Errorf("abandoned message completed: %v", rd.Deliveries)
	}
	if err := c.Multicast(msg(3)); err != nil {
		t.Fatal(err)
	}
	for _, env := range c.Ready().Messages {
		if m := env.Msg.(*wire.Multicast).M; m.ID == id(3) && m.Floor != 1 {
			t.Errorf("floor %d, want 1 (message 1 abandoned, 2 outstanding)", m.Floor)
		}
	}
}

// TestClientAllGroups: with AllGroups a message completes once every
// destination group answered (a group's second answer and a non-destination
// group's are not counted), with every group's reply; without it, on the
// first reply.
func TestClientAllGroups(t *testing.T) {
	topo, err := NewTopology(3, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, all := range []bool{false, true} {
		c, err := NewSessionClient(topo, 100, wire.Session(9))
		if err != nil {
			t.Fatal(err)
		}
		c.AllGroups = all
		m := wire.NewAppMsg(wire.MsgID{Client: 100, Session: wire.Session(9), Seq: 1}, []wire.GroupID{0, 2}, nil)
		id := m.ID
		if err := c.Multicast(m); err != nil {
			t.Fatal(err)
		}
		c.Advance()
		reply := func(g wire.GroupID, gts uint64, res string) error {
			return c.Step(wire.Envelope{From: wire.ProcID(g), To: 100, Msg: &wire.Delivered{ID: id, G: g, GTS: wire.Timestamp{T: gts, G: 2},
				Leader: wire.ProcID(g), HasResult: true, Result: []byte(res)}})
		}
		if err := reply(1, 5, "x"); err == nil {
			t.Fatal("a reply from a group that is not a destination was taken")
		}
		if err := reply(2, 5, "two"); err != nil {
			t.Fatal(err)
		}
		if got := len(c.Ready().Deliveries); all != (got == 0) {
			t.Fatalf("AllGroups %v: %d completions after one of two groups answered", all, got)
		}
		if !all {
			continue
		}
		if err := reply(2, 5, "again"); err != nil || len(c.Ready().Deliveries) != 0 {
			t.Fatalf("a group's second reply completed the message (err %v)", err)
		}
		if err := reply(0, 0, "zero"); err != nil { // a collected message's reply: no gts
			t.Fatal(err)
		}
		ds := c.Ready().Deliveries
		if len(ds) != 1 || len(ds[0].Replies) != 2 || ds[0].GTS != (wire.Timestamp{T: 5, G: 2}) {
			t.Fatalf("completions %+v", ds)
		}
		if string(ds[0].Replies[0].Result) != "two" || string(ds[0].Replies[1].Result) != "zero" {
			t.Fatalf("results %q %q", ds[0].Replies[0].Result, ds[0].Replies[1].Result)
		}
	}
}

// TestClientExpire: a message unanswered ExpireTicks after its first send
// completes as expired (never with a gts), is not retried after that, and a
// late reply does not complete it again; a message answered in time is
// unaffected.
func TestClientExpire(t *testing.T) {
	topo, err := NewTopology(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewSessionClient(topo, 100, wire.Session(9))
	if err != nil {
		t.Fatal(err)
	}
	c.RetryTicks, c.ExpireTicks = 2, 10
	m1 := wire.NewAppMsg(wire.MsgID{Client: 100, Session: wire.Session(9), Seq: 1}, []wire.GroupID{0}, []byte("a"))
	if err := c.Multicast(m1); err != nil {
		t.Fatal(err)
	}
	c.Advance()
	for range 5 {
		c.Tick()
	}
	m2 := wire.NewAppMsg(wire.MsgID{Client: 100, Session: wire.Session(9), Seq: 2}, []wire.GroupID{0}, []byte("b"))
	if err := c.Multicast(m2); err != nil {
		t.Fatal(err)
	}
	c.Advance()
	var expired []wire.MsgID
	for tick := 6; tick <= 10; tick++ {
		c.Tick()
		for _, d := range c.Ready().Deliveries {
			if !d.Expired || !d.GTS.IsZero() {
				t.Fatalf("tick %d: completion %+v, want an expiry", tick, d)
			}
			expired = append(expired, d.M.ID)
			if tick != 10 {
				t.Errorf("%s expired at tick %d, want 10", d.M.ID, tick)
			}
		}
		c.Advance()
	}
	if len(expired) != 1 || expired[0] != m1.ID || c.Outstanding() != 1 || c.Expired() != 1 {
		t.Fatalf("expired %v, outstanding %d; want only %s", expired, c.Outstanding(), m1.ID)
	}
	for range 3 {
		c.Tick()
	}
	for _, env := range c.Ready().Messages {
		if env.Msg.(*wire.Multicast).M.ID == m1.ID {
			t.Errorf("expired message retried to p%d", env.To)
		}
	}
	c.Advance()
	for _, m := range []wire.AppMsg{m1, m2} {
		if err := c.Step(wire.Envelope{From: 0, To: 100, Msg: &wire.Delivered{ID: m.ID, G: 0, GTS: wire.Timestamp{T: 1}, Leader: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	if ds := c.Ready().Deliveries; len(ds) != 1 || ds[0].M.ID != m2.ID || ds[0].Expired {
		t.Fatalf("after late replies: %+v, want only %s completed", ds, m2.ID)
	}
}

// TestClientFloorAgainstScan: the floor each multicast carries is the one
// a scan of the outstanding messages gives (every sequence number below
// the lowest outstanding one, or below the new one), over random sends
// with gaps, replies and abandons; the queue behind it stays within its
// bound at each multicast.
func TestClientFloorAgainstScan(t *testing.T) {
	topo, err := NewTopology(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		c, err := NewSessionClient(topo, 100, wire.Session(9))
		if err != nil {
			t.Fatal(err)
		}
		seq := uint64(0)
		for range 3000 {
			ids := c.OutstandingIDs()
			switch r := rng.IntN(10); {
			case r < 5 || len(ids) == 0:
				seq += 1 + uint64(rng.IntN(3))
				want := seq - 1
				for _, id := range ids {
					want = min(want, id.Seq-1)
				}
				m := wire.NewAppMsg(wire.MsgID{Client: 100, Session: wire.Session(9), Seq: seq}, []wire.GroupID{wire.GroupID(rng.IntN(2))}, nil)
				if err := c.Multicast(m); err != nil {
					t.Fatal(err)
				}
				rd := c.Ready()
				got := rd.Messages[len(rd.Messages)-1].Msg.(*wire.Multicast).M.Floor
				c.Advance()
				if got != want {
					t.Fatalf("seed %d: message %d carries floor %d, a scan of %d outstanding gives %d", seed, seq, got, len(ids), want)
				}
				// Replies and abandons shrink out, not order, until the
				// next multicast.
				if len(c.order) > 2*len(c.out)+64 {
					t.Fatalf("seed %d: order holds %d ids for %d outstanding", seed, len(c.order), len(c.out))
				}
			case r < 8:
				// The reply of a random outstanding message, from its leader.
				id := ids[rng.IntN(len(ids))]
				m := c.out[id].m
				g := m.Dest[0]
				d := &wire.Delivered{ID: id, G: g, GTS: wire.Timestamp{T: seq, G: g}, Leader: c.leaders[g]}
				if err := c.Step(wire.Envelope{From: c.leaders[g], To: 100, Msg: d}); err != nil {
					t.Fatal(err)
				}
				c.Advance()
			default:
				c.Abandon(ids[rng.IntN(len(ids))])
			}
		}
	}
}

// TestClientMulticastChecks: Multicast refuses a message whose digest is
// not its content's (unsealed, or altered after sealing); MulticastSealed,
// for a caller that has just sealed the message itself, skips only that
// check: another client's or session's message, an invalid destination
// set and a sequence number that does not increase are refused by both.
func TestClientMulticastChecks(t *testing.T) {
	topo, err := NewTopology(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewSessionClient(topo, 100, wire.Session(9))
	if err != nil {
		t.Fatal(err)
	}
	id := func(client wire.ProcID, seq uint64) wire.MsgID {
		return wire.MsgID{Client: client, Session: wire.Session(9), Seq: seq}
	}
	altered := wire.NewAppMsg(id(100, 1), []wire.GroupID{0}, []byte("a"))
	altered.Payload = []byte("b")
	if err := c.Multicast(altered); err == nil {
		t.Error("Multicast took a message altered after sealing")
	}
	if err := c.Multicast(wire.AppMsg{ID: id(100, 1), Dest: []wire.GroupID{0}}); err == nil {
		t.Error("Multicast took an unsealed message")
	}
	for _, m := range []wire.AppMsg{
		wire.NewAppMsg(id(101, 1), []wire.GroupID{0}, nil),    // another client's
		wire.NewAppMsg(id(100, 1), []wire.GroupID{5}, nil),    // no group 5
		wire.NewAppMsg(id(100, 1), []wire.GroupID{1, 0}, nil), // destinations out of order
	} {
		if err := c.MulticastSealed(m); err == nil {
			t.Errorf("MulticastSealed took %s to %v", m.ID, m.Dest)
		}
	}
	if err := c.MulticastSealed(wire.NewAppMsg(id(100, 2), []wire.GroupID{0, 1}, nil)); err != nil {
		t.Fatal(err)
	}
	if err := c.Multicast(wire.NewAppMsg(id(100, 2), []wire.GroupID{0}, []byte("x"))); err == nil {
		t.Error("a sequence number that does not increase was taken")
	}
	if c.Outstanding() != 1 {
		t.Errorf("%d outstanding, want 1", c.Outstanding())
	}
}
