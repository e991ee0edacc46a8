package membership

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/weft-dev/weft/wire"
)

func codecSamples() []Message {
	return []Message{
		&Syn{Cluster: "weft"},
		&Syn{Cluster: "weft", Digests: []Digest{{0, 0, 0}, {1, 1767225600, 52}, {math.MaxUint32, math.MaxUint64, math.MaxUint64}}},
		&Ack{},
		&Ack{Requests: []Digest{{3, 1000, 49}}, States: []EndpointState{
			{Node: 2, Generation: 1000, Base: 40, Heartbeat: 44},
			{Node: 3, Generation: 1003, Heartbeat: 2, States: []AppState{{KeyStatus, 1, "NORMAL"}, {KeyLoad, 2, ""}, {KeyFirstApp, 3, strings.Repeat("v", 300)}}},
		}},
		&Ack2{States: []EndpointState{{Node: 1, Generation: 1000, Base: 49, Heartbeat: 52}}},
		&Ack2{States: []EndpointState{{Node: 9, Generation: 5, Base: 7, States: []AppState{{Key(math.MaxUint16), 8, "x"}}}}},
		// Stamped (wire version 2): wall times in Unix ns, the extremes too.
		&Syn{Sent: 1767225600_000000000, Cluster: "weft", Digests: []Digest{{2, 1767225600, 9}}},
		&Ack{Times: Times{Echo: 1767225600_000000000, Recv: 1767225600_250000000, Sent: 1767225600_250000001}},
		&Ack2{Times: Times{Echo: 1, Recv: math.MaxInt64, Sent: math.MaxInt64}, States: []EndpointState{{Node: 1, Generation: 3, Heartbeat: 4}}},
		// Probes (wire version 3).
		&Ping{},
		&Ping{Sent: 1767225600_000000000, Generation: 1767225600, Heartbeat: 42},
		&Pong{Echo: math.MaxInt64, Generation: math.MaxUint64, Heartbeat: math.MaxUint64},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, m := range codecSamples() {
		checkRoundTrip(t, m)
	}
}

func checkRoundTrip(t *testing.T, m Message) {
	t.Helper()
	b := Append(nil, m)
	if len(b) != Size(m) {
		t.Fatalf("%s: Size %d, encoded %d", Describe(m), Size(m), len(b))
	}
	if b[0] != kindVersion(m.Kind()) || Kind(b[1]) != m.Kind() {
		t.Fatalf("header % x", b[:2])
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatalf("%s: %v", Describe(m), err)
	}
	if !reflect.DeepEqual(normalize(got), normalize(m)) {
		t.Fatalf("round trip:\n got %s\nwant %s", Describe(got), Describe(m))
	}
	if b2 := Append(nil, got); !bytes.Equal(b, b2) {
		t.Fatal("re-encoding differs")
	}
}

// normalize maps empty slices to nil, as Decode returns them.
func normalize(m Message) Message {
	norm := func(ss []EndpointState) []EndpointState {
		if len(ss) == 0 {
			return nil
		}
		out := make([]EndpointState, len(ss))
		for i, s := range ss {
			if len(s.States) == 0 {
				s.States = nil
			}
			out[i] = s
		}
		return out
	}
	nd := func(ds []Digest) []Digest {
		if len(ds) == 0 {
			return nil
		}
		return ds
	}
	switch m := m.(type) {
	case *Syn:
		return &Syn{Cluster: m.Cluster, Digests: nd(m.Digests)}
	case *Ack:
		return &Ack{Requests: nd(m.Requests), States: norm(m.States)}
	case *Ack2:
		return &Ack2{States: norm(m.States)}
	}
	return m
}

func TestDecodeErrors(t *testing.T) {
	u := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	// hdr is a message's header with its stamps unset (all zero).
	hdr := func(k Kind) []byte {
		if k == KindSyn {
			return []byte{kindVersion(k), byte(k), 0}
		}
		return []byte{kindVersion(k), byte(k), 0, 0, 0}
	}
	raw := func(k Kind) []byte { return []byte{kindVersion(k), byte(k)} }
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"bad version", []byte{1, 1}, ErrVersion},
		{"no kind", []byte{WireVersion}, ErrMalformed},
		{"unknown kind", []byte{WireVersion, 9}, ErrUnknownKind},
		{"version 4", []byte{WireVersion + 1, 1}, ErrVersion},
		{"syn as version 3", []byte{3, byte(KindSyn), 0, 0, 0}, ErrVersion},
		{"ping as version 2", []byte{2, byte(KindPing), 0, 0, 0}, ErrVersion},
		{"truncated ping", raw(KindPing), ErrMalformed},
		{"ping time over int64", cat(raw(KindPing), u(1<<63, 1, 1)), ErrBadTime},
		{"pong truncated", cat(raw(KindPong), u(1, 1)), ErrMalformed},
		{"pong trailing bytes", cat(raw(KindPong), u(1, 1, 1, 0)), ErrMalformed},
		{"truncated syn", hdr(KindSyn), ErrMalformed},
		{"truncated stamp", raw(KindSyn), ErrMalformed},
		{"syn time over int64", cat(raw(KindSyn), u(1<<63), u(1), []byte("w"), u(0)), ErrBadTime},
		{"reply time over int64", cat(raw(KindAck2), u(5, 1<<63, 1<<63), u(0)), ErrBadTime},
		{"reply stamps partly zero", cat(raw(KindAck), u(5, 0, 7), u(0, 0)), ErrBadTime},
		{"reply echo zero", cat(raw(KindAck2), u(0, 6, 7), u(0)), ErrBadTime},
		{"reply sent before received", cat(raw(KindAck), u(5, 9, 8), u(0, 0)), ErrBadTime},
		{"cluster too long", cat(hdr(KindSyn), u(256)), ErrTooLarge},
		{"cluster truncated", cat(hdr(KindSyn), u(5), []byte("ab")), ErrMalformed},
		{"trailing bytes", cat(hdr(KindAck2), u(0), []byte{0}), ErrMalformed},
		{"non-minimal varint", cat(hdr(KindAck2), []byte{0x80, 0x00}), ErrMalformed},
		{"varint overflow", cat(hdr(KindAck2), bytes.Repeat([]byte{0xff}, 10), []byte{1}), ErrMalformed},
		{"huge count, few bytes", cat(hdr(KindAck2), u(1000)), ErrMalformed},
		{"count over cap", cat(hdr(KindAck2), u(MaxEntries+1)), ErrTooLarge},
		{"digests not increasing", cat(hdr(KindSyn), u(1), []byte("w"), u(2, 5, 1, 1, 5, 1, 1)), ErrMalformed},
		{"node over 32 bits", cat(hdr(KindAck), u(1, 1<<32, 1, 1), u(0)), ErrMalformed},
		{"states not increasing", cat(hdr(KindAck2), u(2, 4, 1, 0, 1, 0, 3, 1, 0, 1, 0)), ErrMalformed},
		{"heartbeat not above base", cat(hdr(KindAck2), u(1, 4, 1, 5, 5, 0)), ErrMalformed},
		{"key 0", cat(hdr(KindAck2), u(1, 4, 1, 0, 1, 1, 0, 1, 0)), ErrMalformed},
		{"keys not increasing", cat(hdr(KindAck2), u(1, 4, 1, 0, 1, 2, 2, 1, 0, 1, 2, 0)), ErrMalformed},
		{"key over 16 bits", cat(hdr(KindAck2), u(1, 4, 1, 0, 1, 1, 1<<16, 1, 0)), ErrMalformed},
		{"item version not above base", cat(hdr(KindAck2), u(1, 4, 1, 3, 0, 1, 1, 3, 0)), ErrMalformed},
		{"too many items", cat(hdr(KindAck2), u(1, 4, 1, 0, 1, MaxItems+1)), ErrTooLarge},
		{"value over cap", cat(hdr(KindAck2), u(1, 4, 1, 0, 1, 1, 1, 1, MaxValue+1)), ErrTooLarge},
		{"value truncated", cat(hdr(KindAck2), u(1, 4, 1, 0, 1, 1, 1, 1, 3), []byte("ab")), ErrMalformed},
	} {
		m, err := Decode(tc.b)
		if m != nil || !errors.Is(err, tc.want) {
			t.Errorf("%s: (%v, %v), want %v", tc.name, m, err, tc.want)
		}
	}
}

// TestDecodeDoesNotAlias: decoded strings survive the input buffer being
// overwritten.
func TestDecodeDoesNotAlias(t *testing.T) {
	m := codecSamples()[3]
	b := Append(nil, m)
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if !reflect.DeepEqual(normalize(got), normalize(m)) {
		t.Fatal("decoded message aliased the input")
	}
}

func fuzzSeeds() [][]byte {
	var out [][]byte
	for _, m := range codecSamples() {
		out = append(out, Append(nil, m))
	}
	return append(out, nil, []byte{WireVersion}, []byte{2, 1, 0x80}, []byte{3, byte(KindPing), 0x80})
}

// FuzzDecode: Decode never panics, fails only with a sentinel, and what it
// accepts re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	seeds := fuzzSeeds()
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		// A reused Decoder, dirtied by another message first, agrees.
		var dc Decoder
		_, _ = dc.Decode(seeds[len(data)%len(seeds)])
		m2, err2 := dc.Decode(data)
		if fmt.Sprint(err) != fmt.Sprint(err2) || err == nil && !bytes.Equal(Append(nil, m), Append(nil, m2)) {
			t.Fatalf("Decoder: %v %v, Decode: %v %v", m2, err2, m, err)
		}
		if err != nil {
			if m != nil {
				t.Fatalf("Decode returned %v with error %v", m, err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) &&
				!errors.Is(err, ErrUnknownKind) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrBadTime) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}
		enc := Append(nil, m)
		if !bytes.Equal(enc, data) {
			t.Fatalf("re-encoding differs:\n in  % x\n out % x", data, enc)
		}
		if Size(m) != len(enc) {
			t.Fatalf("Size %d, encoding %d", Size(m), len(enc))
		}
		// Whatever decodes is acceptable to a Node's Step validation.
		switch m := m.(type) {
		case *Syn:
			if err := validDigests(m.Digests); err != nil || m.Sent < 0 {
				t.Fatal(err, m.Sent)
			}
		case *Ack:
			if err := validStates(m.States); err != nil || m.Times.check() != "" {
				t.Fatal(err, m.Times.check())
			}
		case *Ack2:
			if err := validStates(m.States); err != nil || m.Times.check() != "" {
				t.Fatal(err, m.Times.check())
			}
		}
		_ = Describe(m)
	})
}

// byteSource feeds the fuzzer's bytes to a rand.Source, then a fixed PCG.
type byteSource struct {
	b    []byte
	rest rand.PCG
}

func (s *byteSource) Uint64() uint64 {
	if len(s.b) >= 8 {
		v := binary.LittleEndian.Uint64(s.b)
		s.b = s.b[8:]
		return v
	}
	return s.rest.Uint64()
}

// randMessage builds a valid message of kind k from r.
func randMessage(r *rand.Rand, k Kind) Message {
	big := func() uint64 {
		switch r.IntN(4) {
		case 0:
			return uint64(r.IntN(200))
		case 1:
			return math.MaxUint64 - uint64(r.IntN(3))
		}
		return r.Uint64() >> r.IntN(64)
	}
	nodes := func(n int) []wire.ProcID {
		var ids []wire.ProcID
		next := uint64(r.IntN(10))
		for i := 0; i < n && next <= math.MaxUint32; i++ {
			ids = append(ids, wire.ProcID(next))
			next += 1 + uint64(r.IntN(1<<uint(r.IntN(31))))
		}
		return ids
	}
	digests := func() []Digest {
		var ds []Digest
		for _, id := range nodes(r.IntN(6)) {
			ds = append(ds, Digest{id, big(), big()})
		}
		return ds
	}
	states := func() []EndpointState {
		var ss []EndpointState
		for _, id := range nodes(r.IntN(5)) {
			s := EndpointState{Node: id, Generation: big()}
			if r.IntN(2) == 0 {
				s.Base = uint64(r.IntN(1000))
			}
			if r.IntN(3) > 0 {
				s.Heartbeat = s.Base + 1 + uint64(r.IntN(1000))
			}
			key := 1 + r.IntN(5)
			for j := r.IntN(4); j > 0 && key <= math.MaxUint16; j-- {
				v := strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(40))
				s.States = append(s.States, AppState{Key(key), s.Base + 1 + uint64(r.IntN(5000)), v})
				key += 1 + r.IntN(1<<uint(r.IntN(16)))
			}
			ss = append(ss, s)
		}
		return ss
	}
	stamp := func() int64 { return int64(big() >> 1) }
	times := func() Times {
		if r.IntN(4) == 0 {
			return Times{} // unstamped
		}
		t := Times{Echo: 1 + stamp()>>1, Recv: 1 + stamp()>>1}
		t.Sent = t.Recv + stamp()>>1
		return t
	}
	switch k {
	case KindSyn:
		return &Syn{Sent: stamp(), Cluster: strings.Repeat("c", r.IntN(MaxClusterName+1)), Digests: digests()}
	case KindAck:
		return &Ack{Times: times(), Requests: digests(), States: states()}
	case KindPing:
		return &Ping{Sent: stamp(), Generation: big(), Heartbeat: big()}
	case KindPong:
		return &Pong{Echo: stamp(), Generation: big(), Heartbeat: big()}
	}
	return &Ack2{Times: times(), States: states()}
}

// numKinds is the number of message kinds, KindSyn..KindPong.
const numKinds = int(KindPong-KindSyn) + 1

// FuzzRoundTrip: every valid message the fuzzer can steer survives the
// codec.
func FuzzRoundTrip(f *testing.F) {
	for k := KindSyn; k <= KindPong; k++ {
		f.Add(uint8(k), []byte{})
		f.Add(uint8(k), bytes.Repeat([]byte{0xff, 0x07, 0x80, 0x01}, 64))
	}
	f.Fuzz(func(t *testing.T, k uint8, data []byte) {
		r := rand.New(&byteSource{b: data, rest: *rand.NewPCG(5, 6)})
		checkRoundTrip(t, randMessage(r, KindSyn+Kind(int(k)%numKinds)))
	})
}

func TestRandomRoundTrips(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 3000; i++ {
		checkRoundTrip(t, randMessage(r, KindSyn+Kind(i%numKinds)))
	}
}

// TestDecoderReuse: one Decoder decoding a stream of random messages (and
// broken ones) returns what Decode returns, and the app-state lists it
// returned earlier stay intact.
func TestDecoderReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var dc Decoder
	type kept struct {
		items []AppState
		want  string
	}
	var keep []kept
	for i := 0; i < 3000; i++ {
		b := Append(nil, randMessage(r, KindSyn+Kind(r.IntN(numKinds))))
		if r.IntN(10) == 0 && len(b) > 2 {
			b = b[:2+r.IntN(len(b)-2)] // truncated
		}
		want, werr := Decode(b)
		got, gerr := dc.Decode(b)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) {
			t.Fatalf("message %d: Decoder error %v, Decode %v", i, gerr, werr)
		}
		if werr != nil {
			continue
		}
		if Describe(got) != Describe(want) {
			t.Fatalf("message %d: Decoder %s, Decode %s", i, Describe(got), Describe(want))
		}
		var ss []EndpointState
		switch m := got.(type) {
		case *Ack:
			ss = m.States
		case *Ack2:
			ss = m.States
		}
		for _, s := range ss {
			if len(s.States) > 0 {
				keep = append(keep, kept{s.States, fmt.Sprint(s.States)})
			}
		}
	}
	for _, k := range keep {
		if fmt.Sprint(k.items) != k.want {
			t.Fatal("an app-state list returned earlier was overwritten")
		}
	}
	if len(keep) == 0 {
		t.Fatal("no app-state lists to check")
	}
}

// peekUvarint decodes one uvarint with the decoder's fast path.
func peekUvarint(b []byte, off int) (uint64, int) {
	var x [1]uint64
	k := peekFields(b, off, x[:])
	return x[0], k
}

// TestVarintFastPaths checks the codec's uvarint shortcuts against
// encoding/binary: every length, trailing bytes or none, non-minimal,
// overflowing and truncated inputs.
func TestVarintFastPaths(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 200000; i++ {
		x := r.Uint64() >> uint(r.IntN(64))
		want := binary.AppendUvarint(nil, x)
		b := make([]byte, 16)
		if n := putUvarint(b, x); !bytes.Equal(b[:n], want) {
			t.Fatalf("putUvarint(%#x) = % x, want % x", x, b[:n], want)
		}
		in := append(append([]byte{0x55}, want...), make([]byte, r.IntN(10))...)
		for k := 1 + len(want); k < len(in); k++ {
			in[k] = byte(r.Uint32())
		}
		if got, n := peekUvarint(in, 1); got != x || n != len(want) {
			t.Fatalf("peekUvarint(% x) = %#x, %d, want %#x, %d", in, got, n, x, len(want))
		}
		if n := len(want); n > 1 {
			if _, k := peekUvarint(want[:n-1], 0); k != 0 {
				t.Fatalf("truncated % x accepted", want[:n-1])
			}
		}
		if len(want) < binary.MaxVarintLen64 {
			// The same value with a redundant zero group.
			long := append(append([]byte(nil), want...), 0)
			long[len(want)-1] |= 0x80
			long = append(long, make([]byte, r.IntN(10))...)
			if _, k := peekUvarint(long, 0); k != 0 {
				t.Fatalf("non-minimal % x accepted", long)
			}
		}
	}
	for _, bad := range [][]byte{
		bytes.Repeat([]byte{0xff}, 10),                                 // no end
		append(bytes.Repeat([]byte{0xff}, 9), 0x02),                    // 65 bits
		append(bytes.Repeat([]byte{0xff}, 10), 0x01, 0, 0, 0, 0, 0, 0), // 11 bytes
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00},         // zero, 9 bytes
	} {
		if _, k := peekUvarint(bad, 0); k != 0 {
			t.Errorf("% x accepted", bad)
		}
	}
	if x, k := peekUvarint(append(bytes.Repeat([]byte{0xff}, 9), 0x01), 0); x != math.MaxUint64 || k != 10 {
		t.Errorf("max uint64: %#x %d", x, k)
	}
}
