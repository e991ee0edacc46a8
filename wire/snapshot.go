package wire

import (
	"fmt"
)

// Snapshot pages. A REC_SNAPSHOT holds a process's whole image, which
// can outgrow what Decode accepts (MaxStateEntries per list; 2M client
// sessions are twice that). Written to disk it is split into pages:
// REC_SNAPSHOTs that each carry the image's scalar fields and a slice of
// its lists, every list within MaxStateEntries and every page within a
// byte budget, so every page decodes under the caps Decode enforces. The
// pages, applied as one (JoinSnapshotPages), are the image: one set of
// limits serves the encoder and the decoder.

// SnapshotPages splits r into pages of at most budget encoded bytes
// (Size) and MaxStateEntries entries per list; a page holds at least one
// entry, so a single entry larger than budget gets a page of its own.
// A client's Collected list longer than a page allows continues on the next
// page in an entry with the same Client and Session. The pages share r's
// slices; r with nothing to split is one page.
func SnapshotPages(r *RecSnapshot, budget int) []*RecSnapshot {
	var pages []*RecSnapshot
	pg := NewSnapshotPager(r, budget, false, func(p *RecSnapshot) error {
		pages = append(pages, p)
		return nil
	})
	for i := range r.Msgs {
		pg.Msg(&r.Msgs[i], r.Delivered[i])
	}
	for i := range r.Done {
		c := &r.Done[i]
		pg.Session(c.Client, c.Session, c.Floor)
		pg.IDs(c.Collected)
	}
	pg.Close() // emit never fails here
	return pages
}

// SnapshotPager cuts an image into the pages SnapshotPages would, from
// the image's parts handed over one at a time: its messages (Msg), then
// each client session (Session) followed by its collected ids, in as many
// IDs calls as suit the caller. Each page goes to emit as soon as it is
// full, so an image need never exist whole as one RecSnapshot: a
// compaction streams a process's image to disk through it
// (wbcast.Image.Pages) without a copy of every collected id.
//
// With reuse, every page is built in the same buffers: a page passed to
// emit is valid only until emit returns, and the ids of its sessions are
// copies. Without, every page is new and the ids share the slices IDs was
// given. The first error emit returns stops the pager: later calls do
// nothing and Close returns it.
type SnapshotPager struct {
	hdr    RecSnapshot // the scalar fields of every page
	budget int
	base   int // a page's fixed part, with room for its lists' lengths
	reuse  bool
	emit   func(*RecSnapshot) error
	err    error

	p    *RecSnapshot
	used int         // bytes on p before the session entry being written
	ids  []SeqDigest // with reuse, the page's collected ids

	// The session entry being written: pending until its first id (or
	// its end) tells whether it starts a page; then p.Done's last entry.
	sess    ClientDone // its header
	pending bool
	open    bool
	n       int // its encoded size so far
	start   int // with reuse, where its ids begin in ids
}

// NewSnapshotPager returns a pager of pages with r's scalar fields
// (ballots, clock, last delivery; its lists are not read) and at most
// budget encoded bytes each, as SnapshotPages cuts them.
func NewSnapshotPager(r *RecSnapshot, budget int, reuse bool, emit func(*RecSnapshot) error) *SnapshotPager {
	pg := &SnapshotPager{
		hdr:    RecSnapshot{Ballot: r.Ballot, CBallot: r.CBallot, Clock: r.Clock, MaxDelivered: r.MaxDelivered},
		budget: budget,
		reuse:  reuse,
		emit:   emit,
	}
	// The fixed part of a page, with room for three list lengths at their
	// largest.
	pg.base = Size(&pg.hdr) + 3*uvarintLen(MaxStateEntries)
	pg.p, pg.used = pg.head(), pg.base
	return pg
}

func (pg *SnapshotPager) head() *RecSnapshot {
	h := pg.hdr
	return &h
}

// full reports whether n more bytes overflow the page, unless it is empty.
func (pg *SnapshotPager) full(n int) bool { return pg.used+n > pg.budget && pg.used > pg.base }

// next emits the page and starts another.
func (pg *SnapshotPager) next() {
	if pg.err == nil {
		pg.err = pg.emit(pg.p)
	}
	if !pg.reuse {
		pg.p = pg.head()
	} else {
		pg.p.Msgs, pg.p.Delivered, pg.p.Done = pg.p.Msgs[:0], pg.p.Delivered[:0], pg.p.Done[:0]
		pg.ids = pg.ids[:0]
	}
	pg.used = pg.base
}

// Msg adds a message with its delivered flag. Every message comes before
// the first Session.
func (pg *SnapshotPager) Msg(s *MsgState, delivered bool) {
	if pg.err != nil {
		return
	}
	n := sizeState(s) + 1
	if pg.full(n) || len(pg.p.Msgs) == MaxStateEntries {
		pg.next()
	}
	pg.p.Msgs = append(pg.p.Msgs, *s)
	pg.p.Delivered = append(pg.p.Delivered, delivered)
	pg.used += n
}

// Session starts a client session's entry; its collected ids, in order,
// follow in IDs calls.
func (pg *SnapshotPager) Session(client ProcID, session SessionID, floor uint64) {
	pg.end()
	pg.sess = ClientDone{Client: client, Session: session, Floor: floor}
	pg.pending = true
}

// place puts the pending session's entry on a page, the first of its ids
// being first (0: it has none): on a new page if the entry with that id
// does not fit, as SnapshotPages does.
func (pg *SnapshotPager) place(first int, continuation bool) {
	d := pg.sess
	pg.n = sizeDone(&d)
	if continuation || pg.full(pg.n+first) || len(pg.p.Done) == MaxStateEntries {
		pg.next()
	}
	pg.p.Done = append(pg.p.Done, d)
	pg.start = len(pg.ids)
	pg.pending, pg.open = false, true
}

// end closes the session entry being written.
func (pg *SnapshotPager) end() {
	if pg.pending {
		pg.place(0, false)
	}
	if pg.open {
		pg.used += pg.n
		pg.open = false
	}
}

// IDs adds collected ids to the session started last.
func (pg *SnapshotPager) IDs(ids []SeqDigest) {
	if pg.err != nil || len(ids) == 0 {
		return
	}
	if pg.pending {
		pg.place(sizeSeqDigest(ids[0]), false)
	}
	for len(ids) > 0 {
		e := &pg.p.Done[len(pg.p.Done)-1]
		have := len(e.Collected)
		// At least one id per entry, so a list always shrinks; then as
		// many as fit. Not full(): its "unless empty" guard holds for the
		// whole of a fresh page, which let one session's list fill it far
		// past the budget, up to MaxStateEntries ids: a page over the
		// frame limit, which a compaction refused to write and a state
		// transfer could not send.
		k := 0
		for k < len(ids) && have+k < MaxStateEntries && (have+k == 0 || pg.used+pg.n+sizeSeqDigest(ids[k]) <= pg.budget) {
			pg.n += sizeSeqDigest(ids[k])
			k++
		}
		switch {
		case k == 0:
		case pg.reuse:
			if pg.ids == nil {
				// Room for a page's ids at their smallest, so the
				// buffer never grows: growing it by appends copied
				// five times its final size.
				pg.ids = make([]SeqDigest, 0, min(pg.budget/(1+len(Digest{}))+1, 1<<16))
			}
			pg.ids = append(pg.ids, ids[:k]...)
			e.Collected = pg.ids[pg.start:len(pg.ids):len(pg.ids)]
		case have == 0:
			e.Collected = ids[:k:k]
		default:
			e.Collected = append(e.Collected, ids[:k]...)
		}
		ids = ids[k:]
		if len(ids) > 0 {
			// A continuation starts a page: JoinSnapshotPages merges a
			// page's first entry into the one before.
			pg.end()
			pg.pending = true
			pg.place(0, true)
		}
	}
}

// Close emits the last page (an image with nothing to split is one page)
// and returns emit's first error.
func (pg *SnapshotPager) Close() error {
	if pg.err != nil {
		return pg.err
	}
	pg.end()
	pg.next()
	return pg.err
}

// continued returns how many collected ids of the session (client,
// session) the pages carry in continuations, by JoinSnapshotPages' rule:
// each page's first Done entry, while it is that session's; a page
// without Done entries passes the chain on, one with more ends it.
func continued(pages []*RecSnapshot, client ProcID, session SessionID) int {
	n := 0
	for _, p := range pages {
		if len(p.Done) == 0 {
			continue
		}
		if p.Done[0].Client != client || p.Done[0].Session != session {
			break
		}
		n += len(p.Done[0].Collected)
		if len(p.Done) > 1 {
			break
		}
	}
	return n
}

func sizeSeqDigest(q SeqDigest) int { return uvarintLen(q.Seq) + len(q.Digest) }

// sizeDone is the encoded size of one ClientDone in a REC_SNAPSHOT.
func sizeDone(c *ClientDone) int {
	n := uvarintLen(uint64(c.Client)) + sessionLen(c.Session) + uvarintLen(c.Floor) + uvarintLen(uint64(len(c.Collected)))
	for _, q := range c.Collected {
		n += sizeSeqDigest(q)
	}
	return n
}

// JoinSnapshotPages reassembles the image SnapshotPages split: the pages'
// lists concatenated, and consecutive Done entries of one client session
// merged. Every page must carry the same scalar fields, as SnapshotPages
// writes them; pages of different images are refused.
func JoinSnapshotPages(pages []*RecSnapshot) (*RecSnapshot, error) {
	if len(pages) == 0 {
		return nil, fmt.Errorf("wire: a snapshot of no pages")
	}
	if len(pages) == 1 {
		return pages[0], nil
	}
	f := pages[0]
	out := &RecSnapshot{Ballot: f.Ballot, CBallot: f.CBallot, Clock: f.Clock, MaxDelivered: f.MaxDelivered}
	var msgs, done int
	for _, p := range pages {
		msgs += len(p.Msgs)
		done += len(p.Done)
	}
	out.Msgs = make([]MsgState, 0, msgs)
	out.Delivered = make([]bool, 0, msgs)
	out.Done = make([]ClientDone, 0, done)
	// owned is the index in out.Done of the entry whose Collected this
	// function allocated, at the session's joined length (continued):
	// continuations append to it in place, each id copied once. Appending to a page's own slice instead (clipped, so
	// as not to write into the page) copied the session's ids so far at
	// every page: quadratic in the pages of one session, which a client
	// with a long window spreads over hundreds.
	owned := -1
	for i, p := range pages {
		if p.Ballot != f.Ballot || p.CBallot != f.CBallot || p.Clock != f.Clock || p.MaxDelivered != f.MaxDelivered {
			return nil, fmt.Errorf("wire: snapshot page %d of %d belongs to another image (ballot %s clock %d, page 0: ballot %s clock %d)",
				i, len(pages), p.Ballot, p.Clock, f.Ballot, f.Clock)
		}
		if len(p.Delivered) != len(p.Msgs) {
			return nil, fmt.Errorf("wire: snapshot page %d of %d: %d messages and %d delivered flags", i, len(pages), len(p.Msgs), len(p.Delivered))
		}
		out.Msgs = append(out.Msgs, p.Msgs...)
		out.Delivered = append(out.Delivered, p.Delivered...)
		for j, d := range p.Done {
			if j == 0 && len(out.Done) > 0 {
				if last := &out.Done[len(out.Done)-1]; last.Client == d.Client && last.Session == d.Session {
					if last.Floor != d.Floor {
						return nil, fmt.Errorf("wire: snapshot page %d of %d continues session %d@%s with another floor", i, len(pages), d.Client, d.Session)
					}
					if k := len(out.Done) - 1; owned != k {
						c := make([]SeqDigest, len(last.Collected), len(last.Collected)+continued(pages[i:], d.Client, d.Session))
						copy(c, last.Collected)
						last.Collected, owned = c, k
					}
					last.Collected = append(last.Collected, d.Collected...)
					continue
				}
			}
			out.Done = append(out.Done, d)
		}
	}
	return out, nil
}
