package wire

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Messages and records of the baselines that replicate each group with
// Multi-Paxos (FT-Skeen, FastCast): the per-group log, its phase 1 and 2
// messages, catch-up and heartbeats, and FastCast's timestamp exchange.
// FT-Skeen's leaders exchange local timestamps with Skeen's PROPOSE.

// CmdOp is the operation of a replicated-log command.
type CmdOp uint8

// Log command operations.
const (
	// CmdNoop fills a log slot a new leader found empty.
	CmdNoop CmdOp = iota
	// CmdAssign gives a message its local timestamp in the group.
	CmdAssign
	// CmdFinal fixes a message's global timestamp in the group.
	CmdFinal
	cmdOpEnd
)

func (o CmdOp) String() string {
	switch o {
	case CmdNoop:
		return "NOOP"
	case CmdAssign:
		return "ASSIGN"
	case CmdFinal:
		return "FINAL"
	}
	return fmt.Sprintf("CmdOp(%d)", uint8(o))
}

// Command is one entry of a group's replicated log.
//
//	NOOP                  M and TS are empty
//	ASSIGN(m [, lts])     M is the message with its payload; TS is the local
//	                      timestamp the leader chose (FastCast) or ⊥ (FT-Skeen,
//	                      where executing the command assigns clock+1)
//	FINAL(m, gts)         M carries the id and destinations (no payload); TS is
//	                      the global timestamp
type Command struct {
	Op CmdOp
	M  AppMsg
	TS Timestamp
}

// LogEntry is one slot of a log as reported in a promise: the value
// accepted with ballot B, or, when Decided, the value chosen for the slot.
type LogEntry struct {
	Slot    uint64
	B       Ballot
	Decided bool
	Cmd     Command
}

// PaxosPrepare (phase 1a) asks the members of a group to join ballot B and
// report what they accepted at slots From and above.
type PaxosPrepare struct {
	B    Ballot
	From uint64
}

// PaxosPromise (phase 1b) is a member's promise for ballot B: Executed is
// the first slot it has not executed; Entries are its accepted (or known
// decided) values at the slots the candidate asked for.
type PaxosPromise struct {
	B        Ballot
	Executed uint64
	Entries  []LogEntry
}

// PaxosAccept (phase 2a) is the leader of ballot B proposing Cmd at Slot.
// It is also the leader's own vote.
type PaxosAccept struct {
	B    Ballot
	Slot uint64
	Cmd  Command
}

// PaxosAccepted (phase 2b) is a member's vote for ballot B's value at Slot,
// sent to every member of the group.
type PaxosAccepted struct {
	B    Ballot
	Slot uint64
}

// PaxosDecided carries the values chosen at slots First, First+1, ... to a
// member that is behind (catch-up).
type PaxosDecided struct {
	First uint64
	Cmds  []Command
}

// PaxosHeartbeat is a liveness beacon between members of a group. B is the
// sender's ballot and Leader whether it leads it; Executed is the first
// slot the sender has not executed. A leader's Commit says every slot below
// it is decided: a member that accepted ballot B's value at such a slot may
// take it as chosen.
type PaxosHeartbeat struct {
	B        Ballot
	Leader   bool
	Executed uint64
	Commit   uint64
}

// SoftTS (FastCast SEND-SOFT) is the local timestamp the leader of group G
// proposed for message ID, sent before it is chosen.
type SoftTS struct {
	ID  MsgID
	G   GroupID
	LTS Timestamp
}

// HardTS (FastCast SEND-HARD) is group G's chosen local timestamp for ID.
type HardTS struct {
	ID  MsgID
	G   GroupID
	LTS Timestamp
}

// RecSlotAccepted records that the process accepted Cmd at Slot with ballot
// B. It must be durable before the vote (or the leader's proposal) is sent.
type RecSlotAccepted struct {
	B    Ballot
	Slot uint64
	Cmd  Command
}

// RecSlotDecided records that Cmd was chosen at Slot (the process learned
// it); restarts re-execute the chosen prefix of the log from these.
type RecSlotDecided struct {
	Slot uint64
	Cmd  Command
}

// Kind implementations.
func (*PaxosPrepare) Kind() Kind    { return KindPaxosPrepare }
func (*PaxosPromise) Kind() Kind    { return KindPaxosPromise }
func (*PaxosAccept) Kind() Kind     { return KindPaxosAccept }
func (*PaxosAccepted) Kind() Kind   { return KindPaxosAccepted }
func (*PaxosDecided) Kind() Kind    { return KindPaxosDecided }
func (*PaxosHeartbeat) Kind() Kind  { return KindPaxosHeartbeat }
func (*SoftTS) Kind() Kind          { return KindSoftTS }
func (*HardTS) Kind() Kind          { return KindHardTS }
func (*RecSlotAccepted) Kind() Kind { return KindRecSlotAccepted }
func (*RecSlotDecided) Kind() Kind  { return KindRecSlotDecided }

// Encoding (see codec.go for the conventions):
//
//	Command   Op(1 byte) AppMsg TS
//	LogEntry  Slot Ballot Decided(bool) Command

const (
	minCommandSize  = 9  // Op(1) AppMsg(6) TS(2)
	minLogEntrySize = 11 // Slot(1) Ballot(2) bool(1) Command(7)
)

func appendCommand(buf []byte, c *Command) []byte {
	buf = append(buf, byte(c.Op))
	buf = appendAppMsg(buf, &c.M)
	return appendTS(buf, c.TS)
}

func sizeCommand(c *Command) int { return 1 + sizeAppMsg(&c.M) + sizeTS(c.TS) }

// appendPaxos appends the body of one of this file's messages; ok is false
// for other types.
func appendPaxos(buf []byte, m Message) ([]byte, bool) {
	switch m := m.(type) {
	case *PaxosPrepare:
		buf = appendBallot(buf, m.B)
		buf = binary.AppendUvarint(buf, m.From)
	case *PaxosPromise:
		buf = appendBallot(buf, m.B)
		buf = binary.AppendUvarint(buf, m.Executed)
		buf = binary.AppendUvarint(buf, uint64(len(m.Entries)))
		for i := range m.Entries {
			e := &m.Entries[i]
			buf = binary.AppendUvarint(buf, e.Slot)
			buf = appendBallot(buf, e.B)
			buf = appendBool(buf, e.Decided)
			buf = appendCommand(buf, &e.Cmd)
		}
	case *PaxosAccept:
		buf = appendBallot(buf, m.B)
		buf = binary.AppendUvarint(buf, m.Slot)
		buf = appendCommand(buf, &m.Cmd)
	case *PaxosAccepted:
		buf = appendBallot(buf, m.B)
		buf = binary.AppendUvarint(buf, m.Slot)
	case *PaxosDecided:
		buf = binary.AppendUvarint(buf, m.First)
		buf = binary.AppendUvarint(buf, uint64(len(m.Cmds)))
		for i := range m.Cmds {
			buf = appendCommand(buf, &m.Cmds[i])
		}
	case *PaxosHeartbeat:
		buf = appendBallot(buf, m.B)
		buf = appendBool(buf, m.Leader)
		buf = binary.AppendUvarint(buf, m.Executed)
		buf = binary.AppendUvarint(buf, m.Commit)
	case *SoftTS:
		buf = appendMsgID(buf, m.ID)
		buf = binary.AppendUvarint(buf, uint64(m.G))
		buf = appendTS(buf, m.LTS)
	case *HardTS:
		buf = appendMsgID(buf, m.ID)
		buf = binary.AppendUvarint(buf, uint64(m.G))
		buf = appendTS(buf, m.LTS)
	case *RecSlotAccepted:
		buf = appendBallot(buf, m.B)
		buf = binary.AppendUvarint(buf, m.Slot)
		buf = appendCommand(buf, &m.Cmd)
	case *RecSlotDecided:
		buf = binary.AppendUvarint(buf, m.Slot)
		buf = appendCommand(buf, &m.Cmd)
	default:
		return buf, false
	}
	return buf, true
}

// sizePaxos returns the body size of one of this file's messages (without
// the version and kind bytes); ok is false for other types. It panics on a
// nil pointer.
func sizePaxos(m Message) (n int, ok bool) {
	nilPtr := func() { panic("wire: encoding a nil " + m.Kind().String() + " pointer") }
	switch m := m.(type) {
	case *PaxosPrepare:
		if m == nil {
			nilPtr()
		}
		return sizeBallot(m.B) + uvarintLen(m.From), true
	case *PaxosPromise:
		if m == nil {
			nilPtr()
		}
		n = sizeBallot(m.B) + uvarintLen(m.Executed) + uvarintLen(uint64(len(m.Entries)))
		for i := range m.Entries {
			e := &m.Entries[i]
			n += uvarintLen(e.Slot) + sizeBallot(e.B) + 1 + sizeCommand(&e.Cmd)
		}
		return n, true
	case *PaxosAccept:
		if m == nil {
			nilPtr()
		}
		return sizeBallot(m.B) + uvarintLen(m.Slot) + sizeCommand(&m.Cmd), true
	case *PaxosAccepted:
		if m == nil {
			nilPtr()
		}
		return sizeBallot(m.B) + uvarintLen(m.Slot), true
	case *PaxosDecided:
		if m == nil {
			nilPtr()
		}
		n = uvarintLen(m.First) + uvarintLen(uint64(len(m.Cmds)))
		for i := range m.Cmds {
			n += sizeCommand(&m.Cmds[i])
		}
		return n, true
	case *PaxosHeartbeat:
		if m == nil {
			nilPtr()
		}
		return sizeBallot(m.B) + 1 + uvarintLen(m.Executed) + uvarintLen(m.Commit), true
	case *SoftTS:
		if m == nil {
			nilPtr()
		}
		return sizeMsgID(m.ID) + uvarintLen(uint64(m.G)) + sizeTS(m.LTS), true
	case *HardTS:
		if m == nil {
			nilPtr()
		}
		return sizeMsgID(m.ID) + uvarintLen(uint64(m.G)) + sizeTS(m.LTS), true
	case *RecSlotAccepted:
		if m == nil {
			nilPtr()
		}
		return sizeBallot(m.B) + uvarintLen(m.Slot) + sizeCommand(&m.Cmd), true
	case *RecSlotDecided:
		if m == nil {
			nilPtr()
		}
		return uvarintLen(m.Slot) + sizeCommand(&m.Cmd), true
	}
	return 0, false
}

func (d *decoder) command(c *Command, ctx string) {
	d.ctx = ctx
	if op := CmdOp(d.byte1("op")); op < cmdOpEnd {
		c.Op = op
	} else if d.err == nil {
		d.off--
		d.fail(ErrMalformed, "op", fmt.Sprintf("command op %d out of range", op))
	}
	d.ctx = ctx + ".m"
	d.appMsg(&c.M, nil)
	d.ctx = ctx
	c.TS = d.ts("ts")
	d.ctx = ""
}

// decodePaxos decodes the body of one of this file's kinds; ok is false
// for other kinds.
func (d *decoder) decodePaxos() (m Message, ok bool) {
	switch d.kind {
	case KindPaxosPrepare:
		x := new(PaxosPrepare)
		x.B = d.ballot("b")
		x.From = d.uvarint("from")
		return x, true
	case KindPaxosPromise:
		x := new(PaxosPromise)
		x.B = d.ballot("b")
		x.Executed = d.uvarint("executed")
		if n := d.count("entries", MaxStateEntries, minLogEntrySize); n > 0 {
			x.Entries = make([]LogEntry, n)
			for i := range x.Entries {
				e := &x.Entries[i]
				e.Slot = d.uvarint("entries.slot")
				e.B = d.ballot("entries.b")
				e.Decided = d.bool("entries.decided")
				d.command(&e.Cmd, "entries.cmd")
				if d.err != nil {
					return nil, true
				}
			}
		}
		return x, true
	case KindPaxosAccept:
		x := new(PaxosAccept)
		x.B = d.ballot("b")
		x.Slot = d.uvarint("slot")
		d.command(&x.Cmd, "cmd")
		return x, true
	case KindPaxosAccepted:
		x := new(PaxosAccepted)
		x.B = d.ballot("b")
		x.Slot = d.uvarint("slot")
		return x, true
	case KindPaxosDecided:
		x := new(PaxosDecided)
		x.First = d.uvarint("first")
		if n := d.count("cmds", MaxStateEntries, minCommandSize); n > 0 {
			x.Cmds = make([]Command, n)
			for i := range x.Cmds {
				d.command(&x.Cmds[i], "cmds")
				if d.err != nil {
					return nil, true
				}
			}
		}
		return x, true
	case KindPaxosHeartbeat:
		x := new(PaxosHeartbeat)
		x.B = d.ballot("b")
		x.Leader = d.bool("leader")
		x.Executed = d.uvarint("executed")
		x.Commit = d.uvarint("commit")
		return x, true
	case KindSoftTS:
		x := new(SoftTS)
		x.ID = d.msgID("id")
		x.G = GroupID(d.u32("g"))
		x.LTS = d.ts("lts")
		return x, true
	case KindHardTS:
		x := new(HardTS)
		x.ID = d.msgID("id")
		x.G = GroupID(d.u32("g"))
		x.LTS = d.ts("lts")
		return x, true
	case KindRecSlotAccepted:
		x := new(RecSlotAccepted)
		x.B = d.ballot("b")
		x.Slot = d.uvarint("slot")
		d.command(&x.Cmd, "cmd")
		return x, true
	case KindRecSlotDecided:
		x := new(RecSlotDecided)
		x.Slot = d.uvarint("slot")
		d.command(&x.Cmd, "cmd")
		return x, true
	}
	return nil, false
}

// DescribeCommand renders a log command: "NOOP", "ASSIGN 7.1 dest=[0 1]
// [lts=3.g0]", "FINAL 7.1 dest=[0 1] gts=5.g1".
func DescribeCommand(c *Command) string {
	var sb strings.Builder
	descCommand(&sb, c)
	return sb.String()
}

func descCommand(sb *strings.Builder, c *Command) {
	sb.WriteString(c.Op.String())
	switch c.Op {
	case CmdNoop:
		return
	case CmdAssign:
		descAppMsg(sb, &c.M)
		descOptTS(sb, "lts", c.TS)
	default:
		descAppMsg(sb, &c.M)
		descTS(sb, "gts", c.TS)
	}
}

func descSlot(sb *strings.Builder, name string, s uint64) {
	sb.WriteByte(' ')
	sb.WriteString(name)
	sb.WriteByte('=')
	sb.WriteString(strconv.FormatUint(s, 10))
}

// describePaxos renders the fields of one of this file's messages; ok is
// false for other types.
func describePaxos(sb *strings.Builder, m Message) bool {
	switch m := m.(type) {
	case *PaxosPrepare:
		descBallot(sb, "b", m.B)
		descSlot(sb, "from", m.From)
	case *PaxosPromise:
		descBallot(sb, "b", m.B)
		descSlot(sb, "exec", m.Executed)
		sb.WriteString(" entries=[")
		for i := range m.Entries {
			e := &m.Entries[i]
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteByte('{')
			sb.WriteString(strconv.FormatUint(e.Slot, 10))
			descBallot(sb, "b", e.B)
			if e.Decided {
				sb.WriteString(" decided")
			}
			sb.WriteByte(' ')
			descCommand(sb, &e.Cmd)
			sb.WriteByte('}')
		}
		sb.WriteByte(']')
	case *PaxosAccept:
		descBallot(sb, "b", m.B)
		descSlot(sb, "slot", m.Slot)
		sb.WriteByte(' ')
		descCommand(sb, &m.Cmd)
	case *PaxosAccepted:
		descBallot(sb, "b", m.B)
		descSlot(sb, "slot", m.Slot)
	case *PaxosDecided:
		descSlot(sb, "first", m.First)
		sb.WriteString(" cmds=[")
		for i := range m.Cmds {
			if i > 0 {
				sb.WriteString(" | ")
			}
			descCommand(sb, &m.Cmds[i])
		}
		sb.WriteByte(']')
	case *PaxosHeartbeat:
		descBallot(sb, "b", m.B)
		sb.WriteString(" leader=")
		sb.WriteString(strconv.FormatBool(m.Leader))
		descSlot(sb, "exec", m.Executed)
		descSlot(sb, "commit", m.Commit)
	case *SoftTS:
		descID(sb, m.ID)
		descGroup(sb, "g", m.G)
		descTS(sb, "lts", m.LTS)
	case *HardTS:
		descID(sb, m.ID)
		descGroup(sb, "g", m.G)
		descTS(sb, "lts", m.LTS)
	case *RecSlotAccepted:
		descBallot(sb, "b", m.B)
		descSlot(sb, "slot", m.Slot)
		sb.WriteByte(' ')
		descCommand(sb, &m.Cmd)
	case *RecSlotDecided:
		descSlot(sb, "slot", m.Slot)
		sb.WriteByte(' ')
		descCommand(sb, &m.Cmd)
	default:
		return false
	}
	return true
}

// isNilPaxos reports whether m is a typed nil pointer of one of this
// file's types.
func isNilPaxos(m Message) bool {
	switch m := m.(type) {
	case *PaxosPrepare:
		return m == nil
	case *PaxosPromise:
		return m == nil
	case *PaxosAccept:
		return m == nil
	case *PaxosAccepted:
		return m == nil
	case *PaxosDecided:
		return m == nil
	case *PaxosHeartbeat:
		return m == nil
	case *SoftTS:
		return m == nil
	case *HardTS:
		return m == nil
	case *RecSlotAccepted:
		return m == nil
	case *RecSlotDecided:
		return m == nil
	}
	return false
}
