package wbcast

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/weft-dev/weft/wire"
)

// doneSet is one session's remembered collected ids (sessions.go), ordered
// by sequence number, then digest: the order wire.MsgID.Compare gives ids
// of one session, so a snapshot lists them without sorting.
//
// Why not a map: at the default lease a replica remembers every id it
// collected in the last minute (about 600,000 at 10,000 multicasts a
// second), and a map made each of them cost a hash on every add, lookup and
// store mirror step, a scan of the whole map on every forget pass and a
// full sort on every snapshot (the log's compaction, a SNAPSHOT to a member
// behind). Here ids sit in sorted chunks of at most doneChunk entries: an
// add is a binary search and a move within one chunk (a client's ids
// arrive almost in order, so nearly always an append to the last chunk), a
// lookup two binary searches, a forget pass walks the chunks up to the
// session's floor, and a snapshot copies them in order.
//
// Chunks bound the cost of the order a client chooses: ids arriving in
// reverse or at random cost at most one chunk's move each, never the whole
// set's (a client picks its sequence numbers; a single sorted slice would
// let one client make every add move all of them).
type doneSet struct {
	// n and top first: has reads only them for the usual question (an id
	// above every one held), in the cache line of the session that holds
	// the set. Reading the last chunk's last entry instead took two
	// dependent cache misses, the chunks' array and then the chunk: with
	// 90 client sessions, 5% of a loaded agent's CPU (docs/batching.md).
	n      int
	top    wire.SeqDigest // the highest id held, when n > 0
	chunks []chunk        // each sorted and non-empty; chunk i's entries below chunk i+1's
	// gen is the set's generation, raised by every freeze: a chunk of an
	// older generation may be read by a frozen view on another goroutine
	// (image.go), so it is copied before it is written in place. Entries
	// appended past a chunk's length are not in any view (a view keeps
	// the lengths it was taken with), so an append needs no copy.
	gen uint32
}

// chunk is a sorted run of entries and the generation of the set it was
// last copied (or made) in.
type chunk struct {
	e   []doneEntry
	gen uint32
}

// own returns chunk ci's entries, copied first if a frozen view may share
// them, ready to be written in place.
func (s *doneSet) own(ci int) []doneEntry {
	c := &s.chunks[ci]
	if c.gen != s.gen {
		c.e = append(make([]doneEntry, 0, cap(c.e)), c.e...)
		c.gen = s.gen
	}
	return c.e
}

// freeze returns the chunks as they are now, for a reader on another
// goroutine: until the reader is done, the set copies a shared chunk
// before writing it in place. O(chunks), not O(ids).
func (s *doneSet) freeze() [][]doneEntry {
	out := make([][]doneEntry, len(s.chunks))
	for i, c := range s.chunks {
		out[i] = c.e
	}
	s.gen++
	return out
}

// doneEntry is one remembered id and the tick it was collected at.
type doneEntry struct {
	q  wire.SeqDigest
	at uint64
}

// doneChunk bounds a chunk's entries (32 bytes each: 4 KiB a chunk). A
// chunk that fills splits in two; neighbours that a forget pass left small
// enough merge, so chunks stay at least about a quarter full on average.
const doneChunk = 128

func compareSeqDigest(a, b wire.SeqDigest) int {
	if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	return bytes.Compare(a.Digest[:], b.Digest[:])
}

func (e doneEntry) compare(q wire.SeqDigest) int { return compareSeqDigest(e.q, q) }

// len returns the number of ids held.
func (s *doneSet) len() int { return s.n }

// first returns the lowest entry; the set must not be empty.
func (s *doneSet) first() doneEntry { return s.chunks[0].e[0] }

// find returns the chunk that holds q or would, and q's position in it.
func (s *doneSet) find(q wire.SeqDigest) (ci, i int, found bool) {
	// The last chunk whose first entry is at or below q (chunk 0 if none).
	ci, _ = slices.BinarySearchFunc(s.chunks, q, func(c chunk, q wire.SeqDigest) int {
		if c.e[0].compare(q) <= 0 {
			return -1
		}
		return 1
	})
	ci = max(ci-1, 0)
	i, found = slices.BinarySearchFunc(s.chunks[ci].e, q, doneEntry.compare)
	return ci, i, found
}

// has reports whether q is held.
func (s *doneSet) has(q wire.SeqDigest) bool {
	if s.n == 0 {
		return false
	}
	// The usual question is about a message newer than every id held (a
	// new MULTICAST, its ACCEPTs): answered without a search.
	if compareSeqDigest(s.top, q) < 0 {
		return false
	}
	_, _, found := s.find(q)
	return found
}

// add holds q, collected at tick at; it reports false if q was held
// already (its tick is then kept).
func (s *doneSet) add(q wire.SeqDigest, at uint64) bool {
	e := doneEntry{q: q, at: at}
	if s.n == 0 {
		// A session's first chunk starts small and grows by append: most
		// sessions of short-lived clients hold a few ids, and a full
		// chunk each (4 KiB) would cost a hundred thousand of them 400
		// MiB. Once one chunk is full, the next starts at full size.
		s.chunks = append(s.chunks, chunk{e: []doneEntry{e}, gen: s.gen})
		s.n, s.top = 1, q
		return true
	}
	if compareSeqDigest(s.top, q) < 0 { // the usual case: above every id held
		last := &s.chunks[len(s.chunks)-1]
		if len(last.e) < doneChunk {
			last.e = append(last.e, e) // past every view's length: no copy
		} else {
			s.chunks = append(s.chunks, chunk{e: append(make([]doneEntry, 0, doneChunk), e), gen: s.gen})
		}
		s.n++
		s.top = q
		return true
	}
	ci, i, found := s.find(q)
	if found {
		return false
	}
	c := slices.Insert(s.own(ci), i, e)
	if len(c) > doneChunk { // split: the upper half moves to a new chunk
		hi := append(make([]doneEntry, 0, doneChunk), c[len(c)/2:]...)
		c = c[:len(c)/2]
		s.chunks = slices.Insert(s.chunks, ci+1, chunk{e: hi, gen: s.gen})
	}
	s.chunks[ci].e = c
	s.n++
	return true
}

// filter keeps the entries keep accepts, in order, walking the chunks from
// the lowest until stop reports true for a chunk's first entry (the rest
// are kept unseen), and returns how many it dropped. Emptied chunks go;
// neighbours small enough are merged.
func (s *doneSet) filter(stop func(doneEntry) bool, keep func(doneEntry) bool) int {
	out := s.chunks[:0]
	dropped, ci := 0, 0
	for ; ci < len(s.chunks); ci++ {
		c := s.chunks[ci]
		if stop != nil && stop(c.e[0]) {
			break
		}
		// The first entry dropped, if any: a chunk kept whole is not
		// written (a frozen view may be reading it).
		k := 0
		for k < len(c.e) && keep(c.e[k]) {
			k++
		}
		if k < len(c.e) {
			e := s.own(ci) // out has not reached index ci: s.chunks[ci] is c
			for _, x := range e[k+1:] {
				if keep(x) {
					e[k] = x
					k++
				}
			}
			clear(e[k:])
			dropped += len(e) - k
			c = chunk{e: e[:k], gen: s.gen}
		}
		switch {
		case k == 0:
		case len(out) > 0 && len(out[len(out)-1].e)+k <= doneChunk/2:
			// Past the length of the chunk appended to: no view reads there.
			out[len(out)-1].e = append(out[len(out)-1].e, c.e...)
		default:
			out = append(out, c)
		}
	}
	out = append(out, s.chunks[ci:]...) // the chunks past stop, unseen
	clear(s.chunks[len(out):])
	s.chunks = out
	s.n -= dropped
	s.top = wire.SeqDigest{}
	if s.n > 0 {
		c := s.chunks[len(s.chunks)-1].e
		s.top = c[len(c)-1].q
	}
	return dropped
}

// removeSorted drops the ids of qs (sorted, as ids of one session in a
// REC_EXPIRED are) in one pass, and returns how many were held.
func (s *doneSet) removeSorted(qs []wire.SeqDigest) int {
	if len(qs) == 0 || s.n == 0 {
		return 0
	}
	if !slices.IsSortedFunc(qs, compareSeqDigest) {
		qs = slices.Clone(qs)
		slices.SortFunc(qs, compareSeqDigest)
	}
	hi := qs[len(qs)-1]
	return s.filter(func(first doneEntry) bool { return compareSeqDigest(first.q, hi) > 0 }, func(e doneEntry) bool {
		for len(qs) > 0 && compareSeqDigest(qs[0], e.q) < 0 {
			qs = qs[1:]
		}
		return len(qs) == 0 || compareSeqDigest(qs[0], e.q) != 0
	})
}

// each calls f for every entry, in order.
func (s *doneSet) each(f func(doneEntry)) {
	for _, c := range s.chunks {
		for _, e := range c.e {
			f(e)
		}
	}
}

// appendIDs appends the ids held to out, in order: a snapshot's copy of a
// session's set (600,000 ids at the default lease and 10,000 multicasts a
// second), a plain loop, where each's callback per id cost a call.
func (s *doneSet) appendIDs(out []wire.SeqDigest) []wire.SeqDigest {
	for _, c := range s.chunks {
		out = appendChunkIDs(out, c.e)
	}
	return out
}

func appendChunkIDs(out []wire.SeqDigest, c []doneEntry) []wire.SeqDigest {
	for i := range c {
		out = append(out, c[i].q)
	}
	return out
}

// clone copies s with every collection tick set to at.
func (s *doneSet) clone(at uint64) doneSet {
	out := doneSet{chunks: make([]chunk, len(s.chunks)), n: s.n, top: s.top}
	for i, c := range s.chunks {
		cp := make([]doneEntry, len(c.e))
		for j, e := range c.e {
			cp[j] = doneEntry{q: e.q, at: at}
		}
		out.chunks[i] = chunk{e: cp}
	}
	return out
}

// String renders the ids and ticks in order (Fingerprint, test failures).
func (s *doneSet) String() string {
	var b strings.Builder
	b.WriteByte('[')
	s.each(func(e doneEntry) {
		if b.Len() > 1 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d/%x@%d", e.q.Seq, e.q.Digest[:4], e.at)
	})
	b.WriteByte(']')
	return b.String()
}
