package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/weft-dev/weft/wire"
)

func sampleMessages() []wire.Message {
	big := make([]byte, 200<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	return []wire.Message{
		&wire.Propose{ID: wire.MsgID{Client: 7, Seq: 1}, G: 1, LTS: wire.Timestamp{T: 3, G: 1}},
		&wire.Multicast{M: wire.AppMsg{ID: wire.MsgID{Client: 100, Seq: 9}, Dest: []wire.GroupID{0, 2}, Payload: []byte("hello")}},
		&wire.Multicast{M: wire.AppMsg{ID: wire.MsgID{Client: 100, Seq: 10}, Dest: []wire.GroupID{1}, Payload: big}},
		&wire.Heartbeat{B: wire.Ballot{N: 2, P: 1}, Leader: true},
		&wire.Delivered{ID: wire.MsgID{Client: 100, Seq: 9}, G: 2, GTS: wire.Timestamp{T: 5, G: 2}, Leader: 4},
	}
}

func TestFrameRoundTrip(t *testing.T) {
	var stream []byte
	var want [][]byte
	for _, m := range sampleMessages() {
		enc := wire.Append(nil, m)
		want = append(want, enc)
		a := AppendMessageFrame(nil, m)
		b := AppendFrame(nil, FrameMessage, enc)
		if !bytes.Equal(a, b) {
			t.Fatalf("AppendMessageFrame and AppendFrame differ for %s", m.Kind())
		}
		if len(a) != len(enc)+FrameOverhead {
			t.Fatalf("frame of %d bytes for a %d-byte payload", len(a), len(enc))
		}
		stream = append(stream, a...)
	}
	notice := AppendNotice(nil, Notice{Reason: ReasonShutdown, Text: "bye"})
	stream = AppendFrame(stream, FrameClose, notice)
	want = append(want, notice)

	// DecodeFrame, frame after frame.
	rest := stream
	for i, w := range want {
		typ, payload, n, err := DecodeFrame(rest, DefaultMaxFrame)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if wantType := FrameMessage; i == len(want)-1 {
			wantType = FrameClose
			if typ != wantType {
				t.Fatalf("frame %d: type %s, want %s", i, typ, wantType)
			}
		} else if typ != wantType {
			t.Fatalf("frame %d: type %s, want %s", i, typ, wantType)
		}
		if !bytes.Equal(payload, w) {
			t.Fatalf("frame %d: payload differs", i)
		}
		rest = rest[n:]
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left over", len(rest))
	}

	// FrameReader, over whole reads, one byte at a time, and with a tiny
	// buffer (spill path for every frame).
	readers := map[string]*FrameReader{
		"whole":     NewFrameReader(bytes.NewReader(stream), DefaultMaxFrame),
		"onebyte":   NewFrameReader(iotest.OneByteReader(bytes.NewReader(stream)), DefaultMaxFrame),
		"halfreads": NewFrameReader(iotest.HalfReader(bytes.NewReader(stream)), DefaultMaxFrame),
		"tinybuf":   newFrameReaderSize(bytes.NewReader(stream), DefaultMaxFrame, 16),
	}
	for name, fr := range readers {
		for i, w := range want {
			_, payload, err := fr.Next()
			if err != nil {
				t.Fatalf("%s: frame %d: %v", name, i, err)
			}
			if !bytes.Equal(payload, w) {
				t.Fatalf("%s: frame %d: payload differs", name, i)
			}
			if i < len(want)-1 {
				if _, err := wire.Decode(payload); err != nil {
					t.Fatalf("%s: frame %d: %v", name, i, err)
				}
			}
		}
		if _, _, err := fr.Next(); err != io.EOF {
			t.Fatalf("%s: at end: %v, want io.EOF", name, err)
		}
	}
}

func TestFrameErrors(t *testing.T) {
	good := AppendFrame(nil, FrameMessage, []byte{1, 2, 3, 4})
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x20
		return b
	}
	huge := binary.BigEndian.AppendUint32(nil, 1<<31)
	huge = append(huge, byte(FrameMessage))
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short header", good[:3], ErrTruncated},
		{"short body", good[:len(good)-1], ErrTruncated},
		{"type zero", append([]byte{0, 0, 0, 0, 0}, 0, 0, 0, 0), ErrFrameType},
		{"type unknown", append([]byte{0, 0, 0, 0, 200}, 0, 0, 0, 0), ErrFrameType},
		{"too large", huge, ErrFrameTooLarge},
		{"payload bit flip", flip(FrameHeaderLen + 1), ErrChecksum},
		{"crc bit flip", flip(len(good) - 1), ErrChecksum},
		{"type changed", func() []byte { b := bytes.Clone(good); b[4] = byte(FrameClose); return b }(), ErrChecksum},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, _, err := DecodeFrame(tc.in, 1024); !errors.Is(err, tc.want) {
				t.Errorf("DecodeFrame: %v, want %v", err, tc.want)
			}
			fr := NewFrameReader(bytes.NewReader(tc.in), 1024)
			_, _, err := fr.Next()
			if len(tc.in) == 0 {
				if err != io.EOF {
					t.Errorf("Next on empty input: %v, want io.EOF", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("Next: %v, want %v", err, tc.want)
			}
			if cap(fr.spill) > 0 {
				t.Errorf("Next allocated %d bytes for a bad frame", cap(fr.spill))
			}
		})
	}
	// Exactly at the limit is fine, one byte more is not.
	at := AppendFrame(nil, FrameMessage, make([]byte, 1024))
	if _, _, _, err := DecodeFrame(at, 1024); err != nil {
		t.Errorf("frame at the limit: %v", err)
	}
	if _, _, _, err := DecodeFrame(at, 1023); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("frame over the limit: %v", err)
	}
	if !errors.Is(ErrTruncated, io.ErrUnexpectedEOF) {
		t.Error("ErrTruncated does not wrap io.ErrUnexpectedEOF")
	}
}

// TestFrameReaderSpillBounded checks that the spill buffer grows with the
// bytes received, not with the length a header claims, and that a big
// buffer is not kept after the big frame.
func TestFrameReaderSpillBounded(t *testing.T) {
	const limit = 8 << 20
	hdr := binary.BigEndian.AppendUint32(nil, limit)
	hdr = append(hdr, byte(FrameMessage))
	in := append(hdr, make([]byte, 1000)...) // claims 8 MiB, has 1000 bytes
	fr := NewFrameReader(bytes.NewReader(in), limit)
	if _, _, err := fr.Next(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Next: %v, want ErrTruncated", err)
	}
	if c := cap(fr.spill); c > 2*readBufSize {
		t.Fatalf("spill grew to %d bytes for 1000 received", c)
	}

	big := AppendFrame(nil, FrameMessage, make([]byte, 1<<20))
	small := AppendFrame(nil, FrameMessage, []byte{1})
	fr = NewFrameReader(bytes.NewReader(append(append(big, small...), small...)), limit)
	for i := range 3 {
		if _, _, err := fr.Next(); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if c := cap(fr.spill); c > retainBufSize {
		t.Fatalf("kept a %d-byte spill buffer", c)
	}
}

func TestFrameTypeString(t *testing.T) {
	seen := map[string]bool{}
	for ft := FrameInvalid; ft < frameEnd; ft++ {
		s := ft.String()
		if s == "" || seen[s] {
			t.Errorf("frame type %d has name %q", ft, s)
		}
		seen[s] = true
	}
	if got := FrameType(99).String(); got != "FrameType(99)" {
		t.Errorf("unknown type prints %q", got)
	}
}

// fuzzMaxPayload is the frame limit in the fuzz targets: small, so that
// oversized lengths are common.
const fuzzMaxPayload = 300

func frameSeeds(f *testing.F) {
	f.Add([]byte{})
	for _, m := range sampleMessages()[:2] {
		f.Add(AppendMessageFrame(nil, m))
	}
	two := AppendFrame(nil, FrameHello, AppendHello(nil, Hello{WireVersion: 1, Role: RoleNode, ID: 3, To: 1, Cluster: "c"}))
	two = AppendFrame(two, FrameReject, AppendNotice(nil, Notice{Reason: ReasonClusterName, Text: "no"}))
	f.Add(two)
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{0, 0, 1, 0, 4, 1, 2})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 4})
	r := rand.New(rand.NewPCG(1, 2))
	g := make([]byte, 64)
	for i := range g {
		g[i] = byte(r.Uint32())
	}
	f.Add(g)
}

// FuzzDecodeFrame checks DecodeFrame never panics, never returns a payload
// over the limit, and accepts only canonical frames.
func FuzzDecodeFrame(f *testing.F) {
	frameSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		typ, payload, n, err := DecodeFrame(data, fuzzMaxPayload)
		if err != nil {
			if n != 0 || payload != nil {
				t.Fatalf("error %v with n=%d, payload %d bytes", err, n, len(payload))
			}
			return
		}
		if len(payload) > fuzzMaxPayload || n > len(data) || n != len(payload)+FrameOverhead {
			t.Fatalf("payload %d bytes, n=%d, input %d", len(payload), n, len(data))
		}
		if re := AppendFrame(nil, typ, payload); !bytes.Equal(re, data[:n]) {
			t.Fatalf("re-encoding differs: %x vs %x", re, data[:n])
		}
	})
}

// FuzzFrameReader checks the streaming reader agrees with DecodeFrame
// frame by frame, whatever the buffer size and read pattern, and never
// holds a buffer over the limit.
func FuzzFrameReader(f *testing.F) {
	frameSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, size := range []int{16, 64, readBufSize} {
			var r io.Reader = bytes.NewReader(data)
			if size == 64 {
				r = iotest.OneByteReader(r)
			}
			fr := newFrameReaderSize(r, fuzzMaxPayload, size)
			rest := data
			for {
				typ, payload, err := fr.Next()
				if c := cap(fr.spill); c > fuzzMaxPayload+FrameTrailerLen {
					t.Fatalf("size %d: spill buffer of %d bytes", size, c)
				}
				wt, wp, n, werr := DecodeFrame(rest, fuzzMaxPayload)
				if err != nil {
					if len(rest) == 0 {
						if err != io.EOF {
							t.Fatalf("size %d: at end: %v", size, err)
						}
						break
					}
					if werr == nil {
						t.Fatalf("size %d: reader fails with %v, DecodeFrame accepts", size, err)
					}
					for _, sentinel := range []error{ErrTruncated, ErrFrameType, ErrFrameTooLarge, ErrChecksum} {
						if errors.Is(werr, sentinel) != errors.Is(err, sentinel) {
							t.Fatalf("size %d: reader says %v, DecodeFrame %v", size, err, werr)
						}
					}
					break
				}
				if werr != nil || typ != wt || !bytes.Equal(payload, wp) {
					t.Fatalf("size %d: reader and DecodeFrame disagree (%v)", size, werr)
				}
				rest = rest[n:]
			}
		}
	})
}

// A spill buffer kept from a large frame is reused for a smaller frame that
// still spills: the reader must read that frame only, not fill the buffer
// from the frames after it (it did: the frame after read as truncated, and a
// live connection would have blocked waiting for bytes not yet sent).
func TestFrameReaderReusedSpill(t *testing.T) {
	var stream []byte
	sizes := []int{200, 40, 100, 17, 3}
	for i, n := range sizes {
		stream = AppendFrame(stream, FrameMessage, bytes.Repeat([]byte{byte(i + 1)}, n))
	}
	fr := newFrameReaderSize(bytes.NewReader(stream), DefaultMaxFrame, 16)
	for i, n := range sizes {
		_, p, err := fr.Next()
		if err != nil || !bytes.Equal(p, bytes.Repeat([]byte{byte(i + 1)}, n)) {
			t.Fatalf("frame %d (%d bytes): %d bytes, %v", i, n, len(p), err)
		}
	}
	if _, _, err := fr.Next(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
}
