package membership

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkRound measures one steady-state gossip round (every node ticks
// once; all SYN/ACK/ACK2 exchanges delivered) of a converged cluster, on
// the in-test network: per node per round, CPU time (ns/node-round), wire
// bytes sent (wireB/node-round, from the nodes' exact encoded sizes) and
// heap allocation (allocB/node-round). Messages are passed in memory, not
// encoded, as the simulator will.
func BenchmarkRound(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			nw := newNet(b, 42, size, testConfig(Cassandra(), 0, 1, 2))
			nw.checkEvery = time.Second
			nw.converge(120 * time.Second)
			nw.runFor(10 * time.Second)
			sent := func() (s uint64) {
				for _, sn := range nw.nodes {
					s += sn.n.Stats().BytesSent
				}
				return s
			}
			bytes0 := sent()
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			rounds := 0
			for b.Loop() {
				nw.runFor(time.Second)
				rounds++
			}
			runtime.ReadMemStats(&m1)
			per := float64(rounds * size)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/node-round")
			b.ReportMetric(float64(sent()-bytes0)/per, "wireB/node-round")
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/per, "allocB/node-round")
			b.ReportMetric(float64(m1.HeapInuse)/float64(size), "heapB/node")
		})
	}
}
