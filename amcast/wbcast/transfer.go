package wbcast

import "github.com/weft-dev/weft/wire"

// State transfer (issue #12 item 2; spec §6 P14 and H10.3 [INFER]: "give
// members far behind a state transfer").
//
// Garbage collection needs only a quorum of each group (gc.go,
// updateGroupLinf): the group's delivered floor is the highest timestamp a
// quorum of its members has delivered, so one member down for good no
// longer pins every message in memory. A member the floor has passed can
// no longer be caught up DELIVER by DELIVER: its leader sends it a SNAPSHOT
// of its delivered prefix instead (its last delivery P, its clock, every
// record it holds, its client sessions), in pages. The member installs it:
//
//   - its delivery point jumps to P; the application installs a snapshot
//     of another member's state taken at P or later (amcast.Delivery
//     Install; package rsm);
//   - messages the leader delivered and still holds become delivered here
//     (their records are kept, so re-acks (P2) and duplicate suppression
//     (P15) still work); collected ids join the sessions' tables;
//   - its own records the leader no longer holds, with an own-group local
//     timestamp at or below the leader's clock, were collected by the
//     leader: they are in the prefix and are dropped. A member installs
//     only its leader's snapshot (same cballot), so every record it holds
//     with an own-group local timestamp came from that leader's NEW_STATE
//     or ACCEPTs: the leader knew it when its clock was at that timestamp,
//     and still holds it unless it delivered and collected it. Records the
//     leader holds undelivered, or proposed after the snapshot (lts above
//     its clock), are kept: this member's acks for them may count.
//
// A member below the floor must not lead (it would deliver above a gap):
// it starts no ballot (behind), the others pass it over as a successor,
// and a candidate whose quorum reports a floor above its last delivery
// gives up its ballot (onNewLeaderAck), since those members left out of
// their states what they delivered below their floor. A member's floor is
// volatile (learnt from heartbeats), so a member that restarted (or
// installed a snapshot) reports at least its last delivery at that moment
// (ackFloor): it may have collected up to there (swarm seed 303407 with
// forged clients: a restarted member reported no floor, and a candidate
// behind what it had collected led with a gap).

// snapInbound is a SNAPSHOT arriving in pages at a member.
type snapInbound struct {
	b     wire.Ballot
	next  uint32
	bytes int
	last  wire.MsgID // last entry id so far (entries come in id order)
	pages []*wire.RecSnapshot
}

// behind reports whether this process knows it is below its group's
// delivered floor: it cannot lead until it installed a snapshot.
func (p *Process) behind() bool { return p.maxDelivered.Less(p.linf[p.g]) }

// behindAcked reports whether a quorum's NEW_LEADER_ACKs told this process
// it is behind (ackedFloor). Its peers do not know it (the reports are no
// group floor, so they are not passed on): it may still start a ballot as
// a designated successor, and gives it up at the acks, but it does not
// restart its own ballot, so the next successor takes over.
func (p *Process) behindAcked() bool { return p.maxDelivered.Less(p.ackedFloor) }

// peerBehind reports whether member i is known to be below the floor: its
// last report is below the floor and below what this process had
// delivered catchUpTicks ago (stalled). A report below the floor alone is
// routine: a member reports every heartbeat, and the DELIVERs that take it
// past the floor may be on their way, its report older than a report of
// another member that raised the floor. Passed over on such a report, the
// designated successor was skipped: a departing leader handed over to the
// member after it, and a member took the group over from a successor that
// was starting its ballot (CI, node.TestGossipLeaderLeaves;
// TestHandOverStaleReport).
func (p *Process) peerBehind(i int) bool {
	pr := &p.peers[i]
	return i != p.gi && pr.heardHB && pr.maxDelivered.Less(p.linf[p.g]) && p.stalled(pr.maxDelivered)
}

// sendSnapshot sends member i this leader's delivered prefix, in pages
// under the byte budget; not again before the member had time to install
// it (ElectionTicks, plus two ticks a page).
func (p *Process) sendSnapshot(i int) {
	pr := &p.peers[i]
	if p.ticks < pr.snapBusy {
		return
	}
	img := &wire.RecSnapshot{Clock: p.clock, MaxDelivered: p.maxDelivered}
	for _, id := range p.sortedIDs() {
		r := p.recs[id]
		if !r.known {
			continue
		}
		img.Msgs = append(img.Msgs, p.msgState(r))
		img.Delivered = append(img.Delivered, r.issued)
	}
	img.Done = p.sess.records()
	hdr := wire.Snapshot{B: p.cballot}
	// The page's own fields, the image's length prefix and kind bytes, and
	// the page number at its largest.
	budget := p.cfg.MaxMsgBytes - wire.Size(&hdr) - 16
	pages := wire.SnapshotPages(img, budget)
	q := p.topo.Members(p.g)[i]
	for k, pg := range pages {
		p.send(q, &wire.Snapshot{B: p.cballot, Image: *pg, Paged: wire.Paged{Page: uint32(k), More: k < len(pages)-1}})
	}
	pr.snapBusy = p.ticks + uint64(p.cfg.ElectionTicks) + 2*uint64(len(pages)-1)
	p.cov.Snapshots++
}

// onSnapshot collects a SNAPSHOT's pages from the leader whose state this
// member adopted, and installs it once the last page arrived.
func (p *Process) onSnapshot(from wire.ProcID, s *wire.Snapshot) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g || s.B.Leader() != from {
		return p.rejects.Reject("wrong_sender", "SNAPSHOT %s from p%d", s.B, from)
	}
	img := &s.Image
	if img.Ballot != (wire.Ballot{}) || img.CBallot != (wire.Ballot{}) || len(img.Delivered) != len(img.Msgs) {
		return p.rejects.Reject("bad_state", "SNAPSHOT %s page %d: ballots %s/%s, %d messages and %d flags", s.B, s.Page, img.Ballot, img.CBallot, len(img.Msgs), len(img.Delivered))
	}
	if err := p.checkClock("SNAPSHOT", img.Clock); err != nil {
		return err
	}
	pt := img.MaxDelivered
	if pt.T == 0 || pt.T >= maxClock || int(pt.G) >= p.topo.NumGroups() || img.Clock < pt.T {
		return p.rejects.Reject("bad_timestamp", "SNAPSHOT %s with point %s and clock %d", s.B, pt, img.Clock)
	}
	if p.status != Follower || s.B != p.cballot || p.amn != nil {
		return nil // only the leader whose state was adopted
	}
	in := p.snapIn
	switch {
	case s.Page == 0:
		in = &snapInbound{b: s.B}
	case in == nil || in.b != s.B || s.Page != in.next:
		p.snapIn = nil // a gap: the leader sends it again
		return nil
	case pt != in.pages[0].MaxDelivered || img.Clock != in.pages[0].Clock:
		return p.rejects.Reject("page_mismatch", "SNAPSHOT %s page %d: point %s clock %d, page 0 had %s %d", s.B, s.Page, pt, img.Clock, in.pages[0].MaxDelivered, in.pages[0].Clock)
	}
	size := wire.Size(s)
	if limit := p.cfg.MaxMsgBytes * p.cfg.MaxStatePages; int64(s.Page) >= int64(p.cfg.MaxStatePages) || in.bytes+size > limit {
		return p.rejects.Reject("state_too_large", "SNAPSHOT page %d brings it to %d bytes, limit %d pages and %d bytes", s.Page, in.bytes+size, p.cfg.MaxStatePages, limit)
	}
	last, err := p.checkImage(img, in.last, len(in.pages) > 0)
	if err != nil {
		return err
	}
	in.last = last
	in.next = s.Page + 1
	in.bytes += size
	in.pages = append(in.pages, img)
	if s.More {
		p.snapIn = in
		return nil
	}
	p.snapIn = nil
	full, err := wire.JoinSnapshotPages(in.pages)
	if err != nil {
		return p.rejects.Reject("bad_state", "SNAPSHOT %s: %v", s.B, err)
	}
	p.install(full, in.pages)
	return nil
}

// checkImage validates one page's entries: messages addressed here in id
// order (after last, if cont), delivered ones committed at or below the
// point with a gts that agrees with a delivery held here.
func (p *Process) checkImage(img *wire.RecSnapshot, last wire.MsgID, cont bool) (wire.MsgID, error) {
	for i := range img.Msgs {
		s := &img.Msgs[i]
		if err := p.checkMsg(&s.M); err != nil {
			return last, err
		}
		if (cont || i > 0) && !last.Less(s.M.ID) {
			return last, p.rejects.Reject("bad_state", "SNAPSHOT lists %s after %s (not in id order)", s.M.ID, last)
		}
		last, cont = s.M.ID, true
		r := p.recs[s.M.ID]
		if r != nil && r.known {
			if err := p.checkSame(&s.M, &r.m); err != nil {
				return last, err
			}
		}
		if !img.Delivered[i] {
			continue
		}
		if s.Phase != wire.PhaseCommitted || s.GTS.Less(s.LTS) || img.MaxDelivered.Less(s.GTS) || s.M.DestIndex(s.GTS.G) < 0 {
			return last, p.rejects.Reject("bad_state", "SNAPSHOT delivers %s in phase %s with lts %s gts %s, point %s", s.M.ID, s.Phase, s.LTS, s.GTS, img.MaxDelivered)
		}
		if err := p.checkLTS("SNAPSHOT", s.M.ID, s.LTS, p.g); err != nil {
			return last, err
		}
		if r != nil && r.issued && r.gts != s.GTS {
			return last, p.rejects.Reject("gts_conflict", "SNAPSHOT delivers %s at %s, delivered here at %s", s.M.ID, s.GTS, r.gts)
		}
	}
	return last, nil
}

// install makes img (whole; pages as received) this member's delivered
// prefix, unless it already delivered that far.
func (p *Process) install(img *wire.RecSnapshot, pages []*wire.RecSnapshot) {
	if !p.maxDelivered.Less(img.MaxDelivered) {
		return // stale: caught up meanwhile
	}
	for k, pg := range pages {
		p.persist(&wire.RecInstall{Image: *pg, Paged: wire.Paged{Page: uint32(k), More: k < len(pages)-1}})
	}
	in := make(map[wire.MsgID]bool, len(img.Msgs))
	for i := range img.Msgs {
		s := &img.Msgs[i]
		in[s.M.ID] = true
		if !img.Delivered[i] {
			continue
		}
		r := p.rec(s.M.ID)
		p.learn(r, &s.M)
		r.issued, r.phase, r.lts, r.gts, r.since = true, wire.PhaseCommitted, s.LTS, s.GTS, p.ticks
		r.ackB, r.ackFrom = nil, nil
		foldAccepts(r, s)
		r.durInstalled(s)
	}
	for id, r := range p.recs {
		if r.dur.held && !r.dur.delivered && !in[id] && r.dur.s.LTS.T <= img.Clock {
			r.durForget() // as the store drops it (installStore)
		}
	}
	for _, id := range p.sortedIDs() {
		r := p.recs[id]
		if !r.issued && !in[id] && r.lts.T <= img.Clock {
			p.drop(id, r) // collected by the leader: in the prefix (see above)
		}
	}
	p.sess.merge(img.Done, p.ticks, func(id wire.MsgID) bool { return p.recs[id] != nil })
	p.maxDelivered = img.MaxDelivered
	p.ackFloor = wire.MaxTS(p.ackFloor, img.MaxDelivered) // the leader collected up to its floor, at most here
	p.clock = max(p.clock, img.Clock)
	p.durClock = max(p.durClock, img.Clock)
	clear(p.dlog)
	p.dlog = p.dlog[:0] // the chain restarts at the point (catchUp)
	p.offLog = p.offLogIDs()
	p.cov.Installs++
	p.out.Install(img.MaxDelivered)
}

// drop forgets r, id's record, which was never delivered here.
func (p *Process) drop(id wire.MsgID, r *record) {
	r.dropped = true // refs.go
	delete(p.recs, id)
	s := p.sess.get(id.Key())
	s.live--
	s.last = p.ticks
}

// foldAccepts folds s's per-group ACCEPTs into r, keeping the higher
// ballot for each destination group (adopt and install).
func foldAccepts(r *record, s *wire.MsgState) {
	if len(s.Ballots) != len(r.acc) || len(s.LTSs) != len(r.acc) {
		return
	}
	for j := range r.acc {
		if s.LTSs[j].IsZero() {
			continue
		}
		if e := &r.acc[j]; !e.ok || e.b.Less(s.Ballots[j]) {
			if !e.ok {
				r.nacc++
			}
			*e = accEntry{b: s.Ballots[j], lts: s.LTSs[j], ok: true}
		}
	}
}

// installStore is install on the durable image (Store.Apply of the last
// REC_INSTALL page): the same changes, so a restarted member equals the
// live one (CompareRestored).
func (st *Store) installStore(img *wire.RecSnapshot) {
	if !st.maxDelivered.Less(img.MaxDelivered) {
		return
	}
	in := make(map[wire.MsgID]bool, len(img.Msgs))
	for i := range img.Msgs {
		s := img.Msgs[i]
		in[s.M.ID] = true
		if !img.Delivered[i] {
			continue
		}
		m := st.msgs[s.M.ID]
		if m == nil {
			st.sess.touch(&s.M, 0)
			m = &storedMsg{s: s}
			st.msgs[s.M.ID] = m
		} else {
			m.s.Phase, m.s.LTS, m.s.GTS = wire.PhaseCommitted, s.LTS, s.GTS
			n := len(s.M.Dest) // fold into a copy: the stored slices may be shared
			bs, ls := make([]wire.Ballot, n), make([]wire.Timestamp, n)
			if len(m.s.Ballots) == n && len(m.s.LTSs) == n {
				copy(bs, m.s.Ballots)
				copy(ls, m.s.LTSs)
			}
			m.s.Ballots, m.s.LTSs = bs, ls
			mergeAcc(&m.s, &s)
		}
		m.delivered = true
	}
	for id, m := range st.msgs {
		if !m.delivered && !in[id] && m.s.LTS.T <= img.Clock {
			delete(st.msgs, id)
		}
	}
	st.sess.merge(img.Done, 0, func(id wire.MsgID) bool { return st.msgs[id] != nil })
	st.maxDelivered = img.MaxDelivered
	st.Clock = max(st.Clock, img.Clock)
}

// applyInstallPage collects REC_INSTALL pages in the store; the last one
// applies the whole image.
func (st *Store) applyInstallPage(r *wire.RecInstall) error {
	switch {
	case r.Page == 0:
		st.installing = nil
	case len(st.installing) != int(r.Page):
		return errStorePage("REC_INSTALL", r.Page)
	}
	img := r.Image
	st.installing = append(st.installing, &img)
	if r.More {
		return nil
	}
	pages := st.installing
	st.installing = nil
	full, err := wire.JoinSnapshotPages(pages)
	if err != nil {
		return err
	}
	st.installStore(full)
	return nil
}
