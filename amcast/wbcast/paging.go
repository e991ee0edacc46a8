package wbcast

import "github.com/weft-dev/weft/wire"

// Paged recovery (spec §5, H7.4, H8.12, H9). A member that a partition or a
// slow peer keeps from delivering pins garbage collection (§6), so the
// state a NEW_LEADER_ACK or NEW_STATE carries can legitimately hold 100,000
// messages and more, with their payloads: far past the transport's frame
// cap (wire.DefaultMaxFrame), which would refuse to send it and leave the
// group without a leader. Each such state is split into pages of at most
// Config.MaxMsgBytes (wire.Paged); the receiver acts on a state only once
// every page arrived, in order (links are FIFO). A gap (a page lost, e.g.
// on a link reset) drops what was collected, and the sender starts again
// from page 0: a candidate asks the member for its ack again (a repeated
// NEW_LEADER), a leader re-sends its state to a member whose heartbeat
// shows it missed the recovery, and the candidate timeout covers the rest. The byte total one sender may ship is bounded (MaxMsgBytes x
// MaxStatePages); past it the input is rejected, so a faulty or hostile
// peer cannot exhaust the receiver's memory.

// page is one page of a state: its entries and its number.
type page struct {
	state []wire.MsgState
	wire.Paged
}

// pageHeader bounds what a paged message adds to its entries: m's own
// fields (m is sent with an empty state), the state list's length prefix
// and the largest page number.
func pageHeader(m wire.Message) int {
	return wire.Size(m) + 4 + 5 // length prefix up to 2^28 entries; page up to 2^32
}

// paginate splits st into pages whose encodings, with a header of header
// bytes, stay within the byte budget. A page holds at least one entry, so
// an entry larger than the budget (a payload near wire.MaxPayload) travels
// alone, still under the frame cap. An empty state is one empty page.
func (p *Process) paginate(st []wire.MsgState, header int) []page {
	var pages []page
	start, size := 0, header
	for i := range st {
		n := wire.SizeState(&st[i])
		if i > start && size+n > p.cfg.MaxMsgBytes {
			pages = append(pages, page{state: st[start:i:i]})
			start, size = i, header
		}
		size += n
	}
	pages = append(pages, page{state: st[start:len(st):len(st)]})
	for i := range pages {
		pages[i].Page, pages[i].More = uint32(i), i < len(pages)-1
	}
	return pages
}

// statePages is the leader's NEW_STATE of state, in pages.
func (p *Process) statePages(state []wire.MsgState) []*wire.NewState {
	hdr := wire.NewState{B: p.cballot, Clock: p.clock}
	var out []*wire.NewState
	for _, pg := range p.paginate(state, pageHeader(&hdr)) {
		ns := hdr
		ns.State, ns.Paged = pg.state, pg.Paged
		out = append(out, &ns)
	}
	return out
}

// sendState sends a NEW_STATE in pages to member i, and notes when its last
// page may have arrived if a page takes two ticks (1 MiB per 20 ms with the
// node's default tick): onHeartbeat re-sends no state to the member before
// then, so a member far behind is not sent copy after copy of a large state
// while the first one is still on its way. A state of one page is not held
// back at all.
func (p *Process) sendState(i int, pages []*wire.NewState) {
	q := p.topo.Members(p.g)[i]
	for _, ns := range pages {
		p.send(q, ns)
	}
	p.peers[i].stateBusy = p.ticks + 2*uint64(len(pages)-1)
}

// inbound is a state arriving in pages from one sender.
type inbound struct {
	next  uint32 // the page expected next
	bytes int    // encoded size of the pages so far
	state []wire.MsgState
}

// checkPage validates the next page of in (size: its encoded size) without
// changing anything: the total must stay within MaxMsgBytes x
// MaxStatePages, and the entries must be sorted by id without duplicates,
// across pages too (senders list them in id order; the candidate's merge
// relies on it).
func (p *Process) checkPage(in *inbound, pg wire.Paged, st []wire.MsgState, size int, what string) error {
	limit := p.cfg.MaxMsgBytes * p.cfg.MaxStatePages
	if int64(pg.Page) >= int64(p.cfg.MaxStatePages) || in.bytes+size > limit {
		return p.rejects.Reject("state_too_large", "%s page %d brings its state to %d bytes, limit %d pages and %d bytes",
			what, pg.Page, in.bytes+size, p.cfg.MaxStatePages, limit)
	}
	for i := range st {
		var prev *wire.MsgID
		switch {
		case i > 0:
			prev = &st[i-1].M.ID
		case len(in.state) > 0:
			prev = &in.state[len(in.state)-1].M.ID
		}
		if prev != nil && !prev.Less(st[i].M.ID) {
			return p.rejects.Reject("bad_state", "%s page %d lists %s after %s (not in id order)", what, pg.Page, st[i].M.ID, *prev)
		}
	}
	return nil
}

// add appends a checked page and reports whether the state is complete.
func (in *inbound) add(pg wire.Paged, st []wire.MsgState, size int) bool {
	in.next = pg.Page + 1
	in.bytes += size
	if in.state == nil && !pg.More {
		in.state = st // a whole state in one page: no copy
	} else {
		in.state = append(in.state, st...)
	}
	return !pg.More
}

// follows reports whether pg is the page in expects next (page 0 is never
// a continuation: it starts a state afresh, e.g. a sender's retry).
func (in *inbound) follows(pg wire.Paged) bool {
	return in != nil && pg.Page == in.next && pg.Page > 0
}
