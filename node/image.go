package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/weft-dev/weft/wire"
)

// image mirrors a wbcast.Store: it applies the same records with the same
// rules (amcast/wbcast/store.go), so that the node can write a compact
// snapshot of the store when it compacts its log. wbcast.Store keeps its
// contents unexported, hence the mirror; the store_test checks the two
// agree.
//
// A snapshot is a sequence of ordinary wbcast records which, applied to an
// empty wbcast.Store, rebuild a store equivalent to the image:
//
//	REC_COLLECTED of every collected id, in chunks
//	REC_NEW_STATE{B: CBallot, Clock, State: every retained message}
//	REC_BALLOT{Ballot, CBallot}                  (if they differ)
//	REC_DELIVERED for each delivered message, in gts order
//	REC_DELIVERED + REC_COLLECTED of a marker message (see below)
//
// The store remembers the highest delivered gts even when that message has
// been collected; the snapshot restores it with a marker message
// (client markerClient, sequence 0) that is delivered with that gts and
// collected at once. Clients number their messages from 1, so the marker's
// id never collides with a real one.
type image struct {
	ballot, cballot wire.Ballot
	clock           uint64
	msgs            map[wire.MsgID]*imageMsg
	maxDelivered    wire.Timestamp
	done            map[wire.ProcID]*doneRange
}

type imageMsg struct {
	s         wire.MsgState
	delivered bool
}

// doneRange is one client's collected sequence numbers: every seq <= w, and
// the ones in above.
type doneRange struct {
	w     uint64
	above map[uint64]struct{}
}

// markerClient is the client id of the snapshot's marker message.
const markerClient = wire.ProcID(math.MaxUint32)

func newImage() *image {
	return &image{msgs: map[wire.MsgID]*imageMsg{}, done: map[wire.ProcID]*doneRange{}}
}

func (im *image) isDone(id wire.MsgID) bool {
	d := im.done[id.Client]
	if d == nil {
		return false
	}
	if id.Seq != 0 && id.Seq <= d.w {
		return true
	}
	_, ok := d.above[id.Seq]
	return ok
}

func (im *image) addDone(id wire.MsgID) {
	d := im.done[id.Client]
	if d == nil {
		d = &doneRange{above: map[uint64]struct{}{}}
		im.done[id.Client] = d
	}
	if id.Seq != 0 && id.Seq <= d.w {
		return
	}
	d.above[id.Seq] = struct{}{}
	for {
		if _, ok := d.above[d.w+1]; !ok {
			return
		}
		delete(d.above, d.w+1)
		d.w++
	}
}

// apply applies one record, as wbcast.Store.Apply does.
func (im *image) apply(rec wire.Message) error {
	switch r := rec.(type) {
	case *wire.RecBallot:
		im.ballot, im.cballot = r.Ballot, r.CBallot
	case *wire.RecAccepted:
		if im.isDone(r.S.M.ID) {
			return nil
		}
		if m := im.msgs[r.S.M.ID]; m != nil && m.delivered {
			return nil
		}
		im.msgs[r.S.M.ID] = &imageMsg{s: r.S}
	case *wire.RecDelivered:
		im.maxDelivered = wire.MaxTS(im.maxDelivered, r.GTS)
		if im.isDone(r.M.ID) {
			return nil // collected already (mirrors wbcast.Store)
		}
		m := im.msgs[r.M.ID]
		if m == nil {
			m = &imageMsg{s: wire.MsgState{M: r.M}}
			im.msgs[r.M.ID] = m
		}
		m.s.Phase, m.s.LTS, m.s.GTS = wire.PhaseCommitted, r.LTS, r.GTS
		m.delivered = true
		im.maxDelivered = wire.MaxTS(im.maxDelivered, r.GTS)
	case *wire.RecNewState:
		im.ballot, im.cballot = r.B, r.B
		im.clock = max(im.clock, r.Clock)
		in := make(map[wire.MsgID]bool, len(r.State))
		for _, s := range r.State {
			if im.isDone(s.M.ID) {
				continue
			}
			in[s.M.ID] = true
			if m := im.msgs[s.M.ID]; m != nil && m.delivered {
				continue
			}
			im.msgs[s.M.ID] = &imageMsg{s: s}
		}
		for id, m := range im.msgs {
			if !in[id] && !m.delivered {
				delete(im.msgs, id)
			}
		}
	case *wire.RecCollected:
		for _, id := range r.IDs {
			delete(im.msgs, id)
			im.addDone(id)
		}
	default:
		return fmt.Errorf("node: snapshot image cannot apply %s", rec.Kind())
	}
	return nil
}

func cmpMsgID(a, b wire.MsgID) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}

// collectedChunk bounds the ids of one REC_COLLECTED in a snapshot (the
// codec caps a list at wire.MaxStateEntries).
const collectedChunk = 1 << 16

// records returns the snapshot records (see image).
func (im *image) records() []wire.Message {
	var out []wire.Message
	// The collected ids first: a message may be delivered again after it
	// was collected (REC_DELIVERED does not consult the done set), and
	// REC_NEW_STATE skips collected ids, as the store did.
	clients := make([]wire.ProcID, 0, len(im.done))
	for c := range im.done {
		clients = append(clients, c)
	}
	slices.Sort(clients)
	var chunk []wire.MsgID
	flush := func() {
		if len(chunk) > 0 {
			out = append(out, &wire.RecCollected{IDs: chunk})
			chunk = nil
		}
	}
	add := func(id wire.MsgID) {
		chunk = append(chunk, id)
		if len(chunk) == collectedChunk {
			flush()
		}
	}
	for _, c := range clients {
		d := im.done[c]
		if d.w == 0 && len(d.above) == 0 {
			add(wire.MsgID{Client: c, Seq: 0}) // only the marker (or a seq-0 id)
		}
		for s := uint64(1); s <= d.w; s++ {
			add(wire.MsgID{Client: c, Seq: s})
		}
		above := make([]uint64, 0, len(d.above))
		for s := range d.above {
			above = append(above, s)
		}
		slices.Sort(above)
		for _, s := range above {
			add(wire.MsgID{Client: c, Seq: s})
		}
	}
	flush()

	ids := make([]wire.MsgID, 0, len(im.msgs))
	for id := range im.msgs {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, cmpMsgID)
	ns := &wire.RecNewState{B: im.cballot, Clock: im.clock, State: make([]wire.MsgState, 0, len(ids))}
	var delivered []*imageMsg
	var maxRetained wire.Timestamp
	for _, id := range ids {
		m := im.msgs[id]
		if !im.isDone(id) {
			ns.State = append(ns.State, m.s)
		}
		if m.delivered {
			delivered = append(delivered, m)
			maxRetained = wire.MaxTS(maxRetained, m.s.GTS)
		}
	}
	out = append(out, ns)
	if im.ballot != im.cballot {
		out = append(out, &wire.RecBallot{Ballot: im.ballot, CBallot: im.cballot})
	}
	slices.SortFunc(delivered, func(a, b *imageMsg) int { return a.s.GTS.Compare(b.s.GTS) })
	for _, m := range delivered {
		out = append(out, &wire.RecDelivered{M: m.s.M, LTS: m.s.LTS, GTS: m.s.GTS})
	}
	if maxRetained.Less(im.maxDelivered) {
		marker := wire.AppMsg{ID: wire.MsgID{Client: markerClient, Seq: 0}, Dest: []wire.GroupID{im.maxDelivered.G}}
		out = append(out,
			&wire.RecDelivered{M: marker, LTS: im.maxDelivered, GTS: im.maxDelivered},
			&wire.RecCollected{IDs: []wire.MsgID{marker.ID}})
	}
	return out
}

// Snapshot encoding: the magic, then each record as a uvarint length and
// its wire.Append encoding.
var snapshotMagic = []byte("weftsnap\x01")

func encodeSnapshot(recs []wire.Message) []byte {
	n := len(snapshotMagic)
	for _, r := range recs {
		n += binary.MaxVarintLen32 + wire.Size(r)
	}
	b := make([]byte, 0, n)
	b = append(b, snapshotMagic...)
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(wire.Size(r)))
		b = wire.Append(b, r)
	}
	return b
}

var errBadSnapshot = errors.New("node: malformed snapshot")

func decodeSnapshot(b []byte) ([]wire.Message, error) {
	if len(b) < len(snapshotMagic) || string(b[:len(snapshotMagic)]) != string(snapshotMagic) {
		return nil, fmt.Errorf("%w: bad magic", errBadSnapshot)
	}
	b = b[len(snapshotMagic):]
	var out []wire.Message
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("%w: bad record length at record %d", errBadSnapshot, len(out))
		}
		m, err := wire.Decode(b[k : k+int(n)])
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", errBadSnapshot, len(out), err)
		}
		out = append(out, m)
		b = b[k+int(n):]
	}
	return out, nil
}
