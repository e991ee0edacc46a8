package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/weft-dev/weft/wire"
)

// Encoding
//
// Every gossip message is encoded as
//
//	byte 0   WireVersion
//	byte 1   Kind
//	body
//
// in the style of package wire: integers are minimal uvarints, strings and
// lists are prefixed with their length as a uvarint, and
//
//	Syn            Sent len(Cluster) Cluster len(Digests) Digest...
//	Ack            Times len(Requests) Digest... len(States) EndpointState...
//	Ack2           Times len(States) EndpointState...
//	Ping           Sent Generation Heartbeat         (version 3)
//	Pong           Echo Generation Heartbeat         (version 3)
//	Times          Echo Recv Sent
//	Digest         Node Generation Version
//	EndpointState  Node Generation Base Heartbeat len(States) AppState...
//	AppState       Key Version len(Value) Value
//
// The encoding is canonical: Decode accepts exactly what Append produces.
// It rejects non-minimal varints, node ids or keys beyond their widths,
// digests and states not strictly increasing by node, app states not
// strictly increasing by key, key 0, a Heartbeat or item version not above
// Base (Heartbeat 0 means absent), times beyond int64, Times partly zero
// or with Sent before Recv (ErrBadTime), and trailing bytes. Counts are checked
// against the caps below and against the bytes left before anything is
// allocated. Empty lists decode as nil.

// WireVersion is the newest wire version. Version 2 added the wall-clock
// stamps (Syn.Sent, Times); version 3 added the probe kinds (Ping, Pong).
// Byte 0 of a message is the version that introduced its kind's current
// form (kindVersion): SYN, ACK and ACK2 are still written as version 2,
// byte for byte as before, so nodes of both releases gossip together
// during a rolling upgrade, while a version-2 node refuses a Ping with
// ErrVersion (counted, harmless: its probe peers then judge it from
// relayed heartbeats alone).
const WireVersion = 3

// kindVersion returns the version byte of kind k's encoding (0: unknown
// kind).
func kindVersion(k Kind) byte {
	switch k {
	case KindSyn, KindAck, KindAck2:
		return 2
	case KindPing, KindPong:
		return 3
	}
	return 0
}

// Caps enforced by Decode before allocating.
const (
	// MaxClusterName is the longest cluster name, in bytes.
	MaxClusterName = 255
	// MaxEntries is the largest number of digests, requests or states in
	// one message.
	MaxEntries = 1 << 20
	// MaxItems is the largest number of app states in one EndpointState.
	MaxItems = 1024
	// MaxValue is the longest app-state value, in bytes.
	MaxValue = 64 << 10
)

// Minimum encoded sizes, used to bound counts by the bytes left.
const (
	minDigestSize = 3 // Node Generation Version
	minStateSize  = 5 // Node Generation Base Heartbeat len(States)
	minItemSize   = 3 // Key Version len(Value)
)

// Decode errors; Decode wraps them with the field at fault. Test with
// errors.Is.
var (
	ErrVersion     = errors.New("membership: unsupported wire version")
	ErrUnknownKind = errors.New("membership: unknown message kind")
	ErrMalformed   = errors.New("membership: malformed message")
	ErrTooLarge    = errors.New("membership: message too large")
	// ErrBadTime: a wall-clock stamp is malformed (see Times).
	ErrBadTime = errors.New("membership: malformed time")
)

// Append appends the encoding of m to buf. It panics if m is nil or not a
// *Syn, *Ack or *Ack2. It does not check the caps; Decode does.
func Append(buf []byte, m Message) []byte {
	if len(buf) == cap(buf) {
		// A full (or nil) buffer: allocate once. A reused one with room
		// grows as needed, without a sizing pass over the message.
		buf = slices.Grow(buf, Size(m))
	}
	buf = append(buf, kindVersion(m.Kind()), byte(m.Kind()))
	switch m := m.(type) {
	case *Syn:
		buf = binary.AppendUvarint(buf, uint64(m.Sent))
		buf = binary.AppendUvarint(buf, uint64(len(m.Cluster)))
		buf = append(buf, m.Cluster...)
		buf = appendDigests(buf, m.Digests)
	case *Ack:
		buf = appendTimes(buf, m.Times)
		buf = appendDigests(buf, m.Requests)
		buf = appendStates(buf, m.States)
	case *Ack2:
		buf = appendTimes(buf, m.Times)
		buf = appendStates(buf, m.States)
	case *Ping:
		buf = appendProbe(buf, m.Sent, m.Generation, m.Heartbeat)
	case *Pong:
		buf = appendProbe(buf, m.Echo, m.Generation, m.Heartbeat)
	}
	return buf
}

func appendProbe(buf []byte, t int64, gen, hb uint64) []byte {
	buf = binary.AppendUvarint(buf, uint64(t))
	buf = binary.AppendUvarint(buf, gen)
	return binary.AppendUvarint(buf, hb)
}

// appendTimes writes the stamps as uvarints: a valid stamp is never
// negative (Decode refuses what does not fit an int64).
func appendTimes(buf []byte, t Times) []byte {
	buf = binary.AppendUvarint(buf, uint64(t.Echo))
	buf = binary.AppendUvarint(buf, uint64(t.Recv))
	return binary.AppendUvarint(buf, uint64(t.Sent))
}

func appendDigests(buf []byte, ds []Digest) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(ds)))
	for i, d := range ds {
		// Room for three maximal uvarints, then write by index.
		n := len(buf)
		if cap(buf)-n < 3*binary.MaxVarintLen64 {
			buf = slices.Grow(buf, 3*binary.MaxVarintLen64+(len(ds)-i)*8)
		}
		b := buf[n : n+3*binary.MaxVarintLen64]
		k := putUvarint(b, uint64(d.Node))
		k += putUvarint(b[k:], d.Generation)
		k += putUvarint(b[k:], d.Version)
		buf = buf[:n+k]
	}
	return buf
}

func appendStates(buf []byte, ss []EndpointState) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(ss)))
	for i := range ss {
		s := &ss[i]
		n := len(buf)
		if cap(buf)-n < 5*binary.MaxVarintLen64 {
			buf = slices.Grow(buf, 5*binary.MaxVarintLen64+(len(ss)-i)*8)
		}
		b := buf[n : n+5*binary.MaxVarintLen64]
		k := putUvarint(b, uint64(s.Node))
		k += putUvarint(b[k:], s.Generation)
		k += putUvarint(b[k:], s.Base)
		k += putUvarint(b[k:], s.Heartbeat)
		k += putUvarint(b[k:], uint64(len(s.States)))
		buf = buf[:n+k]
		for _, a := range s.States {
			buf = binary.AppendUvarint(buf, uint64(a.Key))
			buf = binary.AppendUvarint(buf, a.Version)
			buf = binary.AppendUvarint(buf, uint64(len(a.Value)))
			buf = append(buf, a.Value...)
		}
	}
	return buf
}

// putUvarint is binary.PutUvarint with the one-byte case first.
func putUvarint(b []byte, x uint64) int {
	if x < 0x80 {
		b[0] = byte(x)
		return 1
	}
	return binary.PutUvarint(b, x)
}

// minimal returns n, or 0 if the last byte c of an n-byte uvarint is 0
// (a shorter encoding exists).
func minimal(c byte, n int) int {
	if c == 0 {
		return 0
	}
	return n
}

// Size returns len(Append(nil, m)). It panics like Append.
func Size(m Message) int {
	switch m := m.(type) {
	case *Syn:
		if m != nil {
			return 2 + uvarintLen(uint64(m.Sent)) + uvarintLen(uint64(len(m.Cluster))) + len(m.Cluster) + sizeDigests(m.Digests)
		}
	case *Ack:
		if m != nil {
			return 2 + sizeTimes(m.Times) + sizeDigests(m.Requests) + sizeStates(m.States)
		}
	case *Ack2:
		if m != nil {
			return 2 + sizeTimes(m.Times) + sizeStates(m.States)
		}
	case *Ping:
		if m != nil {
			return 2 + uvarintLen(uint64(m.Sent)) + uvarintLen(m.Generation) + uvarintLen(m.Heartbeat)
		}
	case *Pong:
		if m != nil {
			return 2 + uvarintLen(uint64(m.Echo)) + uvarintLen(m.Generation) + uvarintLen(m.Heartbeat)
		}
	default:
		if m == nil {
			panic("membership: encoding a nil Message")
		}
		panic(fmt.Sprintf("membership: encoding unknown message type %T", m))
	}
	panic("membership: encoding a nil " + m.Kind().String())
}

// uvarintLen returns the length of the uvarint encoding of x.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

func sizeTimes(t Times) int {
	return uvarintLen(uint64(t.Echo)) + uvarintLen(uint64(t.Recv)) + uvarintLen(uint64(t.Sent))
}

func sizeDigest(d Digest) int {
	return uvarintLen(uint64(d.Node)) + uvarintLen(d.Generation) + uvarintLen(d.Version)
}

func sizeDigests(ds []Digest) int {
	n := uvarintLen(uint64(len(ds)))
	for _, d := range ds {
		n += sizeDigest(d)
	}
	return n
}

func sizeItem(a *AppState) int {
	return uvarintLen(uint64(a.Key)) + uvarintLen(a.Version) + uvarintLen(uint64(len(a.Value))) + len(a.Value)
}

// sizeStateHead is the size of an EndpointState without its items' bytes
// (but with their count).
func sizeStateHead(node wire.ProcID, gen, base, hb uint64, items int) int {
	return uvarintLen(uint64(node)) + uvarintLen(gen) + uvarintLen(base) + uvarintLen(hb) + uvarintLen(uint64(items))
}

func sizeState(s *EndpointState) int {
	n := sizeStateHead(s.Node, s.Generation, s.Base, s.Heartbeat, len(s.States))
	for i := range s.States {
		n += sizeItem(&s.States[i])
	}
	return n
}

func sizeStates(ss []EndpointState) int {
	n := uvarintLen(uint64(len(ss)))
	for i := range ss {
		n += sizeState(&ss[i])
	}
	return n
}

// Decode decodes one message encoded by Append. The result shares no
// memory with b. Errors wrap ErrVersion, ErrUnknownKind, ErrMalformed or
// ErrTooLarge.
func Decode(b []byte) (Message, error) { return decode(b, nil) }

// Decoder decodes like Decode but reuses its memory: the message it
// returns and its digest and state lists are valid only until the next
// call. App-state lists (EndpointState.States) and strings are always
// fresh, so a receiver may keep them. Node.Step keeps nothing else of a
// message, so a driver can decode each received message with one Decoder
// and Step it at once (a simulator). The zero value is ready to use; it is
// not safe for concurrent use.
type Decoder struct {
	syn      Syn
	ack      Ack
	ack2     Ack2
	digests  []Digest // Syn.Digests
	requests []Digest // Ack.Requests
	states   []EndpointState
	cluster  string
}

// Decode decodes one message encoded by Append (see Decoder).
func (dc *Decoder) Decode(b []byte) (Message, error) { return decode(b, dc) }

func decode(b []byte, dc *Decoder) (Message, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty input", ErrMalformed)
	}
	if b[0] < 2 || b[0] > WireVersion {
		return nil, fmt.Errorf("%w: version byte %d, want 2..%d", ErrVersion, b[0], WireVersion)
	}
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: truncated input: missing kind byte", ErrMalformed)
	}
	if v := kindVersion(Kind(b[1])); v != 0 && v != b[0] {
		return nil, fmt.Errorf("%w: %s is version %d, got version byte %d", ErrVersion, Kind(b[1]), v, b[0])
	}
	d := decoder{b: b, off: 2, kind: Kind(b[1])}
	var m Message
	switch d.kind {
	case KindSyn:
		var x *Syn
		var buf *[]Digest
		if dc != nil {
			x, buf = &dc.syn, &dc.digests
			*x = Syn{}
		} else {
			x = new(Syn)
		}
		x.Sent = d.time("sent")
		if n := d.count("cluster", MaxClusterName, 1); n > 0 {
			raw := d.b[d.off : d.off+n]
			if dc != nil && string(raw) == dc.cluster {
				x.Cluster = dc.cluster
			} else {
				x.Cluster = string(raw)
				if dc != nil {
					dc.cluster = x.Cluster
				}
			}
			d.off += n
		}
		x.Digests = d.digests("digests", buf)
		m = x
	case KindAck:
		var x *Ack
		var rbuf *[]Digest
		var sbuf *[]EndpointState
		if dc != nil {
			x, rbuf, sbuf = &dc.ack, &dc.requests, &dc.states
			*x = Ack{}
		} else {
			x = new(Ack)
		}
		x.Times = d.times()
		x.Requests = d.digests("requests", rbuf)
		x.States = d.states(sbuf)
		m = x
	case KindAck2:
		var x *Ack2
		var sbuf *[]EndpointState
		if dc != nil {
			x, sbuf = &dc.ack2, &dc.states
			*x = Ack2{}
		} else {
			x = new(Ack2)
		}
		x.Times = d.times()
		x.States = d.states(sbuf)
		m = x
	case KindPing:
		x := new(Ping)
		x.Sent, x.Generation, x.Heartbeat = d.time("sent"), d.uvarint("generation"), d.uvarint("heartbeat")
		m = x
	case KindPong:
		x := new(Pong)
		x.Echo, x.Generation, x.Heartbeat = d.time("echo"), d.uvarint("generation"), d.uvarint("heartbeat")
		m = x
	default:
		return nil, fmt.Errorf("%w: kind byte %d", ErrUnknownKind, b[1])
	}
	if d.err == nil && d.off != len(b) {
		d.fail(ErrMalformed, "", fmt.Sprintf("%d trailing bytes", len(b)-d.off))
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// decoder reads fields from b at off; the first error sticks.
type decoder struct {
	b    []byte
	off  int
	kind Kind
	err  error
}

func (d *decoder) fail(sentinel error, field, reason string) {
	if d.err != nil {
		return
	}
	if field == "" {
		d.err = fmt.Errorf("%w: %s: %s", sentinel, d.kind, reason)
		return
	}
	d.err = fmt.Errorf("%w: %s field %s at byte %d: %s", sentinel, d.kind, field, d.off, reason)
}

// uvarint reads a minimal uvarint; after an error it returns 0.
func (d *decoder) uvarint(field string) uint64 {
	if off := d.off; off < len(d.b) && d.b[off] < 0x80 && d.err == nil {
		d.off = off + 1
		return uint64(d.b[off])
	}
	return d.uvarintLong(field)
}

// uvarintLong is uvarint past the one-byte case.
func (d *decoder) uvarintLong(field string) uint64 {
	if d.err != nil {
		return 0
	}
	off := d.off
	var x uint64
	var shift uint
	for i, c := range d.b[off:] {
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
			return x | uint64(c)<<shift
		}
		if i == binary.MaxVarintLen64-1 {
			d.fail(ErrMalformed, field, "varint overflows 64 bits")
			return 0
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	d.fail(ErrMalformed, field, "truncated input")
	return 0
}

// peekFields decodes len(x) consecutive uvarints at b[off:] into x and
// returns the bytes they take, or 0 if any is malformed (the caller then
// re-reads them one by one to report the error).
func peekFields(b []byte, off int, x []uint64) int {
	start := off
	for f := range x {
		if off >= len(b) {
			return 0
		}
		if c := b[off]; c < 0x80 {
			x[f] = uint64(c)
			off++
			continue
		}
		v, k := peekUvarintLong(b, off)
		if k == 0 {
			return 0
		}
		x[f] = v
		off += k
	}
	return off - start
}

// peekUvarintLong decodes a minimal uvarint of two or more bytes at
// b[off:] and returns it with its length, or length 0 if it is truncated,
// not minimal or overflows.
func peekUvarintLong(b []byte, off int) (uint64, int) {
	if off >= len(b) {
		return 0, 0
	}
	b = b[off:]
	if len(b) >= 5 {
		// Up to five bytes (35 bits: node ids, generations) unrolled:
		// the lengths repeat entry after entry, so the branches predict.
		x := uint64(b[0] & 0x7f)
		c := b[1]
		x |= uint64(c&0x7f) << 7
		if c < 0x80 {
			return x, minimal(c, 2)
		}
		c = b[2]
		x |= uint64(c&0x7f) << 14
		if c < 0x80 {
			return x, minimal(c, 3)
		}
		c = b[3]
		x |= uint64(c&0x7f) << 21
		if c < 0x80 {
			return x, minimal(c, 4)
		}
		c = b[4]
		x |= uint64(c&0x7f) << 28
		if c < 0x80 {
			return x, minimal(c, 5)
		}
	}
	var x uint64
	var shift uint
	for i, c := range b {
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 || c == 0 && i > 0 {
				return 0, 0
			}
			return x | uint64(c)<<shift, i + 1
		}
		if i == binary.MaxVarintLen64-1 {
			return 0, 0
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

// bounded reads a uvarint that must not exceed limit.
func (d *decoder) bounded(field string, limit uint64) uint64 {
	start := d.off
	v := d.uvarint(field)
	if v > limit && d.err == nil {
		d.off = start
		d.fail(ErrMalformed, field, fmt.Sprintf("value %d exceeds %d", v, limit))
		return 0
	}
	return v
}

// time reads a wall-clock stamp: an int64 of Unix ns, never negative.
func (d *decoder) time(field string) int64 {
	start := d.off
	v := d.uvarint(field)
	if v > math.MaxInt64 && d.err == nil {
		d.off = start
		d.fail(ErrBadTime, field, fmt.Sprintf("%d exceeds int64", v))
		return 0
	}
	return int64(v)
}

// times reads a reply's stamps: all zero (unstamped), or all positive
// with Sent >= Recv (the peer cannot answer before it received).
func (d *decoder) times() Times {
	start := d.off
	t := Times{Echo: d.time("times.echo"), Recv: d.time("times.recv"), Sent: d.time("times.sent")}
	if d.err == nil {
		if err := t.check(); err != "" {
			d.off = start
			d.fail(ErrBadTime, "times", err)
		}
	}
	return t
}

// check returns what is wrong with t ("" if nothing): see Times.
func (t Times) check() string {
	switch {
	case t == Times{}:
		return ""
	case t.Echo <= 0 || t.Recv <= 0 || t.Sent <= 0:
		return fmt.Sprintf("stamps %d/%d/%d: partly zero or negative", t.Echo, t.Recv, t.Sent)
	case t.Sent < t.Recv:
		return fmt.Sprintf("sent %d before received %d", t.Sent, t.Recv)
	}
	return ""
}

// count reads a length and checks it against limit and the bytes left.
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

// digestFields are the field names of a digest list's entries, for
// errors (built once: a list has up to a million entries).
type digestFields struct{ node, gen, ver string }

var fieldNames = map[string]*digestFields{
	"digests":  {"digests.node", "digests.generation", "digests.version"},
	"requests": {"requests.node", "requests.generation", "requests.version"},
}

// digests reads a digest list, into *buf if it is not nil (reusing its
// memory and leaving the grown list there).
func (d *decoder) digests(field string, buf *[]Digest) []Digest {
	f := fieldNames[field]
	n := d.count(field, MaxEntries, minDigestSize)
	if n == 0 {
		return nil
	}
	var ds []Digest
	switch {
	case buf == nil:
		ds = make([]Digest, n)
	case cap(*buf) >= n:
		ds = (*buf)[:n]
	default:
		ds = make([]Digest, n)
		*buf = ds
	}
	for i := range ds {
		// Fast path: three well-formed uvarints and a node above the
		// previous; anything else is re-read below to report it.
		if d.err == nil {
			var f [3]uint64
			if k := peekFields(d.b, d.off, f[:]); k > 0 && f[0] <= math.MaxUint32 && (i == 0 || wire.ProcID(f[0]) > ds[i-1].Node) {
				ds[i] = Digest{Node: wire.ProcID(f[0]), Generation: f[1], Version: f[2]}
				d.off += k
				continue
			}
		}
		start := d.off
		node := wire.ProcID(d.bounded(f.node, math.MaxUint32))
		if i > 0 && node <= ds[i-1].Node && d.err == nil {
			d.off = start
			d.fail(ErrMalformed, f.node, "nodes not strictly increasing")
		}
		ds[i] = Digest{Node: node, Generation: d.uvarint(f.gen), Version: d.uvarint(f.ver)}
		if d.err != nil {
			return nil
		}
	}
	return ds
}

// states reads a state list, into *buf if it is not nil (see digests).
func (d *decoder) states(buf *[]EndpointState) []EndpointState {
	n := d.count("states", MaxEntries, minStateSize)
	if n == 0 {
		return nil
	}
	var ss []EndpointState
	switch {
	case buf == nil:
		ss = make([]EndpointState, n)
	case cap(*buf) >= n:
		ss = (*buf)[:n]
		clear(ss)
	default:
		ss = make([]EndpointState, n)
		*buf = ss
	}
	for i := range ss {
		s := &ss[i]
		// Fast path: a state without items (heartbeat deltas), well
		// formed; anything else is read below.
		if d.err == nil {
			// node, generation, base, heartbeat, item count
			var f [5]uint64
			if k := peekFields(d.b, d.off, f[:]); k > 0 && f[4] == 0 && f[0] <= math.MaxUint32 &&
				(i == 0 || wire.ProcID(f[0]) > ss[i-1].Node) && (f[3] == 0 || f[3] > f[2]) {
				*s = EndpointState{Node: wire.ProcID(f[0]), Generation: f[1], Base: f[2], Heartbeat: f[3]}
				d.off += k
				continue
			}
		}
		start := d.off
		s.Node = wire.ProcID(d.bounded("states.node", math.MaxUint32))
		if i > 0 && s.Node <= ss[i-1].Node && d.err == nil {
			d.off = start
			d.fail(ErrMalformed, "states.node", "nodes not strictly increasing")
		}
		s.Generation = d.uvarint("states.generation")
		s.Base = d.uvarint("states.base")
		start = d.off
		s.Heartbeat = d.uvarint("states.heartbeat")
		if s.Heartbeat != 0 && s.Heartbeat <= s.Base && d.err == nil {
			d.off = start
			d.fail(ErrMalformed, "states.heartbeat", "heartbeat not above base")
		}
		if m := d.count("states.items", MaxItems, minItemSize); m > 0 {
			s.States = make([]AppState, m)
			for j := range s.States {
				a := &s.States[j]
				start := d.off
				a.Key = Key(d.bounded("states.items.key", math.MaxUint16))
				if d.err == nil && (a.Key == KeyInvalid || j > 0 && a.Key <= s.States[j-1].Key) {
					d.off = start
					d.fail(ErrMalformed, "states.items.key", "keys not strictly increasing from 1")
				}
				start = d.off
				a.Version = d.uvarint("states.items.version")
				if a.Version <= s.Base && d.err == nil {
					d.off = start
					d.fail(ErrMalformed, "states.items.version", "version not above base")
				}
				if l := d.count("states.items.value", MaxValue, 1); l > 0 {
					a.Value = string(d.b[d.off : d.off+l])
					d.off += l
				}
			}
		}
		if d.err != nil {
			return nil
		}
	}
	return ss
}
