package wire

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Reads without a multicast (issue #12 item 1; amcast/wbcast/readindex.go,
// node/reads.go, docs/reads.md).
//
// A client's READ goes to a group's leader, which obtains a read index: it
// records its last delivery, then confirms with one READ_INDEX round,
// acknowledged by a quorum of its group, that it still leads its ballot.
// Once its state machine has applied through the index it runs the query
// and answers with READ_REPLY. A local read (ReadLocal) is answered at once
// from whatever state the receiving replica holds.

// ReadIndex (READ_INDEX) is round Seq of a leader's read-index protocol,
// under its ballot B: the members of its group answer with READ_INDEX_ACK.
type ReadIndex struct {
	B   Ballot
	Seq uint64
}

// ReadIndexAck (READ_INDEX_ACK) answers round Seq: B is the ballot the
// member has joined (its promise). The leader counts it only if B is its
// own ballot; a higher B tells it that it was deposed.
type ReadIndexAck struct {
	B   Ballot
	Seq uint64
}

// ReadMode is the consistency a READ asks for.
type ReadMode uint8

// Read modes.
const (
	// ReadLinearizable is served by the group's leader through a read
	// index confirmed by a quorum.
	ReadLinearizable ReadMode = 1 + iota
	// ReadLocal is served by the receiving replica from its current state,
	// which may be stale; the reply's Index says how far it is.
	ReadLocal
	readModeEnd
)

var readModeNames = [readModeEnd]string{ReadLinearizable: "linearizable", ReadLocal: "local"}

func (m ReadMode) String() string { return enumName(readModeNames[:], m, "ReadMode") }

// enumName is names[v], or "typ(v)" for a value without a name.
func enumName[T ~uint8](names []string, v T, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}

// Read (READ) is a client's read-only query of group G's replicated state
// (the state machine's Query, package rsm). ID names the read: its Client
// is the process it must come from (nodes accept a READ only from the
// connection authenticated as ID.Client, like a MULTICAST), Session and Seq
// tell the client's reads apart; the Digest is unused (zero). Query is
// opaque to weft, at most MaxPayload bytes.
type Read struct {
	ID    MsgID
	G     GroupID
	Mode  ReadMode
	Query []byte
}

// ReadStatus is the outcome of a READ.
type ReadStatus uint8

// Read outcomes.
const (
	// ReadOK: Result is the query's result on the state at Index.
	ReadOK ReadStatus = iota
	// ReadNotLeader: the node does not lead G (or was deposed while
	// confirming); Leader is its hint of who does. The client retries there.
	ReadNotLeader
	// ReadOverloaded: the node holds too many pending reads (in all, or of
	// this client); back off.
	ReadOverloaded
	// ReadFailed: the read cannot be served here (the query failed, the
	// node runs no state machine that answers queries, or serves another
	// group); Err says why. Retrying does not help.
	ReadFailed
	readStatusEnd
)

var readStatusNames = [readStatusEnd]string{ReadOK: "OK", ReadNotLeader: "NOT_LEADER", ReadOverloaded: "OVERLOADED", ReadFailed: "FAILED"}

func (s ReadStatus) String() string { return enumName(readStatusNames[:], s, "ReadStatus") }

// ReadReply (READ_REPLY) answers a READ: the node's group G, the outcome,
// the applied position the query ran at (Index: the gts of the last
// delivery applied), the sender's view of G's leader, the result (at most
// MaxPayload bytes) or the reason of a failure (at most MaxReadErr bytes).
type ReadReply struct {
	ID     MsgID
	G      GroupID
	Status ReadStatus
	Index  Timestamp
	Leader ProcID
	Result []byte
	Err    string
}

// MaxReadErr bounds ReadReply.Err.
const MaxReadErr = 1 << 10

// Kind implements Message.
func (*ReadIndex) Kind() Kind    { return KindReadIndex }
func (*ReadIndexAck) Kind() Kind { return KindReadIndexAck }
func (*Read) Kind() Kind         { return KindRead }
func (*ReadReply) Kind() Kind    { return KindReadReply }

func appendRead(buf []byte, m Message) ([]byte, bool) {
	switch m := m.(type) {
	case *ReadIndex:
		buf = appendBallot(buf, m.B)
		buf = binary.AppendUvarint(buf, m.Seq)
	case *ReadIndexAck:
		buf = appendBallot(buf, m.B)
		buf = binary.AppendUvarint(buf, m.Seq)
	case *Read:
		buf = appendMsgID(buf, m.ID)
		buf = binary.AppendUvarint(buf, uint64(m.G))
		buf = append(buf, byte(m.Mode))
		buf = binary.AppendUvarint(buf, uint64(len(m.Query)))
		buf = append(buf, m.Query...)
	case *ReadReply:
		buf = appendMsgID(buf, m.ID)
		buf = binary.AppendUvarint(buf, uint64(m.G))
		buf = append(buf, byte(m.Status))
		buf = appendTS(buf, m.Index)
		buf = binary.AppendUvarint(buf, uint64(m.Leader))
		buf = binary.AppendUvarint(buf, uint64(len(m.Result)))
		buf = append(buf, m.Result...)
		buf = binary.AppendUvarint(buf, uint64(len(m.Err)))
		buf = append(buf, m.Err...)
	default:
		return buf, false
	}
	return buf, true
}

func sizeRead(m Message) (n int, ok bool) {
	nilPtr := func() { panic("wire: encoding a nil " + m.Kind().String() + " pointer") }
	switch m := m.(type) {
	case *ReadIndex:
		if m == nil {
			nilPtr()
		}
		return sizeBallot(m.B) + uvarintLen(m.Seq), true
	case *ReadIndexAck:
		if m == nil {
			nilPtr()
		}
		return sizeBallot(m.B) + uvarintLen(m.Seq), true
	case *Read:
		if m == nil {
			nilPtr()
		}
		return sizeMsgID(m.ID) + uvarintLen(uint64(m.G)) + 1 + uvarintLen(uint64(len(m.Query))) + len(m.Query), true
	case *ReadReply:
		if m == nil {
			nilPtr()
		}
		return sizeMsgID(m.ID) + uvarintLen(uint64(m.G)) + 1 + sizeTS(m.Index) + uvarintLen(uint64(m.Leader)) +
			uvarintLen(uint64(len(m.Result))) + len(m.Result) + uvarintLen(uint64(len(m.Err))) + len(m.Err), true
	}
	return 0, false
}

// blob decodes a length-prefixed byte string of at most limit bytes.
func (d *decoder) blob(field string, limit int) []byte {
	n := d.count(field, limit, 1)
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	d.off += copy(b, d.b[d.off:])
	return b
}

func (d *decoder) decodeRead() (m Message, ok bool) {
	switch d.kind {
	case KindReadIndex:
		return &ReadIndex{B: d.ballot("b"), Seq: d.uvarint("seq")}, true
	case KindReadIndexAck:
		return &ReadIndexAck{B: d.ballot("b"), Seq: d.uvarint("seq")}, true
	case KindRead:
		x := new(Read)
		x.ID = d.msgID("id")
		x.G = GroupID(d.u32("g"))
		x.Mode = ReadMode(d.byte1("mode"))
		if d.err == nil && (x.Mode == 0 || x.Mode >= readModeEnd) {
			d.fail(ErrMalformed, "mode", fmt.Sprintf("read mode %d", x.Mode))
		}
		x.Query = d.blob("query", MaxPayload)
		return x, true
	case KindReadReply:
		x := new(ReadReply)
		x.ID = d.msgID("id")
		x.G = GroupID(d.u32("g"))
		x.Status = ReadStatus(d.byte1("status"))
		if d.err == nil && x.Status >= readStatusEnd {
			d.fail(ErrMalformed, "status", fmt.Sprintf("read status %d", x.Status))
		}
		x.Index = d.ts("index")
		x.Leader = ProcID(d.u32("leader"))
		x.Result = d.blob("result", MaxPayload)
		x.Err = string(d.blob("err", MaxReadErr))
		return x, true
	}
	return nil, false
}

func describeRead(sb *strings.Builder, m Message) bool {
	switch m := m.(type) {
	case *ReadIndex:
		descBallot(sb, "b", m.B)
		sb.WriteString(" seq=")
		sb.WriteString(strconv.FormatUint(m.Seq, 10))
	case *ReadIndexAck:
		descBallot(sb, "b", m.B)
		sb.WriteString(" seq=")
		sb.WriteString(strconv.FormatUint(m.Seq, 10))
	case *Read:
		descID(sb, m.ID)
		descGroup(sb, "g", m.G)
		sb.WriteString(" mode=")
		sb.WriteString(m.Mode.String())
		sb.WriteString(" query=")
		sb.WriteString(strconv.Itoa(len(m.Query)))
		sb.WriteString("B")
	case *ReadReply:
		descID(sb, m.ID)
		descGroup(sb, "g", m.G)
		sb.WriteString(" ")
		sb.WriteString(m.Status.String())
		descOptTS(sb, "index", m.Index)
		fmt.Fprintf(sb, " leader=p%d", m.Leader)
		if len(m.Result) > 0 {
			sb.WriteString(" result=")
			sb.WriteString(strconv.Itoa(len(m.Result)))
			sb.WriteString("B")
		}
		if m.Err != "" {
			sb.WriteString(" err=")
			sb.WriteString(strconv.Quote(m.Err))
		}
	default:
		return false
	}
	return true
}

func isNilRead(m Message) bool {
	switch m := m.(type) {
	case *ReadIndex:
		return m == nil
	case *ReadIndexAck:
		return m == nil
	case *Read:
		return m == nil
	case *ReadReply:
		return m == nil
	}
	return false
}
