package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Fuzzing.

func fuzzSeeds() [][]byte {
	var seeds [][]byte
	for _, s := range samples() {
		seeds = append(seeds, Append(nil, s.m))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range allKinds() {
		seeds = append(seeds, Append(nil, randMessage(r, k)))
	}
	return seeds
}

// FuzzDecode checks Decode never panics, fails only with the sentinels, and
// is canonical: whatever decodes re-encodes to the same bytes and decodes to
// an equal value.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if m != nil {
				t.Fatalf("Decode returned %v with error %v", m, err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) &&
				!errors.Is(err, ErrUnknownKind) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Decode error %v wraps no sentinel", err)
			}
			if m, _, err2 := DecodeReusing(data, nil); m != nil || err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("DecodeReusing: %v, %v; Decode: %v", m, err2, err)
			}
			return
		}
		enc := Append(nil, m)
		if !bytes.Equal(enc, data) {
			t.Fatalf("re-encoding differs:\n in  % x\n out % x", data, enc)
		}
		if Size(m) != len(enc) {
			t.Fatalf("Size = %d, encoding has %d bytes", Size(m), len(enc))
		}
		m2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decode mismatch:\n %#v\n %#v", m, m2)
		}
		// DecodeReusing decodes the same message into a used array.
		arena := make([]SeqDigest, 3, 5)
		m3, arena, err := DecodeReusing(data, arena)
		if err != nil || !bytes.Equal(Append(nil, m3), data) || len(arena) < 3 {
			t.Fatalf("DecodeReusing: %v, %d ids in the array", err, len(arena))
		}
		_ = Describe(m)
	})
}

// byteSource is a rand.Source reading the fuzzer's bytes, so the fuzzer
// steers the random message generator. When the bytes run out it continues
// with a fixed PCG stream (a constant stream would make rand's rejection
// sampling loop forever).
type byteSource struct {
	b    []byte
	rest rand.PCG
}

func (s *byteSource) Uint64() uint64 {
	if len(s.b) == 0 {
		return s.rest.Uint64()
	}
	var buf [8]byte
	n := copy(buf[:], s.b)
	s.b = s.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// FuzzRoundTrip builds messages from fuzzer-chosen field values and checks
// they round-trip.
func FuzzRoundTrip(f *testing.F) {
	for i := range allKinds() {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), bytes.Repeat([]byte{0xff, 0x07, 0x80, 0x01}, 64))
	}
	kinds := allKinds()
	f.Fuzz(func(t *testing.T, k uint8, data []byte) {
		r := rand.New(&byteSource{b: data, rest: *rand.NewPCG(5, 6)})
		checkRoundTrip(t, randMessage(r, kinds[int(k)%len(kinds)]))
	})
}
