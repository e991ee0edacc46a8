package wbcast

import "github.com/weft-dev/weft/wire"

// Per-message state in few allocations (issue #14 item 4; TestStepAllocs):
// a record keeps its per-destination vectors inline, and the REC_ACCEPTED
// and ACCEPT_ACK made for every message come in one allocation with their
// vectors, for messages to at most inlineDests groups (nearly all).

// inlineDests is how many destination groups a record holds without
// allocating its per-destination slices.
const inlineDests = 2

// newAcc returns r's acc for n destination groups, zeroed.
func (r *record) newAcc(n int) []accEntry {
	if n <= inlineDests {
		r.accInline = [inlineDests]accEntry{}
		return r.accInline[:n:n]
	}
	return make([]accEntry, n)
}

// newAckFrom returns r's ackFrom for n destination groups, zeroed.
func (r *record) newAckFrom(n int) []uint64 {
	if n <= inlineDests {
		r.ackFromInline = [inlineDests]uint64{}
		return r.ackFromInline[:n:n]
	}
	return make([]uint64, n)
}

// vectors returns a ballot and a timestamp vector of n zero entries. For
// up to inlineDests entries both share one allocation: a message state is
// made for every REC_ACCEPTED, and the store keeps it.
func vectors(n int) ([]wire.Ballot, []wire.Timestamp) {
	if n > inlineDests {
		return make([]wire.Ballot, n), make([]wire.Timestamp, n)
	}
	v := new(struct {
		b [inlineDests]wire.Ballot
		t [inlineDests]wire.Timestamp
	})
	return v.b[:n:n], v.t[:n:n]
}

// newAcceptAck returns an ACCEPT_ACK with a zero ballot vector of n
// entries, in one allocation for up to inlineDests.
func newAcceptAck(n int) *wire.AcceptAck {
	if n > inlineDests {
		return &wire.AcceptAck{Ballots: make([]wire.Ballot, n)}
	}
	v := new(struct {
		ack wire.AcceptAck
		b   [inlineDests]wire.Ballot
	})
	v.ack.Ballots = v.b[:n:n]
	return &v.ack
}

// msgState snapshots r for records and recovery messages.
func (p *Process) msgState(r *record) wire.MsgState {
	s := wire.MsgState{}
	s.Ballots, s.LTSs = vectors(len(r.acc))
	fillState(&s, r)
	return s
}

// recAccepted returns r's REC_ACCEPTED, in one allocation with its
// vectors for up to inlineDests (one per message at every member).
func (p *Process) recAccepted(r *record) *wire.RecAccepted {
	n := len(r.acc)
	if n > inlineDests {
		return &wire.RecAccepted{S: p.msgState(r)}
	}
	v := new(struct {
		rec wire.RecAccepted
		b   [inlineDests]wire.Ballot
		t   [inlineDests]wire.Timestamp
	})
	v.rec.S.Ballots, v.rec.S.LTSs = v.b[:n:n], v.t[:n:n]
	fillState(&v.rec.S, r)
	return &v.rec
}

// fillState copies r into s, whose vectors have r's length.
func fillState(s *wire.MsgState, r *record) {
	s.M, s.Phase, s.LTS, s.GTS = r.m, r.phase, r.lts, r.gts
	for i, e := range r.acc {
		if e.ok {
			s.Ballots[i], s.LTSs[i] = e.b, e.lts
		}
	}
}
