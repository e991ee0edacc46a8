package wire

import (
	"errors"
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
