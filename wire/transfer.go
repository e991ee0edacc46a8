package wire

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// State transfer (issue #12 item 2; amcast/wbcast/transfer.go).
//
// Garbage collection needs only a quorum of each group: a member that was
// down or partitioned while its group collected what it had not delivered
// can no longer be caught up DELIVER by DELIVER. Its leader sends it a
// SNAPSHOT instead: the leader's delivered prefix (its last delivery, its
// clock, the delivered messages it still holds and its client sessions'
// duplicate-suppression state), in pages. The member installs it; its
// application installs a snapshot of another member's application state
// taken at that point or later (package rsm). A member whose disk was lost
// first asks, with REJOIN, for a ballot established without it above every
// promise it may have forgotten.

// Snapshot (SNAPSHOT) is one page of a leader's delivered prefix, sent
// under the leader's cballot B. Image carries the page as a snapshot image
// (SnapshotPages): MaxDelivered is the prefix's last delivery (the point),
// Clock the leader's clock, Msgs the delivered messages the leader holds
// (Delivered all true), Done its client sessions; Ballot and CBallot are
// zero (a member's promises are its own).
type Snapshot struct {
	B     Ballot
	Image RecSnapshot
	Paged
}

// Rejoin (REJOIN) is sent by a member that lost its durable state to its
// group: Floor is the highest ballot a quorum of the other members
// reported, which bounds every promise it may have forgotten. The leader
// establishes a ballot above Floor (without the member) and then sends it
// that ballot's state.
type Rejoin struct {
	Floor Ballot
}

// RecInstall records an installed SNAPSHOT, in pages like the SNAPSHOT
// itself: the install counts only once its last page is durable.
type RecInstall struct {
	Image RecSnapshot
	Paged
}

// HandOver (HANDOVER) is a leader's request to a member of its group to
// take over its leadership at once (a planned departure, issue #13; see
// amcast/wbcast/handover.go): B is the ballot the sender leads. The member
// starts a ballot above B without waiting for its failure detector.
type HandOver struct {
	B Ballot
}

// AppSnapRequest (APP_SNAPSHOT_REQUEST) is a node's request, after its
// core installed a SNAPSHOT at Point, for the application state of a member
// of its group (package rsm's streamed snapshot) taken at Point or later:
// the chunk at Offset of the member's snapshot Snap (zero: a new one).
type AppSnapRequest struct {
	Point  Timestamp
	Snap   Timestamp
	Offset uint64
}

// AppSnapChunk (APP_SNAPSHOT_CHUNK) is one chunk of a member's application
// snapshot, taken at its applied gts Snap: Data at Offset of Total bytes.
type AppSnapChunk struct {
	Snap   Timestamp
	Offset uint64
	Total  uint64
	Data   []byte
}

// Caps of the application snapshot transfer.
const (
	// MaxAppChunk is the largest AppSnapChunk payload.
	MaxAppChunk = 1 << 20
	// MaxAppSnapshot is the largest application snapshot a node accepts.
	MaxAppSnapshot = 1 << 40
)

// Kind implements Message.
func (*AppSnapRequest) Kind() Kind { return KindAppSnapRequest }
func (*AppSnapChunk) Kind() Kind   { return KindAppSnapChunk }

// Kind implements Message.
func (*Snapshot) Kind() Kind   { return KindSnapshot }
func (*Rejoin) Kind() Kind     { return KindRejoin }
func (*HandOver) Kind() Kind   { return KindHandOver }
func (*RecInstall) Kind() Kind { return KindRecInstall }

// minImageSize is the smallest encoded snapshot image (version, kind and
// eight one-byte fields).
const minImageSize = 2 + 8

func appendImage(buf []byte, img *RecSnapshot) []byte {
	buf = binary.AppendUvarint(buf, uint64(Size(img)))
	return Append(buf, img)
}

func sizeImage(img *RecSnapshot) int {
	n := Size(img)
	return uvarintLen(uint64(n)) + n
}

// image decodes a nested snapshot image; its own caps apply.
func (d *decoder) image(field string) RecSnapshot {
	n := d.count(field, DefaultMaxFrame, 1)
	if d.err != nil || n < minImageSize {
		if d.err == nil {
			d.fail(ErrMalformed, field, fmt.Sprintf("image of %d bytes", n))
		}
		return RecSnapshot{}
	}
	m, err := Decode(d.b[d.off : d.off+n])
	if err != nil {
		d.err = fmt.Errorf("%s field %s: %w", d.kind, field, err)
		return RecSnapshot{}
	}
	img, ok := m.(*RecSnapshot)
	if !ok {
		d.fail(ErrMalformed, field, "not a snapshot image: "+m.Kind().String())
		return RecSnapshot{}
	}
	d.off += n
	return *img
}

func appendTransfer(buf []byte, m Message) ([]byte, bool) {
	switch m := m.(type) {
	case *Snapshot:
		buf = appendBallot(buf, m.B)
		buf = appendImage(buf, &m.Image)
		buf = appendPaged(buf, m.Paged)
	case *Rejoin:
		buf = appendBallot(buf, m.Floor)
	case *HandOver:
		buf = appendBallot(buf, m.B)
	case *AppSnapRequest:
		buf = appendTS(buf, m.Point)
		buf = appendTS(buf, m.Snap)
		buf = binary.AppendUvarint(buf, m.Offset)
	case *AppSnapChunk:
		buf = appendTS(buf, m.Snap)
		buf = binary.AppendUvarint(buf, m.Offset)
		buf = binary.AppendUvarint(buf, m.Total)
		buf = binary.AppendUvarint(buf, uint64(len(m.Data)))
		buf = append(buf, m.Data...)
	case *RecInstall:
		buf = appendImage(buf, &m.Image)
		buf = appendPaged(buf, m.Paged)
	default:
		return buf, false
	}
	return buf, true
}

func sizeTransfer(m Message) (n int, ok bool) {
	nilPtr := func() { panic("wire: encoding a nil " + m.Kind().String() + " pointer") }
	switch m := m.(type) {
	case *Snapshot:
		if m == nil {
			nilPtr()
		}
		return sizeBallot(m.B) + sizeImage(&m.Image) + sizePaged(m.Paged), true
	case *Rejoin:
		if m == nil {
			nilPtr()
		}
		return sizeBallot(m.Floor), true
	case *HandOver:
		if m == nil {
			nilPtr()
		}
		return sizeBallot(m.B), true
	case *AppSnapRequest:
		if m == nil {
			nilPtr()
		}
		return sizeTS(m.Point) + sizeTS(m.Snap) + uvarintLen(m.Offset), true
	case *AppSnapChunk:
		if m == nil {
			nilPtr()
		}
		return sizeTS(m.Snap) + uvarintLen(m.Offset) + uvarintLen(m.Total) + uvarintLen(uint64(len(m.Data))) + len(m.Data), true
	case *RecInstall:
		if m == nil {
			nilPtr()
		}
		return sizeImage(&m.Image) + sizePaged(m.Paged), true
	}
	return 0, false
}

func (d *decoder) decodeTransfer() (m Message, ok bool) {
	switch d.kind {
	case KindSnapshot:
		x := new(Snapshot)
		x.B = d.ballot("b")
		x.Image = d.image("image")
		x.Paged = d.paged()
		return x, true
	case KindRejoin:
		return &Rejoin{Floor: d.ballot("floor")}, true
	case KindHandOver:
		return &HandOver{B: d.ballot("b")}, true
	case KindAppSnapRequest:
		x := new(AppSnapRequest)
		x.Point = d.ts("point")
		x.Snap = d.ts("snap")
		x.Offset = d.uvarint("offset")
		return x, true
	case KindAppSnapChunk:
		x := new(AppSnapChunk)
		x.Snap = d.ts("snap")
		x.Offset = d.uvarint("offset")
		x.Total = d.uvarint("total")
		if d.err == nil && (x.Total > MaxAppSnapshot || x.Offset > x.Total) {
			d.fail(ErrTooLarge, "total", fmt.Sprintf("offset %d of %d bytes (at most %d)", x.Offset, x.Total, uint64(MaxAppSnapshot)))
		}
		if n := d.count("data", MaxAppChunk, 1); n > 0 {
			x.Data = make([]byte, n)
			copy(x.Data, d.b[d.off:])
			d.off += n
		}
		return x, true
	case KindRecInstall:
		x := new(RecInstall)
		x.Image = d.image("image")
		x.Paged = d.paged()
		return x, true
	}
	return nil, false
}

func describeTransfer(sb *strings.Builder, m Message) bool {
	img := func(i *RecSnapshot) {
		descTS(sb, "point", i.MaxDelivered)
		descClock(sb, i.Clock)
		sb.WriteString(" msgs=")
		sb.WriteString(strconv.Itoa(len(i.Msgs)))
		sb.WriteString(" sessions=")
		sb.WriteString(strconv.Itoa(len(i.Done)))
	}
	switch m := m.(type) {
	case *Snapshot:
		descBallot(sb, "b", m.B)
		img(&m.Image)
		descPaged(sb, m.Paged)
	case *Rejoin:
		descBallot(sb, "floor", m.Floor)
	case *HandOver:
		descBallot(sb, "b", m.B)
	case *AppSnapRequest:
		descTS(sb, "point", m.Point)
		descTS(sb, "snap", m.Snap)
		sb.WriteString(" offset=")
		sb.WriteString(strconv.FormatUint(m.Offset, 10))
	case *AppSnapChunk:
		descTS(sb, "snap", m.Snap)
		sb.WriteString(" offset=")
		sb.WriteString(strconv.FormatUint(m.Offset, 10))
		sb.WriteString(" total=")
		sb.WriteString(strconv.FormatUint(m.Total, 10))
		sb.WriteString(" data=")
		sb.WriteString(strconv.Itoa(len(m.Data)))
		sb.WriteString("B")
	case *RecInstall:
		img(&m.Image)
		descPaged(sb, m.Paged)
	default:
		return false
	}
	return true
}

func isNilTransfer(m Message) bool {
	switch m := m.(type) {
	case *Snapshot:
		return m == nil
	case *Rejoin:
		return m == nil
	case *HandOver:
		return m == nil
	case *AppSnapRequest:
		return m == nil
	case *AppSnapChunk:
		return m == nil
	case *RecInstall:
		return m == nil
	}
	return false
}
