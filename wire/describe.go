package wire

import (
	"fmt"
	"strconv"
	"strings"
)

// Describe renders m as one stable, compact line for logs and golden files:
// the kind name followed by the fields, e.g.
//
//	MULTICAST 7.1 dest=[0 2] payload="hello"
//	ACCEPT 7.1 dest=[0 2] g=0 b=0.p0 lts=3.g0
//	ACCEPT_ACK 7.1 g=2 B=[0.p0 1.p6] gts=3.g2
//	DELIVER 7.1 b=0.p0 lts=1.g0 gts=3.g2
//
// Payloads are quoted when short and printable and shown as a length
// ("payload=300B") otherwise; ACCEPT and message states omit them.
// max_delivered is shown as maxd= and omitted when it is ⊥.
// The format is for humans and tests; it is not parsed back.
func Describe(m Message) string {
	var sb strings.Builder
	describe(&sb, m)
	return sb.String()
}

// DescribeEnvelope renders e as "p<from>->p<to> " followed by Describe(e.Msg).
func DescribeEnvelope(e Envelope) string {
	var sb strings.Builder
	sb.WriteByte('p')
	sb.WriteString(strconv.FormatUint(uint64(e.From), 10))
	sb.WriteString("->p")
	sb.WriteString(strconv.FormatUint(uint64(e.To), 10))
	sb.WriteByte(' ')
	describe(&sb, e.Msg)
	return sb.String()
}

func describe(sb *strings.Builder, m Message) {
	if m == nil {
		sb.WriteString("<nil>")
		return
	}
	sb.WriteString(m.Kind().String())
	if isNilPtr(m) {
		sb.WriteString(" <nil>")
		return
	}
	switch m := m.(type) {
	case *Multicast:
		descAppMsg(sb, &m.M)
		descPayload(sb, m.M.Payload)
	case *Propose:
		descID(sb, m.ID)
		descGroup(sb, "g", m.G)
		descTS(sb, "lts", m.LTS)
	case *Accept:
		descAppMsg(sb, &m.M)
		descGroup(sb, "g", m.G)
		descBallot(sb, "b", m.B)
		descTS(sb, "lts", m.LTS)
		descOptTS(sb, "linf", m.Linf)
	case *AcceptAck:
		descID(sb, m.ID)
		descGroup(sb, "g", m.G)
		descBallots(sb, m.Ballots)
		descTS(sb, "gts", m.GTS)
		descOptTS(sb, "linf", m.Linf)
	case *Deliver:
		descID(sb, m.ID)
		descBallot(sb, "b", m.B)
		descTS(sb, "lts", m.LTS)
		descTS(sb, "gts", m.GTS)
		descOptTS(sb, "prev", m.Prev)
		descOptTS(sb, "linf", m.Linf)
		if m.M != nil {
			sb.WriteString(" +msg")
		}
	case *Delivered:
		descID(sb, m.ID)
		descGroup(sb, "g", m.G)
		descTS(sb, "gts", m.GTS)
		sb.WriteString(" leader=p")
		sb.WriteString(strconv.FormatUint(uint64(m.Leader), 10))
		if m.HasResult {
			sb.WriteString(" result=")
			sb.WriteString(strconv.Itoa(len(m.Result)))
			sb.WriteString("B")
		}
	case *NewLeader:
		descBallot(sb, "b", m.B)
	case *NewLeaderAck:
		descBallot(sb, "b", m.B)
		descBallot(sb, "cb", m.CBallot)
		descClock(sb, m.Clock)
		descMaxDelivered(sb, m.MaxDelivered)
		if !m.Linf.IsZero() {
			descTS(sb, "linf", m.Linf)
		}
		descStates(sb, m.State)
		descPaged(sb, m.Paged)
	case *NewState:
		descBallot(sb, "b", m.B)
		descClock(sb, m.Clock)
		descStates(sb, m.State)
		descPaged(sb, m.Paged)
	case *NewStateAck:
		descBallot(sb, "b", m.B)
		descMaxDelivered(sb, m.MaxDelivered)
	case *Heartbeat:
		descBallot(sb, "b", m.B)
		descBallot(sb, "cb", m.CBallot)
		sb.WriteString(" leader=")
		sb.WriteString(strconv.FormatBool(m.Leader))
		descMaxDelivered(sb, m.MaxDelivered)
		descOptTS(sb, "linf", m.Linf)
	case *RecBallot:
		descBallot(sb, "b", m.Ballot)
		descBallot(sb, "cb", m.CBallot)
	case *RecAccepted:
		sb.WriteByte(' ')
		descState(sb, &m.S)
	case *RecDelivered:
		descID(sb, m.M.ID)
		descTS(sb, "lts", m.LTS)
		descTS(sb, "gts", m.GTS)
	case *RecSnapshot:
		descBallot(sb, "b", m.Ballot)
		descBallot(sb, "cb", m.CBallot)
		descClock(sb, m.Clock)
		descMaxDelivered(sb, m.MaxDelivered)
		sb.WriteString(" msgs=")
		sb.WriteString(strconv.Itoa(len(m.Msgs)))
		sb.WriteString(" sessions=")
		sb.WriteString(strconv.Itoa(len(m.Done)))
	case *RecExpired:
		descList(sb, "sessions", m.Sessions)
		descList(sb, "ids", m.IDs)
	case *RecCollected:
		descList(sb, "ids", m.IDs)
	case *RecNewState:
		descBallot(sb, "b", m.B)
		descClock(sb, m.Clock)
		descStates(sb, m.State)
		descPaged(sb, m.Paged)
	default:
		if !describePaxos(sb, m) && !describeNodeMsg(sb, m) && !describeTransfer(sb, m) && !describeRead(sb, m) && !describeVote(sb, m) && !describeBatch(sb, m) {
			fmt.Fprintf(sb, " %T", m)
		}
	}
}

// isNilPtr reports whether m is a typed nil pointer of one of our types.
func isNilPtr(m Message) bool {
	switch m := m.(type) {
	case *Multicast:
		return m == nil
	case *Propose:
		return m == nil
	case *Accept:
		return m == nil
	case *AcceptAck:
		return m == nil
	case *Deliver:
		return m == nil
	case *Delivered:
		return m == nil
	case *NewLeader:
		return m == nil
	case *NewLeaderAck:
		return m == nil
	case *NewState:
		return m == nil
	case *NewStateAck:
		return m == nil
	case *Heartbeat:
		return m == nil
	case *RecBallot:
		return m == nil
	case *RecAccepted:
		return m == nil
	case *RecDelivered:
		return m == nil
	case *RecNewState:
		return m == nil
	case *RecCollected:
		return m == nil
	case *RecExpired:
		return m == nil
	case *RecSnapshot:
		return m == nil
	}
	return isNilPaxos(m) || isNilNodeMsg(m) || isNilTransfer(m) || isNilRead(m) || isNilVote(m) || isNilBatch(m)
}

func descID(sb *strings.Builder, id MsgID) {
	sb.WriteByte(' ')
	sb.WriteString(id.String())
}

func descGroup(sb *strings.Builder, name string, g GroupID) {
	sb.WriteByte(' ')
	sb.WriteString(name)
	sb.WriteByte('=')
	sb.WriteString(strconv.FormatUint(uint64(g), 10))
}

func descTS(sb *strings.Builder, name string, ts Timestamp) {
	sb.WriteByte(' ')
	sb.WriteString(name)
	sb.WriteByte('=')
	sb.WriteString(ts.String())
}

func descOptTS(sb *strings.Builder, name string, ts Timestamp) {
	if !ts.IsZero() {
		descTS(sb, name, ts)
	}
}

func descMaxDelivered(sb *strings.Builder, ts Timestamp) {
	if !ts.IsZero() {
		descTS(sb, "maxd", ts)
	}
}

func descBallot(sb *strings.Builder, name string, b Ballot) {
	sb.WriteByte(' ')
	sb.WriteString(name)
	sb.WriteByte('=')
	sb.WriteString(b.String())
}

func descClock(sb *strings.Builder, c uint64) {
	sb.WriteString(" clock=")
	sb.WriteString(strconv.FormatUint(c, 10))
}

func descBallots(sb *strings.Builder, bs []Ballot) {
	sb.WriteString(" B=[")
	for i, b := range bs {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(b.String())
	}
	sb.WriteByte(']')
}

// descAppMsg writes " <id> dest=[...]".
func descAppMsg(sb *strings.Builder, m *AppMsg) {
	descID(sb, m.ID)
	sb.WriteString(" dest=[")
	for i, g := range m.Dest {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(strconv.FormatUint(uint64(g), 10))
	}
	sb.WriteByte(']')
}

// maxQuotedPayload is the longest payload Describe shows verbatim.
const maxQuotedPayload = 16

func descPayload(sb *strings.Builder, p []byte) {
	sb.WriteString(" payload=")
	if len(p) > 0 && len(p) <= maxQuotedPayload && plainASCII(p) {
		sb.WriteByte('"')
		sb.Write(p)
		sb.WriteByte('"')
		return
	}
	sb.WriteString(strconv.Itoa(len(p)))
	sb.WriteByte('B')
}

// plainASCII reports whether p is printable ASCII needing no escapes.
func plainASCII(p []byte) bool {
	for _, c := range p {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// descState writes "{<id> <PHASE> dest=[...] lts=.. gts=.. B=[...]}" (no
// leading space).
func descState(sb *strings.Builder, s *MsgState) {
	sb.WriteByte('{')
	sb.WriteString(s.M.ID.String())
	sb.WriteByte(' ')
	sb.WriteString(s.Phase.String())
	sb.WriteString(" dest=[")
	for i, g := range s.M.Dest {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(strconv.FormatUint(uint64(g), 10))
	}
	sb.WriteByte(']')
	descTS(sb, "lts", s.LTS)
	descTS(sb, "gts", s.GTS)
	descBallots(sb, s.Ballots)
	sb.WriteByte('}')
}

func descStates(sb *strings.Builder, ss []MsgState) {
	sb.WriteString(" state=[")
	for i := range ss {
		if i > 0 {
			sb.WriteByte(' ')
		}
		descState(sb, &ss[i])
	}
	sb.WriteByte(']')
}

// descPaged names the page of a paged state; a whole state in one page (the
// zero Paged) prints nothing.
func descPaged(sb *strings.Builder, p Paged) {
	if p == (Paged{}) {
		return
	}
	sb.WriteString(" page=")
	sb.WriteString(strconv.FormatUint(uint64(p.Page), 10))
	if p.More {
		sb.WriteString(" more")
	}
}

// descList writes " name=[a b c]".
func descList[T fmt.Stringer](sb *strings.Builder, name string, xs []T) {
	sb.WriteString(" " + name + "=[")
	for i, x := range xs {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(x.String())
	}
	sb.WriteByte(']')
}
