package wbcast

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// doneModel is the map a doneSet replaces: the reference its operations
// are checked against.
type doneModel map[wire.SeqDigest]uint64

func (m doneModel) sorted() []wire.SeqDigest {
	out := make([]wire.SeqDigest, 0, len(m))
	for q := range m {
		out = append(out, q)
	}
	slices.SortFunc(out, compareSeqDigest)
	return out
}

func doneIDs(s *doneSet) []wire.SeqDigest {
	var out []wire.SeqDigest
	s.each(func(e doneEntry) { out = append(out, e.q) })
	return out
}

func sameAsModel(t *testing.T, what string, s *doneSet, m doneModel) {
	t.Helper()
	if err := s.check(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got, want := doneIDs(s), m.sorted(); !slices.Equal(got, want) {
		t.Fatalf("%s: set holds %d ids, model %d (first difference somewhere in %v vs %v)", what, len(got), len(want), got[:min(len(got), 4)], want[:min(len(want), 4)])
	}
	s.each(func(e doneEntry) {
		if m[e.q] != e.at {
			t.Fatalf("%s: seq %d collected at %d, model %d", what, e.q.Seq, e.at, m[e.q])
		}
	})
}

// runDoneOps drives a set and the model with the ops encoded in b and
// checks they agree after each one.
func runDoneOps(t *testing.T, b []byte) {
	var s doneSet
	m := doneModel{}
	var tick uint64
	q := func(x uint16) wire.SeqDigest {
		var d wire.Digest
		d[0] = byte(x >> 12) // few digests per seq: equal seqs, other content
		return wire.SeqDigest{Seq: uint64(x & 0x0fff), Digest: d}
	}
	for len(b) >= 3 {
		op, x := b[0], binary.LittleEndian.Uint16(b[1:3])
		b = b[3:]
		tick++
		switch op % 5 {
		case 0, 1: // add
			_, held := m[q(x)]
			if got := s.add(q(x), tick); got == held {
				t.Fatalf("add seq %d: reported %v, model held it: %v", q(x).Seq, got, held)
			}
			if !held {
				m[q(x)] = tick
			}
		case 2: // lookup
			if _, held := m[q(x)]; s.has(q(x)) != held {
				t.Fatalf("has seq %d: %v, model %v", q(x).Seq, !held, held)
			}
		case 3: // a forget pass: drop ids at or below a floor collected before a tick
			floor, before := uint64(x&0x0fff), tick-uint64(x>>12)
			dropped := 0
			for k, at := range m {
				if k.Seq <= floor && at < before {
					delete(m, k)
					dropped++
				}
			}
			got := s.filter(func(f doneEntry) bool { return f.q.Seq > floor }, func(e doneEntry) bool {
				return !(e.q.Seq <= floor && e.at < before)
			})
			if got != dropped {
				t.Fatalf("filter dropped %d, model %d", got, dropped)
			}
		case 4: // a REC_EXPIRED: remove some ids, held or not, sorted or not
			var qs []wire.SeqDigest
			for i := range int(x % 7) {
				qs = append(qs, q(x*uint16(i+3)))
			}
			removed := 0
			for _, r := range slices.Compact(slices.SortedFunc(slices.Values(qs), compareSeqDigest)) {
				if _, ok := m[r]; ok {
					delete(m, r)
					removed++
				}
			}
			if got := s.removeSorted(qs); got != removed {
				t.Fatalf("removeSorted(%d ids) removed %d, model %d", len(qs), got, removed)
			}
		}
		sameAsModel(t, "after an op", &s, m)
	}
	c := s.clone(7)
	for k := range m {
		m[k] = 7
	}
	sameAsModel(t, "clone", &c, m)
}

func TestDoneSetAgainstMap(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 1))
		b := make([]byte, 3*3000)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		runDoneOps(t, b)
	}
}

func FuzzDoneSet(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 2, 0, 2, 1, 0, 3, 5, 0, 4, 2, 0})
	f.Fuzz(func(t *testing.T, b []byte) { runDoneOps(t, b) })
}

// TestDoneSetAdversarialOrder: ids added in reverse or in random order
// (a client picks its sequence numbers) keep the chunk invariants, and a
// forget pass that empties most chunks leaves them merged, not a trail of
// near-empty ones.
func TestDoneSetAdversarialOrder(t *testing.T) {
	const n = 20000
	for _, order := range []string{"ascending", "descending", "random"} {
		var s doneSet
		seqs := make([]uint64, n)
		for i := range seqs {
			seqs[i] = uint64(i + 1)
		}
		switch order {
		case "descending":
			slices.Reverse(seqs)
		case "random":
			rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
		}
		for _, q := range seqs {
			if !s.add(wire.SeqDigest{Seq: q}, q) {
				t.Fatalf("%s: seq %d reported held", order, q)
			}
		}
		if err := s.check(); err != nil {
			t.Fatalf("%s: %v", order, err)
		}
		if s.len() != n || len(s.chunks) > 2*n/doneChunk+1 {
			t.Fatalf("%s: %d ids in %d chunks (want %d in at most %d)", order, s.len(), len(s.chunks), n, 2*n/doneChunk+1)
		}
		// Keep every 100th id: about one id per chunk survives.
		s.filter(nil, func(e doneEntry) bool { return e.q.Seq%100 == 0 })
		if err := s.check(); err != nil {
			t.Fatalf("%s after filter: %v", order, err)
		}
		if s.len() != n/100 || len(s.chunks) > n/100/(doneChunk/4)+1 {
			t.Fatalf("%s after filter: %d ids in %d chunks (want %d in at most %d)", order, s.len(), len(s.chunks), n/100, n/100/(doneChunk/4)+1)
		}
	}
}

// BenchmarkSessionTable measures what a replica pays per collected id at
// the default lease: adding it, the lookups of the messages that follow, a
// forget pass every lease/forgetPasses and a snapshot every lease, with
// 90 sessions each holding its ids of the last lease.
func BenchmarkSessionTable(b *testing.B) {
	const sessions, lease = 90, 6000
	t := newSessionTable()
	var seq [sessions]uint64
	b.ReportAllocs()
	for i := range b.N {
		c := i % sessions
		seq[c]++
		id := wire.MsgID{Client: wire.ProcID(1000 + c), Session: wire.Session(1), Seq: seq[c]}
		now := uint64(i / 10) // 10 collections a tick: 1,000/s at 10 ms
		s := t.get(id.Key())
		s.floor = seq[c]
		t.add(id, now)
		_ = t.collected(wire.MsgID{Client: id.Client, Session: id.Session, Seq: seq[c] + 1})
		if i%(10*lease/forgetPasses) == 0 {
			t.prune(now, lease)
		}
		if i%(10*lease) == 0 {
			_ = t.records()
		}
	}
	b.ReportMetric(float64(t.size()), "entries")
}

// TestDoneSetSmallSessionsStaySmall: a session holding a few ids holds a
// chunk sized to them, not a full one (a hundred thousand sessions of
// short-lived clients would otherwise cost 4 KiB each); its clone too.
func TestDoneSetSmallSessionsStaySmall(t *testing.T) {
	var s doneSet
	for q := range uint64(3) {
		s.add(wire.SeqDigest{Seq: q + 1}, 0)
	}
	if c := cap(s.chunks[0].e); c > 8 {
		t.Fatalf("3 ids hold a chunk of capacity %d", c)
	}
	if cl := s.clone(0); cap(cl.chunks[0].e) != 3 {
		t.Fatalf("the clone of 3 ids holds a chunk of capacity %d", cap(cl.chunks[0].e))
	}
}

// check verifies the invariants (tests): chunks non-empty and within
// bounds, entries strictly increasing across chunks, n their count, top
// the last of them.
func (s *doneSet) check() error {
	n := 0
	var prev *wire.SeqDigest
	for i, ch := range s.chunks {
		c := ch.e
		if len(c) == 0 || len(c) > doneChunk {
			return fmt.Errorf("chunk %d holds %d entries", i, len(c))
		}
		for j := range c {
			if prev != nil && compareSeqDigest(*prev, c[j].q) >= 0 {
				return fmt.Errorf("chunk %d entry %d (seq %d) not above the previous (seq %d)", i, j, c[j].q.Seq, prev.Seq)
			}
			prev = &c[j].q
		}
		n += len(c)
	}
	if n != s.n {
		return fmt.Errorf("%d entries counted as %d", n, s.n)
	}
	if prev != nil && *prev != s.top {
		return fmt.Errorf("top is seq %d, the highest entry seq %d", s.top.Seq, prev.Seq)
	}
	return nil
}

// TestDoneSetFreeze: a frozen view (Image, read by a compaction's
// goroutine) keeps the ids it was taken with while the set goes on with
// appends, out-of-order inserts that split chunks, and forget passes that
// drop and merge chunks; run with -race, a write to a chunk the view
// shares would be reported.
func TestDoneSetFreeze(t *testing.T) {
	var s doneSet
	for q := uint64(1); q <= 20*doneChunk; q += 2 {
		s.add(wire.SeqDigest{Seq: q}, q)
	}
	view := s.freeze()
	want := s.appendIDs(nil)
	done := make(chan []wire.SeqDigest)
	go func() {
		var got []wire.SeqDigest
		for range 50 {
			got = got[:0]
			for _, c := range view {
				got = appendChunkIDs(got, c)
			}
		}
		done <- got
	}()
	for q := uint64(20*doneChunk + 1); q <= 22*doneChunk; q++ {
		s.add(wire.SeqDigest{Seq: q}, q) // appends past the view's lengths
	}
	for q := uint64(2); q <= 6*doneChunk; q += 2 {
		s.add(wire.SeqDigest{Seq: q}, q) // inserts, splitting chunks
	}
	s.filter(nil, func(e doneEntry) bool { return e.q.Seq%3 != 0 }) // drops, merges
	if got := <-done; !slices.Equal(got, want) {
		t.Fatalf("the view changed: %d ids, want %d", len(got), len(want))
	}
	if err := s.check(); err != nil {
		t.Fatal(err)
	}
	// A second freeze sees the set as it is now.
	view = s.freeze()
	var got []wire.SeqDigest
	for _, c := range view {
		got = appendChunkIDs(got, c)
	}
	if !slices.Equal(got, s.appendIDs(nil)) {
		t.Fatal("a view taken after the writes differs from the set")
	}
}

// BenchmarkForgetManySessions: one forget pass over 100,000 sessions of a
// few collected ids each (short-lived clients), each pass a tick after the
// last, so about 16 sessions have ids expiring in it: what a pass costs a
// node with many sessions and little to forget.
func BenchmarkForgetManySessions(b *testing.B) {
	const sessions, perSession, lease = 100_000, 4, 6400
	t := newSessionTable()
	for c := range sessions {
		k := wire.MsgID{Client: wire.ProcID(1000 + c), Session: wire.Session(1)}
		t.get(k.Key()).floor = perSession
		for i := range perSession {
			k.Seq = uint64(i + 1)
			t.add(k, uint64(c%lease)) // collection times spread over a lease
		}
	}
	now := uint64(lease)
	b.ReportAllocs()
	for b.Loop() {
		now++
		_ = t.prune(now, lease)
	}
}
