package wbcast

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// Paged recovery (paging.go), driven by hand on one group of three with a
// 1 KiB budget, so a state of 40 messages of 100 bytes takes several pages.

func pagingProc(t *testing.T, id wire.ProcID, pages int) *Process {
	t.Helper()
	topo, err := amcast.NewTopology(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Topology: topo, ID: id, MaxMsgBytes: MinMaxMsgBytes, MaxStatePages: pages})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// accepted returns n ACCEPTED messages of group 0, sorted by id.
func accepted(n int) []wire.MsgState {
	st := make([]wire.MsgState, n)
	for i := range st {
		ts := wire.Timestamp{T: uint64(i + 1)}
		st[i] = wire.MsgState{M: wire.NewAppMsg(wire.MsgID{Client: 50, Seq: uint64(i + 1)}, []wire.GroupID{0},
			[]byte(fmt.Sprintf("%0100d", i))), Phase: wire.PhaseAccepted, LTS: ts, GTS: ts}
	}
	return st
}

func sent(p *Process, kind wire.Kind) []wire.Envelope {
	var out []wire.Envelope
	for _, e := range p.Ready().Messages {
		if e.Msg.Kind() == kind {
			out = append(out, e)
		}
	}
	return out
}

func TestPaginate(t *testing.T) {
	p := pagingProc(t, 0, 0)
	hdr := wire.NewState{B: wire.Ballot{N: 7, P: 0}, Clock: 1 << 40}
	big := accepted(3)
	big[1].M.Payload = make([]byte, 3000) // larger than the budget: a page of its own
	for _, st := range [][]wire.MsgState{nil, accepted(1), accepted(40), big} {
		pages := p.paginate(st, pageHeader(&hdr))
		var all []wire.MsgState
		for i, pg := range pages {
			ns := hdr
			ns.State, ns.Paged = pg.state, pg.Paged
			if pg.Page != uint32(i) || pg.More != (i < len(pages)-1) {
				t.Fatalf("page %d of %d numbered %+v", i, len(pages), pg.Paged)
			}
			if n := wire.Size(&ns); n > p.cfg.MaxMsgBytes && len(pg.state) != 1 {
				t.Fatalf("page %d of %d entries encodes to %d bytes, budget %d", i, len(pg.state), n, p.cfg.MaxMsgBytes)
			}
			all = append(all, pg.state...)
		}
		if len(all) != len(st) || (len(st) > 0 && !slices.EqualFunc(all, st, func(a, b wire.MsgState) bool { return a.M.ID == b.M.ID })) {
			t.Fatalf("pages hold %d entries, state %d", len(all), len(st))
		}
		if len(st) == 40 && len(pages) < 4 {
			t.Fatalf("40 messages of 100 bytes in %d pages of 1 KiB", len(pages))
		}
	}
}

// ackPages returns p2's NEW_LEADER_ACK for ballot b in pages.
func ackPages(p *Process, b wire.Ballot, st []wire.MsgState) []*wire.NewLeaderAck {
	hdr := wire.NewLeaderAck{B: b, CBallot: wire.Ballot{}, Clock: 40}
	var out []*wire.NewLeaderAck
	for _, pg := range p.paginate(st, pageHeader(&hdr)) {
		a := hdr
		a.State, a.Paged = pg.state, pg.Paged
		out = append(out, &a)
	}
	return out
}

// candidate1 makes p1 a candidate of ballot 1.p1 holding its own ack.
func candidate1(t *testing.T, pages int) (*Process, wire.Ballot) {
	p1 := pagingProc(t, 1, pages)
	b := wire.Ballot{N: 1, P: 1}
	if err := p1.Step(wire.Envelope{From: 1, To: 1, Msg: &wire.NewLeader{B: b}}); err != nil {
		t.Fatal(err)
	}
	p1.Advance()
	return p1, b
}

func step(t *testing.T, p *Process, from wire.ProcID, m wire.Message) error {
	t.Helper()
	return p.Step(wire.Envelope{From: from, To: p.id, Msg: m})
}

func wantReject(t *testing.T, err error, reason string) {
	t.Helper()
	var re *amcast.RejectError
	if !errors.As(err, &re) || re.Reason != reason {
		t.Fatalf("got %v, want a %s reject", err, reason)
	}
}

// TestPagedAck: the candidate counts a member's ack only at its last page;
// a page that does not follow is dropped with the partial ack; a page
// whose fields differ from its first page's, or past the page limit, is
// rejected and changes nothing.
func TestPagedAck(t *testing.T) {
	p1, b := candidate1(t, 64)
	pages := ackPages(pagingProc(t, 2, 0), b, accepted(40))
	if len(pages) < 4 {
		t.Fatalf("%d pages", len(pages))
	}
	if err := step(t, p1, 2, pages[1]); err != nil { // no page 0 before it
		t.Fatal(err)
	}
	for _, a := range pages[:len(pages)-1] {
		if err := step(t, p1, 2, a); err != nil {
			t.Fatal(err)
		}
	}
	bad := *pages[len(pages)-1]
	bad.Clock++
	wantReject(t, step(t, p1, 2, &bad), "page_mismatch")
	if n := len(sent(p1, wire.KindNewState)); n != 0 || p1.cballot == b {
		t.Fatalf("the candidate adopted before the last page (%d NEW_STATEs)", n)
	}
	if err := step(t, p1, 2, pages[len(pages)-1]); err != nil {
		t.Fatal(err)
	}
	if p1.cballot != b {
		t.Fatalf("cballot %s after the last page, want %s", p1.cballot, b)
	}
	ns := sent(p1, wire.KindNewState)
	if len(ns) < 2*len(pages)-2 { // to p0 and p2, in pages (the merged state is the same 40 messages)
		t.Fatalf("%d NEW_STATE pages for two members", len(ns))
	}
	var recs int
	for _, r := range p1.Ready().Persist {
		if rs, ok := r.(*wire.RecNewState); ok {
			recs++
			if rs.Page != uint32(recs-1) {
				t.Fatalf("REC_NEW_STATE page %d in position %d", rs.Page, recs-1)
			}
		}
	}
	if recs < len(pages)-1 {
		t.Fatalf("%d REC_NEW_STATE records for a state of %d pages", recs, len(pages))
	}

	// Leading (p2 adopted), p1 re-sends its state to p0, whose heartbeat
	// shows it missed the recovery, only once the first copy's pages may
	// have arrived (a page per two ticks, sendState).
	nsPages := len(ns) / 2
	p1.Advance()
	if err := step(t, p1, 2, &wire.NewStateAck{B: b}); err != nil || !p1.IsLeader() {
		t.Fatalf("p1 not leading after a NEW_STATE_ACK: %v", err)
	}
	p1.Advance()
	busy := 2 * (nsPages - 1)
	for tick := 0; tick <= busy; tick++ {
		p1.cfg.Detector.Heard(0, p1.ticks)
		p1.cfg.Detector.Heard(2, p1.ticks)
		if err := step(t, p1, 0, &wire.Heartbeat{B: b, CBallot: wire.Ballot{}}); err != nil {
			t.Fatal(err)
		}
		n := len(sent(p1, wire.KindNewState))
		if tick < busy && n != 0 {
			t.Fatalf("state of %d pages re-sent %d ticks after the first copy", nsPages, tick)
		}
		if tick == busy && n != nsPages {
			t.Fatalf("%d NEW_STATE pages re-sent %d ticks after the first copy, want %d", n, tick, nsPages)
		}
		p1.Advance()
		p1.Tick()
		p1.Advance()
	}

	// A gap drops the partial ack: its later pages count for nothing.
	p1, b = candidate1(t, 64)
	pages = ackPages(pagingProc(t, 2, 0), b, accepted(40))
	for _, i := range []int{0, 2, len(pages) - 1} {
		if err := step(t, p1, 2, pages[i]); err != nil {
			t.Fatal(err)
		}
	}
	if p1.cballot == b || len(p1.cand.partial) != 0 {
		t.Fatalf("an ack with a missing page counted (cballot %s, %d partial)", p1.cballot, len(p1.cand.partial))
	}
	if nl := sent(p1, wire.KindNewLeader); len(nl) != 1 || nl[0].To != 2 || nl[0].Msg.(*wire.NewLeader).B != b {
		t.Fatalf("after the gap the candidate sent %v, want NEW_LEADER %s to p2 (ask again)", nl, b)
	}

	// Asked again, a member that promised b and is still RECOVERING sends
	// the same ack again; once it adopted b's state, it does not.
	p2 := pagingProc(t, 2, 64)
	for i, want := range []int{1, 1} {
		if err := step(t, p2, 1, &wire.NewLeader{B: b}); err != nil {
			t.Fatal(err)
		}
		if n := len(sent(p2, wire.KindNewLeaderAck)); n != want {
			t.Fatalf("NEW_LEADER %s #%d: %d acks, want %d", b, i+1, n, want)
		}
		p2.Advance()
	}
	if err := step(t, p2, 1, &wire.NewState{B: b, Clock: 1}); err != nil {
		t.Fatal(err)
	}
	p2.Advance()
	if err := step(t, p2, 1, &wire.NewLeader{B: b}); err != nil {
		t.Fatal(err)
	}
	if n := len(sent(p2, wire.KindNewLeaderAck)); n != 0 {
		t.Fatalf("a member that adopted %s acked its NEW_LEADER again", b)
	}

	// Past the page limit: rejected.
	p1, b = candidate1(t, 3)
	pages = ackPages(pagingProc(t, 2, 0), b, accepted(40))
	for _, a := range pages[:3] {
		if err := step(t, p1, 2, a); err != nil {
			t.Fatal(err)
		}
	}
	wantReject(t, step(t, p1, 2, pages[3]), "state_too_large")
	if p1.Rejected()["state_too_large"] != 1 || p1.cand.partial[2].next != 3 {
		t.Fatalf("rejects %v, partial ack at page %d", p1.Rejected(), p1.cand.partial[2].next)
	}
}

// TestPagedNewState: a member adopts the new leader's state, persists it in
// pages and acks only at its last page; the store applies it as a whole, so
// a restart from it sees the new ballot and every message.
func TestPagedNewState(t *testing.T) {
	p2 := pagingProc(t, 2, 64)
	b := wire.Ballot{N: 1, P: 1}
	hdr := wire.NewState{B: b, Clock: 40}
	st := accepted(40)
	var pages []*wire.NewState
	for _, pg := range pagingProc(t, 1, 0).paginate(st, pageHeader(&hdr)) {
		ns := hdr
		ns.State, ns.Paged = pg.state, pg.Paged
		pages = append(pages, &ns)
	}
	store := NewStore()
	apply := func() {
		for _, r := range p2.Ready().Persist {
			if err := store.Apply(r); err != nil {
				t.Fatal(err)
			}
		}
		p2.Advance()
	}
	for _, ns := range pages[:len(pages)-1] {
		if err := step(t, p2, 1, ns); err != nil {
			t.Fatal(err)
		}
		if _, cb := p2.Ballot(); cb == b || len(sent(p2, wire.KindNewStateAck)) != 0 {
			t.Fatalf("adopted at page %d of %d", ns.Page, len(pages))
		}
	}
	if err := step(t, p2, 1, pages[len(pages)-1]); err != nil {
		t.Fatal(err)
	}
	if _, cb := p2.Ballot(); cb != b || len(sent(p2, wire.KindNewStateAck)) != 1 || p2.Retained() != len(st)+1 { // +1: the client session they belong to
		t.Fatalf("after the last page: cballot %s, retained %d", cb, p2.Retained())
	}
	apply()
	if store.CBallot != b || store.Messages() != len(st) {
		t.Fatalf("store: cballot %s, %d messages; want %s, %d", store.CBallot, store.Messages(), b, len(st))
	}
	r, err := Restore(p2.cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	if _, cb := r.Ballot(); cb != b || len(r.recs) != len(st) {
		t.Fatalf("restored: cballot %s, %d messages", cb, len(r.recs))
	}

	// A gap: the partial state is dropped, later pages are ignored.
	p2 = pagingProc(t, 2, 64)
	for _, i := range []int{0, 2, len(pages) - 1} {
		if err := step(t, p2, 1, pages[i]); err != nil {
			t.Fatal(err)
		}
	}
	if _, cb := p2.Ballot(); cb == b || p2.stateIn != nil {
		t.Fatal("a state with a missing page was adopted or kept")
	}
}

// TestStoreTornNewState: a paged REC_NEW_STATE cut short by a crash (the
// next record is not its next page) is dropped; a page out of order is an
// error.
func TestStoreTornNewState(t *testing.T) {
	st := accepted(6)
	b := wire.Ballot{N: 2, P: 1}
	page := func(i int, more bool) *wire.RecNewState {
		return &wire.RecNewState{B: b, Clock: 9, State: st[2*i : 2*i+2], Paged: wire.Paged{Page: uint32(i), More: more}}
	}
	s := NewStore()
	for _, r := range []wire.Message{page(0, true), page(1, true), &wire.RecBallot{Ballot: wire.Ballot{N: 3, P: 2}}} {
		if err := s.Apply(r); err != nil {
			t.Fatal(err)
		}
	}
	if s.CBallot == b || s.Messages() != 0 {
		t.Fatalf("a torn state was applied: cballot %s, %d messages", s.CBallot, s.Messages())
	}
	for _, r := range []wire.Message{page(0, true), page(1, true), page(2, false)} {
		if err := s.Apply(r); err != nil {
			t.Fatal(err)
		}
	}
	if s.CBallot != b || s.Messages() != 6 {
		t.Fatalf("whole state: cballot %s, %d messages", s.CBallot, s.Messages())
	}
	if err := s.Apply(page(2, false)); err == nil {
		t.Fatal("a page without its predecessors was applied")
	}
}
