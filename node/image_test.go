package node

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/wire"
)

// randomRecords returns a plausible random sequence of wbcast records for
// a process of group 0 in a 2 x 3 topology.
func randomRecords(rng *rand.Rand, n int) []wire.Message {
	var out []wire.Message
	var clock uint64
	ballot := wire.Ballot{}
	randMsg := func() wire.AppMsg {
		m := wire.AppMsg{ID: wire.MsgID{Client: wire.ProcID(100 + rng.IntN(2)), Seq: uint64(1 + rng.IntN(30))}, Dest: []wire.GroupID{0}}
		if m.ID.Seq%3 == 0 {
			m.Dest = []wire.GroupID{0, 1}
		}
		m.Payload = []byte(m.ID.String())
		return m
	}
	randState := func(phase wire.Phase) wire.MsgState {
		m := randMsg()
		clock++
		s := wire.MsgState{M: m, Phase: phase, LTS: wire.Timestamp{T: clock, G: 0}}
		s.GTS = wire.Timestamp{T: clock + uint64(rng.IntN(3)), G: wire.GroupID(rng.IntN(2))}
		s.Ballots = make([]wire.Ballot, len(m.Dest))
		s.LTSs = make([]wire.Timestamp, len(m.Dest))
		for i := range m.Dest {
			if rng.IntN(4) > 0 {
				s.Ballots[i] = ballot
				s.LTSs[i] = wire.Timestamp{T: clock, G: m.Dest[i]}
			}
		}
		return s
	}
	var maxDel wire.Timestamp
	for len(out) < n {
		switch k := rng.IntN(20); {
		case k == 0:
			ballot = wire.Ballot{N: ballot.N + 1, P: wire.ProcID(rng.IntN(3))}
			cb := ballot
			if rng.IntN(2) == 0 {
				cb = wire.Ballot{N: ballot.N - 1, P: 0}
			}
			out = append(out, &wire.RecBallot{Ballot: ballot, CBallot: cb})
		case k == 1:
			ns := &wire.RecNewState{B: ballot, Clock: clock + uint64(rng.IntN(5))}
			for range rng.IntN(5) {
				ns.State = append(ns.State, randState(wire.PhaseAccepted))
			}
			out = append(out, ns)
		case k < 10:
			out = append(out, &wire.RecAccepted{S: randState(wire.PhaseAccepted)})
		case k < 16:
			clock++
			maxDel = wire.Timestamp{T: maxDel.T + 1 + uint64(rng.IntN(3)), G: 0}
			out = append(out, &wire.RecDelivered{M: randMsg(), LTS: wire.Timestamp{T: clock}, GTS: maxDel})
		default:
			c := &wire.RecCollected{}
			for range 1 + rng.IntN(6) {
				c.IDs = append(c.IDs, randMsg().ID)
			}
			out = append(out, c)
		}
	}
	return out
}

// behaviour restores a process from st and returns what it answers to a
// NEW_LEADER of a high ballot (its promise, clock, max delivered and
// retained states) plus its observable fields.
func behaviour(t *testing.T, st *wbcast.Store) string {
	t.Helper()
	topo, err := amcast.NewTopology(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	p, err := wbcast.Restore(wbcast.Config{Topology: topo, ID: 1}, st)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	b, cb := p.Ballot()
	fmt.Fprintf(&sb, "ballot %s cballot %s clock %d maxdel %s retained %d status %s\n", b, cb, p.Clock(), p.MaxDelivered(), p.Retained(), p.Status())
	if err := p.Step(wire.Envelope{From: 2, To: 1, Msg: &wire.NewLeader{B: wire.Ballot{N: 1 << 20, P: 2}}}); err != nil {
		t.Fatal(err)
	}
	rd := p.Ready()
	for _, m := range rd.Messages {
		fmt.Fprintf(&sb, "send %d %s\n", m.To, wire.Describe(m.Msg))
		if a, ok := m.Msg.(*wire.NewLeaderAck); ok {
			for _, s := range a.State {
				fmt.Fprintf(&sb, "  state %s %s %s %s %v %v\n", s.M.ID, s.Phase, s.LTS, s.GTS, s.Ballots, s.LTSs)
			}
		}
	}
	return sb.String()
}

// TestSnapshotRebuildsStore: random record sequences, then a snapshot of
// the store through the node's snapshot encoding and the codec: the store
// it rebuilds has the same snapshot, and a process restored from it
// behaves like one restored from the records.
func TestSnapshotRebuildsStore(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		recs := randomRecords(rng, 1+rng.IntN(120))
		st := wbcast.NewStore()
		for _, r := range recs {
			if err := st.Apply(r); err != nil {
				t.Fatal(err)
			}
		}
		snap, err := roundTrip(t, []wire.Message{st.Snapshot()})
		if err != nil {
			t.Fatal(err)
		}
		st2 := wbcast.NewStore()
		for _, r := range snap {
			if err := st2.Apply(r); err != nil {
				t.Fatal(err)
			}
		}
		if a, b := st.Snapshot(), st2.Snapshot(); !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: the snapshot does not rebuild the store:\n%+v\n%+v", seed, a, b)
		}
		if b1, b2 := behaviour(t, st), behaviour(t, st2); b1 != b2 {
			t.Fatalf("seed %d: restored processes differ:\nfrom the records:\n%s\nfrom the snapshot:\n%s", seed, b1, b2)
		}
	}
}

// roundTrip encodes recs as a snapshot and decodes them back.
func roundTrip(t *testing.T, recs []wire.Message) ([]wire.Message, error) {
	t.Helper()
	var b bytes.Buffer
	if err := writeSnapshot(&b, recs, nil); err != nil {
		t.Fatal(err)
	}
	return readSnapshot(&b)
}

func TestSnapshotRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("weftsnap"), []byte("weftsnap\x01"), []byte("weftsnap\x02\x05ab"),
		append([]byte("weftsnap\x02\x02"), 9, 9), binary.AppendUvarint([]byte("weftsnap\x02"), maxImageRecord+1)} {
		if _, err := readSnapshot(bytes.NewReader(b)); err == nil {
			t.Errorf("readSnapshot(%q) succeeded", b)
		}
	}
}

// TestSnapshotLongSession: one client session remembering more collected
// ids than one record may hold (a client shared by an application's
// threads, at thousands of multicasts a second, over the session lease)
// is written across records and read back whole. Pages used to split a
// session's list only at wire.MaxStateEntries, so this snapshot was one
// record of about 5 MiB, which writeSnapshot refused: every compaction
// failed and the log grew without bound.
func TestSnapshotLongSession(t *testing.T) {
	done := wire.ClientDone{Client: 7, Session: wire.Session(3), Floor: 1}
	for j := range 250_000 {
		done.Collected = append(done.Collected, wire.SeqDigest{Seq: uint64(j + 2), Digest: wire.Digest{byte(j), byte(j >> 8), byte(j >> 16)}})
	}
	if n := wire.Size(&wire.RecSnapshot{Done: []wire.ClientDone{done}}); n <= maxImageRecord {
		t.Fatalf("the session encodes in %d bytes, within one record: the test no longer needs pages", n)
	}
	back, err := roundTrip(t, []wire.Message{&wire.RecSnapshot{Clock: 4, Done: []wire.ClientDone{done}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 1 || !reflect.DeepEqual(back[0].(*wire.RecSnapshot).Done, []wire.ClientDone{done}) {
		t.Fatalf("read back %d records, not the session's %d ids", len(back), len(done.Collected))
	}
}

// TestSnapshotEncoderRefusesWhatTheDecoderWould: a record over the
// per-record limit is refused when writing, not discovered when reading.
func TestSnapshotEncoderRefusesWhatTheDecoderWould(t *testing.T) {
	big := &wire.RecDelivered{M: wire.AppMsg{ID: wire.MsgID{Client: 1, Seq: 1}, Dest: []wire.GroupID{0}, Payload: make([]byte, maxImageRecord)}}
	err := writeSnapshot(io.Discard, []wire.Message{big}, nil)
	if err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Fatalf("writeSnapshot = %v", err)
	}
}

// TestDurableDeliveriesInGTSOrder: a snapshot lists its messages in id
// order; the hand-over after a crash needs them in delivery order, or it
// skips those delivered after a later id (the deliveries log then misses
// them).
func TestDurableDeliveriesInGTSOrder(t *testing.T) {
	msg := func(seq, gts uint64) wire.MsgState {
		return wire.MsgState{M: wire.AppMsg{ID: wire.MsgID{Client: 7, Seq: seq}, Dest: []wire.GroupID{0}}, Phase: wire.PhaseCommitted,
			GTS: wire.Timestamp{T: gts}}
	}
	snap := &wire.RecSnapshot{Msgs: []wire.MsgState{msg(1, 30), msg(2, 10), msg(3, 20), msg(4, 5)}, Delivered: []bool{true, true, true, false}}
	after := &wire.RecDelivered{M: wire.AppMsg{ID: wire.MsgID{Client: 7, Seq: 5}}, GTS: wire.Timestamp{T: 40}}
	var got []uint64
	for _, d := range durableDeliveries([]wire.Message{snap, after}) {
		got = append(got, d.GTS.T)
	}
	if !reflect.DeepEqual(got, []uint64{10, 20, 30, 40}) {
		t.Fatalf("durable deliveries in gts order %v, want [10 20 30 40]", got)
	}
}
