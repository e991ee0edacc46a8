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
