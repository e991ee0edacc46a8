package node

import (
	"embed"
	"io/fs"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/weft-dev/weft/wire"
)

// The dashboard (docs/operations.md "Dashboard"): a static page embedded
// in the binary (no build step, no CDN, no network fetch but its own
// endpoint) that polls GET /dashboard/data and draws the cluster as this
// node's gossip sees it, with a bounded history of per-peer gossip
// round trips, up/down verdicts, throughput and delivery latency.
//
//	GET /dashboard/       the page and its assets: no token, any Host (they
//	                      hold no data; the page asks for the token when
//	                      /dashboard/data refuses it)
//	GET /dashboard/data   dashboardData as JSON: the read rules (AdminHandler)

//go:embed dashboard
var dashboardAssets embed.FS

const (
	// dashboardEvery is the default sampling interval of the history.
	dashboardEvery = time.Second
	// dashboardSamples bounds the history: 300 samples, five minutes at
	// the default interval, about 100 B per peer per sample.
	dashboardSamples = 300
)

// dashboardCSP forbids the page anything but its own endpoint: no inline
// script, no other origin, no framing.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// registerDashboard adds the dashboard's routes to the admin handler.
func (h *adminHandler) registerDashboard(every time.Duration) {
	h.dash = newDashHistory(h.n, every, dashboardSamples)
	assets, err := fs.Sub(dashboardAssets, "dashboard")
	if err != nil {
		panic(err) // the embedded tree is part of the binary
	}
	files := http.StripPrefix("/dashboard/", http.FileServer(http.FS(assets)))
	h.mux.Handle("/dashboard", http.RedirectHandler("/dashboard/", http.StatusMovedPermanently))
	h.mux.HandleFunc("/dashboard/", h.probe(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", dashboardCSP)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	h.mux.HandleFunc("/dashboard/data", h.read(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, h.dash.data(time.Now()))
	}))
}

// dashboardData is what the page draws.
type dashboardData struct {
	Now int64 `json:"now"` // Unix ms
	// Self is this node's report, Members its gossip view (nil without
	// gossip).
	Self    Report   `json:"self"`
	Gossip  bool     `json:"gossip"`
	Members []Member `json:"members"`
	// History holds the last samples, oldest first: at most Capacity,
	// one every EveryMs.
	History  []dashSample `json:"history"`
	Capacity int          `json:"capacity"`
	EveryMs  int64        `json:"every_ms"`
	// ClockSkew and SeedList are gossip's warnings (gossip_advice.go):
	// empty when there are none, nil without gossip, which the page says.
	ClockSkew []string `json:"clock_skew"`
	SeedList  []string `json:"seed_list"`
}

// dashSample is the node's state at one instant; rates and means cover
// the interval since the previous sample.
type dashSample struct {
	T            int64   `json:"t"`         // Unix ms
	Delivered    uint64  `json:"delivered"` // deliveries at this node so far
	DeliveryRate float64 `json:"delivery_rate"`
	// LatencyMs is the mean delivery latency (weft_delivery_latency_seconds)
	// of the messages delivered in the interval; nil: none measured.
	LatencyMs *float64                      `json:"latency_ms"`
	Peers     map[wire.ProcID]dashPeerPoint `json:"peers"`
}

// dashPeerPoint is one peer in one sample.
type dashPeerPoint struct {
	Status string  `json:"status"`
	Phi    float64 `json:"phi"`
	// RTTMs is the mean gossip round trip (weft_gossip_rtt_seconds) of the
	// exchanges in the interval; nil: none completed.
	RTTMs *float64 `json:"rtt_ms"`
	Flaps uint64   `json:"flaps"`
}

// dashHistory samples a node into a ring of at most cap samples: from a
// goroutine while the admin endpoint serves (ServeAdmin), and when the
// page asks, so a handler built by AdminHandler has a history too.
type dashHistory struct {
	n     *Node
	every time.Duration

	mu   sync.Mutex
	ring []dashSample // oldest first once full: ring[next:] then ring[:next]
	next int
	full bool
	prev dashCounters // the counters at the last sample
}

// dashCounters are the cumulative counters a sample differentiates.
type dashCounters struct {
	at        time.Time
	delivered uint64
	lat       histSum
	rtt       map[string]histSum
}

type histSum struct {
	sum   float64
	count uint64
}

func newDashHistory(n *Node, every time.Duration, capacity int) *dashHistory {
	if every <= 0 {
		every = dashboardEvery
	}
	return &dashHistory{n: n, every: every, ring: make([]dashSample, capacity)}
}

// run samples every interval until stop closes or the node stops.
func (d *dashHistory) run(stop <-chan struct{}) {
	t := time.NewTicker(d.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-d.n.Done():
			return
		case now := <-t.C:
			d.sample(now, d.n.Members())
		}
	}
}

// data samples if the last sample is older than the interval and returns
// the page's data.
func (d *dashHistory) data(now time.Time) dashboardData {
	ms := d.n.Members()
	d.sample(now, ms)
	out := dashboardData{Now: now.UnixMilli(), Self: d.n.Report(), Gossip: d.n.cfg.Gossip != nil, Members: ms,
		Capacity: len(d.ring), EveryMs: d.every.Milliseconds()}
	if adv := d.n.advice(); adv != nil {
		out.ClockSkew, out.SeedList = adv.ClockSkew, adv.SeedList
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.full {
		out.History = append(out.History, d.ring[d.next:]...)
	}
	out.History = append(out.History, d.ring[:d.next]...)
	return out
}

// sample appends the node's state at now to the ring, unless the last
// sample is less than 90% of an interval old (the page's polls and the
// ticker share the ring).
func (d *dashHistory) sample(now time.Time, ms []Member) {
	st := d.n.Status()
	cur := dashCounters{at: now, delivered: st.Stats.Delivered, lat: histogramSum(d.n.met.delivery), rtt: rttSums(d.n.met.gossipRTT)}
	flaps := map[wire.ProcID]uint64{}
	d.n.met.mu.Lock()
	for p, pc := range d.n.met.peers {
		flaps[p] = pc.flaps
	}
	d.n.met.mu.Unlock()

	d.mu.Lock()
	defer d.mu.Unlock()
	prev := d.prev
	if !prev.at.IsZero() && now.Sub(prev.at) < d.every*9/10 {
		return
	}
	s := dashSample{T: now.UnixMilli(), Delivered: cur.delivered, Peers: map[wire.ProcID]dashPeerPoint{}}
	if !prev.at.IsZero() {
		if secs := now.Sub(prev.at).Seconds(); secs > 0 && cur.delivered >= prev.delivered {
			s.DeliveryRate = float64(cur.delivered-prev.delivered) / secs
		}
		s.LatencyMs = meanMs(cur.lat, prev.lat)
	}
	for _, m := range ms {
		if m.Self {
			continue
		}
		pt := dashPeerPoint{Status: m.Status, Phi: m.Phi, Flaps: flaps[m.ID]}
		if !prev.at.IsZero() {
			l := peerLabel(m.ID)
			pt.RTTMs = meanMs(cur.rtt[l], prev.rtt[l])
		}
		s.Peers[m.ID] = pt
	}
	d.prev = cur
	d.ring[d.next] = s
	d.next++
	if d.next == len(d.ring) {
		d.next, d.full = 0, true
	}
}

// meanMs is the mean, in milliseconds, of the observations a histogram
// gained between two readings; nil if it gained none.
func meanMs(cur, prev histSum) *float64 {
	if cur.count <= prev.count {
		return nil
	}
	v := (cur.sum - prev.sum) / float64(cur.count-prev.count) * 1000
	return &v
}

func histogramSum(h prometheus.Histogram) histSum {
	var m dto.Metric
	if h.Write(&m) != nil || m.Histogram == nil {
		return histSum{}
	}
	return histSum{sum: m.Histogram.GetSampleSum(), count: m.Histogram.GetSampleCount()}
}

// rttSums reads every peer's round-trip histogram by its peer label
// (Collect, not WithLabelValues, which would create empty series).
func rttSums(v *prometheus.HistogramVec) map[string]histSum {
	ch := make(chan prometheus.Metric)
	go func() { v.Collect(ch); close(ch) }()
	out := map[string]histSum{}
	for pm := range ch {
		var m dto.Metric
		if pm.Write(&m) != nil || m.Histogram == nil {
			continue
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == "peer" {
				out[l.GetValue()] = histSum{sum: m.Histogram.GetSampleSum(), count: m.Histogram.GetSampleCount()}
			}
		}
	}
	return out
}
