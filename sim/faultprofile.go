package sim

// The fault profile: the kinds of faults, scripted faults, the random
// profile's rates and their validation, and the counts of a run's faults.
// faults.go injects them.

import (
	"fmt"
	"strings"

	"github.com/weft-dev/weft/wire"
)

// FaultKind is a kind of injected fault.
type FaultKind uint8

// Fault kinds.
const (
	// FaultCrash: replica Proc crashes. Its machine (volatile state) is
	// discarded, messages arriving while it is down are dropped, and it
	// sends nothing. Its store survives.
	FaultCrash FaultKind = iota + 1
	// FaultTornCrash: replica Proc crashes in the middle of its next
	// non-empty Ready: only the first Keep records of Ready.Persist reach
	// its store (a random prefix if Keep < 0), none of the messages leave
	// but those the protocol sends before its sync
	// (ProtocolSpec.SendsBeforeSync), and only the deliveries whose record
	// (Delivery.Rec) is in the prefix happen.
	FaultTornCrash
	// FaultRestart: replica Proc restarts from its store (Restore).
	FaultRestart
	// FaultPartition: messages sent on every link from a member of From to
	// a member of To, and back unless OneWay, are lost, for For (0: until
	// GST, or for good without one).
	FaultPartition
	// FaultReset: the messages in flight on every link from a member of
	// From to a member of To, and back unless OneWay, are dropped.
	FaultReset
	// FaultSpike: delays on every link from a member of From to a member of
	// To, and back unless OneWay, are multiplied by Factor (capped at 100δ
	// a message) for For (0: until GST, or for good without one).
	FaultSpike
	// FaultDiskLoss: replica Proc crashes and its store is wiped (a lost or
	// replaced disk). It restarts through ProtocolSpec.Amnesiac (WbCast: it
	// rejoins its group and installs a SNAPSHOT of the delivered prefix,
	// amcast/wbcast/amnesia.go) and counts as down until it rejoined; the
	// history records the wipe (check's "wipe" event: its old deliveries
	// no longer count).
	FaultDiskLoss
	// FaultHandOver: the leader Proc (a random current leader for random
	// faults) is asked to hand its leadership over (amcast.HandOverer: a
	// planned departure without the departure; it keeps running).
	FaultHandOver
)

func (k FaultKind) String() string {
	switch k {
	case FaultCrash:
		return "crash"
	case FaultTornCrash:
		return "torn-crash"
	case FaultRestart:
		return "restart"
	case FaultPartition:
		return "partition"
	case FaultReset:
		return "reset"
	case FaultSpike:
		return "spike"
	case FaultDiskLoss:
		return "disk-loss"
	case FaultHandOver:
		return "handover"
	}
	return fmt.Sprintf("FaultKind(%d)", uint8(k))
}

// Fault is one scripted fault (Faults.Script).
type Fault struct {
	At     int64
	Kind   FaultKind
	Proc   wire.ProcID   // FaultCrash, FaultTornCrash, FaultRestart, FaultDiskLoss, FaultHandOver
	From   []wire.ProcID // FaultPartition, FaultReset, FaultSpike
	To     []wire.ProcID
	OneWay bool  // only the From->To direction
	For    int64 // FaultPartition, FaultSpike: duration
	Factor int   // FaultSpike: delay multiplier
	Keep   int   // FaultTornCrash: records that reach the store; < 0: random
	// ForGood (FaultCrash): the replica never restarts, not even at GST
	// (a member lost for good; `weft sim gc --down-for-good`).
	ForGood bool
}

// Faults is a fault profile: scripted faults, and random faults drawn from
// the run's seed during a fault phase that ends at GST. At GST every
// partition and spike heals, random faults stop, and every crashed replica
// restarts except up to MaxDown per group that stay down for good (each
// with probability PermanentProb); the liveness phase then runs until the
// run converges or GST+Conv. The zero value injects no fault.
//
// Rates are mean times between two faults of a kind (exponential), in
// virtual units; 0 disables the kind. Faults apply to replica links and
// client links; clients never crash.
type Faults struct {
	Script []Fault

	GST  int64 // end of the fault phase (0: no phases, only Script)
	Conv int64 // length of the liveness phase (0: DefaultConv)

	CrashEvery    int64
	DownFor       int64   // mean downtime of a crashed replica (default 10δ)
	MaxDown       int     // replicas of a group unavailable at once (down, or behind its floor: budget.go), at most (default f = (Replicas-1)/2)
	LeaderBias    float64 // probability that a crash, isolation or spike targets a current leader
	TornProb      float64 // probability that a crash is torn (FaultTornCrash)
	PermanentProb float64 // at GST: probability that a crashed replica stays down for good
	DiskLossProb  float64 // probability that a (non-torn) crash also wipes the store (FaultDiskLoss)

	PartitionEvery int64
	PartitionFor   int64   // mean duration (default 10δ)
	AsymProb       float64 // probability that a partition is one-way

	ResetEvery int64

	SpikeEvery         int64
	SpikeFor           int64 // mean duration (default 20δ)
	SpikeMin, SpikeMax int   // delay multiplier range (default 5-20)

	// HandOverEvery: mean time between leadership hand-overs of a random
	// leader (FaultHandOver; protocols with ProtocolSpec.HandsOver). They
	// draw from a PRNG stream of their own, so enabling them leaves every
	// other fault of a seed where it was.
	HandOverEvery int64
}

// Enabled reports whether the profile injects anything.
func (f *Faults) Enabled() bool { return f.GST > 0 || len(f.Script) > 0 }

// crashes reports whether the profile can crash replicas.
func (f *Faults) crashes() bool {
	if f.CrashEvery > 0 {
		return true
	}
	for _, sf := range f.Script {
		if sf.Kind == FaultCrash || sf.Kind == FaultTornCrash || sf.Kind == FaultDiskLoss {
			return true
		}
	}
	return false
}

// DefaultConv returns the default length of the liveness phase for cfg:
// 20 × (election timeout + protocol depth × maximum message delay), with
// an election timeout of 10 ticks and a depth of 6 message delays.
func DefaultConv(cfg *Config) int64 {
	tick := cfg.TickEvery
	if tick <= 0 {
		tick = cfg.Delta
	}
	maxDelay := cfg.Delta
	if cfg.Delay == DelayHeavy {
		maxDelay = 50 * cfg.Delta
	}
	return 20 * (10*tick + 6*maxDelay)
}

func (f *Faults) validate(c *Config, ps *ProtocolSpec) error {
	if f.GST < 0 || f.Conv < 0 || f.CrashEvery < 0 || f.DownFor < 0 || f.PartitionEvery < 0 || f.PartitionFor < 0 ||
		f.ResetEvery < 0 || f.SpikeEvery < 0 || f.SpikeFor < 0 || f.MaxDown < 0 || f.HandOverEvery < 0 {
		return fmt.Errorf("sim: negative fault parameter")
	}
	for _, p := range []float64{f.LeaderBias, f.TornProb, f.PermanentProb, f.AsymProb, f.DiskLossProb} {
		if p < 0 || p > 1 {
			return fmt.Errorf("sim: fault probability %v outside [0,1]", p)
		}
	}
	if f.GST == 0 && (f.CrashEvery > 0 || f.PartitionEvery > 0 || f.ResetEvery > 0 || f.SpikeEvery > 0 || f.HandOverEvery > 0) {
		return fmt.Errorf("sim: random faults need a GST to end their phase")
	}
	if !ps.HandsOver {
		if f.HandOverEvery > 0 {
			return fmt.Errorf("sim: protocol %s cannot hand its leadership over (no ProtocolSpec.HandsOver)", ps.Name)
		}
		for _, sf := range f.Script {
			if sf.Kind == FaultHandOver {
				return fmt.Errorf("sim: protocol %s cannot hand its leadership over (no ProtocolSpec.HandsOver)", ps.Name)
			}
		}
	}
	if f.crashes() && !ps.CrashTolerant() {
		return fmt.Errorf("sim: protocol %s is not crash tolerant (no store): it cannot be run with crashes", ps.Name)
	}
	if ps.Amnesiac == nil {
		if f.DiskLossProb > 0 {
			return fmt.Errorf("sim: protocol %s cannot lose a disk (no ProtocolSpec.Amnesiac)", ps.Name)
		}
		for _, sf := range f.Script {
			if sf.Kind == FaultDiskLoss {
				return fmt.Errorf("sim: protocol %s cannot lose a disk (no ProtocolSpec.Amnesiac)", ps.Name)
			}
		}
	}
	if !f.Enabled() {
		return nil
	}
	if f.Conv == 0 {
		f.Conv = DefaultConv(c)
	}
	if f.MaxDown == 0 {
		f.MaxDown = (c.Replicas - 1) / 2
	}
	if f.DownFor == 0 {
		f.DownFor = 10 * c.Delta
	}
	if f.PartitionFor == 0 {
		f.PartitionFor = 10 * c.Delta
	}
	if f.SpikeFor == 0 {
		f.SpikeFor = 20 * c.Delta
	}
	if f.SpikeMin == 0 {
		f.SpikeMin = 5
	}
	if f.SpikeMax == 0 {
		f.SpikeMax = max(20, f.SpikeMin)
	}
	if f.SpikeMin < 1 || f.SpikeMax < f.SpikeMin {
		return fmt.Errorf("sim: spike factors [%d,%d] invalid", f.SpikeMin, f.SpikeMax)
	}
	nrep := c.Groups * c.Replicas
	n := nrep + c.Workload.Clients
	for i, sf := range f.Script {
		if sf.At < 0 {
			return fmt.Errorf("sim: fault %d (%s) at negative time", i, sf.Kind)
		}
		switch sf.Kind {
		case FaultCrash, FaultTornCrash, FaultRestart, FaultDiskLoss, FaultHandOver:
			if int(sf.Proc) >= nrep {
				return fmt.Errorf("sim: fault %d: %s of p%d, which is not a replica", i, sf.Kind, sf.Proc)
			}
		case FaultPartition, FaultReset, FaultSpike:
			for _, p := range append(append([]wire.ProcID(nil), sf.From...), sf.To...) {
				if int(p) >= n {
					return fmt.Errorf("sim: fault %d: %s of unknown process p%d", i, sf.Kind, p)
				}
			}
			if sf.Kind == FaultSpike && sf.Factor < 1 {
				return fmt.Errorf("sim: fault %d: spike factor %d", i, sf.Factor)
			}
			if sf.For < 0 {
				return fmt.Errorf("sim: fault %d: negative duration", i)
			}
		default:
			return fmt.Errorf("sim: fault %d: unknown kind %d", i, sf.Kind)
		}
	}
	return nil
}

// Describe prints the profile, durations in δ.
func (f *Faults) Describe(delta int64) string {
	if !f.Enabled() {
		return "none"
	}
	d := func(t int64) string { return fmt.Sprintf("%.0fδ", float64(t)/float64(delta)) }
	pct := func(p float64) string { return fmt.Sprintf("%.0f%%", 100*p) }
	var parts []string
	if f.GST > 0 {
		parts = append(parts, "gst "+d(f.GST)+" conv "+d(f.Conv))
	}
	if f.CrashEvery > 0 {
		parts = append(parts, fmt.Sprintf("crash every %s (down %s, leader %s, torn %s, max down %d, permanent %s)",
			d(f.CrashEvery), d(f.DownFor), pct(f.LeaderBias), pct(f.TornProb), f.MaxDown, pct(f.PermanentProb)))
	}
	if f.PartitionEvery > 0 {
		parts = append(parts, fmt.Sprintf("partition every %s (for %s, one-way %s)", d(f.PartitionEvery), d(f.PartitionFor), pct(f.AsymProb)))
	}
	if f.ResetEvery > 0 {
		parts = append(parts, "reset every "+d(f.ResetEvery))
	}
	if f.SpikeEvery > 0 {
		parts = append(parts, fmt.Sprintf("spike every %s (for %s, x%d-%d)", d(f.SpikeEvery), d(f.SpikeFor), f.SpikeMin, f.SpikeMax))
	}
	if f.HandOverEvery > 0 {
		parts = append(parts, "hand-over every "+d(f.HandOverEvery))
	}
	if len(f.Script) > 0 {
		parts = append(parts, fmt.Sprintf("%d scripted", len(f.Script)))
	}
	if len(parts) == 1 && f.GST > 0 {
		parts = append(parts, "no random faults")
	}
	return strings.Join(parts, "; ")
}

// FaultStats counts injected faults by kind.
type FaultStats struct {
	Crashes        int // every crash, torn ones included
	TornCrashes    int // crashes that struck in the middle of a Ready
	Restarts       int
	Partitions     int // symmetric partitions
	AsymPartitions int // one-way partitions
	LinkResets     int
	Spikes         int
	Permanent      int // replicas left down for good at GST
	DiskLosses     int // crashes that wiped the store
	HandOvers      int // leaders asked to hand over (that could: a live successor)
	// Withheld counts the crashes the nemesis held back, and the members
	// it did not leave down for good at GST, because members behind their
	// group's floor (being caught up) counted against its budget
	// (budget.go).
	Withheld int
}

// Add accumulates o into st.
func (st *FaultStats) Add(o FaultStats) {
	st.Crashes += o.Crashes
	st.TornCrashes += o.TornCrashes
	st.Restarts += o.Restarts
	st.Partitions += o.Partitions
	st.AsymPartitions += o.AsymPartitions
	st.LinkResets += o.LinkResets
	st.Spikes += o.Spikes
	st.Permanent += o.Permanent
	st.DiskLosses += o.DiskLosses
	st.HandOvers += o.HandOvers
	st.Withheld += o.Withheld
}

func (st FaultStats) String() string {
	return fmt.Sprintf("crashes %d (torn %d, disk lost %d)  restarts %d  partitions %d (+%d one-way)  link resets %d  delay spikes %d  down for good %d  hand-overs %d  withheld for members behind the floor %d",
		st.Crashes, st.TornCrashes, st.DiskLosses, st.Restarts, st.Partitions, st.AsymPartitions, st.LinkResets, st.Spikes, st.Permanent, st.HandOvers, st.Withheld)
}
