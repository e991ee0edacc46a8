package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/wire"
)

// rejectCase is one forged input a baseline replica must refuse with a
// counted reason, leaving its state unchanged.
type rejectCase struct {
	protocol string
	reason   string
	// setup runs (as amcasttest script lines) before the injection, prep
	// are genuine envelopes handed to their recipients next; both happen in
	// the test run and in the control run.
	setup []string
	prep  []wire.Envelope
	// bad is the forged envelope, handed only to the test run's recipient.
	bad wire.Envelope
}

func msgID(c, s uint32) wire.MsgID { return wire.MsgID{Client: wire.ProcID(c), Seq: uint64(s)} }

func ts(t uint64, g wire.GroupID) wire.Timestamp { return wire.Timestamp{T: t, G: g} }

func appMsg(id wire.MsgID, payload string, dest ...wire.GroupID) wire.AppMsg {
	return wire.AppMsg{ID: id, Dest: dest, Payload: []byte(payload)}
}

func env(from, to wire.ProcID, m wire.Message) wire.Envelope {
	return wire.Envelope{From: from, To: to, Msg: m}
}

// resolve gives the ids of a case's envelope their digests, as a sender
// would: the cases name messages as scripts do ("6.1", no digest). An id
// the run multicast takes that message's digest, so a copy with other
// content under it is refused as bad_digest (wire.MsgID.Digest: the
// content is the identity); a full message the run never multicast is
// sealed; an id-only reference to one stays as named.
func resolve(e *amcasttest.Env, m wire.Message) wire.Message {
	id := func(x wire.MsgID) wire.MsgID {
		if known, ok := e.Message(x); ok && x.Digest == (wire.Digest{}) {
			return known.ID
		}
		return x
	}
	full := func(a wire.AppMsg) wire.AppMsg {
		if _, ok := e.Message(a.ID); !ok && a.ID.Digest == (wire.Digest{}) {
			a.Seal()
			return a
		}
		a.ID = id(a.ID)
		return a
	}
	cmd := func(c wire.Command) wire.Command {
		if c.Op == wire.CmdAssign {
			c.M = full(c.M)
		} else {
			c.M.ID = id(c.M.ID)
		}
		return c
	}
	switch x := m.(type) {
	case *wire.Multicast:
		return &wire.Multicast{M: full(x.M)}
	case *wire.Accept:
		y := *x
		y.M = full(x.M)
		return &y
	case *wire.Propose:
		y := *x
		y.ID = id(x.ID)
		return &y
	case *wire.HardTS:
		y := *x
		y.ID = id(x.ID)
		return &y
	case *wire.SoftTS:
		y := *x
		y.ID = id(x.ID)
		return &y
	case *wire.PaxosAccept:
		y := *x
		y.Cmd = cmd(x.Cmd)
		return &y
	case *wire.PaxosDecided:
		y := *x
		y.Cmds = make([]wire.Command, len(x.Cmds))
		for i, c := range x.Cmds {
			y.Cmds[i] = cmd(c)
		}
		return &y
	case *wire.PaxosPromise:
		y := *x
		y.Entries = make([]wire.LogEntry, len(x.Entries))
		for i, le := range x.Entries {
			le.Cmd = cmd(le.Cmd)
			y.Entries[i] = le
		}
		return &y
	}
	return m
}

// rejectCases: FT-Skeen and FastCast run 2 groups x 3 replicas (g0 = p0 p1
// p2, g1 = p3 p4 p5) with client c6; Skeen 2 groups x 1 (p0, p1) with
// client c2. Every setup multicasts 6.1 (2.1) to both groups with payload
// "m"; after the injection both runs multicast one more message and
// stabilize.
func rejectCases() []rejectCase {
	m61 := appMsg(msgID(6, 1), "m", 0, 1)
	mcast := []string{"multicast dest=0,1 payload=m"}
	known := []string{"multicast dest=0,1 payload=m", "deliver from=6 to=0"}
	done := []string{"multicast dest=0,1 payload=m", "stabilize quiet"}
	noop := wire.Command{Op: wire.CmdNoop}
	b0 := wire.Ballot{N: 0, P: 0}
	var cs []rejectCase
	for _, p := range []string{"ftskeen", "fastcast"} {
		cs = append(cs,
			rejectCase{protocol: p, reason: "wrong_recipient", setup: mcast, bad: env(6, 0, &wire.Multicast{M: m61})},
			rejectCase{protocol: p, reason: "from_self", setup: mcast, bad: env(0, 0, &wire.Multicast{M: m61})},
			rejectCase{protocol: p, reason: "not_member", setup: mcast,
				bad: env(3, 0, &wire.PaxosAccept{B: wire.Ballot{N: 9, P: 3}, Slot: 0, Cmd: noop})},
			rejectCase{protocol: p, reason: "unexpected_kind", setup: mcast,
				bad: env(3, 0, &wire.Accept{M: m61, G: 1, B: wire.Ballot{P: 3}, LTS: ts(1, 1)})},
			rejectCase{protocol: p, reason: "bad_dest", setup: mcast, bad: env(6, 0, &wire.Multicast{M: appMsg(msgID(6, 9), "x", 1, 0)})},
			rejectCase{protocol: p, reason: "not_destination", setup: mcast, bad: env(6, 0, &wire.Multicast{M: appMsg(msgID(6, 9), "x", 1)})},
			rejectCase{protocol: p, reason: "client_mismatch", setup: mcast, bad: env(6, 0, &wire.Multicast{M: appMsg(msgID(7, 1), "x", 0)})},
			// A known id with other content: its digest does not match
			// (dest_mismatch and payload_mismatch before ids had digests).
			rejectCase{protocol: p, reason: "bad_digest", setup: known, bad: env(6, 0, &wire.Multicast{M: appMsg(msgID(6, 1), "m", 0)})},
			rejectCase{protocol: p, reason: "bad_digest", setup: known, bad: env(6, 0, &wire.Multicast{M: appMsg(msgID(6, 1), "forged", 0, 1)})},
			rejectCase{protocol: p, reason: "bad_digest", setup: done, bad: env(6, 3, &wire.Multicast{M: appMsg(msgID(6, 1), "late forgery", 0, 1)})},
			// Paxos: p1 is a follower of g0, whose leader p0 leads ballot 0.p0.
			rejectCase{protocol: p, reason: "ballot_sender_mismatch", setup: mcast,
				bad: env(2, 1, &wire.PaxosAccept{B: b0, Slot: 0, Cmd: noop})},
			rejectCase{protocol: p, reason: "ballot_not_member", setup: mcast,
				bad: env(2, 1, &wire.PaxosHeartbeat{B: wire.Ballot{N: 7, P: 4}, Executed: 0})},
			rejectCase{protocol: p, reason: "ballot_not_member", setup: mcast,
				bad: env(2, 1, &wire.PaxosPromise{B: wire.Ballot{N: 7, P: 99}})},
			rejectCase{protocol: p, reason: "slot_out_of_range", setup: mcast,
				bad: env(2, 1, &wire.PaxosAccepted{B: b0, Slot: 1 << 40})},
			rejectCase{protocol: p, reason: "slot_out_of_range", setup: mcast,
				bad: env(0, 1, &wire.PaxosDecided{First: ^uint64(0) - 1, Cmds: []wire.Command{noop, noop, noop}})},
			rejectCase{protocol: p, reason: "bad_command", setup: mcast,
				bad: env(0, 1, &wire.PaxosAccept{B: b0, Slot: 0, Cmd: wire.Command{Op: wire.CmdAssign, M: appMsg(msgID(6, 1), "m", 1)}})},
			rejectCase{protocol: p, reason: "bad_command", setup: mcast,
				bad: env(0, 1, &wire.PaxosAccept{B: b0, Slot: 0, Cmd: wire.Command{Op: wire.CmdFinal, M: appMsg(msgID(6, 1), "", 0, 1), TS: ts(3, 2)}})},
			rejectCase{protocol: p, reason: "decided_mismatch", setup: done,
				bad: env(0, 1, &wire.PaxosDecided{First: 0, Cmds: []wire.Command{noop}})},
			rejectCase{protocol: p, reason: "decided_mismatch", setup: done,
				bad: env(0, 1, &wire.PaxosPromise{B: wire.Ballot{N: 5, P: 0}, Entries: []wire.LogEntry{{Slot: 0, B: b0, Decided: true, Cmd: noop}}})},
		)
	}
	// Timestamps from other groups: FT-Skeen's PROPOSE, FastCast's
	// SOFT_TS and HARD_TS. g1 chooses 1.g1 for 6.1 in both protocols.
	tsMsg := map[string]func(g wire.GroupID, lts wire.Timestamp) wire.Message{
		"ftskeen": func(g wire.GroupID, lts wire.Timestamp) wire.Message {
			return &wire.Propose{ID: msgID(6, 1), G: g, LTS: lts}
		},
		"fastcast": func(g wire.GroupID, lts wire.Timestamp) wire.Message {
			return &wire.HardTS{ID: msgID(6, 1), G: g, LTS: lts}
		},
		"fastcast(soft)": func(g wire.GroupID, lts wire.Timestamp) wire.Message {
			return &wire.SoftTS{ID: msgID(6, 1), G: g, LTS: lts}
		},
	}
	for name, mk := range tsMsg {
		p, _, _ := strings.Cut(name, "(")
		cs = append(cs,
			rejectCase{protocol: p, reason: "sender_not_in_group", setup: mcast, bad: env(1, 0, mk(1, ts(1, 1)))},
			rejectCase{protocol: p, reason: "own_group_ts", setup: mcast, bad: env(1, 0, mk(0, ts(1, 0)))},
			rejectCase{protocol: p, reason: "bad_timestamp", setup: mcast, bad: env(3, 0, mk(1, ts(1, 0)))},
			rejectCase{protocol: p, reason: "bad_timestamp", setup: mcast, bad: env(3, 0, mk(1, ts(0, 1)))},
			rejectCase{protocol: p, reason: "not_destination", setup: []string{"multicast dest=0 payload=m", "deliver from=6 to=0"},
				bad: env(3, 0, mk(1, ts(1, 1)))},
		)
		if name != "fastcast(soft)" { // soft timestamps may change (latest wins)
			cs = append(cs,
				rejectCase{protocol: p, reason: "ts_mismatch", setup: mcast, prep: []wire.Envelope{env(3, 0, mk(1, ts(1, 1)))},
					bad: env(3, 0, mk(1, ts(5, 1)))},
				rejectCase{protocol: p, reason: "ts_mismatch", setup: known, prep: []wire.Envelope{env(3, 0, mk(1, ts(1, 1)))},
					bad: env(4, 0, mk(1, ts(2, 1)))})
		}
	}
	// Skeen: p0 and p1, client c2; 2.1 is the genuine message.
	m21 := appMsg(msgID(2, 1), "m", 0, 1)
	skKnown := []string{"multicast dest=0,1 payload=m", "deliver from=2 to=0"}
	skDone := []string{"multicast dest=0,1 payload=m", "stabilize quiet"}
	prop := func(g wire.GroupID, lts wire.Timestamp) *wire.Propose {
		return &wire.Propose{ID: msgID(2, 1), G: g, LTS: lts}
	}
	cs = append(cs,
		rejectCase{protocol: "skeen", reason: "wrong_recipient", setup: mcast, bad: env(2, 1, &wire.Multicast{M: m21})},
		rejectCase{protocol: "skeen", reason: "from_self", setup: mcast, bad: env(0, 0, prop(0, ts(1, 0)))},
		rejectCase{protocol: "skeen", reason: "unexpected_kind", setup: mcast, bad: env(1, 0, &wire.PaxosAccepted{B: b0})},
		rejectCase{protocol: "skeen", reason: "bad_dest", setup: mcast, bad: env(2, 0, &wire.Multicast{M: appMsg(msgID(2, 9), "x", 0, 5)})},
		rejectCase{protocol: "skeen", reason: "not_destination", setup: mcast, bad: env(2, 0, &wire.Multicast{M: appMsg(msgID(2, 9), "x", 1)})},
		// A client id that is the process itself would make it answer itself.
		rejectCase{protocol: "skeen", reason: "client_mismatch", setup: mcast, bad: env(0+2, 0, &wire.Multicast{M: appMsg(msgID(0, 1), "x", 0)})},
		rejectCase{protocol: "skeen", reason: "client_mismatch", setup: mcast, bad: env(1, 0, &wire.Multicast{M: appMsg(msgID(1, 1), "x", 0)})},
		rejectCase{protocol: "skeen", reason: "bad_digest", setup: skKnown, bad: env(2, 0, &wire.Multicast{M: appMsg(msgID(2, 1), "m", 0)})},
		rejectCase{protocol: "skeen", reason: "bad_digest", setup: skKnown, bad: env(2, 0, &wire.Multicast{M: appMsg(msgID(2, 1), "forged", 0, 1)})},
		rejectCase{protocol: "skeen", reason: "bad_digest", setup: skDone, bad: env(2, 0, &wire.Multicast{M: appMsg(msgID(2, 1), "late", 0, 1)})},
		rejectCase{protocol: "skeen", reason: "sender_not_in_group", setup: mcast, bad: env(0+1, 0, prop(0, ts(1, 0)))},
		rejectCase{protocol: "skeen", reason: "bad_timestamp", setup: mcast, bad: env(1, 0, prop(1, ts(1, 0)))},
		rejectCase{protocol: "skeen", reason: "not_destination", setup: []string{"multicast dest=0 payload=m", "deliver from=2 to=0"}, bad: env(1, 0, prop(1, ts(1, 1)))},
		rejectCase{protocol: "skeen", reason: "ts_mismatch", setup: mcast, prep: []wire.Envelope{env(1, 0, prop(1, ts(1, 1)))}, bad: env(1, 0, prop(1, ts(4, 1)))},
	)
	return cs
}

// TestBaselineRejects: each forged input is refused with its reason,
// counted once in Rejected(), produces no output, and leaves the replica's
// state unchanged: the run continues exactly as a control run that never
// saw it (same messages, records and deliveries, byte for byte), and the
// genuine messages are delivered.
func TestBaselineRejects(t *testing.T) {
	for _, c := range rejectCases() {
		t.Run(c.protocol+"/"+c.reason, func(t *testing.T) {
			test, control := amcasttest.New(NewReplica), amcasttest.New(NewReplica)
			var outs [2]strings.Builder
			for i, e := range []*amcasttest.Env{test, control} {
				if c.protocol == "skeen" {
					e.Do(t, "topology protocol=skeen groups=2 replicas=1")
				} else {
					e.Do(t, "topology protocol="+c.protocol+" groups=2 replicas=3")
				}
				for _, line := range c.setup {
					e.Do(t, line)
				}
				for _, p := range c.prep {
					var w strings.Builder
					p.Msg = resolve(e, p.Msg)
					e.Step(t, p, &w)
					if strings.Contains(w.String(), "error:") {
						t.Fatalf("prep %s: %s", wire.DescribeEnvelope(p), w.String())
					}
				}
				if i == 0 {
					c.bad.Msg = resolve(e, c.bad.Msg)
					m := e.Machine(c.bad.To)
					if c.reason == "wrong_recipient" {
						c.bad.To++ // the envelope names another process
					}
					err := m.Step(c.bad)
					var re *amcast.RejectError
					if !errors.As(err, &re) || re.Reason != c.reason {
						t.Fatalf("%s: got %v, want reject %q", wire.DescribeEnvelope(c.bad), err, c.reason)
					}
					if !errors.Is(err, amcast.ErrBadMessage) {
						t.Fatalf("reject does not wrap ErrBadMessage: %v", err)
					}
					if n := m.(amcast.RejectCounter).Rejected(); n[c.reason] != 1 || len(n) != 1 {
						t.Fatalf("Rejected() = %v, want %s:1", n, c.reason)
					}
					if m.HasReady() {
						t.Fatalf("rejected input produced output: %+v", m.Ready())
					}
				}
				outs[i].WriteString(e.Do(t, "stabilize"))
				outs[i].WriteString(e.Do(t, "multicast dest=0,1 payload=next"))
				outs[i].WriteString(e.Do(t, "stabilize"))
				outs[i].WriteString(e.Do(t, "deliveries"))
			}
			if outs[0].String() != outs[1].String() {
				t.Fatalf("the rejected input changed the run:\n--- with it:\n%s\n--- control:\n%s", outs[0].String(), outs[1].String())
			}
			if got := strings.Count(outs[0].String(), ".2@"); got < 3 {
				t.Fatalf("the next message was not delivered everywhere:\n%s", outs[0].String())
			}
		})
	}
}

// TestBaselineLogConflictCounted: a value a peer claims was chosen that
// contradicts what the replica executed (a second FINAL for a delivered
// message, with another global timestamp) is counted as log_conflict; the
// replica does not crash and does not deliver again.
func TestBaselineLogConflictCounted(t *testing.T) {
	for _, protocol := range []string{"ftskeen", "fastcast"} {
		e := amcasttest.New(NewReplica)
		e.Do(t, "topology protocol="+protocol+" groups=2 replicas=3")
		e.Do(t, "multicast dest=0,1 payload=m")
		e.Do(t, "stabilize quiet")
		p1 := e.Machine(1)
		before := len(e.Deliveries(1))
		// g0's log holds ASSIGN 6.1 and FINAL(s) of 6.1: claim that the
		// first free slot chose another FINAL for it (the slots already
		// chosen refuse it: decided_mismatch).
		slots := 0
		for s := uint64(1); s < 8; s++ {
			final := wire.Command{Op: wire.CmdFinal, M: wire.AppMsg{ID: msgID(6, 1), Dest: []wire.GroupID{0, 1}}, TS: ts(50, 1)}
			if err := p1.Step(env(0, 1, resolve(e, &wire.PaxosDecided{First: s, Cmds: []wire.Command{final}}))); err == nil {
				slots++
				break
			}
		}
		if slots == 0 {
			t.Fatalf("%s: no slot took the forged FINAL", protocol)
		}
		// FT-Skeen commits on FINAL: a second gts is a conflict. FastCast
		// ignores a FINAL of a committed message.
		got := p1.(amcast.RejectCounter).Rejected()
		if protocol == "ftskeen" && got["log_conflict"] != 1 {
			t.Fatalf("%s: Rejected() = %v, want log_conflict:1", protocol, got)
		}
		rd := p1.Ready()
		if len(rd.Deliveries) != 0 {
			t.Fatalf("%s: delivered again: %+v", protocol, rd.Deliveries)
		}
		if len(e.Deliveries(1)) != before {
			t.Fatalf("%s: deliveries changed", protocol)
		}
	}
}
