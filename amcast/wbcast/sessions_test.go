package wbcast

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// A client restarted with the same id starts a new session at seq 1: its
// messages must not be taken for the collected messages of the earlier
// incarnation (the leader would answer them "delivered" without ordering
// them).
func TestSessionsAreSeparate(t *testing.T) {
	tb := newSessionTable()
	old := wire.MsgID{Client: 9, Session: wire.Session(1), Seq: 1}
	tb.add(old, 0)
	tb.add(wire.MsgID{Client: 9, Session: wire.Session(1), Seq: 3}, 0)
	if !tb.collected(old) || !tb.collected(wire.MsgID{Client: 9, Session: wire.Session(1), Seq: 3}) {
		t.Fatal("collected ids are not remembered")
	}
	for _, id := range []wire.MsgID{
		{Client: 9, Session: wire.Session(2), Seq: 1},                         // the restarted client's first message
		{Client: 9, Session: wire.Session(1), Seq: 2},                         // a gap
		{Client: 8, Session: wire.Session(1), Seq: 1},                         // another client
		{Client: 9, Session: wire.Session(1), Seq: 1, Digest: wire.Digest{1}}, // seq 1 reused for other content
	} {
		if tb.collected(id) {
			t.Errorf("%s (digest %x) taken for a collected message", id, id.Digest[:2])
		}
	}
	if tb.size() != 3 { // one session + two ids
		t.Errorf("size %d, want 3", tb.size())
	}
}

// The client's floor bounds what a session remembers: without it every
// collected id would stay until the session expires.
// An id below the floor is forgotten a lease after it was collected, not
// before (a late copy may still be in flight).
func TestSessionFloorBoundsMemory(t *testing.T) {
	tb := newSessionTable()
	const lease = 50
	// This group sees every third message of the session, one per tick,
	// each carrying the client's floor (all but the last 4 answered), and
	// collects it at once.
	peak := 0
	for seq := uint64(2); seq <= 3000; seq += 3 {
		now := seq
		m := &wire.AppMsg{ID: wire.MsgID{Client: 7, Session: wire.Session(5), Seq: seq}, Floor: seq - min(seq, 4)}
		tb.touch(m, now)
		tb.add(m.ID, now)
		tb.prune(now, lease)
		peak = max(peak, tb.size())
	}
	// One session + the ids of the last lease/3 ticks' messages (+1).
	if peak > 1+lease/3+2 {
		t.Errorf("peak %d entries", peak)
	}
	// An id just collected is remembered even below the floor.
	recent := wire.MsgID{Client: 7, Session: wire.Session(5), Seq: 2999}
	if !tb.collected(recent) {
		t.Error("a recently collected id was forgotten")
	}
	old := wire.MsgID{Client: 7, Session: wire.Session(5), Seq: 2}
	if tb.collected(old) || !tb.mayHaveForgotten(old) {
		t.Errorf("seq 2: collected %v, may have been forgotten %v", tb.collected(old), tb.mayHaveForgotten(old))
	}
	// Without a floor nothing is forgotten.
	nf := newSessionTable()
	for seq := uint64(2); seq <= 300; seq += 3 {
		nf.add(wire.MsgID{Client: 1, Seq: seq}, 0)
	}
	if got := nf.prune(1000, lease); len(got) != 0 || nf.size() != 1+100 {
		t.Errorf("no floor: pruned %d, size %d", len(got), nf.size())
	}
}

// TestPruneStopsAtYoungIDs: a forget pass walks a session's ids only up
// to the first chunk that starts with an id collected less than a lease
// ago, so it costs what expired, not the lease's worth of ids (prune's
// comment). An expired id behind a young one is remembered until the
// young one expires too: longer than the lease, never shorter.
func TestPruneStopsAtYoungIDs(t *testing.T) {
	const lease, n = 100, 3 * doneChunk
	k := wire.SessionKey{Client: 7, Session: wire.Session(5)}
	build := func(late bool) *sessionTable {
		tb := newSessionTable()
		tb.get(k).floor = n
		for seq := uint64(1); seq <= n; seq++ {
			at := seq // one id collected a tick, in order
			if late && seq == 1 {
				at = 2 * n // its message was collected late
			}
			tb.add(wire.MsgID{Client: k.Client, Session: k.Session, Seq: seq}, at)
		}
		return &tb
	}
	// In order: the ids collected at or before now-lease go, pass after
	// pass, and the rest stay.
	tb := build(false)
	for _, c := range []struct{ now, want uint64 }{{lease + 50, 50}, {lease + 50, 0}, {lease + 200, 150}, {lease + n, n - 200}} {
		got := tb.prune(c.now, lease)
		if uint64(len(got)) != c.want {
			t.Fatalf("prune at %d: %d ids, want %d", c.now, len(got), c.want)
		}
		for _, id := range got {
			if c.now < id.Seq+lease {
				t.Fatalf("prune at %d forgot seq %d, collected at %d: before its lease", c.now, id.Seq, id.Seq)
			}
		}
	}
	// Seq 1 collected last: the first chunk starts with a young id, and
	// nothing goes until it expires; then everything does.
	tb = build(true)
	if got := tb.prune(2*n+lease-1, lease); len(got) != 0 {
		t.Fatalf("%d ids forgotten behind a young one", len(got))
	}
	if got := tb.prune(2*n+lease, lease); len(got) != n {
		t.Fatalf("%d ids forgotten once the young one expired, want %d", len(got), n)
	}
}

func TestSessionExpiry(t *testing.T) {
	tb := newSessionTable()
	a := &wire.AppMsg{ID: wire.MsgID{Client: 1, Session: wire.Session(1), Seq: 1}}
	b := &wire.AppMsg{ID: wire.MsgID{Client: 2, Session: wire.Session(1), Seq: 1}}
	tb.touch(a, 10)
	tb.add(a.ID, 10)
	tb.touch(b, 10)
	tb.get(b.ID.Key()).live++ // b's message is still held
	if got := tb.expire(109, 100); len(got) != 0 {
		t.Fatalf("expired %v before the lease", got)
	}
	got := tb.expire(110, 100)
	if !reflect.DeepEqual(got, []wire.SessionKey{a.ID.Key()}) {
		t.Fatalf("expired %v, want only the idle session with nothing held", got)
	}
	if tb.collected(a.ID) || tb.size() != 1 {
		t.Errorf("after expiry: collected %v, size %d", tb.collected(a.ID), tb.size())
	}
}

// The table survives a snapshot (records/load) exactly.
func TestSessionRecordsRoundTrip(t *testing.T) {
	tb := newSessionTable()
	for _, id := range []wire.MsgID{{Client: 3, Session: wire.Session(9), Seq: 1}, {Client: 3, Session: wire.Session(9), Seq: 4}, {Client: 1, Session: wire.Session(2), Seq: 7}} {
		tb.touch(&wire.AppMsg{ID: id, Floor: 0}, 0)
		tb.add(id, 0)
	}
	tb.touch(&wire.AppMsg{ID: wire.MsgID{Client: 1, Session: wire.Session(2), Seq: 9}, Floor: 3}, 0)
	var back sessionTable
	back.load(tb.records())
	if !reflect.DeepEqual(tb.records(), back.records()) || back.size() != tb.size() {
		t.Fatalf("round trip:\n%+v\n%+v", tb.records(), back.records())
	}
}

// A MULTICAST is taken only from the message's own client (the transport
// authenticates the sender) or from a replica of a destination group (H12):
// a client forging another's id is refused and nothing is proposed.
func TestMulticastSender(t *testing.T) {
	topo, _ := amcastTopo(2, 3) // g0 = p0..p2 (leader p0), g1 = p3..p5
	p, err := New(Config{Topology: topo, ID: 0})
	if err != nil {
		t.Fatal(err)
	}
	m := wire.NewAppMsg(wire.MsgID{Client: 6, Session: wire.Session(9), Seq: 1}, []wire.GroupID{0}, []byte("x"))
	for _, tc := range []struct {
		from   wire.ProcID
		reason string
	}{
		{7, "client_mismatch"},     // another client
		{4, "foreign_remulticast"}, // a replica of g1, which m does not address
	} {
		err := p.Step(wire.Envelope{From: tc.from, To: 0, Msg: &wire.Multicast{M: m}})
		var re *amcast.RejectError
		if !errors.As(err, &re) || re.Reason != tc.reason {
			t.Fatalf("from p%d: got %v, want a %s reject", tc.from, err, tc.reason)
		}
		if p.HasReady() || len(p.recs) != 0 {
			t.Fatalf("from p%d: the refused MULTICAST left state or output", tc.from)
		}
	}
	if got := p.Rejected(); got["client_mismatch"] != 1 || got["foreign_remulticast"] != 1 {
		t.Fatalf("rejects %v", got)
	}
	for _, from := range []wire.ProcID{6, 1} { // the client, then a member of g0 (H12)
		if err := p.Step(wire.Envelope{From: from, To: 0, Msg: &wire.Multicast{M: m}}); err != nil {
			t.Fatalf("from p%d: %v", from, err)
		}
	}
	if !p.HasReady() || len(p.recs) != 1 {
		t.Fatal("the genuine MULTICAST was not proposed")
	}
}

// TestForgetBoundsRecords: sessions far more numerous than one record may
// carry expire in one forget pass as several REC_EXPIRED records, each of
// at most maxRecordIDs entries, which the store applies to the same state
// (issue #11: one record of a million expired sessions could be neither
// written nor read back).
func TestForgetBoundsRecords(t *testing.T) {
	topo, _ := amcastTopo(1, 1)
	p, err := New(Config{Topology: topo, ID: 0, SessionTicks: 10})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2*maxRecordIDs + 5
	for i := range n {
		p.sess.touch(&wire.AppMsg{ID: wire.MsgID{Client: 1, Session: wire.Session(uint64(i + 1)), Seq: 1}}, 0)
	}
	st := NewStore()
	p.ticks = 10
	p.forget()
	rd := p.Ready()
	records, expired := 0, 0
	for _, rec := range rd.Persist {
		if r, ok := rec.(*wire.RecExpired); ok {
			records++
			expired += len(r.Sessions) + len(r.IDs)
			if len(r.Sessions)+len(r.IDs) > maxRecordIDs {
				t.Errorf("a REC_EXPIRED of %d entries, bound %d", len(r.Sessions)+len(r.IDs), maxRecordIDs)
			}
			b := wire.Append(nil, r)
			if _, err := wire.Decode(b); err != nil {
				t.Fatalf("a REC_EXPIRED of %d bytes does not decode: %v", len(b), err)
			}
		}
		if err := st.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	if records != 3 || expired != n || p.sess.size() != 0 {
		t.Fatalf("%d records with %d expired sessions (want 3 and %d), %d entries left", records, expired, n, p.sess.size())
	}
}

// TestGroupBySession: each session's ids together and in their order,
// sessions in the order of their first id, with few sessions and with
// many (the map).
func TestGroupBySession(t *testing.T) {
	for _, sessions := range []int{1, 2, 8, 9, 90} {
		r := rand.New(rand.NewPCG(uint64(sessions), 3))
		var ids []wire.MsgID
		next := make([]uint64, sessions)
		for range 2000 {
			c := r.IntN(sessions)
			next[c]++
			ids = append(ids, wire.MsgID{Client: wire.ProcID(100 + c), Session: wire.SessionID{Lo: uint64(c)}, Seq: next[c]})
		}
		got := groupBySession(slices.Clone(ids))
		var want []wire.MsgID
		var seen []wire.SessionKey
		for _, id := range ids {
			if !slices.Contains(seen, id.Key()) {
				seen = append(seen, id.Key())
			}
		}
		for _, k := range seen {
			for _, id := range ids {
				if id.Key() == k {
					want = append(want, id)
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%d sessions: grouped ids differ from each session's ids in order, sessions by first appearance", sessions)
		}
	}
}
