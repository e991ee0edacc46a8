package amcast

import (
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
	c, err := NewSessionClient(topo, 100, 9)
	if err != nil {
		t.Fatal(err)
	}
	c.RetryTicks = 2
	id := func(seq uint64) wire.MsgID { return wire.MsgID{Client: 100, Session: 9, Seq: seq} }
	for seq := uint64(1); seq <= 2; seq++ {
		if err := c.Multicast(wire.AppMsg{ID: id(seq), Dest: []wire.GroupID{0}}); err != nil {
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
	if err := c.Multicast(wire.AppMsg{ID: id(3), Dest: []wire.GroupID{0}}); err != nil {
		t.Fatal(err)
	}
	for _, env := range c.Ready().Messages {
		if m := env.Msg.(*wire.Multicast).M; m.ID == id(3) && m.Floor != 1 {
			t.Errorf("floor %d, want 1 (message 1 abandoned, 2 outstanding)", m.Floor)
		}
	}
}
