package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

// TestTimelineCPU: each interval's cores and CPU per multicast come from
// that interval's ticks and completions, not the window's.
func TestTimelineCPU(t *testing.T) {
	h := func(n int) latHist {
		x := newLatHist()
		for range n {
			x.add(int64(time.Millisecond))
		}
		return x
	}
	// Two 10 s intervals: 20,000 then 10,000 multicasts; the agents used
	// 13 s then 14 s of CPU (ticks of 10 ms), the clients 5 s then 5 s.
	tl := timeline([]latHist{h(20000), h(10000)}, 10*time.Second,
		[][2]float64{{100, 800}, {101, 810}}, [][2]uint64{{1300, 500}, {1400, 500}})
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9*max(1, math.Abs(want)) }
	for i, want := range []struct{ srv, cli, us, tput float64 }{{1.3, 0.5, 900, 2000}, {1.4, 0.5, 1900, 1000}} {
		iv := tl[i]
		if !near(iv.AgentCores, want.srv) || !near(iv.ClientCores, want.cli) || !near(iv.CPUPerMsgUs, want.us) || !near(iv.Throughput, want.tput) {
			t.Errorf("interval %d: cores %.3f/%.3f, %.1f µs/msg, %.0f/s; want %.1f/%.1f, %.0f, %.0f",
				i, iv.AgentCores, iv.ClientCores, iv.CPUPerMsgUs, iv.Throughput, want.srv, want.cli, want.us, want.tput)
		}
	}
	// An interval without CPU samples (the run ended early) reports none.
	if tl := timeline([]latHist{h(5)}, time.Second, nil, nil); tl[0].AgentCores != 0 || tl[0].CPUPerMsgUs != 0 {
		t.Errorf("no samples: %+v", tl[0])
	}
	var b bytes.Buffer
	writeTimeline(&b, []benchRow{{Protocol: "wbcast", Durability: "nofsync", GroupsPerMsg: 1, Clients: 90, Timeline: tl}})
	if out := b.String(); !strings.Contains(out, "CPU per multicast +111.1%") || !strings.Contains(out, "1900.0µs") {
		t.Errorf("timeline output:\n%s", out)
	}
}
