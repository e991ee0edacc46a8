package wire

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Messages between a real node and its peers and clients that are not part
// of any multicast protocol: gossip membership frames, carried opaquely on
// the same connections as the protocol, the leader view a client asks any
// node for, and the node's answer to a MULTICAST it shed.

// Caps of this file's messages.
const (
	// MaxGossip is the largest gossip frame (membership's own cap is
	// lower; this bounds what a peer can make us buffer).
	MaxGossip = 4 << 20
	// MaxViewEntries is the most members a View lists.
	MaxViewEntries = 1 << 16
	// MaxAddr is the longest address in a View.
	MaxAddr = 255
)

// Gossip carries one encoded membership message (package membership's
// SYN, ACK or ACK2) between nodes. The wire package does not look inside.
type Gossip struct {
	Data []byte
}

// ViewRequest asks a node for its view of the cluster (answered with a
// View). A client sends it to any node it can reach.
type ViewRequest struct{}

// ViewEntry is one member as a node's gossip sees it.
type ViewEntry struct {
	ID     ProcID
	Group  GroupID
	Ballot Ballot // the member's ballot; Ballot.Leader() is who it follows
	Leader bool   // the member says it leads its group
	Alive  bool   // the answering node's failure detector judges it up
	Addr   string // where clients reach it
}

// View answers a ViewRequest: every member the node knows, sorted by ID.
type View struct {
	Entries []ViewEntry
}

// Overloaded tells a client that a node shed its MULTICAST of message ID
// unread: the node's client inbox was full (admission control). The client
// should back off before it sends more. The message may still be ordered
// if another copy of it got in (an earlier send, or another destination
// group's leader).
type Overloaded struct {
	ID MsgID
}

// Kind implementations.
func (*Gossip) Kind() Kind      { return KindGossip }
func (*ViewRequest) Kind() Kind { return KindViewRequest }
func (*View) Kind() Kind        { return KindView }
func (*Overloaded) Kind() Kind  { return KindOverloaded }

// minViewEntrySize is the smallest encoding of a ViewEntry: id, group,
// ballot (2), flags, address length.
const minViewEntrySize = 6

func appendNodeMsg(buf []byte, m Message) ([]byte, bool) {
	switch m := m.(type) {
	case *Gossip:
		buf = binary.AppendUvarint(buf, uint64(len(m.Data)))
		buf = append(buf, m.Data...)
	case *ViewRequest:
	case *View:
		buf = binary.AppendUvarint(buf, uint64(len(m.Entries)))
		for i := range m.Entries {
			e := &m.Entries[i]
			buf = binary.AppendUvarint(buf, uint64(e.ID))
			buf = binary.AppendUvarint(buf, uint64(e.Group))
			buf = appendBallot(buf, e.Ballot)
			var flags byte
			if e.Leader {
				flags |= 1
			}
			if e.Alive {
				flags |= 2
			}
			buf = append(buf, flags)
			buf = binary.AppendUvarint(buf, uint64(len(e.Addr)))
			buf = append(buf, e.Addr...)
		}
	case *Overloaded:
		buf = appendMsgID(buf, m.ID)
	default:
		return buf, false
	}
	return buf, true
}

func sizeNodeMsg(m Message) (n int, ok bool) {
	nilPtr := func() { panic("wire: encoding a nil " + m.Kind().String() + " pointer") }
	switch m := m.(type) {
	case *Gossip:
		if m == nil {
			nilPtr()
		}
		return uvarintLen(uint64(len(m.Data))) + len(m.Data), true
	case *ViewRequest:
		if m == nil {
			nilPtr()
		}
		return 0, true
	case *View:
		if m == nil {
			nilPtr()
		}
		n = uvarintLen(uint64(len(m.Entries)))
		for i := range m.Entries {
			e := &m.Entries[i]
			n += uvarintLen(uint64(e.ID)) + uvarintLen(uint64(e.Group)) + sizeBallot(e.Ballot) + 1 +
				uvarintLen(uint64(len(e.Addr))) + len(e.Addr)
		}
		return n, true
	case *Overloaded:
		if m == nil {
			nilPtr()
		}
		return sizeMsgID(m.ID), true
	}
	return 0, false
}

func (d *decoder) decodeNodeMsg() (m Message, ok bool) {
	switch d.kind {
	case KindGossip:
		x := new(Gossip)
		if n := d.count("data", MaxGossip, 1); n > 0 {
			x.Data = make([]byte, n)
			copy(x.Data, d.b[d.off:])
			d.off += n
		}
		return x, true
	case KindViewRequest:
		return new(ViewRequest), true
	case KindView:
		x := new(View)
		if n := d.count("entries", MaxViewEntries, minViewEntrySize); n > 0 {
			x.Entries = make([]ViewEntry, n)
			for i := range x.Entries {
				e := &x.Entries[i]
				start := d.off
				e.ID = ProcID(d.u32("entries.id"))
				if i > 0 && e.ID <= x.Entries[i-1].ID && d.err == nil {
					d.off = start
					d.fail(ErrMalformed, "entries.id", "ids not strictly increasing")
				}
				e.Group = GroupID(d.u32("entries.group"))
				e.Ballot = d.ballot("entries.ballot")
				flags := d.byte1("entries.flags")
				if flags > 3 && d.err == nil {
					d.off--
					d.fail(ErrMalformed, "entries.flags", fmt.Sprintf("unknown flag bits %#x", flags))
				}
				e.Leader, e.Alive = flags&1 != 0, flags&2 != 0
				if k := d.count("entries.addr", MaxAddr, 1); k > 0 {
					e.Addr = string(d.b[d.off : d.off+k])
					d.off += k
				}
			}
		}
		return x, true
	case KindOverloaded:
		return &Overloaded{ID: d.msgID("id")}, true
	}
	return nil, false
}

func describeNodeMsg(sb *strings.Builder, m Message) bool {
	switch m := m.(type) {
	case *Gossip:
		sb.WriteString(" ")
		sb.WriteString(strconv.Itoa(len(m.Data)))
		sb.WriteString("B")
	case *ViewRequest:
	case *View:
		for i := range m.Entries {
			e := &m.Entries[i]
			fmt.Fprintf(sb, " p%d:g%d:%s", e.ID, e.Group, e.Ballot)
			if e.Leader {
				sb.WriteString(":leader")
			}
			if !e.Alive {
				sb.WriteString(":down")
			}
			if e.Addr != "" {
				sb.WriteString("@")
				sb.WriteString(e.Addr)
			}
		}
	case *Overloaded:
		sb.WriteString(" ")
		sb.WriteString(m.ID.String())
	default:
		return false
	}
	return true
}

func isNilNodeMsg(m Message) bool {
	switch m := m.(type) {
	case *Gossip:
		return m == nil
	case *ViewRequest:
		return m == nil
	case *View:
		return m == nil
	case *Overloaded:
		return m == nil
	}
	return false
}
