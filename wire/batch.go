package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Batch (BATCH) carries several protocol messages from one replica to
// another in one frame, in the order they were sent (issue #14 item 2;
// amcast.Coalesce builds them from a Ready, amcast.StepAll takes them
// apart). A leader's ACCEPTs for every MULTICAST that arrived while its
// previous Ready was handled go to each member as one BATCH, the member
// answers with one BATCH of ACCEPT_ACKs, and the DELIVERs of a Ready leave
// as one BATCH: one frame, one decode call, one inbox hand-off and one
// loop wake-up per batch instead of per message. The messages inside keep
// their own kinds and checks; a batch adds no protocol meaning, so losing
// one is losing each message in it.
//
// A batch holds at least two messages and at most MaxBatchMsgs, none of
// them a Batch or a durable record: Decode refuses any other.
type Batch struct {
	Msgs []Message
}

// MaxBatchMsgs bounds the messages of one Batch (the frame cap bounds its
// bytes).
const MaxBatchMsgs = 1 << 14

// Kind implements Message.
func (*Batch) Kind() Kind { return KindBatch }

// batchable reports why m may not travel in a Batch (nil if it may).
func batchable(m Message) error {
	switch {
	case m == nil || isNilPtr(m):
		return errors.New("nil message")
	case m.Kind() == KindBatch:
		return errors.New("a batch inside a batch")
	case m.Kind() >= KindRecBallot:
		return fmt.Errorf("durable record %s", m.Kind())
	}
	return nil
}

func appendBatch(buf []byte, m Message) ([]byte, bool) {
	b, ok := m.(*Batch)
	if !ok {
		return buf, false
	}
	buf = binary.AppendUvarint(buf, uint64(len(b.Msgs)))
	for _, x := range b.Msgs {
		buf = binary.AppendUvarint(buf, uint64(Size(x)))
		buf = Append(buf, x)
	}
	return buf, true
}

func sizeBatch(m Message) (n int, ok bool) {
	b, ok := m.(*Batch)
	if !ok {
		return 0, false
	}
	if b == nil {
		panic("wire: encoding a nil BATCH pointer")
	}
	n = uvarintLen(uint64(len(b.Msgs)))
	for _, x := range b.Msgs {
		s := Size(x)
		n += uvarintLen(uint64(s)) + s
	}
	return n, true
}

// decodeBatch decodes the body of a BATCH: each message with Decode, so
// every cap applies to it as to a message on its own; a message that
// could not travel in a batch (batchable), or fewer than two, is
// malformed.
func (d *decoder) decodeBatch() (m Message, ok bool) {
	if d.kind != KindBatch {
		return nil, false
	}
	n := d.count("msgs", MaxBatchMsgs, 3) // a length and a version and kind byte each
	if d.err == nil && n < 2 {
		d.fail(ErrMalformed, "msgs", fmt.Sprintf("%d messages, a batch has at least 2", n))
	}
	x := &Batch{Msgs: make([]Message, 0, n)}
	for i := 0; i < n && d.err == nil; i++ {
		// An error names the message's index; the name is built only then
		// (once per message, it was an allocation per message decoded).
		l := d.count("msgs", math.MaxInt32, 1) // the input bounds it (malformed past its end)
		if d.err != nil {
			break
		}
		inner, err := Decode(d.b[d.off : d.off+l])
		if err != nil {
			d.fail(ErrMalformed, "msgs["+strconv.Itoa(i)+"]", err.Error())
			break
		}
		if err := batchable(inner); err != nil {
			d.fail(ErrMalformed, "msgs["+strconv.Itoa(i)+"]", err.Error())
			break
		}
		d.off += l
		x.Msgs = append(x.Msgs, inner)
	}
	return x, true
}

func describeBatch(sb *strings.Builder, m Message) bool {
	b, ok := m.(*Batch)
	if !ok {
		return false
	}
	sb.WriteString(" msgs=")
	sb.WriteString(strconv.Itoa(len(b.Msgs)))
	for i, x := range b.Msgs {
		if i == 0 {
			sb.WriteString(" [")
		} else {
			sb.WriteString("; ")
		}
		sb.WriteString(Describe(x))
	}
	if len(b.Msgs) > 0 {
		sb.WriteByte(']')
	}
	return true
}

func isNilBatch(m Message) bool {
	b, ok := m.(*Batch)
	return ok && b == nil
}
