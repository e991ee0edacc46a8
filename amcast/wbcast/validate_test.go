package wbcast_test

import (
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/wire"
)

// forge hands a forged message to its recipient and requires that it is
// refused with the given reason (validate.go), that the process's counter
// for the reason went up by one, and that nothing else changed: no output,
// the same state (Step's contract for refused input).
func forge(t *testing.T, env *amcasttest.Env, from, to wire.ProcID, m wire.Message, reason string) {
	t.Helper()
	p := env.Procs[to].(*wbcast.Process)
	before, state := p.Rejected()[reason], wbcast.Fingerprint(p)
	var w strings.Builder
	env.Step(t, wire.Envelope{From: from, To: to, Msg: m}, &w)
	out := w.String()
	if !strings.Contains(out, "rejected ("+reason+")") || strings.Count(out, "\n") != 2 { // the envelope, then the error
		t.Errorf("forged %s from p%d to p%d: want a %s reject and nothing else, got:\n%s", wire.Describe(m), from, to, reason, out)
	}
	if got := p.Rejected()[reason]; got != before+1 {
		t.Errorf("p%d counted %d %s rejects, want %d", to, got, reason, before+1)
	}
	if after := wbcast.Fingerprint(p); after != state {
		t.Errorf("forged %s changed p%d:\nbefore:\n%s\nafter:\n%s", wire.Describe(m), to, state, after)
	}
}

// TestRejectRecoveryInput (issue #10 item 1): forged NEW_LEADER_ACK,
// NEW_STATE, NEW_STATE_ACK and HEARTBEAT messages that contradict what the
// recipient knows are refused with a reason (several used to panic in the
// merge or in adopt) and change nothing: the genuine recovery then completes
// and the message accepted before the leader crashed is delivered with the
// lts it had (P3).
//
// g0 = {p0 p1 p2}: 6.1 is delivered everywhere (gts 1.g0); 6.2 is accepted
// at p1 only (lts 2.g0); p0 crashes; p1 starts ballot 1.p1, and p2's
// NEW_LEADER_ACK is held on its link, so p1 is a candidate holding only its own ack.
func TestRejectRecoveryInput(t *testing.T) {
	env := newEnv(t, "topology groups=2 replicas=3")
	do(t, env,
		"multicast dest=0 payload=a", "stabilize",
		"multicast dest=0 payload=b", "deliver to=0", "deliver from=0 to=1 kind=ACCEPT",
		"drop from=0", "drop to=0", "crash p=0",
	)
	p1 := env.Procs[1].(*wbcast.Process)
	p2 := env.Procs[2].(*wbcast.Process)
	for i := 0; i < 60 && p2.Status() != wbcast.Recovering; i++ {
		do(t, env, "run ticks=1 quiet")
	}
	do(t, env, "partition from=2 to=1 hold") // p2's ack is in flight
	b, cb := p1.Ballot()
	if p1.Status() != wbcast.Recovering || p2.Status() != wbcast.Recovering || b.Leader() != 1 {
		t.Fatalf("setup: p1 %s ballot %s, p2 %s; want both RECOVERING in a ballot of p1", p1.Status(), b, p2.Status())
	}
	g0 := []wire.GroupID{0}
	// sealed is the id of client 6's message seq with that content.
	sealed := func(seq uint64, dest []wire.GroupID, payload string) wire.MsgID {
		m := wire.AppMsg{ID: wire.MsgID{Client: 6, Seq: seq}, Dest: dest, Payload: []byte(payload)}
		m.Seal()
		return m.ID
	}
	id1, id2, id9 := sealed(1, g0, "a"), sealed(2, g0, "b"), sealed(9, g0, "x")
	ts := func(t uint64, g wire.GroupID) wire.Timestamp { return wire.Timestamp{T: t, G: g} }
	b0 := wire.Ballot{N: 0, P: 0}
	state := func(id wire.MsgID, dest []wire.GroupID, payload string, ph wire.Phase, lts, gts wire.Timestamp) wire.MsgState {
		return wire.MsgState{M: wire.AppMsg{ID: id, Dest: dest, Payload: []byte(payload)}, Phase: ph, LTS: lts, GTS: gts}
	}
	ack := func(st ...wire.MsgState) *wire.NewLeaderAck {
		return &wire.NewLeaderAck{B: b, CBallot: cb, Clock: 2, MaxDelivered: ts(1, 0), State: st}
	}
	accepted2 := state(id2, g0, "b", wire.PhaseAccepted, ts(2, 0), ts(2, 0))

	// At the candidate p1 (its own ack lists 6.2 ACCEPTED at 2.g0, cballot 0.p0).
	forge(t, env, 2, 1, &wire.NewLeaderAck{B: b, CBallot: wire.Ballot{N: 0, P: 3}, State: nil}, "foreign_ballot")
	forge(t, env, 2, 1, &wire.NewLeaderAck{B: b0, CBallot: b}, "bad_ballot")
	forge(t, env, 2, 1, ack(state(id2, g0, "b", wire.PhaseAccepted, ts(5, 0), ts(5, 0))), "merge_conflict") // INV-4: was a panic
	// A known id with other content: its digest no longer matches (it was
	// dest_mismatch and payload_mismatch before ids carried digests).
	forge(t, env, 2, 1, ack(state(id2, []wire.GroupID{0, 1}, "b", wire.PhaseAccepted, ts(2, 0), ts(2, 0))), "bad_digest")
	forge(t, env, 2, 1, ack(state(id2, g0, "evil", wire.PhaseAccepted, ts(2, 0), ts(2, 0))), "bad_digest")
	forge(t, env, 2, 1, ack(accepted2, accepted2), "bad_state")
	forge(t, env, 2, 1, &wire.NewLeaderAck{B: b, CBallot: cb, Clock: 1<<64 - 1}, "bad_timestamp")
	forge(t, env, 2, 1, ack(state(id2, g0, "b", wire.PhaseProposed, ts(2, 0), ts(2, 0))), "bad_state")
	forge(t, env, 2, 1, ack(state(id2, g0, "b", wire.PhaseAccepted, ts(2, 1), ts(2, 1))), "bad_timestamp")
	forge(t, env, 2, 1, ack(state(sealed(2, []wire.GroupID{1}, "b"), []wire.GroupID{1}, "b", wire.PhaseAccepted, ts(2, 0), ts(2, 0))), "not_addressed")
	// INV-8 (was a panic in adopt): 6.9 committed below p1's last delivery,
	// a message of a session p1 knows (6.1 was delivered here) that it
	// neither holds nor collected, and its client never declared answered.
	// (One of a session unknown here could have been collected and its
	// session expired: that entry is skipped, not refused.)
	forge(t, env, 2, 1, ack(state(id9, g0, "x", wire.PhaseCommitted, ts(1, 0), ts(1, 0))), "committed_below_delivered")
	// 6.1 was delivered here: the state may not name another message.
	forge(t, env, 2, 1, &wire.NewLeaderAck{B: b, CBallot: wire.Ballot{N: 0, P: 1}, State: []wire.MsgState{
		state(id1, g0, "evil", wire.PhaseCommitted, ts(1, 0), ts(1, 0))}}, "bad_digest")
	forge(t, env, 2, 1, &wire.NewStateAck{B: wire.Ballot{N: 1, P: 4}}, "foreign_ballot")
	forge(t, env, 2, 1, &wire.Heartbeat{B: wire.Ballot{N: 7, P: 5}, CBallot: cb}, "foreign_ballot")
	forge(t, env, 2, 1, &wire.Heartbeat{B: cb, CBallot: b}, "bad_ballot")
	if p1.Status() != wbcast.Recovering {
		t.Fatalf("p1 left recovery on forged acks: %s", p1.Status())
	}

	// At the member p2, a NEW_STATE of the ballot it joined.
	ns := func(st ...wire.MsgState) *wire.NewState { return &wire.NewState{B: b, Clock: 2, State: st} }
	forge(t, env, 1, 2, ns(state(id9, g0, "x", wire.PhaseCommitted, ts(1, 0), ts(1, 0))), "committed_below_delivered")
	forge(t, env, 1, 2, ns(state(id2, g0, "b", wire.PhaseAccepted, ts(2, 0), ts(1, 0))), "bad_timestamp") // gts below lts
	bad := accepted2
	bad.Ballots, bad.LTSs = []wire.Ballot{b0, b0}, []wire.Timestamp{ts(2, 0), ts(2, 0)}
	forge(t, env, 1, 2, ns(bad), "bad_state")
	// A clock so high that clock+1 would wrap (this process would then
	// refuse its own next ACCEPT, a panic).
	forge(t, env, 1, 2, &wire.NewState{B: b, Clock: 1 << 63}, "bad_timestamp")
	if _, cb2 := p2.Ballot(); cb2 != cb {
		t.Fatalf("p2 adopted a forged NEW_STATE: cballot %s", cb2)
	}

	// The genuine recovery: p2's held ack reaches p1, which leads and
	// re-proposes 6.2 with its old lts; everyone left delivers it at 2.g0.
	do(t, env, "heal", "run ticks=30 quiet")
	if !p1.IsLeader() {
		t.Fatalf("p1 did not become leader after the forged input")
	}
	for _, p := range []wire.ProcID{1, 2} {
		ds := env.Deliveries(p)
		if len(ds) != 2 || ds[1].M.ID != id2 || ds[1].GTS != ts(2, 0) || string(ds[1].M.Payload) != "b" {
			t.Errorf("p%d delivered %v, want 6.1 then 6.2 \"b\" at 2.g0", p, ds)
		}
	}
	var _ amcast.RejectCounter = p1
}
