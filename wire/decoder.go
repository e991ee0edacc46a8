package wire

// The decoder and its field readers, which every message's decoding in
// codec.go (and idlist.go, paxos.go, node.go, ...) is written with: each checks its
// bytes and records the first error, naming the field.

import (
	"encoding/binary"
	"fmt"
	"math"
)

// decoder reads fields from b starting at off. The first error sticks: later
// reads return zero values and do not allocate.
type decoder struct {
	b    []byte
	off  int
	kind Kind
	ctx  string // field path prefix for errors, e.g. "state.m"; "" at top level
	err  error
	ids  *[]SeqDigest // DecodeReusing's array, or nil
}

// collected returns room for a session's k collected ids: carved from
// DecodeReusing's array, or allocated. k was checked against the bytes
// left (count), so the array grows at most by what b can hold.
func (d *decoder) collected(k int) []SeqDigest {
	if d.ids == nil {
		return make([]SeqDigest, k)
	}
	a := *d.ids
	if cap(a)-len(a) < k {
		a = make([]SeqDigest, 0, max(2*cap(a), k))
	}
	n := len(a)
	*d.ids = a[:n+k]
	return a[n : n+k : n+k]
}

func (d *decoder) fail(sentinel error, field, reason string) {
	if d.err != nil {
		return
	}
	if field == "" {
		d.err = fmt.Errorf("%w: %s: %s", sentinel, d.kind, reason)
		return
	}
	if d.ctx != "" {
		field = d.ctx + "." + field
	}
	d.err = fmt.Errorf("%w: %s field %s at byte %d: %s", sentinel, d.kind, field, d.off, reason)
}

// uvarint reads a minimal uvarint. After an error it returns 0.
func (d *decoder) uvarint(field string) uint64 {
	b, off := d.b, d.off
	if off < len(b) && b[off] < 0x80 && d.err == nil { // common case: one byte
		d.off = off + 1
		return uint64(b[off])
	}
	if d.err != nil {
		return 0
	}
	var x uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		if off+i >= len(b) {
			d.fail(ErrMalformed, field, "truncated input")
			return 0
		}
		c := b[off+i]
		if c < 0x80 {
			switch {
			case i == binary.MaxVarintLen64-1 && c > 1:
				d.fail(ErrMalformed, field, "varint overflows 64 bits")
				return 0
			case c == 0 && i > 0:
				d.fail(ErrMalformed, field, "non-minimal varint")
				return 0
			}
			d.off = off + i + 1
			return x | uint64(c)<<(7*i)
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	d.fail(ErrMalformed, field, "varint overflows 64 bits")
	return 0
}

// u32 reads a uvarint that must fit in 32 bits.
func (d *decoder) u32(field string) uint32 {
	v := d.uvarint(field)
	if v > math.MaxUint32 {
		d.fail(ErrMalformed, field, "value exceeds 32 bits")
		return 0
	}
	return uint32(v)
}

func (d *decoder) byte1(field string) byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail(ErrMalformed, field, "truncated input")
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *decoder) bool(field string) bool {
	switch d.byte1(field) {
	case 0:
		return false
	case 1:
		return true
	}
	d.off--
	d.fail(ErrMalformed, field, "bool byte is neither 0 nor 1")
	return false
}

// count reads a list length and checks it against limit and against the
// remaining input, given the minimum encoded size of one element.
func (d *decoder) count(field string, limit, minElem int) int {
	start := d.off
	v := d.uvarint(field)
	if d.err != nil {
		return 0
	}
	if v > uint64(limit) {
		d.off = start
		d.fail(ErrTooLarge, field, fmt.Sprintf("length %d exceeds limit %d", v, limit))
		return 0
	}
	if rem := len(d.b) - d.off; v > uint64(rem/minElem) {
		d.off = start
		d.fail(ErrMalformed, field, fmt.Sprintf("truncated input: length %d but only %d bytes left", v, rem))
		return 0
	}
	return int(v)
}

func (d *decoder) msgID(field string) MsgID {
	return MsgID{Client: ProcID(d.u32(field)), Session: d.session(field), Seq: d.uvarint(field), Digest: d.digest(field)}
}

func (d *decoder) session(field string) SessionID {
	return SessionID{Hi: d.uvarint(field), Lo: d.uvarint(field)}
}

// seqDigests decodes len(dst) ids of one session into dst, each a
// sequence number (uvarint) and a digest: most of a snapshot's bytes. An
// id whose bytes are a minimal varint and a whole digest is taken in one
// step; any other goes through uvarint and digest, which report it. It
// decodes what the two would, with their errors: a loaded agent spent 2%
// of its CPU in this loop checking its compactions (docs/batching.md).
func (d *decoder) seqDigests(dst []SeqDigest, field string) {
	const dl = len(Digest{})
	for j := range dst {
		if d.err != nil {
			return
		}
		b, off := d.b, d.off
		x, n := binary.Uvarint(b[off:])
		if n <= 0 || (n > 1 && b[off+n-1] == 0) || len(b)-off-n < dl {
			dst[j] = SeqDigest{Seq: d.uvarint(field), Digest: d.digest(field)}
			continue
		}
		dst[j].Seq = x
		copy(dst[j].Digest[:], b[off+n:off+n+dl])
		d.off = off + n + dl
	}
}

func (d *decoder) digest(field string) Digest {
	var x Digest
	if d.err != nil {
		return x
	}
	if len(d.b)-d.off < len(x) {
		d.fail(ErrMalformed, field, "truncated input")
		return x
	}
	d.off += copy(x[:], d.b[d.off:])
	return x
}

func (d *decoder) ts(field string) Timestamp {
	return Timestamp{T: d.uvarint(field), G: GroupID(d.u32(field))}
}

func (d *decoder) ballot(field string) Ballot {
	// Fast path: both halves are one-byte varints, as they usually are.
	if off := d.off; off+1 < len(d.b) && d.b[off]|d.b[off+1] < 0x80 && d.err == nil {
		d.off = off + 2
		return Ballot{N: uint32(d.b[off]), P: ProcID(d.b[off+1])}
	}
	return Ballot{N: d.u32(field), P: ProcID(d.u32(field))}
}

// inlineDest is how many Dest groups Decode stores in the same allocation as
// a Multicast or Accept, saving an allocation for typical messages.
const inlineDest = 4

// appMsg decodes an AppMsg; d.ctx names it in errors. If the message has at
// most len(inline) destination groups, Dest uses inline's memory (with its
// capacity clipped, so appending to Dest never writes into inline).
func (d *decoder) appMsg(m *AppMsg, inline []GroupID) {
	m.ID = d.msgID("id")
	m.Floor = d.uvarint("floor")
	if n := d.count("dest", MaxGroups, minGroupSize); n > 0 {
		var dest []GroupID
		if n <= len(inline) {
			dest = inline[:n:n]
		} else {
			dest = make([]GroupID, n)
		}
		for i := range dest {
			start := d.off
			g := GroupID(d.u32("dest"))
			if i > 0 && g <= dest[i-1] && d.err == nil {
				d.off = start
				d.fail(ErrMalformed, "dest", "groups not strictly increasing")
			}
			dest[i] = g
		}
		m.Dest = dest
	}
	if n := d.count("payload", MaxPayload, 1); n > 0 {
		m.Payload = make([]byte, n)
		copy(m.Payload, d.b[d.off:])
		d.off += n
	}
}

func (d *decoder) ballots(field string) []Ballot { return d.ballotsInto(field, nil) }

// ballotsInto is ballots, in inline's room when the vector fits there.
func (d *decoder) ballotsInto(field string, inline []Ballot) []Ballot {
	n := d.count(field, MaxGroups, minBallotSize)
	if n == 0 {
		return nil
	}
	var bs []Ballot
	if n <= len(inline) {
		bs = inline[:n:n]
	} else {
		bs = make([]Ballot, n)
	}
	for i := range bs {
		bs[i] = d.ballot(field)
	}
	return bs
}

// state decodes a MsgState named ctx in errors; mctx names its AppMsg.
func (d *decoder) state(s *MsgState, ctx, mctx string) {
	d.ctx = mctx
	d.appMsg(&s.M, nil)
	d.ctx = ctx
	if p := Phase(d.byte1("phase")); p <= PhaseCommitted {
		s.Phase = p
	} else {
		d.off--
		d.fail(ErrMalformed, "phase", fmt.Sprintf("phase %d out of range", p))
	}
	s.LTS = d.ts("lts")
	s.GTS = d.ts("gts")
	s.Ballots = d.ballots("ballots")
	if n := d.count("ltss", MaxGroups, minTSSize); n > 0 {
		s.LTSs = make([]Timestamp, n)
		for i := range s.LTSs {
			s.LTSs[i] = d.ts("ltss")
		}
	}
	d.ctx = ""
}

func (d *decoder) states() []MsgState {
	n := d.count("state", MaxStateEntries, minMsgStateSize)
	if n == 0 {
		return nil
	}
	ss := make([]MsgState, n)
	for i := range ss {
		d.state(&ss[i], "state", "state.m")
		if d.err != nil {
			return nil
		}
	}
	return ss
}

func (d *decoder) paged() Paged {
	return Paged{Page: d.u32("page"), More: d.bool("more")}
}
