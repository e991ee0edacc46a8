package wire

import (
	"encoding/binary"
	"strconv"
	"strings"
)

// Votes between groups (issue #12 item 3; rsm/exchange.go, node/votes.go).
//
// A replicated service whose command at one group depends on another
// group's state (a weft-kv transaction with a condition on one shard and
// writes on another) has each replica of each destination group send the
// replicas of the other destination groups its group's vote on the
// message, cast at the message's place in the order. A replica still
// missing a vote after a while asks for it again with VOTE_PULL.

// Vote (VOTE) is group G's vote on message ID, delivered at gts GTS (the
// same at every group). Vote is opaque to weft, at most MaxVote bytes.
type Vote struct {
	ID   MsgID
	GTS  Timestamp
	G    GroupID
	Vote []byte
}

// VotePull (VOTE_PULL) asks the receiver for group G's vote on message ID
// (at gts GTS); it answers with a VOTE if it holds it, and ignores the
// pull otherwise.
type VotePull struct {
	ID  MsgID
	GTS Timestamp
	G   GroupID
}

// Applied (APPLIED) tells the replicas of the other groups that the
// sender, a replica of group G, applied every delivery up to GTS: a
// replica keeps the votes of messages a destination group has not applied
// (a quorum of it) for that group's pulls (rsm.Driver.NoteApplied).
type Applied struct {
	G   GroupID
	GTS Timestamp
}

// MaxVote bounds Vote.Vote (rsm.MaxVote is the same).
const MaxVote = 64 << 10

// Kind implements Message.
func (*Vote) Kind() Kind     { return KindVote }
func (*VotePull) Kind() Kind { return KindVotePull }
func (*Applied) Kind() Kind  { return KindApplied }

func appendVote(buf []byte, m Message) ([]byte, bool) {
	switch m := m.(type) {
	case *Vote:
		buf = appendMsgID(buf, m.ID)
		buf = appendTS(buf, m.GTS)
		buf = binary.AppendUvarint(buf, uint64(m.G))
		buf = binary.AppendUvarint(buf, uint64(len(m.Vote)))
		buf = append(buf, m.Vote...)
	case *VotePull:
		buf = appendMsgID(buf, m.ID)
		buf = appendTS(buf, m.GTS)
		buf = binary.AppendUvarint(buf, uint64(m.G))
	case *Applied:
		buf = binary.AppendUvarint(buf, uint64(m.G))
		buf = appendTS(buf, m.GTS)
	default:
		return buf, false
	}
	return buf, true
}

func sizeVote(m Message) (n int, ok bool) {
	switch m := m.(type) {
	case *Vote:
		if m == nil {
			panic("wire: encoding a nil VOTE pointer")
		}
		return sizeMsgID(m.ID) + sizeTS(m.GTS) + uvarintLen(uint64(m.G)) + uvarintLen(uint64(len(m.Vote))) + len(m.Vote), true
	case *VotePull:
		if m == nil {
			panic("wire: encoding a nil VOTE_PULL pointer")
		}
		return sizeMsgID(m.ID) + sizeTS(m.GTS) + uvarintLen(uint64(m.G)), true
	case *Applied:
		if m == nil {
			panic("wire: encoding a nil APPLIED pointer")
		}
		return uvarintLen(uint64(m.G)) + sizeTS(m.GTS), true
	}
	return 0, false
}

func (d *decoder) decodeVote() (m Message, ok bool) {
	switch d.kind {
	case KindVote:
		x := new(Vote)
		x.ID = d.msgID("id")
		x.GTS = d.ts("gts")
		x.G = GroupID(d.u32("g"))
		x.Vote = d.blob("vote", MaxVote)
		return x, true
	case KindVotePull:
		x := new(VotePull)
		x.ID = d.msgID("id")
		x.GTS = d.ts("gts")
		x.G = GroupID(d.u32("g"))
		return x, true
	case KindApplied:
		x := new(Applied)
		x.G = GroupID(d.u32("g"))
		x.GTS = d.ts("gts")
		return x, true
	}
	return nil, false
}

func describeVote(sb *strings.Builder, m Message) bool {
	switch m := m.(type) {
	case *Vote:
		descID(sb, m.ID)
		descOptTS(sb, "gts", m.GTS)
		descGroup(sb, "g", m.G)
		sb.WriteString(" vote=")
		sb.WriteString(strconv.Itoa(len(m.Vote)))
		sb.WriteString("B")
	case *VotePull:
		descID(sb, m.ID)
		descOptTS(sb, "gts", m.GTS)
		descGroup(sb, "g", m.G)
	case *Applied:
		descGroup(sb, "g", m.G)
		descOptTS(sb, "gts", m.GTS)
	default:
		return false
	}
	return true
}

func isNilVote(m Message) bool {
	switch m := m.(type) {
	case *Vote:
		return m == nil
	case *Applied:
		return m == nil
	case *VotePull:
		return m == nil
	}
	return false
}
