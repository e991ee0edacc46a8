package wbcast

import (
	"testing"

	"github.com/weft-dev/weft/wire"
)

// A replica that lost its disk promises, acks, proposes, leads and sends
// nothing (amnesia.go): not even as the initial leader of its group.
func TestAmnesiacIsInert(t *testing.T) {
	topo, _ := amcastTopo(2, 3)
	p, err := RestoreAmnesiac(Config{Topology: topo, ID: 0}, nil) // group 0's initial leader
	if err != nil {
		t.Fatal(err)
	}
	m := wire.NewAppMsg(wire.MsgID{Client: 6, Seq: 1}, []wire.GroupID{0, 1}, []byte("x"))
	for _, env := range []wire.Envelope{
		{From: 6, To: 0, Msg: &wire.Multicast{M: m}},
		{From: 1, To: 0, Msg: &wire.NewLeader{B: wire.Ballot{N: 1, P: 1}}},
		{From: 3, To: 0, Msg: &wire.Accept{M: m, G: 1, B: wire.Ballot{N: 0, P: 3}, LTS: wire.Timestamp{T: 1, G: 1}}},
		{From: 1, To: 0, Msg: &wire.Heartbeat{B: wire.Ballot{N: 0, P: 0}, CBallot: wire.Ballot{N: 0, P: 0}}},
	} {
		if err := p.Step(env); err != nil {
			t.Fatalf("%s: %v", wire.Describe(env.Msg), err)
		}
	}
	for range 100 {
		p.Tick()
	}
	if p.HasReady() || p.IsLeader() || !p.Amnesiac() || len(p.recs) != 0 {
		t.Fatalf("an amnesiac replica acted: ready %v leader %v recs %d", p.HasReady(), p.IsLeader(), len(p.recs))
	}
	if q, _ := New(Config{Topology: topo, ID: 0}); !q.IsLeader() {
		t.Fatal("control: a new p0 leads ballot 0 (the hazard)")
	}
}
