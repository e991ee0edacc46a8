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
		return wire.NewAppMsg(wire.MsgID{Client: 9, Seq: seq}, []wire.GroupID{0, 1}, []byte{byte(seq)})
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
	st2.records, st2.rejoined = st.records, st.rejoined
	st.sess.hit, st2.sess.hit = nil, nil // the lookup caches (sessions.go) are not state
	st.sess.hitKey, st2.sess.hitKey = wire.SessionKey{}, wire.SessionKey{}
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
	if !a.sess.collected(wire.MsgID{Client: 9, Seq: 3}) || a.sess.collected(wire.MsgID{Client: 9, Seq: 4}) {
		t.Fatal("done set lost in the snapshot")
	}
}

func amcastTopo(g, r int) (*amcast.Topology, error) { return amcast.NewTopology(g, r) }

// TestRestoreDropsOwnAcceptsOfLeftBallots (H9.3, issue #10 item 4): p2
// accepted 9.1 under g0's ballot 0.p0 (RecAccepted), then adopted ballot
// 1.p1, whose state lists 9.1 with the same vectors (RecNewState). The live
// process dropped its own group's ACCEPT on adopt; Restore used to rebuild
// it from the records, so that g1's ACCEPT completed the set at once and the
// restarted p2 acked [0.p0 0.p3], a vector it had left. Both the old
// ballot's ACCEPT and one under the adopted ballot carried by a re-sent
// state are dropped; the restored process acks only after the new leader's
// ACCEPT, as the live one would.
func TestRestoreDropsOwnAcceptsOfLeftBallots(t *testing.T) {
	topo, _ := amcastTopo(2, 3)
	m := wire.NewAppMsg(wire.MsgID{Client: 9, Seq: 1}, []wire.GroupID{0, 1}, []byte("m"))
	b0, b1, g1 := wire.Ballot{N: 0, P: 0}, wire.Ballot{N: 1, P: 1}, wire.Ballot{N: 0, P: 3}
	lts0, lts1 := wire.Timestamp{T: 1, G: 0}, wire.Timestamp{T: 1, G: 1}
	state := func(own wire.Ballot) wire.MsgState {
		return wire.MsgState{M: m, Phase: wire.PhaseAccepted, LTS: lts0, GTS: lts1,
			Ballots: []wire.Ballot{own, g1}, LTSs: []wire.Timestamp{lts0, lts1}}
	}
	for _, tc := range []struct {
		name string
		recs []wire.Message
	}{
		{"old ballot", []wire.Message{
			&wire.RecAccepted{S: state(b0)},
			&wire.RecBallot{Ballot: b1, CBallot: b0},
			&wire.RecNewState{B: b1, Clock: 1, State: []wire.MsgState{state(b0)}},
		}},
		{"re-sent state", []wire.Message{
			&wire.RecBallot{Ballot: b1, CBallot: b0},
			&wire.RecNewState{B: b1, Clock: 1, State: []wire.MsgState{state(b1)}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStore()
			for _, r := range tc.recs {
				if err := st.Apply(r); err != nil {
					t.Fatal(err)
				}
			}
			p, err := Restore(Config{Topology: topo, ID: 2}, st)
			if err != nil {
				t.Fatal(err)
			}
			if e := p.recs[m.ID].acc[0]; e.ok {
				t.Fatalf("restored p2 holds g0's ACCEPT (%s, %s), which adopting %s dropped", e.b, e.lts, p.cballot)
			}
			step := func(from wire.ProcID, a *wire.Accept) []wire.Envelope {
				if err := p.Step(wire.Envelope{From: from, To: 2, Msg: a}); err != nil {
					t.Fatal(err)
				}
				rd := p.Ready()
				out := append([]wire.Envelope(nil), rd.Messages...)
				p.Advance()
				return out
			}
			if out := step(3, &wire.Accept{M: m, G: 1, B: g1, LTS: lts1}); len(out) != 0 {
				t.Fatalf("restored p2 acked on g1's ACCEPT alone: %v", wire.DescribeEnvelope(out[0]))
			}
			out := step(1, &wire.Accept{M: m, G: 0, B: b1, LTS: lts0})
			if len(out) == 0 {
				t.Fatal("restored p2 did not ack after the new leader's ACCEPT")
			}
			if ak := out[0].Msg.(*wire.AcceptAck); ak.Ballots[0] != b1 {
				t.Fatalf("restored p2 acked with vector %v", ak.Ballots)
			}
		})
	}
}
