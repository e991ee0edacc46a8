package rsm

import "github.com/weft-dev/weft/wire"

// replyOverhead is the bytes a held result counts beyond its own (its id
// and the table's bookkeeping), so that empty results are bounded too.
const replyOverhead = 64

// replyTable holds each applied entry's result until the client no longer
// needs it, so that a retried MULTICAST of a delivered message is answered
// with its result (the first answer may have been lost with a crashed
// leader). It is deterministic: replicas that apply the same entries hold
// the same results, and a snapshot carries it (the Raft thesis keeps client
// responses in the replicated state for the same reason, §6.3).
//
// A result is forgotten when its client's floor passes it (wire.AppMsg.Floor:
// "everything up to here is answered") or, past the bounds, oldest first in
// apply order; a client asking after that gets a reply without a result
// (wire.Delivered.HasResult false).
type replyTable struct {
	max      int
	maxBytes int64
	res      map[wire.MsgID][]byte
	bySess   map[wire.SessionKey][]wire.SeqDigest // ids held, per session (a reused seq is another message: wire.MsgID.Digest)
	order    []wire.MsgID                         // apply order; ids no longer held are skipped
	head     int
	bytes    int64
	evicted  uint64
}

func (t *replyTable) init(max int, maxBytes int64) {
	t.max, t.maxBytes = max, maxBytes
	t.res = map[wire.MsgID][]byte{}
	t.bySess = map[wire.SessionKey][]wire.SeqDigest{}
	t.order, t.head, t.bytes, t.evicted = nil, 0, 0, 0
}

func (t *replyTable) len() int { return len(t.res) }

func (t *replyTable) get(id wire.MsgID) ([]byte, bool) {
	r, ok := t.res[id]
	return r, ok
}

// put holds id's result (copied) after forgetting the session's results at
// or below floor.
func (t *replyTable) put(id wire.MsgID, floor uint64, result []byte) {
	k := id.Key()
	if seqs := t.bySess[k]; len(seqs) > 0 {
		kept := seqs[:0]
		for _, s := range seqs {
			if s.Seq <= floor {
				t.drop(wire.MsgID{Client: id.Client, Session: id.Session, Seq: s.Seq, Digest: s.Digest})
			} else {
				kept = append(kept, s)
			}
		}
		t.bySess[k] = kept
	}
	if _, dup := t.res[id]; dup {
		return // an id is applied once; keep the first
	}
	var r []byte
	if len(result) > 0 {
		r = append([]byte(nil), result...)
	}
	t.res[id] = r
	t.bySess[k] = append(t.bySess[k], wire.SeqDigest{Seq: id.Seq, Digest: id.Digest})
	t.order = append(t.order, id)
	t.bytes += int64(len(r)) + replyOverhead
	for len(t.res) > t.max || (t.bytes > t.maxBytes && len(t.res) > 0) {
		old := t.order[t.head]
		t.head++
		if _, ok := t.res[old]; ok {
			t.drop(old)
			t.unindex(old)
			t.evicted++
		}
	}
	// Ids forgotten by floors leave holes in order: compact it when it is
	// mostly holes, so its length stays within a constant of the table's.
	if live := len(t.res); len(t.order)-t.head > 2*live+64 {
		kept := make([]wire.MsgID, 0, live)
		for _, o := range t.order[t.head:] {
			if _, ok := t.res[o]; ok {
				kept = append(kept, o)
			}
		}
		t.order, t.head = kept, 0
	}
	if len(t.bySess[k]) == 0 {
		delete(t.bySess, k)
	}
}

// drop forgets id's result (not its session index entry).
func (t *replyTable) drop(id wire.MsgID) {
	if r, ok := t.res[id]; ok {
		t.bytes -= int64(len(r)) + replyOverhead
		delete(t.res, id)
	}
}

// unindex removes id from its session's index.
func (t *replyTable) unindex(id wire.MsgID) {
	k := id.Key()
	seqs := t.bySess[k]
	for i, s := range seqs {
		if s.Seq == id.Seq && s.Digest == id.Digest {
			seqs = append(seqs[:i], seqs[i+1:]...)
			break
		}
	}
	if len(seqs) == 0 {
		delete(t.bySess, k)
	} else {
		t.bySess[k] = seqs
	}
}

// each calls f with every held result in apply order (snapshots).
func (t *replyTable) each(f func(id wire.MsgID, r []byte) error) error {
	for _, id := range t.order[t.head:] {
		if r, ok := t.res[id]; ok {
			if err := f(id, r); err != nil {
				return err
			}
		}
	}
	return nil
}
