package gossipsim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/wire"
)

// Epoch is the virtual clock's start: 2026-01-01T00:00:00Z in Unix
// nanoseconds, so generations look like real ones.
const Epoch = int64(1767225600) * int64(time.Second)

// FullConfig configures RunFull.
type FullConfig struct {
	Nodes int
	Runs  int
	Seed  uint64
	// Profile is the node configuration (identity fields are set per
	// node). Nil: membership.Cassandra() with FD.WindowSize = PhiWindow.
	Profile *membership.Config
	// PhiWindow is the failure detector's window (samples per endpoint)
	// when Profile is nil. Default 8; Cassandra keeps 1000. Memory is
	// N² × 2 bytes per sample, and the warm-up must fill the window.
	// Smaller windows give noisier means: the last node convicts later,
	// and a window of near-zero samples (two exchanges bringing progress
	// in one round) can convict a live node.
	PhiWindow int
	// Seeds is the number of seed nodes (ids 0..Seeds-1). Default 3.
	Seeds int
	// Warmup is the number of gossip intervals between the converged
	// start and the measurement, so the detector windows hold real
	// inter-arrival times. Default PhiWindow+2.
	Warmup int
	// MaxRounds bounds the measurement, in gossip intervals. Default 120.
	MaxRounds int
	// MinDelay and MaxDelay bound the uniform base link delay. Default
	// 1 ms and 5 ms (one data centre).
	MinDelay, MaxDelay time.Duration
	// Jitter adds a uniform 0..Jitter to each message's base delay, drawn
	// per message, so messages overtake each other (a congested switch, a
	// descheduled receiver). MaxDelay+Jitter must stay below half the
	// profile's ExchangeTimeout: beyond it every exchange would time out
	// and the run would measure the timeout, not the network.
	Jitter time.Duration
	// Loss is the probability that a message is lost, drawn per message
	// independently (0 <= Loss < 1).
	Loss float64
	// GroupSize is the size of the replica groups (consecutive ids, the
	// last group taking the remainder): with a profile that probes
	// (ProbeTimeout > 0) each node's ProbePeers are its group's other
	// members. Default 3.
	GroupSize int
	// Leave replaces the crash by a planned departure: node C calls
	// Node.Leave at the crash instant and the run measures how long until
	// every live node has marked it departed (EventLeft), which must not
	// wait for the failure detector (FullRun.LeaveConvictions).
	Leave bool
	// SimulateTail keeps gossiping until every node has convicted the
	// crashed node. It is forced with a probing profile: published
	// verdicts convict earlier than the frozen windows would. By default the run stops simulating once every live
	// node holds the crashed node's last heartbeat (and the new value):
	// from then on no node can see progress for it, so its phi windows
	// are frozen and each node convicts it at the first of its ticks at
	// which Node.Phi exceeds the threshold (the guards never fire: ticks
	// are regular and nothing is queued). That tick is computed instead
	// of simulated, which saves most of the run (the last conviction
	// comes ~35 intervals after the crash) and gives the same times.
	SimulateTail bool
	// Progress, if set, is called after each measured run (for a CLI).
	Progress func(run int, fr *FullRun)
}

// FullRun is the outcome of one full-mode run. Times count from the
// measurement start: the value is set at node V just before one of its
// ticks (T), and node C crashes at the same instant.
type FullRun struct {
	// ConvergeSeconds: T until every live node holds V's new value.
	ConvergeSeconds float64 `json:"converge_seconds"`
	// ConvergeRounds is ConvergeSeconds in gossip intervals, rounded up:
	// the round in which the last node learned the value.
	ConvergeRounds int `json:"converge_rounds"`
	// BytesPerNodeRound is the encoded bytes all nodes sent during the
	// measurement, per node per gossip interval; MsgsPerNodeRound the
	// messages (SYN, ACK, ACK2 together).
	BytesPerNodeRound float64 `json:"bytes_per_node_round"`
	MsgsPerNodeRound  float64 `json:"msgs_per_node_round"`
	// MaxMessageBytes is the largest encoded message seen.
	MaxMessageBytes int `json:"max_message_bytes"`
	// DetectFirstSeconds and DetectAllSeconds: from the crash until the
	// first, and until every, live node convicted C; DetectMeanSeconds
	// is the mean over the nodes.
	DetectFirstSeconds float64 `json:"detect_first_seconds"`
	DetectMeanSeconds  float64 `json:"detect_mean_seconds"`
	DetectAllSeconds   float64 `json:"detect_all_seconds"`
	// DetectP50Seconds and DetectP99Seconds are percentiles over the live
	// nodes of the time from the crash until each convicted C
	// (DetectAllSeconds is the maximum).
	DetectP50Seconds float64 `json:"detect_p50_seconds"`
	DetectP99Seconds float64 `json:"detect_p99_seconds"`
	// FalseConvictions counts convictions of live nodes, from the
	// converged start to the end of the simulation (each conviction by
	// each node counts).
	FalseConvictions int `json:"false_convictions"`
	// LostMessages is how many messages FullConfig.Loss dropped during
	// the measurement.
	LostMessages int64 `json:"lost_messages"`
	// Leave scenario (FullConfig.Leave): percentiles over the live nodes
	// and maximum of the time from Leave until each marked C departed
	// (EventLeft), and how many convicted C before they learned it left
	// (the departure waited for the detector there; it must be 0).
	LeftP50Seconds   float64 `json:"left_p50_seconds,omitempty"`
	LeftP99Seconds   float64 `json:"left_p99_seconds,omitempty"`
	LeftAllSeconds   float64 `json:"left_all_seconds,omitempty"`
	LeaveConvictions int     `json:"leave_convictions,omitempty"`
	// MeasuredRounds is the length of the simulated measurement in
	// gossip intervals; ExtrapolatedConvictions is how many convictions
	// of the crashed node were computed from frozen windows rather than
	// simulated (see FullConfig.SimulateTail).
	MeasuredRounds          int `json:"measured_rounds"`
	ExtrapolatedConvictions int `json:"extrapolated_convictions"`
}

// FullSummary is what full mode adds to a Result.
type FullSummary struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	PhiWindow       int     `json:"phi_window"`
	PhiThreshold    float64 `json:"phi_threshold"`
	// ProbeTimeoutSeconds is the profile's direct-probe timeout (0: no
	// probes); GroupSize the probe groups' size.
	ProbeTimeoutSeconds float64 `json:"probe_timeout_seconds"`
	GroupSize           int     `json:"group_size"`
	Seeds               int     `json:"seeds"`
	WarmupRounds        int     `json:"warmup_rounds"`

	ConvergeSecondsMean float64 `json:"converge_seconds_mean"`
	// The idealised references at the same size (mean rounds over
	// max(Runs, 20) runs): synchronous push-pull (the seed's model) and
	// push-pull with in-round updates (SpreadInRound), which is what the
	// core's asynchronous rounds amount to.
	IdealPushPullMean float64 `json:"ideal_pushpull_mean"`
	IdealInRoundMean  float64 `json:"ideal_pushpull_inround_mean"`
	// BytesPerNodeRound: mean over runs.
	BytesPerNodeRound float64 `json:"bytes_per_node_round"`
	MsgsPerNodeRound  float64 `json:"msgs_per_node_round"`
	MaxMessageBytes   int     `json:"max_message_bytes"`
	// Detection: means over runs of each run's first, mean and all-nodes
	// conviction time, in seconds and in gossip intervals.
	DetectFirstSeconds float64 `json:"detect_first_seconds"`
	DetectMeanSeconds  float64 `json:"detect_mean_seconds"`
	DetectAllSeconds   float64 `json:"detect_all_seconds"`
	DetectAllRounds    float64 `json:"detect_all_rounds"`
	DetectAllMax       float64 `json:"detect_all_seconds_max"`
	DetectP50Seconds   float64 `json:"detect_p50_seconds"`
	DetectP99Seconds   float64 `json:"detect_p99_seconds"`
	FalseConvictions   int     `json:"false_convictions"`
	// The network: per-message loss probability and delay bounds, and
	// the messages lost over all runs' measurements.
	Loss         float64 `json:"loss"`
	MinDelayMs   float64 `json:"min_delay_ms"`
	MaxDelayMs   float64 `json:"max_delay_ms"`
	JitterMs     float64 `json:"jitter_ms"`
	LostMessages int64   `json:"lost_messages"`
	// Leave scenario: means over runs of the percentiles of the time
	// until each node marked the leaver departed, the worst run's
	// maximum, and convictions of the leaver (must be 0).
	Leave            bool    `json:"leave,omitempty"`
	LeftP50Seconds   float64 `json:"left_p50_seconds,omitempty"`
	LeftP99Seconds   float64 `json:"left_p99_seconds,omitempty"`
	LeftAllMax       float64 `json:"left_all_seconds_max,omitempty"`
	LeaveConvictions int     `json:"leave_convictions,omitempty"`

	PerRun []FullRun `json:"per_run"`
}

func (c *FullConfig) defaults() error {
	if c.Nodes < 3 {
		return fmt.Errorf("gossipsim: full mode needs at least 3 nodes, got %d", c.Nodes)
	}
	if c.Runs < 1 {
		return fmt.Errorf("gossipsim: need at least 1 run, got %d", c.Runs)
	}
	if c.PhiWindow == 0 {
		c.PhiWindow = 8
	}
	if c.Profile == nil {
		p := membership.Cassandra()
		p.FD.WindowSize = c.PhiWindow
		c.Profile = &p
	}
	c.PhiWindow = c.Profile.FD.WindowSize
	if c.Seeds == 0 {
		c.Seeds = 3
	}
	if c.GroupSize == 0 {
		c.GroupSize = 3
	}
	if c.GroupSize < 1 {
		return fmt.Errorf("gossipsim: group size %d must be positive", c.GroupSize)
	}
	if c.Profile.ProbeTimeout > 0 {
		c.SimulateTail = true
	}
	c.Seeds = min(c.Seeds, c.Nodes-2)
	if c.Seeds < 1 {
		return errors.New("gossipsim: need at least one seed")
	}
	if c.Warmup == 0 {
		c.Warmup = c.PhiWindow + 2
	}
	if c.MaxRounds == 0 {
		c.MaxRounds = 120
	}
	if c.MinDelay == 0 && c.MaxDelay == 0 {
		c.MinDelay, c.MaxDelay = time.Millisecond, 5*time.Millisecond
	}
	if c.Warmup < 1 || c.MaxRounds < 1 || c.MinDelay < 0 || c.MaxDelay < c.MinDelay || c.Jitter < 0 {
		return errors.New("gossipsim: bad warm-up, round limit, delays or jitter")
	}
	if !(c.Loss >= 0 && c.Loss < 1) {
		return fmt.Errorf("gossipsim: message loss %v must be in [0, 1)", c.Loss)
	}
	// Delays longer than the round are fine (messages then overtake
	// ticks and each other, as on a real network); a round trip longer
	// than the exchange timeout is not a network the core can gossip over.
	if worst := c.MaxDelay + c.Jitter; 2*worst >= c.Profile.ExchangeTimeout {
		return fmt.Errorf("gossipsim: a round trip of up to 2 x %v (max delay %v + jitter %v) does not fit the profile's exchange timeout %v: every reply would be stale",
			worst, c.MaxDelay, c.Jitter, c.Profile.ExchangeTimeout)
	}
	return nil
}

// RunFull runs the real gossip core: cfg.Runs independent clusters of
// cfg.Nodes membership.Nodes (see run for the scenario).
func RunFull(cfg FullConfig) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	res := &Result{Mode: Full.String(), Nodes: cfg.Nodes, Runs: cfg.Runs, Seed: cfg.Seed}
	fs := &FullSummary{
		IntervalSeconds: cfg.Profile.Interval.Seconds(), PhiWindow: cfg.PhiWindow,
		PhiThreshold: cfg.Profile.FD.Threshold, Seeds: cfg.Seeds, WarmupRounds: cfg.Warmup,
		ProbeTimeoutSeconds: cfg.Profile.ProbeTimeout.Seconds(), GroupSize: cfg.GroupSize,
		Loss: cfg.Loss, MinDelayMs: ms(cfg.MinDelay), MaxDelayMs: ms(cfg.MaxDelay), JitterMs: ms(cfg.Jitter),
		Leave: cfg.Leave,
	}
	for r := 0; r < cfg.Runs; r++ {
		fr, err := runFull(&cfg, runSeed(cfg.Seed, r))
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", r, err)
		}
		if cfg.Progress != nil {
			cfg.Progress(r, fr)
		}
		fs.PerRun = append(fs.PerRun, *fr)
		res.Rounds = append(res.Rounds, fr.ConvergeRounds)
	}
	summarise(res)
	k := float64(len(fs.PerRun))
	for _, fr := range fs.PerRun {
		fs.ConvergeSecondsMean += fr.ConvergeSeconds / k
		fs.BytesPerNodeRound += fr.BytesPerNodeRound / k
		fs.MsgsPerNodeRound += fr.MsgsPerNodeRound / k
		fs.MaxMessageBytes = max(fs.MaxMessageBytes, fr.MaxMessageBytes)
		fs.DetectFirstSeconds += fr.DetectFirstSeconds / k
		fs.DetectMeanSeconds += fr.DetectMeanSeconds / k
		fs.DetectAllSeconds += fr.DetectAllSeconds / k
		fs.DetectAllMax = max(fs.DetectAllMax, fr.DetectAllSeconds)
		fs.DetectP50Seconds += fr.DetectP50Seconds / k
		fs.DetectP99Seconds += fr.DetectP99Seconds / k
		fs.FalseConvictions += fr.FalseConvictions
		fs.LostMessages += fr.LostMessages
		fs.LeftP50Seconds += fr.LeftP50Seconds / k
		fs.LeftP99Seconds += fr.LeftP99Seconds / k
		fs.LeftAllMax = max(fs.LeftAllMax, fr.LeftAllSeconds)
		fs.LeaveConvictions += fr.LeaveConvictions
	}
	fs.DetectAllRounds = fs.DetectAllSeconds / fs.IntervalSeconds
	refRuns := max(cfg.Runs, 20)
	var syncSum, inRoundSum int
	for r := 0; r < refRuns; r++ {
		syncSum += Spread(cfg.Nodes, PushPull, rand.New(rand.NewPCG(runSeed(cfg.Seed, r), 0x5eed)))
		inRoundSum += SpreadInRound(cfg.Nodes, PushPull, rand.New(rand.NewPCG(runSeed(cfg.Seed, r), 0x1a5c)))
	}
	fs.IdealPushPullMean = float64(syncSum) / float64(refRuns)
	fs.IdealInRoundMean = float64(inRoundSum) / float64(refRuns)
	res.FullSummary = fs
	return res, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Event queue entries.
type event struct {
	at   int64
	seq  uint64
	to   wire.ProcID
	from wire.ProcID
	tick bool
	data []byte // encoded message
}

type cluster struct {
	cfg    *FullConfig
	rng    *rand.Rand
	now    int64
	seq    uint64
	q      []event
	nodes  []*membership.Node // nil once crashed
	next   []int64            // each node's next tick
	dec    membership.Decoder
	bufs   [][]byte // free encode buffers
	ivl    int64
	minD   int64
	spanD  int64
	onEvt  func(at int64, who wire.ProcID, e membership.Event)
	bytes  int64
	msgs   int64
	lost   int64
	maxMsg int
	jitter int64 // FullConfig.Jitter+1: the span of the added delay
	loss   float64
}

// runFull is one run:
//
//  1. Start: Nodes nodes at Epoch, each with STATUS=NORMAL, seeds
//     0..Seeds-1, all sharing one AppTable and one Pool. Every node is
//     preloaded (Node.Preload) with the converged view: every node's
//     record, encoded and decoded once by the codec as an ACK2. Ticks
//     start at a random phase per node in the first interval.
//  2. Warm-up: Warmup intervals of normal gossip.
//  3. Measurement, from T: node V sets LOAD just before its first tick
//     at or after the end of the warm-up; node C (not a seed, not V)
//     crashes at that instant. It runs until every live node holds the
//     value and either has convicted C or holds C's last heartbeat (then
//     the remaining convictions are computed from the frozen windows,
//     see FullConfig.SimulateTail), or MaxRounds intervals.
func runFull(cfg *FullConfig, seed uint64) (*FullRun, error) {
	c := &cluster{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		now:    Epoch,
		ivl:    int64(cfg.Profile.Interval),
		minD:   int64(cfg.MinDelay),
		spanD:  int64(cfg.MaxDelay-cfg.MinDelay) + 1,
		jitter: int64(cfg.Jitter) + 1,
		loss:   cfg.Loss,
	}
	n := cfg.Nodes
	seeds := make([]wire.ProcID, cfg.Seeds)
	for i := range seeds {
		seeds[i] = wire.ProcID(i)
	}
	apps := membership.NewAppTable()
	pool := &membership.Pool{}
	c.nodes = make([]*membership.Node, n)
	snap := make([]membership.EndpointState, n)
	for i := range c.nodes {
		nc := *cfg.Profile
		nc.ID = wire.ProcID(i)
		nc.ClusterName = "weft-sim"
		nc.Seeds = seeds
		nc.Rand = rand.NewPCG(seed, uint64(i))
		nc.ProbePeers = groupOf(i, n, cfg.GroupSize)
		nc.Apps, nc.Pool = apps, pool
		nd, err := membership.NewNode(nc, c.now)
		if err != nil {
			return nil, err
		}
		if err := nd.SetAppState(membership.KeyStatus, membership.StatusNormal); err != nil {
			return nil, err
		}
		nd.Advance()
		c.nodes[i] = nd
		m, _ := nd.Member(nd.ID())
		snap[i] = membership.EndpointState{Node: nd.ID(), Generation: m.Generation, Heartbeat: m.Heartbeat, States: nd.AppStates(nd.ID())}
	}
	// The converged view, through the codec once.
	raw := membership.Append(nil, &membership.Ack2{States: snap})
	msg, err := membership.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	view := msg.(*membership.Ack2).States
	shareLists(view)
	for _, nd := range c.nodes {
		if err := nd.Preload(c.now, view); err != nil {
			return nil, err
		}
		nd.Advance()
	}
	view, snap, raw, msg = nil, nil, nil, nil
	c.next = make([]int64, n)
	for i := range c.nodes {
		c.next[i] = c.now + c.rng.Int64N(c.ivl)
		c.push(event{at: c.next[i], to: wire.ProcID(i), tick: true})
	}
	// V sets the value, C crashes: neither is a seed.
	v := wire.ProcID(cfg.Seeds + c.rng.IntN(n-cfg.Seeds))
	crash := v
	for crash == v {
		crash = wire.ProcID(cfg.Seeds + c.rng.IntN(n-cfg.Seeds))
	}
	const value = "load-42"
	fr := &FullRun{}
	var (
		tSet, tCrash        int64  = -1, -1
		tConverged, tDetect int64  = -1, -1
		lastHB              uint64 // C's heartbeat when it crashed
		holdLast            = make([]bool, n)
		nHoldLast           = 0
		informed            = make([]bool, n)
		nInformed           = 0
		deadC               = make([]bool, n) // who holds C convicted
		detect              []int64           // each conviction of C, ns after the crash
		leftC               = make([]bool, n) // who marked C departed
		left                []int64           // each EventLeft for C, ns after Leave
	)
	live := n - 1 // all but C
	convictC := func(at int64, who wire.ProcID) {
		deadC[who] = true
		if detect = append(detect, at-tCrash); len(detect) == live {
			tDetect = at
		}
	}
	c.onEvt = func(at int64, who wire.ProcID, e membership.Event) {
		switch {
		case e.Kind == membership.EventChanged && e.Node == v && e.Key == membership.KeyLoad && e.Value == value:
			if !informed[who] {
				informed[who] = true
				if nInformed++; nInformed == live-1 { // V knows it already
					tConverged = at
				}
			}
		case e.Kind == membership.EventLeft && e.Node == crash && cfg.Leave && tCrash >= 0:
			if !leftC[who] {
				leftC[who] = true
				left = append(left, at-tCrash)
			}
		case e.Kind == membership.EventDead && e.Node == crash && cfg.Leave && tCrash >= 0:
			fr.LeaveConvictions++
		case e.Kind == membership.EventDead && e.Node == crash && tCrash >= 0:
			if !deadC[who] {
				convictC(at, who)
			}
		case e.Kind == membership.EventDead:
			fr.FalseConvictions++

			if e.Node == crash {
				deadC[who] = true
			}
		case e.Kind == membership.EventAlive && e.Node == crash && tCrash < 0:
			deadC[who] = false
		}
	}

	// Warm-up.
	start := Epoch + int64(cfg.Warmup)*c.ivl
	if err := c.runUntil(start, nil); err != nil {
		return nil, err
	}

	// Measurement: run to V's next tick and set the value just before it
	// runs; C crashes (or leaves) at that instant.
	c.bytes, c.msgs, c.maxMsg, c.lost = 0, 0, 0, 0
	mStart := c.now
	limit := start + int64(cfg.MaxRounds+1)*c.ivl
	if err := c.runUntil(limit, func(ev *event) (bool, error) {
		if ev.tick && tSet < 0 && ev.to == v {
			tSet, tCrash = ev.at, ev.at
			if cfg.Leave {
				if err := c.nodes[crash].Leave(ev.at); err != nil {
					return false, err
				}
				return false, c.nodes[v].SetAppState(membership.KeyLoad, value)
			}
			m, _ := c.nodes[crash].Member(crash)
			lastHB = m.Heartbeat
			c.nodes[crash] = nil
			for who, dead := range deadC {
				if dead { // wrongly convicted before the crash, still down
					deadC[who] = false
					convictC(tCrash, wire.ProcID(who))
				}
			}
			return false, c.nodes[v].SetAppState(membership.KeyLoad, value)
		}
		if !cfg.Leave && ev.tick && tSet >= 0 && !holdLast[ev.to] && c.nodes[ev.to] != nil {
			// Checked at each node's ticks: a node holding C's last
			// heartbeat keeps it (nobody has a newer one).
			if m, _ := c.nodes[ev.to].Member(crash); m.Heartbeat == lastHB {
				holdLast[ev.to] = true
				nHoldLast++
			}
		}
		if tConverged < 0 {
			return false, nil
		}
		if cfg.Leave {
			return len(left) == live, nil
		}
		return tDetect >= 0 || !cfg.SimulateTail && nHoldLast == live, nil
	}); err != nil {
		return nil, err
	}
	if !cfg.Leave && tDetect < 0 && tConverged >= 0 && nHoldLast == live {
		// C's windows are frozen everywhere: each node convicts C at the
		// first of its ticks at which phi exceeds the threshold.
		for who, nd := range c.nodes {
			if nd == nil || deadC[who] {
				continue
			}
			if !nd.IsAlive(crash) {
				return nil, fmt.Errorf("node %d judges %d down without an event", who, crash)
			}
			at := c.next[who]
			for ; at < limit && nd.Phi(crash, at) <= cfg.Profile.FD.Threshold; at += c.ivl {
			}
			if at < limit {
				fr.ExtrapolatedConvictions++
				convictC(at, wire.ProcID(who))
			}
		}
	}
	span := float64(c.now-mStart) / float64(c.ivl)
	fr.MeasuredRounds = int(math.Ceil(span))
	fr.BytesPerNodeRound = float64(c.bytes) / span / float64(n)
	fr.MsgsPerNodeRound = float64(c.msgs) / span / float64(n)
	fr.MaxMessageBytes = c.maxMsg
	fr.LostMessages = c.lost
	if tConverged < 0 {
		return nil, fmt.Errorf("value not everywhere after %d rounds (%d of %d nodes)", cfg.MaxRounds, nInformed+1, live)
	}
	fr.ConvergeSeconds = float64(tConverged-tSet) / 1e9
	fr.ConvergeRounds = int(math.Ceil(float64(tConverged-tSet) / float64(c.ivl)))
	if cfg.Leave {
		if len(left) < live {
			return nil, fmt.Errorf("departure not seen everywhere after %d rounds (%d of %d nodes)", cfg.MaxRounds, len(left), live)
		}
		fr.LeftP50Seconds, fr.LeftP99Seconds, fr.LeftAllSeconds = quantiles(left)
		return fr, nil
	}
	if tDetect < 0 {
		return nil, fmt.Errorf("crash not detected everywhere after %d rounds (%d of %d nodes)", cfg.MaxRounds, len(detect), live)
	}
	var sum int64
	for _, d := range detect {
		sum += d
	}
	fr.DetectFirstSeconds = float64(slices.Min(detect)) / 1e9
	fr.DetectMeanSeconds = float64(sum) / float64(live) / 1e9
	fr.DetectP50Seconds, fr.DetectP99Seconds, fr.DetectAllSeconds = quantiles(detect)
	return fr, nil
}

// quantiles returns the nearest-rank median, 99th percentile and maximum
// of ds (nanoseconds, sorted in place) in seconds.
func quantiles(ds []int64) (p50, p99, maxS float64) {
	slices.Sort(ds)
	rank := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(ds)))) - 1
		return float64(ds[max(i, 0)]) / 1e9
	}
	return rank(0.5), rank(0.99), float64(ds[len(ds)-1]) / 1e9
}

// groupOf returns the members of node i's group: groups of size ids in
// order, the last one also taking the remainder (so nobody is alone).
func groupOf(i, n, size int) []wire.ProcID {
	groups := max(n/size, 1)
	g := min(i/size, groups-1)
	hi := (g + 1) * size
	if g == groups-1 {
		hi = n
	}
	var ids []wire.ProcID
	for j := g * size; j < hi; j++ {
		ids = append(ids, wire.ProcID(j))
	}
	return ids
}

// shareLists makes equal app-state lists in a decoded snapshot one slice,
// as each node's AppTable would find them equal anyway.
func shareLists(view []membership.EndpointState) {
	for i := 1; i < len(view); i++ {
		a, b := view[i-1].States, view[i].States
		if len(a) != len(b) {
			continue
		}
		same := true
		for k := range a {
			if a[k] != b[k] {
				same = false
				break
			}
		}
		if same {
			view[i].States = a
		}
	}
}

// runUntil processes events up to deadline. step, if set, sees every
// event before it is handled and may stop the run (true).
func (c *cluster) runUntil(deadline int64, step func(*event) (bool, error)) error {
	for len(c.q) > 0 && c.q[0].at <= deadline {
		ev := c.pop()
		c.now = ev.at
		if step != nil {
			stop, err := step(&ev)
			if err != nil {
				return err
			}
			if stop {
				return nil
			}
		}
		if ev.tick {
			nd := c.nodes[ev.to]
			if nd == nil {
				continue // crashed: no more ticks
			}
			nd.Tick(c.now)
			c.next[ev.to] = c.now + c.ivl
			c.push(event{at: c.now + c.ivl, to: ev.to, tick: true})
			c.flush(nd)
			continue
		}
		nd := c.nodes[ev.to]
		if nd == nil || nd.Stopped() {
			c.bufs = append(c.bufs, ev.data[:0])
			continue // lost: the receiver crashed or left
		}
		m, err := c.dec.Decode(ev.data)
		c.bufs = append(c.bufs, ev.data[:0])
		if err != nil {
			return fmt.Errorf("t=%v %d->%d: %w", time.Duration(c.now-Epoch), ev.from, ev.to, err)
		}
		if err := nd.Step(c.now, ev.from, m); err != nil {
			return fmt.Errorf("t=%v node %d refused %s from %d: %w", time.Duration(c.now-Epoch), ev.to, m.Kind(), ev.from, err)
		}
		c.flush(nd)
	}
	if c.now < deadline && (len(c.q) == 0 || c.q[0].at > deadline) {
		c.now = deadline
	}
	return nil
}

// flush encodes and schedules the node's messages and reports its events.
func (c *cluster) flush(nd *membership.Node) {
	if !nd.HasReady() {
		return
	}
	rd := nd.Ready()
	for _, env := range rd.Messages {
		var buf []byte
		if k := len(c.bufs); k > 0 {
			buf = c.bufs[k-1]
			c.bufs = c.bufs[:k-1]
		}
		data := membership.Append(buf, env.Msg)
		c.bytes += int64(len(data))
		c.msgs++
		c.maxMsg = max(c.maxMsg, len(data))
		// Without loss or jitter no draw is made, so runs without them
		// keep the random sequence (and results) they had before both.
		if c.loss > 0 && c.rng.Float64() < c.loss {
			c.lost++
			c.bufs = append(c.bufs, data[:0])
			continue
		}
		at := c.now + c.minD + c.rng.Int64N(c.spanD)
		if c.jitter > 1 {
			at += c.rng.Int64N(c.jitter)
		}
		c.push(event{at: at, from: env.From, to: env.To, data: data})
	}
	if c.onEvt != nil {
		for _, e := range rd.Events {
			c.onEvt(c.now, nd.ID(), e)
		}
	}
	nd.Advance()
}

// The event queue: a binary min-heap on (at, seq).

func less(a, b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (c *cluster) push(e event) {
	c.seq++
	e.seq = c.seq
	c.q = append(c.q, e)
	i := len(c.q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(&c.q[i], &c.q[p]) {
			break
		}
		c.q[i], c.q[p] = c.q[p], c.q[i]
		i = p
	}
}

func (c *cluster) pop() event {
	top := c.q[0]
	n := len(c.q) - 1
	c.q[0] = c.q[n]
	c.q[n] = event{}
	c.q = c.q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && less(&c.q[r], &c.q[l]) {
			m = r
		}
		if !less(&c.q[m], &c.q[i]) {
			break
		}
		c.q[i], c.q[m] = c.q[m], c.q[i]
		i = m
	}
	return top
}
