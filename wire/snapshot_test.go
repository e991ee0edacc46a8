package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestSnapshotPages: an image whose lists exceed what Decode accepts (more
// than MaxStateEntries client sessions, one session's Collected list longer
// than that too) splits into pages that each decode under the caps and
// within the byte budget, and that join back into the same image.
func TestSnapshotPages(t *testing.T) {
	r := &RecSnapshot{Ballot: Ballot{N: 3, P: 1}, CBallot: Ballot{N: 2, P: 1}, Clock: 77, MaxDelivered: Timestamp{T: 70, G: 1}}
	for i := range 5 {
		m := AppMsg{ID: MsgID{Client: 9, Session: Session(1), Seq: uint64(i + 1)}, Dest: []GroupID{0, 1}, Payload: make([]byte, 300_000)}
		r.Msgs = append(r.Msgs, MsgState{M: m, Phase: PhaseCommitted, LTS: Timestamp{T: uint64(i), G: 0}, GTS: Timestamp{T: uint64(i), G: 1}})
		r.Delivered = append(r.Delivered, i%2 == 0)
	}
	for i := range MaxStateEntries + 10 {
		r.Done = append(r.Done, ClientDone{Client: ProcID(i%1000 + 100), Session: Session(uint64(i)), Floor: uint64(4 + i%17)})
		if i == 500_000 {
			big := &r.Done[len(r.Done)-1]
			for j := range MaxStateEntries + 3 {
				big.Collected = append(big.Collected, SeqDigest{Seq: uint64(100 + 2*j), Digest: Digest{byte(j)}})
			}
		}
	}
	if _, err := Decode(Append(nil, r)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("the whole image decodes (%v): the test no longer exceeds the caps", err)
	}
	const budget = 1 << 20
	pages := SnapshotPages(r, budget)
	decoded := make([]*RecSnapshot, len(pages))
	for i, p := range pages {
		b := Append(nil, p)
		// No entry here is larger than the budget (a session's list
		// splits by id), so no page may exceed it.
		if len(b) > budget {
			t.Fatalf("page %d: %d bytes with %d entries, over the budget %d", i, len(b), len(p.Msgs)+len(p.Done), budget)
		}
		m, err := Decode(b)
		if err != nil {
			t.Fatalf("page %d of %d does not decode: %v", i, len(pages), err)
		}
		decoded[i] = m.(*RecSnapshot)
	}
	got, err := JoinSnapshotPages(decoded)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("joined image differs: %d msgs %d done (want %d, %d)", len(got.Msgs), len(got.Done), len(r.Msgs), len(r.Done))
	}
	t.Logf("%d pages", len(pages))

	// Pages of another image are refused.
	other := *decoded[1]
	other.Clock++
	if _, err := JoinSnapshotPages([]*RecSnapshot{decoded[0], &other}); err == nil {
		t.Fatal("joined pages of two images")
	}
	// A small image is one page, itself.
	small := &RecSnapshot{Clock: 1, Done: []ClientDone{{Client: 1, Session: Session(1), Floor: 3}}}
	if ps := SnapshotPages(small, budget); len(ps) != 1 || !reflect.DeepEqual(ps[0], small) {
		t.Fatalf("small image split into %d pages", len(ps))
	}
}

// TestJoinLongSession: one client session whose collected ids span
// hundreds of pages joins back whole, leaves the pages as they were, and
// costs a few allocations (the lists, and the session's ids once, at
// their joined length), not one copy of the ids so far per page (the
// join used to be quadratic in the pages).
func TestJoinLongSession(t *testing.T) {
	r := &RecSnapshot{Clock: 5, Done: []ClientDone{{Client: 1, Session: Session(1), Floor: 9}, {Client: 2, Session: Session(2), Floor: 3}}}
	for j := range 200_000 {
		r.Done[0].Collected = append(r.Done[0].Collected, SeqDigest{Seq: uint64(j + 1), Digest: Digest{byte(j), byte(j >> 8)}})
	}
	r.Done[1].Collected = []SeqDigest{{Seq: 1}, {Seq: 2}}
	pages := SnapshotPages(r, 16<<10)
	if len(pages) < 200 {
		t.Fatalf("%d pages: the test wants the session over hundreds", len(pages))
	}
	before := make([][]SeqDigest, len(pages))
	for i, p := range pages {
		before[i] = slices.Clone(p.Done[0].Collected)
	}
	got, err := JoinSnapshotPages(pages)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Done, r.Done) || got.Clock != r.Clock || len(got.Msgs) != 0 {
		t.Fatalf("joined image differs: %d sessions, %d ids in the first (want %d, %d)", len(got.Done), len(got.Done[0].Collected), len(r.Done), len(r.Done[0].Collected))
	}
	for i, p := range pages {
		if n := Size(p); n > 16<<10 {
			t.Fatalf("page %d of %d: %d bytes, over the budget", i, len(pages), n)
		}
	}
	for i, p := range pages {
		if !slices.Equal(p.Done[0].Collected, before[i]) {
			t.Fatalf("page %d changed by the join", i)
		}
	}
	allocs := testing.AllocsPerRun(3, func() {
		if _, err := JoinSnapshotPages(pages); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 8 {
		t.Fatalf("%.0f allocations to join %d pages of one session", allocs, len(pages))
	}
	t.Logf("%d pages joined in %.0f allocations", len(pages), allocs)
}

// TestSnapshotPagerCuts: the pager cuts random images into the pages the
// first SnapshotPages (snapshotPagesV1, kept here as the oracle) did,
// whether it shares the image's slices (SnapshotPages) or builds every
// page in reused buffers from ids handed over in pieces of any size
// (wbcast.Image.Pages); and an error from emit stops it.
func TestSnapshotPagerCuts(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 1))
	for round := range 300 {
		img := &RecSnapshot{Ballot: randBallot(r), CBallot: randBallot(r), Clock: randNum(r, 40), MaxDelivered: randTS(r)}
		for range r.IntN(30) {
			img.Msgs = append(img.Msgs, randState(r))
			img.Delivered = append(img.Delivered, r.IntN(2) == 0)
		}
		for range r.IntN(40) {
			c := ClientDone{Client: ProcID(r.Uint32()), Session: SessionID{Hi: randNum(r, 64), Lo: randNum(r, 64)}, Floor: randNum(r, 40)}
			n := r.IntN(6)
			if r.IntN(4) == 0 {
				n = r.IntN(3000)
			}
			seq := randNum(r, 30)
			for range n {
				seq += 1 + randNum(r, 12)
				c.Collected = append(c.Collected, SeqDigest{Seq: seq, Digest: Digest{byte(r.IntN(256)), 15: byte(seq)}})
			}
			img.Done = append(img.Done, c)
		}
		budget := []int{200, 1000, 4096, 64 << 10, 1 << 20}[r.IntN(5)]
		want := snapshotPagesV1(img, budget)
		if got := SnapshotPages(img, budget); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d, budget %d: SnapshotPages cut %d pages, the oracle %d", round, budget, len(got), len(want))
		}
		var got []*RecSnapshot
		pg := NewSnapshotPager(img, budget, true, func(p *RecSnapshot) error {
			m, err := Decode(Append(nil, p)) // a deep copy: the pager reuses p
			if err != nil {
				return err
			}
			got = append(got, m.(*RecSnapshot))
			return nil
		})
		for i := range img.Msgs {
			pg.Msg(&img.Msgs[i], img.Delivered[i])
		}
		for _, c := range img.Done {
			pg.Session(c.Client, c.Session, c.Floor)
			for ids := c.Collected; len(ids) > 0; {
				k := min(len(ids), 1+r.IntN(200))
				pg.IDs(ids[:k])
				ids = ids[k:]
			}
		}
		if err := pg.Close(); err != nil {
			t.Fatal(err)
		}
		// Decode gives nil for an empty list where the oracle's pages
		// may hold empty ones: compare encodings.
		if len(got) != len(want) {
			t.Fatalf("round %d, budget %d: the reusing pager cut %d pages, the oracle %d", round, budget, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(Append(nil, got[i]), Append(nil, want[i])) {
				t.Fatalf("round %d, budget %d: page %d of %d differs from the oracle's", round, budget, i, len(want))
			}
		}
	}
	// emit's error stops the pager and comes back from Close.
	stop := errors.New("stop")
	calls := 0
	pg := NewSnapshotPager(&RecSnapshot{}, 200, true, func(*RecSnapshot) error { calls++; return stop })
	pg.Session(1, Session(1), 0)
	for j := range 100 {
		pg.IDs([]SeqDigest{{Seq: uint64(j + 1)}})
	}
	if err := pg.Close(); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Close after emit failed: %v, %d calls to emit", err, calls)
	}
}

// snapshotPagesV1 is SnapshotPages as first written, before the pager:
// the oracle of TestSnapshotPagerCuts.
func snapshotPagesV1(r *RecSnapshot, budget int) []*RecSnapshot {
	head := func() *RecSnapshot {
		return &RecSnapshot{Ballot: r.Ballot, CBallot: r.CBallot, Clock: r.Clock, MaxDelivered: r.MaxDelivered}
	}
	// The fixed part of a page, with room for three list lengths at their
	// largest.
	base := Size(head()) + 3*uvarintLen(MaxStateEntries)
	var pages []*RecSnapshot
	p, used := head(), base
	full := func(n int) bool { return used+n > budget && used > base }
	next := func() {
		pages = append(pages, p)
		p, used = head(), base
	}
	for i := range r.Msgs {
		n := sizeState(&r.Msgs[i]) + 1
		if full(n) || len(p.Msgs) == MaxStateEntries {
			next()
		}
		p.Msgs = append(p.Msgs, r.Msgs[i])
		p.Delivered = append(p.Delivered, r.Delivered[i])
		used += n
	}
	for _, c := range r.Done {
		coll := c.Collected
		for first := true; first || len(coll) > 0; first = false {
			n := sizeDone(&ClientDone{Client: c.Client, Session: c.Session, Floor: c.Floor})
			// A continuation starts a page: JoinSnapshotPages merges a
			// page's first entry into the one before.
			if !first || full(n+firstCollectedSize(coll)) || len(p.Done) == MaxStateEntries {
				next()
			}
			d := ClientDone{Client: c.Client, Session: c.Session, Floor: c.Floor}
			// At least one id, so the list shrinks; then as many as fit.
			// Not full(): its "at least one entry" guard (used > base)
			// holds for the whole of a fresh page, which let one
			// session's list fill it far past the budget, up to
			// MaxStateEntries ids: a page over the frame limit, which a
			// compaction refused to write and a state transfer could not
			// send.
			k := 0
			for k < len(coll) && k < MaxStateEntries && (k == 0 || used+n+sizeSeqDigest(coll[k]) <= budget) {
				n += sizeSeqDigest(coll[k])
				k++
			}
			if k > 0 {
				d.Collected = coll[:k:k]
			}
			coll = coll[k:]
			p.Done = append(p.Done, d)
			used += n
		}
	}
	return append(pages, p)
}

// TestDecodeReusing: a page's collected ids are carved out of the array
// given, one session after the other, and decode to what was encoded; an
// array too short is replaced, not overrun.
func TestDecodeReusing(t *testing.T) {
	r := &RecSnapshot{Clock: 4, Done: []ClientDone{{Client: 1, Session: Session(1)}, {Client: 2, Session: Session(2), Floor: 3}}}
	for j := range 1000 {
		r.Done[j%2].Collected = append(r.Done[j%2].Collected, SeqDigest{Seq: uint64(j + 1), Digest: Digest{byte(j), 9: 1}})
	}
	b := Append(nil, r)
	arena := make([]SeqDigest, 0, 1200)
	m, arena, err := DecodeReusing(b, arena)
	if err != nil {
		t.Fatal(err)
	}
	got := m.(*RecSnapshot)
	if !reflect.DeepEqual(got, r) {
		t.Fatal("decoded page differs")
	}
	if len(arena) != 1000 || &got.Done[0].Collected[0] != &arena[0] || &got.Done[1].Collected[0] != &arena[500] {
		t.Fatalf("ids not carved from the array (%d in it)", len(arena))
	}
	short := make([]SeqDigest, 1, 10)
	m, short, err = DecodeReusing(b, short)
	if err != nil || !reflect.DeepEqual(m, r) || cap(short) < 1000 {
		t.Fatalf("decoding into a short array: %v, capacity %d", err, cap(short))
	}
}

// firstCollectedSize is the size of c's first id (0 if none), as the
// oracle placed a session.
func firstCollectedSize(c []SeqDigest) int {
	if len(c) == 0 {
		return 0
	}
	return sizeSeqDigest(c[0])
}
