package sim

import (
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// Theory is a protocol's latency bounds in δ (paper, §III-§V): at the first
// delivery in each destination group and at followers (NaN-free: HasFollower
// is false for protocols with one process per group).
type Theory struct {
	CollisionFreeLeader, FailureFreeLeader     float64
	CollisionFreeFollower, FailureFreeFollower float64
	HasFollower                                bool
	// TightLeader and TightFollower, when set, are the failure-free bounds
	// of weft's implementation where they are below the paper's figures
	// (which are then upper bounds that no schedule reaches): measurements
	// must stay at or below them and the adversarial schedule must reach
	// them. docs/latency.md derives them.
	TightLeader, TightFollower float64
	// ClockAdvance is C, the time after m's multicast at which the first
	// destination group's leader fixes its clock advance past m's global
	// timestamp: a message m' that reaches that leader just before gets a
	// smaller local timestamp and blocks m (the adversarial schedule's
	// construction, AdversarialConfig). 0 means 2δ.
	ClockAdvance float64
}

// FailureFreeBound returns the failure-free bounds the measurement is held
// to: the tight bound where one is set, the paper's figure otherwise.
func (t Theory) FailureFreeBound() (leader, follower float64) {
	leader, follower = t.FailureFreeLeader, t.FailureFreeFollower
	if t.TightLeader > 0 {
		leader = t.TightLeader
	}
	if t.TightFollower > 0 {
		follower = t.TightFollower
	}
	return leader, follower
}

// Theories holds the bounds of every protocol the simulator runs. The
// leader figures are the paper's (Skeen 2/4, FT-Skeen 6/12, FastCast 4/8,
// WbCast 3/5); the follower figures of the replicated-log baselines are
// weft's (every member executes the log when the leader does).
var Theories = map[string]Theory{
	"skeen":  {CollisionFreeLeader: 2, FailureFreeLeader: 4},
	"wbcast": {CollisionFreeLeader: 3, FailureFreeLeader: 5, CollisionFreeFollower: 4, FailureFreeFollower: 6, HasFollower: true},
	"ftskeen": {CollisionFreeLeader: 6, FailureFreeLeader: 12, CollisionFreeFollower: 6, FailureFreeFollower: 12, HasFollower: true,
		TightLeader: 10, TightFollower: 10, ClockAdvance: 4},
	"fastcast": {CollisionFreeLeader: 4, FailureFreeLeader: 8, CollisionFreeFollower: 4, FailureFreeFollower: 8, HasFollower: true,
		TightLeader: 6, TightFollower: 6, ClockAdvance: 2},
}

// LatencyRow is one protocol's measured latencies in δ.
type LatencyRow struct {
	Protocol string
	Theory   Theory
	// Collision-free: solo messages, every link delay exactly δ.
	SoloLeader, SoloFollower float64
	SoloMessages             int
	// Random contended messages, delays uniform in (0, δ].
	RandomLeader, RandomFollower float64
	RandomMessages               int
	// The adversarial schedule (the paper's Figure 2 construction).
	AdvLeader, AdvFollower float64
}

// CollisionFree returns the collision-free latencies (leader, follower).
func (r *LatencyRow) CollisionFree() (float64, float64) { return r.SoloLeader, r.SoloFollower }

// FailureFree returns the failure-free latencies: the maximum over the
// random contended runs and the adversarial schedule.
func (r *LatencyRow) FailureFree() (float64, float64) {
	return max(r.RandomLeader, r.AdvLeader), max(r.RandomFollower, r.AdvFollower)
}

// LatencyOptions sizes the latency measurement.
type LatencyOptions struct {
	Seed           uint64
	SoloMessages   int // default 500
	RandomMessages int // default 10,000
	Clients        int // contended clients, default 16
}

// MeasureLatency measures one protocol's latency row on 3 groups (3
// replicas each, 1 for Skeen). It returns an error if any run fails its
// checkers, a measurement exceeds theory, or the adversarial schedule does
// not reach the bound (then it is not adversarial).
func MeasureLatency(protocol string, o LatencyOptions) (*LatencyRow, error) {
	th, ok := Theories[protocol]
	if !ok {
		return nil, fmt.Errorf("sim: no latency theory for protocol %q", protocol)
	}
	if o.SoloMessages == 0 {
		o.SoloMessages = 500
	}
	if o.RandomMessages == 0 {
		o.RandomMessages = 10000
	}
	if o.Clients == 0 {
		o.Clients = 16
	}
	replicas := 3
	if !th.HasFollower {
		replicas = 1
	}
	row := &LatencyRow{Protocol: protocol, Theory: th, SoloMessages: o.SoloMessages, RandomMessages: o.RandomMessages}
	run := func(cfg Config) (*Result, error) {
		res, err := Run(cfg)
		if err != nil {
			return nil, err
		}
		if err := CheckResult(res); err != nil {
			return nil, err
		}
		return res, nil
	}
	maxOf := func(lat []int64, delta int64) float64 { return Summarize(lat, delta).Max }

	// Batch: the latencies hold with batching on, as nodes run (a batch
	// is what one Ready holds, never waited for).
	solo, err := run(Config{Protocol: protocol, Groups: 3, Replicas: replicas, Seed: o.Seed, Delay: DelayFixed, Batch: true,
		Workload: Workload{Mode: Solo, Messages: o.SoloMessages}})
	if err != nil {
		return nil, fmt.Errorf("collision-free run: %w", err)
	}
	row.SoloLeader, row.SoloFollower = maxOf(solo.Stats.LeaderLat, solo.Config.Delta), maxOf(solo.Stats.FollowerLat, solo.Config.Delta)

	rnd, err := run(Config{Protocol: protocol, Groups: 3, Replicas: replicas, Seed: o.Seed, Delay: DelayUniform, Batch: true,
		Workload: Workload{Mode: ClosedLoop, Clients: o.Clients, Messages: o.RandomMessages}})
	if err != nil {
		return nil, fmt.Errorf("contended run: %w", err)
	}
	row.RandomLeader, row.RandomFollower = maxOf(rnd.Stats.LeaderLat, rnd.Config.Delta), maxOf(rnd.Stats.FollowerLat, rnd.Config.Delta)

	adv, err := run(AdversarialConfig(protocol, replicas, o.Seed))
	if err != nil {
		return nil, fmt.Errorf("adversarial run: %w", err)
	}
	row.AdvLeader, row.AdvFollower = maxOf(adv.Stats.LeaderLat, adv.Config.Delta), maxOf(adv.Stats.FollowerLat, adv.Config.Delta)
	return row, row.verify()
}

const latencyTolerance = 0.01 // δ; the adversarial schedule uses ε = δ/1000

func (r *LatencyRow) verify() error {
	th := r.Theory
	cfL, cfF := r.CollisionFree()
	ffL, ffF := r.FailureFree()
	boundL, boundF := th.FailureFreeBound()
	type cmp struct {
		name      string
		got, want float64
	}
	checks := []cmp{{"collision-free leader", cfL, th.CollisionFreeLeader}, {"failure-free leader", ffL, boundL}}
	if th.HasFollower {
		checks = append(checks, cmp{"collision-free follower", cfF, th.CollisionFreeFollower}, cmp{"failure-free follower", ffF, boundF})
	}
	for _, c := range checks {
		if c.got > c.want+1e-9 {
			return fmt.Errorf("%s: %s latency %.3fδ exceeds its bound %.0fδ (a bug)", r.Protocol, c.name, c.got, c.want)
		}
	}
	if r.AdvLeader < boundL-latencyTolerance {
		return fmt.Errorf("%s: adversarial schedule reached only %.3fδ at leaders, bound %.0fδ: the schedule is not adversarial", r.Protocol, r.AdvLeader, boundL)
	}
	if th.HasFollower && r.AdvFollower < boundF-latencyTolerance {
		return fmt.Errorf("%s: adversarial schedule reached only %.3fδ at followers, bound %.0fδ", r.Protocol, r.AdvFollower, boundF)
	}
	if r.SoloLeader < th.CollisionFreeLeader-latencyTolerance {
		return fmt.Errorf("%s: solo messages took %.3fδ, below theory %.0fδ: fixed delays should reach it", r.Protocol, r.SoloLeader, th.CollisionFreeLeader)
	}
	return nil
}

// AdversarialConfig builds the paper's Figure 2 schedule on groups g0, g1:
// g1's clock is first pushed ahead by three messages to g1 alone; then m
// goes to {g0, g1} at t0, so GlobalTS[m] comes from g1 and exceeds g0's
// clock until g0's leader fixes its clock advance past it, at t0+C
// (Theory.ClockAdvance: 2δ for Skeen and WbCast, when the leader learns the
// global timestamp; 4δ for FT-Skeen, when the leader places FINAL(m) in its
// log; 2δ for FastCast, when it places the speculative FINAL). m' to
// {g0, g1} is multicast at t0+C-2ε and reaches g0's leader after ε, just
// before that clock advance: it gets a local timestamp below GlobalTS[m]
// and blocks m. It reaches g1 only after a full δ, so it commits at g0 one
// full commit latency later, and m with it: C plus the collision-free
// latency (4δ for Skeen, 5δ for WbCast and 6δ at its followers, 10δ for
// FT-Skeen, 6δ for FastCast). Every other message takes exactly δ.
func AdversarialConfig(protocol string, replicas int, seed uint64) Config {
	const delta, eps = 1000, 1
	t0 := int64(10 * delta)
	c := int64(2 * delta)
	if ca := Theories[protocol].ClockAdvance; ca > 0 {
		c = int64(ca * delta)
	}
	g0Leader := wire.ProcID(0)
	clientB := wire.ProcID(2*replicas + 1) // the second client (index 1)
	script := []Scripted{
		{At: 0, Client: 0, Dest: []wire.GroupID{1}},
		{At: 0, Client: 0, Dest: []wire.GroupID{1}},
		{At: 0, Client: 0, Dest: []wire.GroupID{1}},
		{At: t0, Client: 0, Dest: []wire.GroupID{0, 1}},             // m
		{At: t0 + c - 2*eps, Client: 1, Dest: []wire.GroupID{0, 1}}, // m'
	}
	return Config{
		Protocol: protocol, Groups: 2, Replicas: replicas, Seed: seed, Delta: delta, Delay: DelayFixed, Batch: true,
		Workload: Workload{Mode: Script, Clients: 2, Script: script},
		DelayFn: func(now int64, from, to wire.ProcID, m wire.Message) (int64, bool) {
			if mc, ok := m.(*wire.Multicast); ok && mc.M.ID.Client == clientB && mc.M.ID.Seq == 1 && to == g0Leader { // m'

				return eps, true
			}
			return 0, false
		},
	}
}
