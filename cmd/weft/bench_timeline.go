package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// The timeline of a long `weft bench` row (--interval; issue #14 item 5:
// throughput must stay flat over a long run, and memory too): each
// interval of the window gets its own throughput, latency percentiles, the
// cores the agents and the clients used in it, and the agents' resident
// memory at its end. The CPU per multicast of each interval tells a run
// that slows because it does more work per multicast from one that slows
// because this machine gave it less: on a shared VM the same work takes
// up to half again the CPU time from one hour to the next
// (docs/batching.md, "Sixteen minutes, sampled").

// benchInterval is one interval of a row's timeline.
type benchInterval struct {
	StartS     float64 `json:"start_s"` // from the start of the window
	Completed  uint64  `json:"completed"`
	Throughput float64 `json:"throughput_per_s"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	// The agents' resident memory at the end of the interval: the largest
	// one's, and all of them together.
	AgentRSSMaxMiB float64 `json:"agent_rss_max_mib"`
	AgentRSSSumMiB float64 `json:"agent_rss_sum_mib"`
	// Cores used by the agents and by the client processes in the
	// interval, and their CPU per multicast completed in it.
	AgentCores  float64 `json:"agent_cores"`
	ClientCores float64 `json:"client_cores"`
	CPUPerMsgUs float64 `json:"cpu_per_msg_us"`
}

// rssKiB is a process's resident set size (/proc/<pid>/status VmRSS), 0 if
// unknown.
func rssKiB(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// agentsRSS returns the largest and the total resident memory of pids, in
// MiB.
func agentsRSS(pids []int) (maxMiB, sumMiB float64) {
	for _, p := range pids {
		m := float64(rssKiB(p)) / 1024
		maxMiB = max(maxMiB, m)
		sumMiB += m
	}
	return maxMiB, sumMiB
}

// timeline builds a row's intervals from the client processes' merged
// histograms (one per interval), the memory samples and the CPU ticks
// (agents', clients') of each interval.
func timeline(hists []latHist, interval time.Duration, rss [][2]float64, cpu [][2]uint64) []benchInterval {
	out := make([]benchInterval, len(hists))
	for i, h := range hists {
		n := h.count()
		out[i] = benchInterval{StartS: (time.Duration(i) * interval).Seconds(), Completed: n,
			Throughput: float64(n) / interval.Seconds(),
			P50ms:      float64(h.quantile(0.5)) / 1e6, P99ms: float64(h.quantile(0.99)) / 1e6}
		if i < len(rss) {
			out[i].AgentRSSMaxMiB, out[i].AgentRSSSumMiB = rss[i][0], rss[i][1]
		}
		if i < len(cpu) && interval > 0 {
			sv, cl := float64(cpu[i][0])/clockTicks, float64(cpu[i][1])/clockTicks // seconds
			out[i].AgentCores, out[i].ClientCores = sv/interval.Seconds(), cl/interval.Seconds()
			if n > 0 {
				out[i].CPUPerMsgUs = (sv + cl) / float64(n) * 1e6
			}
		}
	}
	return out
}

// writeTimeline prints each row's timeline and the change from its first
// interval to its last.
func writeTimeline(w io.Writer, rows []benchRow) {
	for _, r := range rows {
		if len(r.Timeline) == 0 {
			continue
		}
		fmt.Fprintf(w, "\ntimeline: %s %s, %d group(s)/msg, %d clients\n", r.Protocol, r.Durability, r.GroupsPerMsg, r.Clients)
		fmt.Fprintf(w, "%9s %12s %9s %9s %6s %6s %9s %14s %14s\n", "from", "multicasts/s", "p50", "p99", "srv", "cli", "cpu/msg", "agent rss max", "agents rss")
		for _, iv := range r.Timeline {
			fmt.Fprintf(w, "%8.0fs %12.0f %7.2fms %7.2fms %6.2f %6.2f %7.1fµs %10.1f MiB %10.1f MiB\n",
				iv.StartS, iv.Throughput, iv.P50ms, iv.P99ms, iv.AgentCores, iv.ClientCores, iv.CPUPerMsgUs, iv.AgentRSSMaxMiB, iv.AgentRSSSumMiB)
		}
		first, last := r.Timeline[0], r.Timeline[len(r.Timeline)-1]
		if first.Throughput > 0 && first.AgentRSSSumMiB > 0 && first.CPUPerMsgUs > 0 {
			fmt.Fprintf(w, "last interval vs first: throughput %+.1f%%, CPU per multicast %+.1f%%, agents' memory %+.1f%%\n",
				100*(last.Throughput/first.Throughput-1), 100*(last.CPUPerMsgUs/first.CPUPerMsgUs-1),
				100*(last.AgentRSSSumMiB/first.AgentRSSSumMiB-1))
		}
	}
}
