package sim

import (
	"fmt"
	"slices"
)

// Cost model (docs/latency.md): one virtual unit is 1 µs and δ is Delta
// units (default 1000: a 1 ms one-way delay, every link the same). Every
// message a replica handles costs it ServiceUS µs of CPU (default 10):
// replicas handle messages one at a time, in arrival order, from a FIFO
// queue (Config.ServiceTime); sending, ticks, clients and a process's
// messages to itself cost nothing. Load is open-loop: Poisson arrivals
// from many clients, every multicast to exactly Dest groups chosen
// uniformly among Groups.

// CostOptions sizes the cost measurement.
type CostOptions struct {
	Seed      uint64
	Groups    int   // default 4
	Replicas  int   // default 3 (1 for protocols without followers)
	Delta     int64 // virtual µs per δ, default 1000
	ServiceUS int64 // CPU µs per message handled, default 10
	Messages  int   // multicasts per load point, at least (default 1000)
	Duration  int64 // δ of arrivals per load point, at least (default 200)
	MaxMsgs   int   // multicasts per load point, at most (default 20000)
	Clients   int   // open-loop clients, default 32
	// Climb is how far latency may rise above its light-load value before
	// the load counts as not sustained (default 2: twice).
	Climb float64
}

func (o *CostOptions) defaults(protocol string) {
	if o.Groups == 0 {
		o.Groups = 4
	}
	if o.Replicas == 0 {
		o.Replicas = 3
		if th, ok := Theories[protocol]; ok && !th.HasFollower {
			o.Replicas = 1
		}
	}
	if o.Delta == 0 {
		o.Delta = 1000
	}
	if o.ServiceUS == 0 {
		o.ServiceUS = 10
	}
	if o.Messages == 0 {
		o.Messages = 1000
	}
	if o.Duration == 0 {
		o.Duration = 200
	}
	if o.MaxMsgs == 0 {
		o.MaxMsgs = 20000
	}
	if o.Clients == 0 {
		o.Clients = 32
	}
	if o.Climb == 0 {
		o.Climb = 2
	}
}

// CostRow is one protocol's cost for multicasts to Dest groups.
type CostRow struct {
	Protocol string
	Dest     int
	Groups   int
	Replicas int
	// Per multicast, without contention and without timers: protocol
	// messages (the client's MULTICASTs and the reply included) and their
	// encoded bytes; ByKind splits the messages by kind.
	Messages, Bytes float64
	ByKind          map[string]float64
	// Heartbeats every replica sends per δ (background, load-independent).
	HeartbeatsPerDelta float64
	// Busiest is the most messages one replica handles per multicast;
	// 1e6/(Busiest·ServiceUS) is the load at which that replica saturates.
	Busiest  float64
	Capacity float64
	// Latency (first delivery per group, mean, in δ) at light load, and
	// MaxLoad, the highest offered load (multicasts/s) at which the mean
	// latency of the last quarter of a run of Duration δ of arrivals (at
	// most MaxMsgs multicasts; bisected to 1/16 of the doubling) stays
	// within Climb times it (a queue that grows shows there); LatencyAtMax
	// is that latency at MaxLoad.
	LightLatency float64
	MaxLoad      float64
	LatencyAtMax float64
	Options      CostOptions
}

func isHeartbeat(kind string) bool { return kind == "HEARTBEAT" || kind == "PAXOS_HEARTBEAT" }

// MeasureCost measures protocol's cost for multicasts to dest groups: the
// messages and bytes per multicast from solo runs (fixed delays, no
// contention, no CPU cost), then the highest open-loop load it sustains
// under the CPU model, by doubling the load until latency climbs and
// bisecting.
func MeasureCost(protocol string, dest int, o CostOptions) (*CostRow, error) {
	o.defaults(protocol)
	if dest < 1 || dest > o.Groups {
		return nil, fmt.Errorf("sim: cost: %d destination groups with %d groups", dest, o.Groups)
	}
	row := &CostRow{Protocol: protocol, Dest: dest, Groups: o.Groups, Replicas: o.Replicas, Options: o, ByKind: map[string]float64{}}
	base := Config{Protocol: protocol, Groups: o.Groups, Replicas: o.Replicas, Seed: o.Seed, Delta: o.Delta, Delay: DelayFixed}

	// Counts: solo messages (one at a time), no CPU cost.
	solo := base
	solo.Workload = Workload{Mode: Solo, Messages: 200, DestMin: dest, DestMax: dest, PayloadSize: 8}
	res, err := Run(solo)
	if err != nil {
		return nil, fmt.Errorf("cost: solo run: %w", err)
	}
	if err := CheckResult(res); err != nil {
		return nil, fmt.Errorf("cost: solo run: %w", err)
	}
	hb := 0
	for k, c := range res.Stats.ByKind {
		if isHeartbeat(k) {
			hb += c
		}
	}
	// The protocol's own messages: the same run without ticks, so that
	// nothing timer-driven (heartbeats, catch-ups, re-sends) is counted.
	quiet := solo
	quiet.TickEvery = -1
	qres, err := Run(quiet)
	if err != nil {
		return nil, fmt.Errorf("cost: solo run without ticks: %w", err)
	}
	n := float64(qres.Stats.Multicasts)
	for k, c := range qres.Stats.ByKind {
		row.ByKind[k] = float64(c) / n
		row.Messages += float64(c) / n
	}
	row.Bytes = float64(qres.Stats.Bytes) / n
	busiest := 0
	for id := 0; id < o.Groups*o.Replicas; id++ {
		busiest = max(busiest, qres.Stats.Handled[id])
	}
	row.Busiest = float64(busiest) / n
	row.HeartbeatsPerDelta = float64(hb) / float64(max(res.Stats.Ticks, 1)) / float64(o.Groups*o.Replicas)
	if row.Busiest > 0 {
		row.Capacity = 1e6 / (row.Busiest * float64(o.ServiceUS))
	}

	// Load: open loop with the CPU model.
	run := func(rate float64, msgs int) (lat float64, ok bool, err error) {
		cfg := base
		cfg.ServiceTime = o.ServiceUS
		cfg.NoHistory = true
		interval := int64(float64(o.Clients) * 1e6 / rate)
		cfg.Workload = Workload{Mode: OpenLoop, Clients: o.Clients, Messages: msgs, Interval: max(interval, 1),
			DestMin: dest, DestMax: dest, PayloadSize: 8}
		cfg.MaxTime = int64(float64(msgs)/rate*1e6)*4 + 1000*o.Delta
		r, err := Run(cfg)
		if err != nil {
			return 0, false, err
		}
		ls := r.Stats.LeaderLat
		if !r.Converged || len(ls) < msgs*dest {
			return 0, false, nil // did not drain: overloaded
		}
		// The last quarter of the deliveries, when queues (if any) have
		// grown the longest.
		tail := ls[len(ls)*3/4:]
		var sum int64
		for _, l := range tail {
			sum += l
		}
		return float64(sum) / float64(len(tail)) / float64(o.Delta), true, nil
	}
	light, ok, err := run(100, 200)
	if err != nil || !ok {
		return nil, fmt.Errorf("cost: light-load run failed: %v", err)
	}
	row.LightLatency = light
	sustained := func(rate float64) (float64, bool, error) {
		msgs := min(max(o.Messages, int(rate*float64(o.Duration*o.Delta)/1e6)), max(o.MaxMsgs, o.Messages))
		lat, ok, err := run(rate, msgs)
		return lat, ok && lat <= o.Climb*light, err
	}
	lo, hi := 0.0, 0.0
	latLo := light
	for rate := 1000.0; rate <= 1e7; rate *= 2 {
		lat, ok, err := sustained(rate)
		if err != nil {
			return nil, err
		}
		if !ok {
			hi = rate
			break
		}
		lo, latLo = rate, lat
	}
	if hi == 0 {
		return nil, fmt.Errorf("cost: %s never saturated", protocol)
	}
	for range 4 {
		mid := (lo + hi) / 2
		lat, ok, err := sustained(mid)
		if err != nil {
			return nil, err
		}
		if ok {
			lo, latLo = mid, lat
		} else {
			hi = mid
		}
	}
	row.MaxLoad, row.LatencyAtMax = lo, latLo
	return row, nil
}

// SortedKinds returns the kinds of ByKind in a stable order (most first).
func (r *CostRow) SortedKinds() []string {
	ks := make([]string, 0, len(r.ByKind))
	for k := range r.ByKind {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b string) int {
		if r.ByKind[a] != r.ByKind[b] {
			if r.ByKind[a] > r.ByKind[b] {
				return -1
			}
			return 1
		}
		if a < b {
			return -1
		}
		return 1
	})
	return ks
}
