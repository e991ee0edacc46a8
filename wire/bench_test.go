package wire

import (
	"bytes"
	"testing"
)

// Benchmarks.

func benchAccept() *Accept {
	return &Accept{
		M: AppMsg{
			ID:      MsgID{Client: 1001, Seq: 123456},
			Dest:    []GroupID{0, 2, 5},
			Payload: bytes.Repeat([]byte("x"), 32),
		},
		G:   2,
		B:   Ballot{N: 3, P: 7},
		LTS: Timestamp{T: 98765, G: 2},
	}
}

func BenchmarkEncodeAccept(b *testing.B) {
	m := benchAccept()
	buf := Append(nil, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = Append(buf[:0], m)
	}
	b.ReportMetric(float64(len(buf)), "bytes/msg")
}

func BenchmarkEncodeAcceptFresh(b *testing.B) {
	m := benchAccept()
	b.ReportAllocs()
	for b.Loop() {
		_ = Append(nil, m)
	}
}

func BenchmarkDecodeAccept(b *testing.B) {
	enc := Append(nil, benchAccept())
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(enc)), "bytes/msg")
}
