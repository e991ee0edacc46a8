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

func firstCollectedSize(c []SeqDigest) int {
	if len(c) == 0 {
		return 0
	}
	return sizeSeqDigest(c[0])
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
