package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/internal/check"
)

// SwarmConfig draws one swarm-testing configuration (TigerBeetle VOPR
// style) from seed: the shape (2-4 groups of 3 or 5 replicas, so f = 1 or
// 2, and 1-4 clients), an open-loop workload of 100-400 multicasts, most of
// them to 2 or more groups, clients that start a new session every 1-20
// messages in three seeds of four, crashes that lose the disk in one
// seed of three (protocols with ProtocolSpec.Amnesiac), a delay model, and a fault profile whose every
// kind (crashes, torn crashes, partitions, link resets, delay spikes) may
// be absent. The fault phase lasts about as long as the workload; crashes
// keep at most f replicas of a group down and target leaders often; at GST
// everything heals and crashed replicas restart, except, in some seeds,
// up to f per group that stay down for good. The liveness phase lasts
// DefaultConv.
//
// Protocols that are not crash tolerant (no store) and cannot lose
// messages get one replica per group and delay spikes only.
//
// The same protocol and seed give the same Config, and Run gives the same
// history: a failing seed replays exactly.
func SwarmConfig(protocol string, seed uint64) Config {
	r := rand.New(rand.NewPCG(seed, 0x5357_4152_4d5f_5631)) // "SWARM_V1"
	const delta = 1000
	tolerant := false
	if ps, err := LookupProtocol(protocol); err == nil {
		tolerant = ps.CrashTolerant()
	}
	groups := 2 + r.IntN(3)
	replicas := 1
	if tolerant {
		replicas = 3 + 2*r.IntN(2)
	}
	clients := 1 + r.IntN(4)
	messages := 100 + r.IntN(301)
	destMin := 2
	if r.IntN(4) == 0 {
		destMin = 1
	}
	delay := DelayModel(r.IntN(3))
	interval := int64(delta + r.IntN(2*delta)) // per client, mean, in [1δ, 3δ)
	load := int64(messages) * interval / int64(clients)
	gst := max(load*int64(80+r.IntN(41))/100, 50*delta)

	cfg := Config{
		Protocol: protocol, Groups: groups, Replicas: replicas, Seed: seed, Delta: delta, Delay: delay,
		Workload: Workload{Messages: messages, Clients: clients, Mode: OpenLoop, Interval: interval,
			DestMin: destMin, DestMax: groups, PayloadSize: 8},
	}
	// Clients start new sessions (a client restarted with the same id) in
	// most seeds. Drawn from a stream of its own, so every other part of a
	// seed's configuration is what it was before sessions existed.
	rs := rand.New(rand.NewPCG(seed, 0x5345_5353_494f_4e53)) // "SESSIONS"
	if rs.IntN(4) > 0 {
		cfg.Workload.SessionEvery = 1 + rs.IntN(20)
	}
	// A node batches its messages between replicas (amcast.Coalesce): so
	// do three seeds of four, drawn from a stream of their own so every
	// other part of a seed is what it was before batching existed.
	cfg.Batch = rand.New(rand.NewPCG(seed, 0x4241_5443_4845_5321)).IntN(4) > 0 // "BATCHES!"
	// A WbCast node holds its DELIVERs for its next message to the peer
	// or its next tick (amcast.Held): so do half the seeds, from a stream
	// of their own.
	cfg.Hold = rand.New(rand.NewPCG(seed, 0x484f_4c44_5345_4e44)).IntN(2) > 0 // "HOLDSEND"
	// A node of a fault-tolerant protocol syncs off its loop, stepping
	// input while its records sync (amcast.Pipeline; node/pipeline.go): so
	// do half the seeds, from a stream of their own.
	cfg.Pipeline = rand.New(rand.NewPCG(seed, 0x5049_5045_4c49_4e45)).IntN(2) > 0 // "PIPELINE"
	f := Faults{GST: gst, LeaderBias: 0.3 + 0.6*r.Float64(), SpikeMin: 5, SpikeMax: 20}
	// rate draws whether a kind is present (with probability p) and, if so,
	// a mean time between faults giving 1..maxN of them before GST.
	rate := func(p float64, maxN int) int64 {
		n := 1 + r.IntN(maxN)
		if r.Float64() >= p {
			return 0
		}
		return gst / int64(n)
	}
	if tolerant {
		f.CrashEvery = rate(0.85, 12)
		f.DownFor = int64(3+r.IntN(38)) * delta
		if r.IntN(3) > 0 {
			f.TornProb = 0.5 * r.Float64()
		}
		if r.IntN(2) == 0 {
			f.PermanentProb = 0.3 + 0.7*r.Float64()
		}
		f.PartitionEvery = rate(0.7, 8)
		f.PartitionFor = int64(2+r.IntN(39)) * delta
		if r.IntN(4) > 0 {
			f.AsymProb = r.Float64()
		}
		f.ResetEvery = rate(0.6, 20)
	}
	// Disk loss (a crash that wipes the store) in one seed of three for
	// protocols that handle it; from the same separate stream as sessions.
	if ps, err := LookupProtocol(protocol); err == nil && ps.Amnesiac != nil && tolerant && rs.IntN(3) == 0 {
		f.DiskLossProb = 0.1 + 0.4*rs.Float64()
	}
	// Clients that restart with messages in flight, and clients that give
	// up on a message unanswered past their session lease (at most half
	// WbCast's default replica lease of 1000 ticks), each in one seed of
	// three; from the same separate stream, after every earlier draw.
	if cfg.Workload.SessionEvery > 0 && rs.IntN(3) == 0 {
		cfg.Workload.CrashClients = true
	}
	if rs.IntN(3) == 0 {
		cfg.Workload.ExpireTicks = 200 + rs.IntN(301)
	}
	f.SpikeEvery = rate(0.7, 8)
	f.SpikeFor = int64(5+r.IntN(56)) * delta
	// Leadership hand-overs (planned departures, amcast/wbcast/handover.go)
	// in one seed of three for protocols that hand over: 1..8 before GST,
	// from the separate stream, after every earlier draw (and on their own
	// PRNG stream in the run), so every other fault stays where it was.
	if ps, err := LookupProtocol(protocol); err == nil && ps.HandsOver && rs.IntN(3) == 0 {
		f.HandOverEvery = gst / int64(1+rs.IntN(8))
	}
	cfg.Faults = f
	cfg.Faults.Conv = DefaultConv(&cfg)
	cfg.MaxMessages = SwarmBudget(&cfg)
	return cfg
}

// swarmBudgetFactor scales SwarmBudget's allowance per multicast. Seeds
// that converge used up to 0.9 of it (WbCast, Nov 2026; median 0.07).
const swarmBudgetFactor = 100

// SwarmBudget is the message budget (Config.MaxMessages) of a swarm
// configuration: two messages per replica pair and tick until the horizon
// (heartbeats and their answers), plus 100 times a
// multicast's failure-free cost to all groups (ACCEPT to every member,
// ACCEPT_ACK from every member to every leader, DELIVER, replies) per
// multicast. A run past it is in a livelock or a retry storm.
func SwarmBudget(cfg *Config) int {
	tick := cfg.TickEvery
	if tick <= 0 {
		tick = cfg.Delta
	}
	G, R := cfg.Groups, cfg.Replicas
	ticks := int((cfg.Faults.GST + cfg.Faults.Conv) / tick)
	perMulticast := G*G*R + 2*G*R
	return 2*G*R*max(R-1, 1)*ticks + swarmBudgetFactor*perMulticast*cfg.Workload.Messages
}

// SweepResult is the outcome of one swarm seed.
type SweepResult struct {
	Seed   uint64
	Config Config // as drawn by SwarmConfig, with defaults filled in by Run
	Stats  Stats
	Faults FaultStats
	// LeaderChanges, GroupLeaderChanges and Coverage are Result's.
	LeaderChanges      int
	GroupLeaderChanges []int
	Coverage           amcast.Coverage
	Converged          bool
	// GSTToLast is the virtual time from GST to the last delivery (0 if
	// every delivery came before GST).
	GSTToLast int64
	// Quorum and Live are FaultChecks' reports. When Err is set, Quorum
	// holds the safety checks of the history up to the failure (no
	// termination nor agreement) and Live is nil.
	Quorum, Live *check.Report
	// Err is a run that could not finish: a panic inside a protocol, a
	// message refused, a store error. It counts as a violation.
	Err error
}

// Violations returns the number of violations: Quorum's, the termination
// violations of Live, and 1 for Err.
func (r *SweepResult) Violations() int {
	n := 0
	if r.Err != nil {
		n++
	}
	if r.Quorum != nil {
		n += r.Quorum.Total
	}
	return n + r.liveTermination()
}

func (r *SweepResult) liveTermination() int {
	if r.Live == nil {
		return 0
	}
	return r.Live.Count(check.KindTermination)
}

// Failure describes what failed, "" if nothing did.
func (r *SweepResult) Failure() string {
	var parts []string
	if r.Err != nil {
		parts = append(parts, r.Err.Error())
	}
	if r.Quorum != nil && !r.Quorum.OK() {
		parts = append(parts, r.Quorum.Error())
	}
	if n := r.liveTermination(); n > 0 {
		var sb strings.Builder
		fmt.Fprintf(&sb, "termination at every live replica (TermAll): %d violation(s)", n)
		shown := 0
		for _, v := range r.Live.Violations {
			if v.Kind == check.KindTermination && shown < 3 {
				sb.WriteString("\n  " + v.String())
				shown++
			}
		}
		parts = append(parts, sb.String())
	}
	return strings.Join(parts, "\n")
}

// RunSwarm runs and checks one swarm seed (SwarmConfig). It never panics:
// a panic inside a protocol becomes Err.
func RunSwarm(protocol string, seed uint64) *SweepResult {
	return RunSwarmConfig(SwarmConfig(protocol, seed))
}

// RunSwarmConfig runs and checks cfg as RunSwarm does a swarm seed: cfg
// is typically a SwarmConfig with a change, e.g. Spec set to a variant of
// the protocol (sim/mutation_test.go runs WbCast broken on purpose).
func RunSwarmConfig(cfg Config) (r *SweepResult) {
	seed := cfg.Seed
	r = &SweepResult{Seed: seed, Config: cfg}
	defer func() {
		if x := recover(); x != nil {
			r.Err = fmt.Errorf("sim: seed %d: panic: %v", seed, x)
		}
	}()
	res, err := Run(cfg)
	if res != nil {
		r.Config = res.Config
		r.Stats = res.Stats
		r.Faults = res.Faults
		r.LeaderChanges = res.LeaderChanges
		r.GroupLeaderChanges = res.GroupLeaderChanges
		r.Coverage = res.Coverage
		r.Converged = res.Converged
		if gst := res.Config.Faults.GST; res.LastDelivery > gst {
			r.GSTToLast = res.LastDelivery - gst
		}
	}
	if err != nil {
		r.Err = err
		if res != nil && res.History != nil {
			// The safety checks still apply to the history up to the failure.
			r.Quorum = check.Check(res.History, check.Options{Termination: check.TermNone})
		}
		return r
	}
	r.Quorum, r.Live = FaultChecks(res)
	return r
}

// SweepFailure is a failing seed of a sweep.
type SweepFailure struct {
	Seed   uint64
	Detail string
}

// MinCoverageSeeds is the sweep size from which missing coverage facts
// make a sweep invalid (SweepSummary.CoverageGaps).
const MinCoverageSeeds = 20

// SweepSummary aggregates the results of a sweep.
type SweepSummary struct {
	Protocol   string
	Seeds      int
	Delta      int64 // virtual units per δ of the swarm configurations
	SimTime    int64 // virtual time, summed over seeds
	Multicasts int
	MultiGroup int // multicasts to 2 or more groups
	Deliveries int
	Messages   int
	Lost       int // messages lost to partitions, resets and crashes
	Faults     FaultStats
	// LeaderChanges and Coverage sum the seeds'. Groups counts the groups
	// of all seeds, GroupsWithLeaderChange those that changed leader at
	// least once.
	LeaderChanges          int
	Groups                 int
	GroupsWithLeaderChange int
	Coverage               amcast.Coverage
	// GSTToLast holds each seed's SweepResult.GSTToLast (virtual units).
	GSTToLast  []int64
	Converged  int // seeds that converged before the horizon
	Violations int
	// Failures lists the failing seeds in seed order.
	Failures []SweepFailure
}

// Add accumulates one seed's result.
func (s *SweepSummary) Add(r *SweepResult) {
	s.Seeds++
	if s.Protocol == "" {
		s.Protocol = r.Config.Protocol
	}
	if s.Delta == 0 {
		s.Delta = r.Config.Delta
	}
	st := &r.Stats
	s.SimTime += st.VirtualTime
	s.Multicasts += st.Multicasts
	s.MultiGroup += st.MultiGroup
	s.Deliveries += st.Deliveries
	s.Messages += st.Messages
	s.Lost += st.LostPartition + st.LostReset + st.LostDown
	s.Faults.Add(r.Faults)
	s.LeaderChanges += r.LeaderChanges
	s.Groups += r.Config.Groups
	for _, n := range r.GroupLeaderChanges {
		if n > 0 {
			s.GroupsWithLeaderChange++
		}
	}
	s.Coverage.Add(r.Coverage)
	s.GSTToLast = append(s.GSTToLast, r.GSTToLast)
	if r.Converged {
		s.Converged++
	}
	if v := r.Violations(); v > 0 {
		s.Violations += v
		i := len(s.Failures)
		for i > 0 && s.Failures[i-1].Seed > r.Seed {
			i--
		}
		s.Failures = append(s.Failures, SweepFailure{})
		copy(s.Failures[i+1:], s.Failures[i:])
		s.Failures[i] = SweepFailure{Seed: r.Seed, Detail: r.Failure()}
	}
}

// GSTLatency summarises the time from GST to the last delivery over the
// seeds, in δ.
func (s *SweepSummary) GSTLatency() LatencySummary {
	return Summarize(append([]int64(nil), s.GSTToLast...), max(s.Delta, 1))
}

// CoverageGaps lists the coverage facts a sweep of at least
// MinCoverageSeeds seeds failed to reach (then the sweep is invalid: its
// faults did not exercise recovery): a leader change, a recovery while a
// message was ACCEPTED and not delivered, a multicast to 2 or more
// groups. Protocols that are not crash tolerant (their swarm injects delay
// spikes only) need only the last. Smaller sweeps report none.
func (s *SweepSummary) CoverageGaps() []string {
	if s.Seeds < MinCoverageSeeds {
		return nil
	}
	var gaps []string
	if ps, err := LookupProtocol(s.Protocol); err == nil && !ps.CrashTolerant() {
		if s.MultiGroup == 0 {
			gaps = append(gaps, "no multicast to 2 or more groups")
		}
		return gaps
	}
	if s.LeaderChanges == 0 {
		gaps = append(gaps, "no leader change")
	}
	if s.Coverage.RecoveriesWithAccepted == 0 {
		gaps = append(gaps, "no recovery while a message was ACCEPTED")
	}
	if s.MultiGroup == 0 {
		gaps = append(gaps, "no multicast to 2 or more groups")
	}
	if ps, err := LookupProtocol(s.Protocol); err == nil && ps.Amnesiac != nil {
		// State transfer (wbcast, transfer.go): members the floor passed,
		// and members that lost their disk and rejoined.
		if s.Coverage.Installs == 0 {
			gaps = append(gaps, "no state transfer (no SNAPSHOT installed)")
		}
		if s.Coverage.Rejoins == 0 {
			gaps = append(gaps, "no rejoin after a disk loss")
		}
	}
	if ps, err := LookupProtocol(s.Protocol); err == nil && ps.HandsOver && s.Coverage.HandOvers == 0 {
		gaps = append(gaps, "no leadership hand-over")
	}
	return gaps
}

// Sweep runs seeds swarm seeds of protocol, start, start+1, ..., one after
// the other, calling progress (if not nil) after each. It returns an error
// only for an unknown protocol; violations are in the summary.
func Sweep(protocol string, seeds int, start uint64, progress func(done int, agg *SweepSummary)) (*SweepSummary, error) {
	if _, err := LookupProtocol(protocol); err != nil {
		return nil, err
	}
	agg := &SweepSummary{Protocol: protocol}
	for i := 0; i < seeds; i++ {
		agg.Add(RunSwarm(protocol, start+uint64(i)))
		if progress != nil {
			progress(i+1, agg)
		}
	}
	return agg, nil
}
