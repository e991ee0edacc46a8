package wbcast

import (
	"reflect"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// TestSnapshotRoundTrip: a store rebuilt from its snapshot (through the
// codec) equals the original, and a process restored from either is the same.
func TestSnapshotRoundTrip(t *testing.T) {
	st := NewStore()
	m := func(seq uint64) wire.AppMsg {
		return wire.AppMsg{ID: wire.MsgID{Client: 9, Seq: seq}, Dest: []wire.GroupID{0, 1}, Payload: []byte{byte(seq)}}
	}
	recs := []wire.Message{
		&wire.RecBallot{Ballot: wire.Ballot{N: 2, P: 1}, CBallot: wire.Ballot{N: 1, P: 0}},
		&wire.RecAccepted{S: wire.MsgState{M: m(1), Phase: wire.PhaseAccepted, LTS: wire.Timestamp{T: 3}, GTS: wire.Timestamp{T: 4, G: 1},
			Ballots: []wire.Ballot{{N: 1}, {N: 0, P: 3}}, LTSs: []wire.Timestamp{{T: 3}, {T: 4, G: 1}}}},
		&wire.RecDelivered{M: m(2), LTS: wire.Timestamp{T: 5}, GTS: wire.Timestamp{T: 6, G: 1}},
		&wire.RecDelivered{M: m(3), LTS: wire.Timestamp{T: 7}, GTS: wire.Timestamp{T: 8, G: 1}},
		&wire.RecCollected{IDs: []wire.MsgID{{Client: 9, Seq: 3}, {Client: 9, Seq: 5}, {Client: 4, Seq: 1}}},
	}
	for _, r := range recs {
		if err := st.Apply(r); err != nil {
			t.Fatal(err)
		}
	}
	dec, err := wire.Decode(wire.Append(nil, st.Snapshot()))
	if err != nil {
		t.Fatal(err)
	}
	st2 := NewStore()
	if err := st2.Apply(dec); err != nil {
		t.Fatal(err)
	}
	st2.records = st.records
	if !reflect.DeepEqual(st, st2) {
		t.Fatalf("store from snapshot differs:\n%+v\n%+v", st, st2)
	}
	topo, _ := amcastTopo(2, 3)
	a, err := Restore(Config{Topology: topo, ID: 1}, st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Restore(Config{Topology: topo, ID: 1}, st2)
	if err != nil {
		t.Fatal(err)
	}
	if a.maxDelivered != b.maxDelivered || len(a.recs) != len(b.recs) || a.ballot != b.ballot || a.cballot != b.cballot || a.clock != b.clock {
		t.Fatalf("restored processes differ")
	}
	if !a.done.has(wire.MsgID{Client: 9, Seq: 3}) || a.done.has(wire.MsgID{Client: 9, Seq: 4}) {
		t.Fatal("done set lost in the snapshot")
	}
}

func amcastTopo(g, r int) (*amcast.Topology, error) { return amcast.NewTopology(g, r) }
