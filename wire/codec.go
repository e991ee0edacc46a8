package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Encoding
//
// Every message and record is encoded as
//
//	byte 0   wire version (Version)
//	byte 1   Kind
//	body     the fields in declaration order
//
// Integers (ids, sequence numbers, timestamps, ballots, clocks, counts) are
// minimal uvarints (encoding/binary). Byte strings and lists are prefixed
// with their length as a uvarint. Phase is one byte, bool is one byte (0 or
// 1). Composite fields are flattened:
//
//	MsgID     Client Session Seq Digest(16 bytes)
//	Session   Hi Lo
//	Timestamp T G
//	Ballot    N P
//	AppMsg    ID Floor len(Dest) Dest... len(Payload) Payload
//	MsgState  M Phase LTS GTS len(Ballots) Ballots...
//	Paged     Page More
//
// The encoding is canonical: Decode accepts exactly the byte strings that
// Append produces (minimal varints, 32-bit fields in range, Dest strictly
// increasing, no trailing bytes), so Append(nil, Decode(b)) == b whenever
// Decode succeeds. Empty slices decode as nil.

// Version is the wire format version, byte 0 of every encoding.
//
// Version 2: MsgID gained Session and AppMsg gained Floor (client sessions).
// Version 3: MsgID gained Digest (a message's identity is its content).
// Version 4: NEW_LEADER_ACK gained Linf; SNAPSHOT, REJOIN and REC_INSTALL
// (state transfer).
// Version 5: a session is 128 bits (two uvarints, SessionID).
// Version 6: REC_COLLECTED's and REC_EXPIRED's ids are in runs of one
// session (idlist.go).
// New kinds are appended without a new version (HAND_OVER, READ, VOTE,
// BATCH, ...): every earlier encoding still decodes the same.
const Version = 6

// Size caps enforced by Decode before it allocates anything.
const (
	// MaxPayload is the largest application payload, in bytes.
	MaxPayload = 1 << 20
	// MaxGroups is the largest number of entries in a Dest or ballot vector.
	MaxGroups = 1024
	// MaxStateEntries is the largest number of MsgStates in one message.
	MaxStateEntries = 1 << 20
)

// DefaultMaxFrame is the largest encoded message the transport carries by
// default (transport.DefaultMaxFrame) and the simulator lets through
// (sim.Config.MaxFrame): protocols keep every message under it, splitting
// large states into pages (Paged) under a smaller byte budget. It leaves
// room for the largest payload (MaxPayload) with its metadata.
const DefaultMaxFrame = 4 << 20

// Minimum encoded sizes of list elements, used to bound counts by the
// remaining input before allocating.
const (
	minGroupSize    = 1  // one uvarint
	minBallotSize   = 2  // N P
	minMsgStateSize = 29 // AppMsg(22) Phase(1) LTS(2) GTS(2) len(Ballots)(1) len(LTSs)(1)
	minTSSize       = 2  // T G
)

// Decode errors. Decode wraps them with the kind and field at fault; test
// with errors.Is.
var (
	// ErrVersion reports an unsupported wire version byte.
	ErrVersion = errors.New("wire: unsupported version")
	// ErrUnknownKind reports an unknown kind byte.
	ErrUnknownKind = errors.New("wire: unknown kind")
	// ErrMalformed reports input that is not a valid encoding: truncated,
	// a bad or non-minimal varint, a value out of range, trailing bytes,
	// unsorted or duplicate Dest groups, an invalid Phase or bool.
	ErrMalformed = errors.New("wire: malformed message")
	// ErrTooLarge reports a payload or list longer than its cap.
	ErrTooLarge = errors.New("wire: message too large")
)

// appendRoom: Append sizes a message first only when buf has less room.
const appendRoom = 4 << 10

// Append appends the encoding of m to buf and returns the extended buffer.
// It panics if m is nil or not one of the types in this package, which is a
// programming error. Append does not enforce the size caps; Decode does.
func Append(buf []byte, m Message) []byte {
	// Sized up front only into a buffer with little room left: sizing is
	// a second pass over the message, and the buffers messages go into
	// (the log's, a peer's frames) usually have room (wire.Size was 2.7%
	// of a loaded agent's CPU, two fifths of it here). A message larger
	// than the room grows the buffer by append's doubling.
	if cap(buf)-len(buf) < appendRoom {
		buf = slices.Grow(buf, Size(m))
	}
	buf = append(buf, Version, byte(m.Kind()))
	switch m := m.(type) {
	case *Multicast:
		buf = appendAppMsg(buf, &m.M)
	case *Propose:
		buf = appendMsgID(buf, m.ID)
		buf = binary.AppendUvarint(buf, uint64(m.G))
		buf = appendTS(buf, m.LTS)
	case *Accept:
		buf = appendAppMsg(buf, &m.M)
		buf = binary.AppendUvarint(buf, uint64(m.G))
		buf = appendBallot(buf, m.B)
		buf = appendTS(buf, m.LTS)
		buf = appendTS(buf, m.Linf)
	case *AcceptAck:
		buf = appendMsgID(buf, m.ID)
		buf = binary.AppendUvarint(buf, uint64(m.G))
		buf = appendBallots(buf, m.Ballots)
		buf = appendTS(buf, m.GTS)
		buf = appendTS(buf, m.Linf)
	case *Deliver:
		buf = appendMsgID(buf, m.ID)
		buf = appendBallot(buf, m.B)
		buf = appendTS(buf, m.LTS)
		buf = appendTS(buf, m.GTS)
		buf = appendTS(buf, m.Prev)
		buf = appendTS(buf, m.Linf)
		buf = appendBool(buf, m.M != nil)
		if m.M != nil {
			buf = appendAppMsg(buf, m.M)
		}
	case *Delivered:
		buf = appendMsgID(buf, m.ID)
		buf = binary.AppendUvarint(buf, uint64(m.G))
		buf = appendTS(buf, m.GTS)
		buf = binary.AppendUvarint(buf, uint64(m.Leader))
		buf = appendBool(buf, m.HasResult)
		buf = binary.AppendUvarint(buf, uint64(len(m.Result)))
		buf = append(buf, m.Result...)
	case *NewLeader:
		buf = appendBallot(buf, m.B)
	case *NewLeaderAck:
		buf = appendBallot(buf, m.B)
		buf = appendBallot(buf, m.CBallot)
		buf = binary.AppendUvarint(buf, m.Clock)
		buf = appendTS(buf, m.MaxDelivered)
		buf = appendTS(buf, m.Linf)
		buf = appendStates(buf, m.State)
		buf = appendPaged(buf, m.Paged)
	case *NewState:
		buf = appendBallot(buf, m.B)
		buf = binary.AppendUvarint(buf, m.Clock)
		buf = appendStates(buf, m.State)
		buf = appendPaged(buf, m.Paged)
	case *NewStateAck:
		buf = appendBallot(buf, m.B)
		buf = appendTS(buf, m.MaxDelivered)
	case *Heartbeat:
		buf = appendBallot(buf, m.B)
		buf = appendBallot(buf, m.CBallot)
		buf = appendBool(buf, m.Leader)
		buf = appendTS(buf, m.MaxDelivered)
		buf = appendTS(buf, m.Linf)
	case *RecBallot:
		buf = appendBallot(buf, m.Ballot)
		buf = appendBallot(buf, m.CBallot)
	case *RecAccepted:
		buf = appendState(buf, &m.S)
	case *RecDelivered:
		buf = appendAppMsg(buf, &m.M)
		buf = appendTS(buf, m.LTS)
		buf = appendTS(buf, m.GTS)
	case *RecNewState:
		buf = appendBallot(buf, m.B)
		buf = binary.AppendUvarint(buf, m.Clock)
		buf = appendStates(buf, m.State)
		buf = appendPaged(buf, m.Paged)
	case *RecCollected:
		buf = appendIDList(buf, m.IDs)
	case *RecExpired:
		buf = binary.AppendUvarint(buf, uint64(len(m.Sessions)))
		for _, k := range m.Sessions {
			buf = binary.AppendUvarint(buf, uint64(k.Client))
			buf = appendSession(buf, k.Session)
		}
		buf = appendIDList(buf, m.IDs)
	case *RecSnapshot:
		buf = appendBallot(buf, m.Ballot)
		buf = appendBallot(buf, m.CBallot)
		buf = binary.AppendUvarint(buf, m.Clock)
		buf = appendTS(buf, m.MaxDelivered)
		buf = appendStates(buf, m.Msgs)
		buf = binary.AppendUvarint(buf, uint64(len(m.Delivered)))
		for _, d := range m.Delivered {
			buf = appendBool(buf, d)
		}
		buf = binary.AppendUvarint(buf, uint64(len(m.Done)))
		for _, c := range m.Done {
			buf = binary.AppendUvarint(buf, uint64(c.Client))
			buf = appendSession(buf, c.Session)
			buf = binary.AppendUvarint(buf, c.Floor)
			buf = binary.AppendUvarint(buf, uint64(len(c.Collected)))
			for _, a := range c.Collected {
				buf = binary.AppendUvarint(buf, a.Seq)
				buf = append(buf, a.Digest[:]...)
			}
		}
	default:
		var ok bool
		if buf, ok = appendPaxos(buf, m); !ok {
			if buf, ok = appendNodeMsg(buf, m); !ok {
				if buf, ok = appendTransfer(buf, m); !ok {
					if buf, ok = appendRead(buf, m); !ok {
						if buf, ok = appendVote(buf, m); !ok {
							buf, _ = appendBatch(buf, m)
						}
					}
				}
			}
		}
	}
	return buf
}

func appendMsgID(buf []byte, id MsgID) []byte {
	buf = binary.AppendUvarint(buf, uint64(id.Client))
	buf = appendSession(buf, id.Session)
	buf = binary.AppendUvarint(buf, id.Seq)
	return append(buf, id.Digest[:]...)
}

func appendSession(buf []byte, s SessionID) []byte {
	buf = binary.AppendUvarint(buf, s.Hi)
	return binary.AppendUvarint(buf, s.Lo)
}

func appendTS(buf []byte, ts Timestamp) []byte {
	buf = binary.AppendUvarint(buf, ts.T)
	return binary.AppendUvarint(buf, uint64(ts.G))
}

func appendBallot(buf []byte, b Ballot) []byte {
	buf = binary.AppendUvarint(buf, uint64(b.N))
	return binary.AppendUvarint(buf, uint64(b.P))
}

func appendBool(buf []byte, v bool) []byte {
	if v {
		return append(buf, 1)
	}
	return append(buf, 0)
}

func appendAppMsg(buf []byte, m *AppMsg) []byte {
	buf = appendMsgID(buf, m.ID)
	buf = binary.AppendUvarint(buf, m.Floor)
	buf = binary.AppendUvarint(buf, uint64(len(m.Dest)))
	for _, g := range m.Dest {
		buf = binary.AppendUvarint(buf, uint64(g))
	}
	buf = binary.AppendUvarint(buf, uint64(len(m.Payload)))
	return append(buf, m.Payload...)
}

func appendBallots(buf []byte, bs []Ballot) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(bs)))
	for _, b := range bs {
		buf = appendBallot(buf, b)
	}
	return buf
}

func appendState(buf []byte, s *MsgState) []byte {
	buf = appendAppMsg(buf, &s.M)
	buf = append(buf, byte(s.Phase))
	buf = appendTS(buf, s.LTS)
	buf = appendTS(buf, s.GTS)
	buf = appendBallots(buf, s.Ballots)
	buf = binary.AppendUvarint(buf, uint64(len(s.LTSs)))
	for _, ts := range s.LTSs {
		buf = appendTS(buf, ts)
	}
	return buf
}

func appendStates(buf []byte, ss []MsgState) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(ss)))
	for i := range ss {
		buf = appendState(buf, &ss[i])
	}
	return buf
}

func appendPaged(buf []byte, p Paged) []byte {
	buf = binary.AppendUvarint(buf, uint64(p.Page))
	return appendBool(buf, p.More)
}

// Decode decodes one message or record encoded by Append. The result is a
// pointer type (*Accept, *RecBallot, ...) that shares no memory with b.
// Errors wrap ErrVersion, ErrUnknownKind, ErrMalformed or ErrTooLarge.
func Decode(b []byte) (Message, error) {
	return decode(b, nil)
}

// DecodeReusing decodes b as Decode does, except that a REC_SNAPSHOT's
// collected ids are carved out of ids (from its length on; a new array,
// without ids' content, when it is too short) instead of allocated per
// session; it returns the array up to what was carved, for the next call.
// The message shares that array: a caller that passes it again as ids[:0]
// overwrites the message's ids. For a
// compaction's check, which decodes each page of a snapshot as it is
// written and drops it (a million ids were 24 MB of garbage per
// compaction).
func DecodeReusing(b []byte, ids []SeqDigest) (Message, []SeqDigest, error) {
	m, err := decode(b, &ids)
	return m, ids, err
}

func decode(b []byte, ids *[]SeqDigest) (Message, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty input", ErrMalformed)
	}
	if b[0] != Version {
		return nil, fmt.Errorf("%w: version byte %d, want %d", ErrVersion, b[0], Version)
	}
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: truncated input: missing kind byte", ErrMalformed)
	}
	d := decoder{b: b, off: 2, kind: Kind(b[1]), ids: ids}
	var m Message
	switch d.kind {
	case KindMulticast:
		box := new(struct {
			Multicast
			dest [inlineDest]GroupID
		})
		x := &box.Multicast
		d.ctx = "m"
		d.appMsg(&x.M, box.dest[:])
		d.ctx = ""
		m = x
	case KindPropose:
		x := new(Propose)
		x.ID = d.msgID("id")
		x.G = GroupID(d.u32("g"))
		x.LTS = d.ts("lts")
		m = x
	case KindAccept:
		box := new(struct {
			Accept
			dest [inlineDest]GroupID
		})
		x := &box.Accept
		d.ctx = "m"
		d.appMsg(&x.M, box.dest[:])
		d.ctx = ""
		x.G = GroupID(d.u32("g"))
		x.B = d.ballot("b")
		x.LTS = d.ts("lts")
		x.Linf = d.ts("linf")
		m = x
	case KindAcceptAck:
		box := new(struct {
			AcceptAck
			ballots [inlineDest]Ballot
		})
		x := &box.AcceptAck
		x.ID = d.msgID("id")
		x.G = GroupID(d.u32("g"))
		x.Ballots = d.ballotsInto("ballots", box.ballots[:])
		x.GTS = d.ts("gts")
		x.Linf = d.ts("linf")
		m = x
	case KindDeliver:
		x := new(Deliver)
		x.ID = d.msgID("id")
		x.B = d.ballot("b")
		x.LTS = d.ts("lts")
		x.GTS = d.ts("gts")
		x.Prev = d.ts("prev")
		x.Linf = d.ts("linf")
		if d.bool("has_m") {
			x.M = new(AppMsg)
			d.ctx = "m"
			d.appMsg(x.M, nil)
			d.ctx = ""
		}
		m = x
	case KindDelivered:
		x := new(Delivered)
		x.ID = d.msgID("id")
		x.G = GroupID(d.u32("g"))
		x.GTS = d.ts("gts")
		x.Leader = ProcID(d.u32("leader"))
		x.HasResult = d.bool("has_result")
		if n := d.count("result", MaxPayload, 1); n > 0 {
			x.Result = make([]byte, n)
			copy(x.Result, d.b[d.off:])
			d.off += n
		}
		m = x
	case KindNewLeader:
		x := new(NewLeader)
		x.B = d.ballot("b")
		m = x
	case KindNewLeaderAck:
		x := new(NewLeaderAck)
		x.B = d.ballot("b")
		x.CBallot = d.ballot("cballot")
		x.Clock = d.uvarint("clock")
		x.MaxDelivered = d.ts("max_delivered")
		x.Linf = d.ts("linf")
		x.State = d.states()
		x.Paged = d.paged()
		m = x
	case KindNewState:
		x := new(NewState)
		x.B = d.ballot("b")
		x.Clock = d.uvarint("clock")
		x.State = d.states()
		x.Paged = d.paged()
		m = x
	case KindNewStateAck:
		x := new(NewStateAck)
		x.B = d.ballot("b")
		x.MaxDelivered = d.ts("max_delivered")
		m = x
	case KindHeartbeat:
		x := new(Heartbeat)
		x.B = d.ballot("b")
		x.CBallot = d.ballot("cballot")
		x.Leader = d.bool("leader")
		x.MaxDelivered = d.ts("max_delivered")
		x.Linf = d.ts("linf")
		m = x
	case KindRecBallot:
		x := new(RecBallot)
		x.Ballot = d.ballot("ballot")
		x.CBallot = d.ballot("cballot")
		m = x
	case KindRecAccepted:
		x := new(RecAccepted)
		d.state(&x.S, "s", "s.m")
		m = x
	case KindRecDelivered:
		x := new(RecDelivered)
		d.ctx = "m"
		d.appMsg(&x.M, nil)
		d.ctx = ""
		x.LTS = d.ts("lts")
		x.GTS = d.ts("gts")
		m = x
	case KindRecNewState:
		x := new(RecNewState)
		x.B = d.ballot("b")
		x.Clock = d.uvarint("clock")
		x.State = d.states()
		x.Paged = d.paged()
		m = x
	case KindRecSnapshot:
		x := new(RecSnapshot)
		x.Ballot = d.ballot("ballot")
		x.CBallot = d.ballot("cballot")
		x.Clock = d.uvarint("clock")
		x.MaxDelivered = d.ts("max_delivered")
		x.Msgs = d.states()
		if n := d.count("delivered", MaxStateEntries, 1); n > 0 {
			x.Delivered = make([]bool, n)
			for i := range x.Delivered {
				x.Delivered[i] = d.bool("delivered")
			}
		}
		if n := d.count("done", MaxStateEntries, 5); n > 0 {
			x.Done = make([]ClientDone, n)
			for i := range x.Done {
				c := &x.Done[i]
				c.Client = ProcID(d.u32("done.client"))
				c.Session = d.session("done.session")
				c.Floor = d.uvarint("done.floor")
				if k := d.count("done.collected", MaxStateEntries, 1+len(Digest{})); k > 0 {
					c.Collected = d.collected(k)
					d.seqDigests(c.Collected, "done.collected")
				}
			}
		}
		m = x
	case KindRecCollected:
		m = &RecCollected{IDs: d.idList("ids")}
	case KindRecExpired:
		x := new(RecExpired)
		if n := d.count("sessions", MaxStateEntries, 3); n > 0 {
			x.Sessions = make([]SessionKey, n)
			for i := range x.Sessions {
				x.Sessions[i] = SessionKey{Client: ProcID(d.u32("sessions.client")), Session: d.session("sessions.session")}
			}
		}
		x.IDs = d.idList("ids")
		m = x
	default:
		x, ok := d.decodePaxos()
		if !ok {
			x, ok = d.decodeNodeMsg()
		}
		if !ok {
			x, ok = d.decodeTransfer()
		}
		if !ok {
			x, ok = d.decodeRead()
		}
		if !ok {
			x, ok = d.decodeVote()
		}
		if !ok {
			x, ok = d.decodeBatch()
		}
		if !ok {
			return nil, fmt.Errorf("%w: kind byte %d", ErrUnknownKind, b[1])
		}
		m = x
	}
	if d.err == nil && d.off != len(b) {
		d.fail(ErrMalformed, "", fmt.Sprintf("%d trailing bytes", len(b)-d.off))
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}
