package wbcast

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// The durable image without a second copy of the state.
//
// A node compacts its log by writing a snapshot of what its records built
// (the Store's image: Store.Snapshot). It used to keep that image by
// applying every record it persisted to a Store of its own, a second copy
// of every message in flight and of every collected id of the last lease
// (about 840,000 ids at 14,000 multicasts a second per group), updated by
// three map operations a multicast: 8% of a loaded agent's CPU, and with
// the compactions it fed, about a fifth of its throughput
// (docs/batching.md). The process now keeps, beside each record, what its
// records made durable of it (durState), and Image freezes that and its
// collected ids in time proportional to the messages in flight and the
// sessions, not to the ids: a snapshot is then built from the Image on
// another goroutine while the process goes on.
//
// The image equals the Store's (sim.Config.CheckRestore compares them after
// every Ready of every swarm seed: CompareImage), except that the process
// may know more of its client sessions than its records carry (a session
// and its floor learnt from a message not persisted, which a restarted
// process would learn again): the image holds every session the process
// holds, with its floor. Both are safe to persist: a floor is the client's
// claim that it will never send a message at or below it again, true
// whether or not the message that carried it was persisted, and it only
// ever shortens how long ids are remembered, never below the lease
// (sessions.go).

// durState is what the records persisted so far made durable of one
// message: Store.Apply's storedMsg, kept beside the process's record.
type durState struct {
	// s is the message's last persisted state: a REC_ACCEPTED's (the
	// record's own memory, immutable once persisted), an adopted
	// NEW_STATE entry without the own group's ACCEPTs (dropOwnAccepts),
	// an installed one. nil with delivered: the delivery was the first
	// record of the message (its state is then its message alone).
	s         *wire.MsgState
	held      bool // the store holds the message
	delivered bool // a REC_DELIVERED (or an installed delivery) for it
}

// durAccepted records that r's REC_ACCEPTED rec was persisted (Store.Apply:
// a delivered message keeps its delivered state).
func (r *record) durAccepted(rec *wire.RecAccepted) {
	if !r.dur.delivered {
		r.dur = durState{s: &rec.S, held: true}
	}
}

// durDelivered records that r's REC_DELIVERED was persisted; the image
// takes its lts and gts from r, final once delivered.
func (r *record) durDelivered() {
	r.dur.held, r.dur.delivered = true, true
}

// durAdopted records that r's entry s of a NEW_STATE adopted under ballot b
// was persisted (Store.applyNewStatePage).
func (r *record) durAdopted(s *wire.MsgState, b wire.Ballot) {
	if !r.dur.delivered {
		ds := dropOwnAccepts(*s, b)
		r.dur = durState{s: &ds, held: true}
	}
}

// durInstalled records that an installed SNAPSHOT delivered r with state s
// (Store.installStore): a held state keeps its vectors, merged with s's
// into new slices (the old ones are shared with a persisted record).
func (r *record) durInstalled(s *wire.MsgState) {
	if !r.dur.held {
		cp := *s
		r.dur = durState{s: &cp, held: true, delivered: true}
		return
	}
	cp := wire.MsgState{M: r.m}
	if r.dur.s != nil {
		cp = *r.dur.s
	}
	n := len(s.M.Dest)
	bs, ls := make([]wire.Ballot, n), make([]wire.Timestamp, n)
	if len(cp.Ballots) == n && len(cp.LTSs) == n {
		copy(bs, cp.Ballots)
		copy(ls, cp.LTSs)
	}
	cp.Ballots, cp.LTSs = bs, ls
	mergeAcc(&cp, s)
	r.dur = durState{s: &cp, held: true, delivered: true}
}

// durForget records that the store dropped r (not delivered): back to
// START in an adopted state, or in an installed prefix.
func (r *record) durForget() { r.dur = durState{} }

// durImage returns r's durable state for a snapshot; ok is false when the
// store does not hold r.
func (r *record) durImage() (s wire.MsgState, delivered, ok bool) {
	if !r.dur.held {
		return wire.MsgState{}, false, false
	}
	s = wire.MsgState{M: r.m}
	if r.dur.s != nil {
		s = *r.dur.s
	}
	if r.dur.delivered {
		s.Phase, s.LTS, s.GTS = wire.PhaseCommitted, r.lts, r.gts
	}
	return s, r.dur.delivered, true
}

// Image is a process's durable image, frozen when it was taken: what its
// store would snapshot. Snapshot may run on another goroutine while the
// process goes on.
type Image struct {
	hdr  wire.RecSnapshot // ballots, clock, last delivery
	msgs []imageMsg
	sess []imageSession
}

type imageMsg struct {
	s         wire.MsgState
	delivered bool
}

type imageSession struct {
	k      wire.SessionKey
	floor  uint64
	chunks [][]doneEntry // frozen (doneSet.freeze)
}

// Image freezes the process's durable image as of its last Ready: every
// record it returned so far must be durable (a node takes it right after
// a sync). It costs time in the messages held and the sessions, not in the
// collected ids. ok is false while the process is inert after a disk loss
// (it holds no image to compact; amnesia.go).
func (p *Process) Image() (img *Image, ok bool) {
	if p.amn != nil {
		return nil, false
	}
	img = &Image{hdr: wire.RecSnapshot{Ballot: p.ballot, CBallot: p.cballot, Clock: p.durClock, MaxDelivered: p.maxDelivered}}
	img.msgs = make([]imageMsg, 0, len(p.recs))
	for _, r := range p.recs {
		if s, d, ok := r.durImage(); ok {
			img.msgs = append(img.msgs, imageMsg{s: s, delivered: d})
		}
	}
	img.sess = make([]imageSession, 0, len(p.sess.m))
	for k, s := range p.sess.m {
		img.sess = append(img.sess, imageSession{k: k, floor: s.floor, chunks: s.done.freeze()})
	}
	return img, true
}

// Messages returns the number of messages the image holds.
func (img *Image) Messages() int { return len(img.msgs) }

// sort puts the messages in id order and the sessions in key order, the
// order of Store.Snapshot's lists.
func (img *Image) sort() {
	slices.SortFunc(img.msgs, func(a, b imageMsg) int { return a.s.M.ID.Compare(b.s.M.ID) })
	slices.SortFunc(img.sess, func(a, b imageSession) int { return a.k.Compare(b.k) })
}

// Snapshot returns the image as the one record Store.Apply rebuilds a store
// from (Store.Snapshot's form: messages by id, sessions by key, each
// session's ids in order).
func (img *Image) Snapshot() *wire.RecSnapshot {
	img.sort()
	snap := img.hdr
	snap.Msgs = make([]wire.MsgState, len(img.msgs))
	snap.Delivered = make([]bool, len(img.msgs))
	for i, m := range img.msgs {
		snap.Msgs[i], snap.Delivered[i] = m.s, m.delivered
	}
	snap.Done = make([]wire.ClientDone, len(img.sess))
	for i, s := range img.sess {
		cd := wire.ClientDone{Client: s.k.Client, Session: s.k.Session, Floor: s.floor}
		n := 0
		for _, c := range s.chunks {
			n += len(c)
		}
		if n > 0 {
			cd.Collected = make([]wire.SeqDigest, 0, n)
			for _, c := range s.chunks {
				cd.Collected = appendChunkIDs(cd.Collected, c)
			}
		}
		snap.Done[i] = cd
	}
	return &snap
}

// Pages hands emit the pages wire.SnapshotPages would cut Snapshot's
// record into, at most budget bytes each, one at a time and built in the
// same buffers (each valid until emit returns): a compaction writes the
// image without a copy of every collected id, which Snapshot makes (with
// about a million ids per agent at 15,000 multicasts/s per group, two
// such copies per compaction, this one and the check's decoding, were
// garbage of about 50 MB each time; docs/batching.md). It returns emit's
// first error.
func (img *Image) Pages(budget int, emit func(*wire.RecSnapshot) error) error {
	img.sort()
	pg := wire.NewSnapshotPager(&img.hdr, budget, true, emit)
	for i := range img.msgs {
		pg.Msg(&img.msgs[i].s, img.msgs[i].delivered)
	}
	var ids [doneChunk]wire.SeqDigest
	for _, s := range img.sess {
		pg.Session(s.k.Client, s.k.Session, s.floor)
		for _, c := range s.chunks {
			pg.IDs(appendChunkIDs(ids[:0], c))
		}
	}
	return pg.Close()
}

// CompareImage checks that img, a process's Image taken after a Ready,
// agrees with st, the store its records built (see above): the same
// ballots (a store that never saw a ballot record holds the zero ones,
// which Restore reads as the initial ballot), clock, last delivery and
// messages, and the same collected ids of every session; the image may
// hold more sessions, without ids, and higher floors. It returns the first
// difference, or nil.
func CompareImage(topo *amcast.Topology, g wire.GroupID, img *Image, st *Store) error {
	got, want := img.Snapshot(), st.Snapshot()
	if want.Ballot == (wire.Ballot{}) && want.CBallot == (wire.Ballot{}) {
		b0 := wire.Ballot{N: 0, P: topo.InitialLeader(g)}
		want.Ballot, want.CBallot = b0, b0
	}
	switch {
	case got.Ballot != want.Ballot || got.CBallot != want.CBallot:
		return fmt.Errorf("wbcast: image ballots %s/%s, store %s/%s", got.Ballot, got.CBallot, want.Ballot, want.CBallot)
	case got.Clock != want.Clock:
		return fmt.Errorf("wbcast: image clock %d, store %d", got.Clock, want.Clock)
	case got.MaxDelivered != want.MaxDelivered:
		return fmt.Errorf("wbcast: image last delivery %s, store %s", got.MaxDelivered, want.MaxDelivered)
	case len(got.Msgs) != len(want.Msgs):
		return fmt.Errorf("wbcast: image holds %d messages, store %d%s", len(got.Msgs), len(want.Msgs), firstMissing(got, want))
	}
	for i := range got.Msgs {
		a, b := &got.Msgs[i], &want.Msgs[i]
		if got.Delivered[i] != want.Delivered[i] || !sameState(a, b) {
			return fmt.Errorf("wbcast: image holds %s, store %s", describeState(a, got.Delivered[i]), describeState(b, want.Delivered[i]))
		}
	}
	stored := make(map[wire.SessionKey]*wire.ClientDone, len(want.Done))
	for i := range want.Done {
		d := &want.Done[i]
		stored[wire.SessionKey{Client: d.Client, Session: d.Session}] = d
	}
	for i := range got.Done {
		d := &got.Done[i]
		k := wire.SessionKey{Client: d.Client, Session: d.Session}
		w := stored[k]
		delete(stored, k)
		switch {
		case w == nil && len(d.Collected) > 0:
			return fmt.Errorf("wbcast: image session %s holds %d collected ids, the store none", k, len(d.Collected))
		case w == nil:
		case !slices.Equal(d.Collected, w.Collected):
			return fmt.Errorf("wbcast: image session %s holds %d collected ids, the store %d (or others)", k, len(d.Collected), len(w.Collected))
		case d.Floor < w.Floor:
			return fmt.Errorf("wbcast: image session %s floor %d below the store's %d", k, d.Floor, w.Floor)
		}
	}
	for k := range stored {
		return fmt.Errorf("wbcast: the store holds session %s, the image not", k)
	}
	return samePages(img, got)
}

// comparePageBudget is the page budget CompareImage cuts images with: small,
// so that the simulator's images span several pages and sessions continue
// across them.
const comparePageBudget = 300

// samePages checks that the pages img streams (Pages, what a compaction
// writes) are, byte for byte, those wire.SnapshotPages cuts its Snapshot,
// snap, into.
func samePages(img *Image, snap *wire.RecSnapshot) error {
	want := wire.SnapshotPages(snap, comparePageBudget)
	i := 0
	err := img.Pages(comparePageBudget, func(p *wire.RecSnapshot) error {
		if i == len(want) {
			return fmt.Errorf("wbcast: the image streams more than the %d pages of its snapshot", len(want))
		}
		if !bytes.Equal(wire.Append(nil, p), wire.Append(nil, want[i])) {
			return fmt.Errorf("wbcast: the image's streamed page %d of %d differs from its snapshot's", i, len(want))
		}
		i++
		return nil
	})
	if err == nil && i != len(want) {
		err = fmt.Errorf("wbcast: the image streams %d pages, its snapshot %d", i, len(want))
	}
	return err
}

func firstMissing(got, want *wire.RecSnapshot) string {
	in := make(map[wire.MsgID]bool, len(got.Msgs))
	for i := range got.Msgs {
		in[got.Msgs[i].M.ID] = true
	}
	for i := range want.Msgs {
		if !in[want.Msgs[i].M.ID] {
			return fmt.Sprintf(" (the store holds %s, the image not)", describeState(&want.Msgs[i], want.Delivered[i]))
		}
		delete(in, want.Msgs[i].M.ID)
	}
	for id := range in {
		return fmt.Sprintf(" (the image holds %s, the store not)", id)
	}
	return ""
}

func sameState(a, b *wire.MsgState) bool {
	return a.M.ID == b.M.ID && a.Phase == b.Phase && a.LTS == b.LTS && a.GTS == b.GTS &&
		slices.Equal(a.Ballots, b.Ballots) && slices.Equal(a.LTSs, b.LTSs)
}

func describeState(s *wire.MsgState, delivered bool) string {
	return fmt.Sprintf("%s %s lts %s gts %s ballots %v ltss %v delivered %v", s.M.ID, s.Phase, s.LTS, s.GTS, s.Ballots, s.LTSs, delivered)
}
