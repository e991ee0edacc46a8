package wire

// Encoded sizes: Size is the length of Append's encoding, computed without
// encoding (the byte budgets of paged states and frames rely on it).

import (
	"fmt"
	"math/bits"
)

// Size returns the length of Append(nil, m). It panics like Append.
func Size(m Message) int {
	n := 2 // version, kind
	switch m := m.(type) {
	case *Multicast:
		if m != nil {
			return n + sizeAppMsg(&m.M)
		}
	case *Propose:
		if m != nil {
			return n + sizeMsgID(m.ID) + uvarintLen(uint64(m.G)) + sizeTS(m.LTS)
		}
	case *Accept:
		if m != nil {
			return n + sizeAppMsg(&m.M) + uvarintLen(uint64(m.G)) + sizeBallot(m.B) + sizeTS(m.LTS) + sizeTS(m.Linf)
		}
	case *AcceptAck:
		if m != nil {
			return n + sizeMsgID(m.ID) + uvarintLen(uint64(m.G)) + sizeBallots(m.Ballots) +
				sizeTS(m.GTS) + sizeTS(m.Linf)
		}
	case *Deliver:
		if m != nil {
			n += sizeMsgID(m.ID) + sizeBallot(m.B) + sizeTS(m.LTS) + sizeTS(m.GTS) + sizeTS(m.Prev) + sizeTS(m.Linf) + 1
			if m.M != nil {
				n += sizeAppMsg(m.M)
			}
			return n
		}
	case *Delivered:
		if m != nil {
			return n + sizeMsgID(m.ID) + uvarintLen(uint64(m.G)) + sizeTS(m.GTS) + uvarintLen(uint64(m.Leader)) +
				1 + uvarintLen(uint64(len(m.Result))) + len(m.Result)
		}
	case *NewLeader:
		if m != nil {
			return n + sizeBallot(m.B)
		}
	case *NewLeaderAck:
		if m != nil {
			return n + sizeBallot(m.B) + sizeBallot(m.CBallot) + uvarintLen(m.Clock) +
				sizeTS(m.MaxDelivered) + sizeTS(m.Linf) + sizeStates(m.State) + sizePaged(m.Paged)
		}
	case *NewState:
		if m != nil {
			return n + sizeBallot(m.B) + uvarintLen(m.Clock) + sizeStates(m.State) + sizePaged(m.Paged)
		}
	case *NewStateAck:
		if m != nil {
			return n + sizeBallot(m.B) + sizeTS(m.MaxDelivered)
		}
	case *Heartbeat:
		if m != nil {
			return n + sizeBallot(m.B) + sizeBallot(m.CBallot) + 1 + sizeTS(m.MaxDelivered) + sizeTS(m.Linf)
		}
	case *RecBallot:
		if m != nil {
			return n + sizeBallot(m.Ballot) + sizeBallot(m.CBallot)
		}
	case *RecAccepted:
		if m != nil {
			return n + sizeState(&m.S)
		}
	case *RecDelivered:
		if m != nil {
			return n + sizeAppMsg(&m.M) + sizeTS(m.LTS) + sizeTS(m.GTS)
		}
	case *RecNewState:
		if m != nil {
			return n + sizeBallot(m.B) + uvarintLen(m.Clock) + sizeStates(m.State) + sizePaged(m.Paged)
		}
	case *RecExpired:
		if m != nil {
			n += uvarintLen(uint64(len(m.Sessions)))
			for _, k := range m.Sessions {
				n += uvarintLen(uint64(k.Client)) + sessionLen(k.Session)
			}
			return n + sizeIDList(m.IDs)
		}
	case *RecCollected:
		if m != nil {
			return n + sizeIDList(m.IDs)
		}
	case *RecSnapshot:
		if m != nil {
			n += sizeBallot(m.Ballot) + sizeBallot(m.CBallot) + uvarintLen(m.Clock) + sizeTS(m.MaxDelivered) +
				sizeStates(m.Msgs) + uvarintLen(uint64(len(m.Delivered))) + len(m.Delivered) + uvarintLen(uint64(len(m.Done)))
			for _, c := range m.Done {
				n += uvarintLen(uint64(c.Client)) + sessionLen(c.Session) + uvarintLen(c.Floor) + uvarintLen(uint64(len(c.Collected)))
				for _, a := range c.Collected {
					n += uvarintLen(a.Seq) + len(a.Digest)
				}
			}
			return n
		}
	default:
		if m == nil {
			panic("wire: encoding a nil Message")
		}
		if b, ok := sizePaxos(m); ok {
			return n + b
		}
		if b, ok := sizeNodeMsg(m); ok {
			return n + b
		}
		if b, ok := sizeTransfer(m); ok {
			return n + b
		}
		if b, ok := sizeRead(m); ok {
			return n + b
		}
		if b, ok := sizeVote(m); ok {
			return n + b
		}
		if b, ok := sizeBatch(m); ok {
			return n + b
		}
		panic("wire: encoding unknown message type " + fmt.Sprintf("%T", m))
	}
	panic("wire: encoding a nil " + m.Kind().String() + " pointer")
}

// uvarintLen returns the length of the uvarint encoding of x.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

func sizeMsgID(id MsgID) int {
	return uvarintLen(uint64(id.Client)) + sessionLen(id.Session) + uvarintLen(id.Seq) + len(id.Digest)
}
func sizeTS(ts Timestamp) int { return uvarintLen(ts.T) + uvarintLen(uint64(ts.G)) }
func sizeBallot(b Ballot) int { return uvarintLen(uint64(b.N)) + uvarintLen(uint64(b.P)) }
func sizeAppMsg(m *AppMsg) int {
	n := sizeMsgID(m.ID) + uvarintLen(m.Floor) + uvarintLen(uint64(len(m.Dest)))
	for _, g := range m.Dest {
		n += uvarintLen(uint64(g))
	}
	return n + uvarintLen(uint64(len(m.Payload))) + len(m.Payload)
}

func sizeBallots(bs []Ballot) int {
	n := uvarintLen(uint64(len(bs)))
	for _, b := range bs {
		n += sizeBallot(b)
	}
	return n
}

func sizeState(s *MsgState) int {
	n := sizeAppMsg(&s.M) + 1 + sizeTS(s.LTS) + sizeTS(s.GTS) + sizeBallots(s.Ballots) + uvarintLen(uint64(len(s.LTSs)))
	for _, ts := range s.LTSs {
		n += sizeTS(ts)
	}
	return n
}

func sizeStates(ss []MsgState) int {
	n := uvarintLen(uint64(len(ss)))
	for i := range ss {
		n += sizeState(&ss[i])
	}
	return n
}

// SizeState returns the encoded size of s in a state list: what one more
// entry adds to a NEW_LEADER_ACK, NEW_STATE or REC_NEW_STATE (give or take
// the list's length prefix).
func SizeState(s *MsgState) int { return sizeState(s) }

func sizePaged(p Paged) int { return uvarintLen(uint64(p.Page)) + 1 }

func sessionLen(s SessionID) int { return uvarintLen(s.Hi) + uvarintLen(s.Lo) }
