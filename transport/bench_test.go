package transport

import (
	"errors"
	"log/slog"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// BenchmarkLoopback measures one-way throughput of small messages (a
// PROPOSE of about 10 bytes, about 19 with the frame overhead) between two
// transports over loopback TCP. The sender retries when its queue is full, so nothing is
// dropped and msgs/s is the rate the receiver's Handler sees.
func BenchmarkLoopback(b *testing.B) {
	var got atomic.Int64
	var target atomic.Int64
	done := make(chan struct{}, 1)
	lnA, lnB := listen(b), listen(b)
	peers := map[wire.ProcID]string{1: lnA.Addr().String(), 2: lnB.Addr().String()}
	mk := func(self wire.ProcID, ln net.Listener, h func(wire.ProcID, wire.Message)) *Transport {
		cfg := Config{ClusterName: "bench", Self: self, Listener: ln, Peers: peers, Handler: h, Logger: slog.New(slog.DiscardHandler)}
		tr, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return tr
	}
	a := mk(1, lnA, func(wire.ProcID, wire.Message) {})
	defer a.Close()
	rb := mk(2, lnB, func(wire.ProcID, wire.Message) {
		if got.Add(1) == target.Load() {
			done <- struct{}{}
		}
	})
	defer rb.Close()

	m := &wire.Propose{ID: wire.MsgID{Client: 1, Seq: 1}, G: 1, LTS: wire.Timestamp{T: 1, G: 1}}
	// Warm up: connect.
	target.Store(1)
	for a.Send(2, m) != nil {
		runtime.Gosched()
	}
	<-done

	got.Store(0)
	target.Store(int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		m.ID.Seq = uint64(i)
		for {
			err := a.Send(2, m)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrQueueFull) {
				b.Fatal(err)
			}
			runtime.Gosched()
		}
	}
	<-done
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	st := a.Stats()
	b.ReportMetric(float64(st.BytesOut)/float64(st.FramesOut), "B/frame")
}

// BenchmarkFanout measures the sender's side of one ACCEPT (64-byte
// payload, two destination groups) to the four other members of its
// groups, as a WbCast leader sends it: queued with Send (encoded and
// checksummed per recipient) or with a Batch (once). The peers are
// unreachable and the benchmark empties their queues itself, so only the
// encoding and queueing are timed.
func BenchmarkFanout(b *testing.B) {
	peers := map[wire.ProcID]string{}
	for p := wire.ProcID(2); p <= 5; p++ {
		peers[p] = "127.0.0.1:1" // never dialed successfully
	}
	tr, err := New(Config{ClusterName: "bench", Self: 1, Listen: "127.0.0.1:0", Peers: peers,
		Handler: func(wire.ProcID, wire.Message) {}, Logger: slog.New(slog.DiscardHandler), DialBackoffMin: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	proto := wire.Accept{M: wire.AppMsg{ID: wire.MsgID{Client: 100, Seq: 1}, Dest: []wire.GroupID{0, 1}, Payload: make([]byte, 64)},
		G: 0, B: wire.Ballot{N: 1, P: 1}, LTS: wire.Timestamp{T: 7, G: 0}, Linf: wire.Timestamp{T: 6, G: 0}}
	spare := map[wire.ProcID][]byte{}
	drain := func() {
		for p := wire.ProcID(2); p <= 5; p++ {
			spare[p], _ = tr.peers[p].q.take(spare[p])
		}
	}
	b.Run("send", func(b *testing.B) {
		acc := &proto
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			acc.M.ID.Seq = uint64(i)
			for p := wire.ProcID(2); p <= 5; p++ {
				if err := tr.Send(p, acc); err != nil {
					b.Fatal(err)
				}
			}
			if i%64 == 63 {
				drain()
			}
		}
	})
	b.Run("batch", func(b *testing.B) {
		bt := tr.NewBatch()
		accs := make([]wire.Accept, 64) // a Batch's messages are not changed before Flush
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			acc := &accs[i%64]
			*acc = wire.Accept{M: proto.M, G: proto.G, B: proto.B, LTS: proto.LTS, Linf: proto.Linf}
			acc.M.ID.Seq = uint64(i)
			for p := wire.ProcID(2); p <= 5; p++ {
				if err := bt.Send(p, acc); err != nil {
					b.Fatal(err)
				}
			}
			if i%64 == 63 {
				bt.Flush()
				drain()
			}
		}
	})
}
