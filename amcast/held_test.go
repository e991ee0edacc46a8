package amcast

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// TestHeldRoute walks Held.Route and Flush: only a peer's trailing
// messages that may wait are held, a peer's later messages go behind what
// is held for it (the link stays FIFO: spec pitfalls P8, P9), other peers
// are not touched, a bound of bytes is kept, and a flush sends the rest.
func TestHeldRoute(t *testing.T) {
	topo := testTopology(t) // 9: a client
	may := func(m wire.Message) bool { _, ok := m.(*wire.Deliver); return ok }
	acc := func(to wire.ProcID, seq uint64) wire.Envelope {
		return wire.Envelope{From: 0, To: to, Msg: &wire.Accept{M: wire.AppMsg{ID: wire.MsgID{Client: 9, Seq: seq}, Dest: []wire.GroupID{0}}}}
	}
	del := func(to wire.ProcID, seq uint64) wire.Envelope {
		return wire.Envelope{From: 0, To: to, Msg: &wire.Deliver{ID: wire.MsgID{Client: 9, Seq: seq}}}
	}
	name := func(envs []wire.Envelope) string {
		var b []string
		for _, e := range envs {
			switch m := e.Msg.(type) {
			case *wire.Accept:
				b = append(b, fmt.Sprintf("A%d>%d", m.M.ID.Seq, e.To))
			case *wire.Deliver:
				b = append(b, fmt.Sprintf("D%d>%d", m.ID.Seq, e.To))
			}
		}
		return strings.Join(b, " ")
	}
	// perPeer keeps each recipient's messages in order, recipients sorted:
	// route and flush promise the order within a peer only.
	perPeer := func(envs []wire.Envelope) string {
		by := map[wire.ProcID][]wire.Envelope{}
		var peers []wire.ProcID
		for _, e := range envs {
			if by[e.To] == nil {
				peers = append(peers, e.To)
			}
			by[e.To] = append(by[e.To], e)
		}
		slices.Sort(peers)
		var b []string
		for _, p := range peers {
			b = append(b, name(by[p]))
		}
		return strings.Join(b, " | ")
	}
	var h Held
	step := func(msgs []wire.Envelope, wantSend string, wantHeld int) {
		t.Helper()
		send, held := h.Route(msgs, topo, may)
		if got := perPeer(send); got != wantSend || held != wantHeld {
			t.Fatalf("route(%s) sent %q and held %d, want %q and %d", name(msgs), got, held, wantSend, wantHeld)
		}
	}
	// A DELIVER before an ACCEPT to the same peer is not trailing: both go.
	step([]wire.Envelope{del(1, 1), acc(1, 2), del(2, 1), acc(2, 2)}, "D1>1 A2>1 | D1>2 A2>2", 0)
	// Trailing DELIVERs are held; a client's never is.
	step([]wire.Envelope{acc(1, 3), del(1, 2), del(2, 2), del(9, 2)}, "A3>1 | D2>9", 2)
	if h.n != 2 {
		t.Fatalf("%d held, want 2", h.n)
	}
	// The next message to peer 1 goes behind what is held for it; peer
	// 2's stay held, and a new trailing DELIVER to 1 is held again.
	step([]wire.Envelope{acc(1, 4), del(1, 3)}, "D2>1 A4>1", 1)
	// Only DELIVERs to peer 1: what was held stays held behind them, and
	// counts once.
	step([]wire.Envelope{del(1, 4)}, "", 1)
	// A flush sends what is held, each peer's in order.
	if got := perPeer(h.Flush()); got != "D3>1 D4>1 | D2>2" {
		t.Fatalf("flush sent %q", got)
	}
	if h.n != 0 || perPeer(h.Flush()) != "" {
		t.Fatalf("after a flush: %d held", h.n)
	}
	// Past HeldBytes a peer's held messages all go, behind its others.
	var big []wire.Envelope
	for seq := uint64(10); ; seq++ {
		d := &wire.Deliver{ID: wire.MsgID{Client: 9, Seq: seq}, M: &wire.AppMsg{ID: wire.MsgID{Client: 9, Seq: seq}, Dest: []wire.GroupID{0}, Payload: make([]byte, HeldBytes/3)}}
		d.M.Seal()
		big = append(big, wire.Envelope{From: 0, To: 1, Msg: d})
		send, _ := h.Route(big[len(big)-1:], topo, may)
		if len(send) > 0 {
			if len(send) != len(big) || h.n != 0 {
				t.Fatalf("over the bound: sent %d of %d, %d still held", len(send), len(big), h.n)
			}
			return
		}
		if len(big) > 10 {
			t.Fatal("held past HeldBytes")
		}
	}
}

// TestHeldRouteAllocs: routing a loaded Ready (an ACCEPT and a DELIVER to
// each of two followers, the DELIVERs held and carried by the next
// Ready's ACCEPTs) allocates nothing once its buffers have grown.
func TestHeldRouteAllocs(t *testing.T) {
	topo := testTopology(t)
	may := func(m wire.Message) bool { _, ok := m.(*wire.Deliver); return ok }
	acc := &wire.Accept{M: wire.AppMsg{ID: wire.MsgID{Client: 9, Seq: 1}, Dest: []wire.GroupID{0}}}
	del := &wire.Deliver{ID: wire.MsgID{Client: 9, Seq: 1}}
	msgs := []wire.Envelope{{To: 1, Msg: acc}, {To: 2, Msg: acc}, {To: 1, Msg: del}, {To: 2, Msg: del}}
	var h Held
	h.Route(msgs, topo, may)
	if got := testing.AllocsPerRun(100, func() { h.Route(msgs, topo, may) }); got != 0 {
		t.Fatalf("%.1f allocations per route", got)
	}
}

// TestHeldOrderAndDrop: Flush returns the peers' messages in the order
// the peers were first held for (so a simulator's runs are reproducible),
// and Drop forgets what is held, as a crash does.
func TestHeldOrderAndDrop(t *testing.T) {
	topo := testTopology(t)
	may := func(wire.Message) bool { return true }
	del := func(to wire.ProcID, seq uint64) wire.Envelope {
		return wire.Envelope{To: to, Msg: &wire.Deliver{ID: wire.MsgID{Client: 9, Seq: seq}}}
	}
	var h Held
	for round := range 20 {
		h.Route([]wire.Envelope{del(3, 1), del(1, 2), del(2, 3)}, topo, may)
		var got []wire.ProcID
		for _, e := range h.Flush() {
			got = append(got, e.To)
		}
		if fmt.Sprint(got) != "[3 1 2]" {
			t.Fatalf("round %d: flushed to %v, want [3 1 2]", round, got)
		}
	}
	h.Route([]wire.Envelope{del(1, 4), del(2, 5)}, topo, may)
	if h.Len() != 2 {
		t.Fatalf("%d held, want 2", h.Len())
	}
	h.Drop()
	if h.Len() != 0 || len(h.Flush()) != 0 {
		t.Fatalf("after Drop: %d held", h.Len())
	}
}

// testTopology is 2 groups of 3 replicas (ids 0 to 5): 9 is a client.
func testTopology(t *testing.T) *Topology {
	t.Helper()
	topo, err := NewTopology(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}
