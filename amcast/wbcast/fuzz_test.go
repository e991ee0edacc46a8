package wbcast_test

import (
	"testing"

	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

// FuzzStep (issue #10 item 1) feeds a WbCast replica, brought into a varied
// state by a short simulated run, arbitrary decoded messages from arbitrary
// senders (sim.FuzzReplica, shared with the baselines): it must never
// panic and, when the senders are strangers, the run must still pass the
// checkers. The seed corpus is testdata/fuzz/FuzzStep (fuzzCorpus; see
// TestFuzzCorpus). Fuzz: go test ./amcast/wbcast -run '^$' -fuzz FuzzStep
// -fuzztime 2m
func FuzzStep(f *testing.F) {
	f.Fuzz(func(t *testing.T, seed uint64, data []byte) {
		if err := sim.FuzzReplica("wbcast", seed, data); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFuzzCorpus: the seed corpus files are fuzzCorpus, in the fuzzing
// engine's format (FuzzStep runs them). Rewrite them with
// go test ./amcast/wbcast -run TestFuzzCorpus -rewrite.
func TestFuzzCorpus(t *testing.T) {
	amcasttest.CheckFuzzCorpus(t, sim.FuzzCorpusFiles(fuzzCorpus()))
}

// fuzzCorpus is FuzzStep's seed corpus, by file name: every WbCast message
// kind, from strangers and in the name of replicas and clients, well formed
// and contradicting what the run's replicas know. Sender bytes index
// sim.FuzzReplica's choices: replicas 0..5 (g0 = p0 p1 p2, g1 = p3 p4 p5),
// the clients 6 and 7, then two strangers, 8 and 9.
func fuzzCorpus() map[string]sim.FuzzSeed {
	const client, stranger = 6, 8
	ts := func(t uint64, g wire.GroupID) wire.Timestamp { return wire.Timestamp{T: t, G: g} }
	m := wire.NewAppMsg(wire.MsgID{Client: 6, Seq: 1}, []wire.GroupID{0, 1}, []byte("fuzz"))
	id := m.ID
	b0, b1 := wire.Ballot{N: 0, P: 0}, wire.Ballot{N: 0, P: 3}
	nb := wire.Ballot{N: 5, P: 1}
	st := []wire.MsgState{{M: m, Phase: wire.PhaseAccepted, LTS: ts(3, 0), GTS: ts(3, 1),
		Ballots: []wire.Ballot{b0, b1}, LTSs: []wire.Timestamp{ts(3, 0), ts(3, 1)}}}
	in := sim.FuzzInput
	type fm = sim.FuzzMsg
	return map[string]sim.FuzzSeed{
		"stranger_multicast": {Seed: 7, Data: in(fm{Sender: stranger, Msg: &wire.Multicast{M: wire.NewAppMsg(wire.MsgID{Client: 9, Seq: 1}, []wire.GroupID{0, 1}, nil)}},
			fm{Sender: stranger, Msg: &wire.Multicast{M: wire.NewAppMsg(wire.MsgID{Client: 9, Seq: 1}, []wire.GroupID{0}, nil)}})},
		"stranger_protocol": {Seed: 20, Data: in(fm{Sender: stranger, Msg: &wire.Accept{M: m, G: 0, B: b0, LTS: ts(1, 0)}},
			fm{Sender: stranger + 1, Msg: &wire.Deliver{ID: id, B: b0, LTS: ts(1, 0), GTS: ts(2, 1)}},
			fm{Sender: stranger, Msg: &wire.NewLeaderAck{B: nb, CBallot: b0, State: st}},
			fm{Sender: stranger, Msg: &wire.Delivered{ID: id, G: 0, GTS: ts(1, 0), Leader: 0}})},
		"replica_accepts": {Seed: 33, Data: in(fm{Sender: 0, Msg: &wire.Accept{M: m, G: 0, B: b0, LTS: ts(9, 0)}},
			fm{Sender: 3, Msg: &wire.Accept{M: m, G: 1, B: b1, LTS: ts(1, 1)}},
			fm{Sender: 3, Msg: &wire.AcceptAck{ID: id, G: 1, Ballots: []wire.Ballot{b0, b1}, GTS: ts(9, 1)}})},
		"replica_recovery": {Seed: 61, Data: in(fm{Sender: 1, Msg: &wire.NewLeader{B: nb}},
			fm{Sender: 2, Msg: &wire.NewLeaderAck{B: nb, CBallot: b0, Clock: 3, State: st}},
			fm{Sender: 1, Msg: &wire.NewState{B: nb, Clock: 3, State: st}},
			fm{Sender: 1, Msg: &wire.NewStateAck{B: nb}},
			fm{Sender: 2, Msg: &wire.Heartbeat{B: wire.Ballot{N: 9, P: 2}, CBallot: b0, Leader: true, MaxDelivered: ts(4, 0)}})},
		// Paged states (paging.go): a gap, a page that contradicts its first
		// page, pages of a NEW_STATE out of order.
		"replica_paged_recovery": {Seed: 72, Data: in(fm{Sender: 1, Msg: &wire.NewLeader{B: nb}},
			fm{Sender: 2, Msg: &wire.NewLeaderAck{B: nb, CBallot: b0, Clock: 3, State: st, Paged: wire.Paged{More: true}}},
			fm{Sender: 2, Msg: &wire.NewLeaderAck{B: nb, CBallot: b0, Clock: 4, Paged: wire.Paged{Page: 1}}},
			fm{Sender: 2, Msg: &wire.NewLeaderAck{B: nb, CBallot: b0, Clock: 3, Paged: wire.Paged{Page: 2}}},
			fm{Sender: 1, Msg: &wire.NewState{B: nb, Clock: 3, State: st, Paged: wire.Paged{More: true}}},
			fm{Sender: 1, Msg: &wire.NewState{B: nb, Clock: 3, Paged: wire.Paged{Page: 7, More: true}}},
			fm{Sender: 1, Msg: &wire.NewState{B: nb, Clock: 3, Paged: wire.Paged{Page: 1}}})},
		"replica_catchup": {Seed: 94, Data: in(fm{Sender: 0, Msg: &wire.Deliver{ID: id, B: b0, LTS: ts(1, 0), GTS: ts(50, 1), M: &m}},
			fm{Sender: 3, Msg: &wire.Deliver{ID: id, B: b1, LTS: ts(1, 1), GTS: ts(2, 1), Prev: ts(1, 0)}})},
		// Hand-overs: from the leader of the first ballot, from a member
		// that leads no ballot, from a stranger, and a stale one.
		"replica_handover": {Seed: 151, Data: in(fm{Sender: 0, Msg: &wire.HandOver{B: b0}},
			fm{Sender: 1, Msg: &wire.HandOver{B: nb}},
			fm{Sender: stranger, Msg: &wire.HandOver{B: wire.Ballot{N: 3, P: 8}}},
			fm{Sender: 3, Msg: &wire.HandOver{B: b1}})},
		// Read index (readindex.go): rounds from a leader and a non-leader,
		// acks under a lower, the same and a higher ballot, an ack for a
		// round never sent, and both from a stranger.
		"read_index": {Seed: 140, Data: in(fm{Sender: 0, Msg: &wire.ReadIndex{B: b0, Seq: 1}},
			fm{Sender: 1, Msg: &wire.ReadIndex{B: b0, Seq: 2}},
			fm{Sender: 1, Msg: &wire.ReadIndexAck{B: b0, Seq: 1 << 40}},
			fm{Sender: 2, Msg: &wire.ReadIndexAck{B: nb, Seq: 1}},
			fm{Sender: 4, Msg: &wire.ReadIndexAck{B: b1, Seq: 1}},
			fm{Sender: stranger, Msg: &wire.ReadIndex{B: b0, Seq: 1}},
			fm{Sender: stranger, Msg: &wire.ReadIndexAck{B: b0, Seq: 1}})},
		// Another content under m's id (bad digest), then the same sequence
		// number sealed with other content: a second message.
		"client_reuses_ids": {Seed: 125, Data: in(fm{Sender: client, Msg: &wire.Multicast{M: m}},
			fm{Sender: client, Msg: &wire.Multicast{M: wire.AppMsg{ID: id, Dest: []wire.GroupID{1}, Payload: []byte("other")}}},
			fm{Sender: client, Msg: &wire.Multicast{M: wire.NewAppMsg(wire.MsgID{Client: 6, Seq: 1}, []wire.GroupID{1}, []byte("other"))}})},
	}
}
