package node

import (
	"math"

	dto "github.com/prometheus/client_model/go"

	"github.com/weft-dev/weft/wire"
)

// Report is what /status serves and weft status prints: the Status
// (its fields at the top level of the JSON, as before), readiness, the
// WAL fsync p99 and the send queues to the peers.
type Report struct {
	Status
	Readiness Readiness `json:"readiness"`
	// FsyncP99Seconds estimates the 99th percentile of the WAL's group
	// commits since the node started, from weft_wal_fsync_duration_seconds
	// (linear within a bucket; 0: no commit yet).
	FsyncP99Seconds float64 `json:"fsync_p99_seconds"`
	Fsyncs          uint64  `json:"fsyncs"`
	// PeerQueues are the send queues to the peers (transport.PeerStats).
	PeerQueues map[wire.ProcID]PeerQueue `json:"peer_queues,omitempty"`
}

// PeerQueue is one peer's send queue.
type PeerQueue struct {
	Connected bool  `json:"connected"`
	Messages  int   `json:"messages"`
	Bytes     int64 `json:"bytes"`
	PeakBytes int64 `json:"peak_bytes"`
}

// Report returns the node's report (see Report).
func (n *Node) Report() Report {
	r := Report{Status: n.Status(), Readiness: n.Readiness()}
	var mm dto.Metric
	if err := n.met.fsync.Write(&mm); err == nil && mm.Histogram != nil {
		r.FsyncP99Seconds = histogramQuantile(mm.Histogram, 0.99)
		r.Fsyncs = mm.Histogram.GetSampleCount()
	}
	ts := n.TransportStats()
	if len(ts.Peers) > 0 {
		r.PeerQueues = map[wire.ProcID]PeerQueue{}
		for p, ps := range ts.Peers {
			r.PeerQueues[p] = PeerQueue{Connected: ps.Connected, Messages: ps.Queued, Bytes: ps.QueuedBytes, PeakBytes: ps.PeakBytes}
		}
	}
	return r
}

// histogramQuantile estimates quantile q of a Prometheus histogram as
// histogram_quantile does: linear interpolation within the bucket that
// holds the rank (the highest finite bound if it is the +Inf bucket).
func histogramQuantile(h *dto.Histogram, q float64) float64 {
	total := h.GetSampleCount()
	if total == 0 {
		return 0
	}
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for _, b := range h.GetBucket() {
		upper, cum := b.GetUpperBound(), b.GetCumulativeCount()
		if math.IsInf(upper, +1) {
			return lower
		}
		if float64(cum) >= rank {
			in := cum - below
			if in == 0 {
				return upper
			}
			return lower + (upper-lower)*(rank-float64(below))/float64(in)
		}
		lower, below = upper, cum
	}
	return lower
}
