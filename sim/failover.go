package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/weft-dev/weft/wire"
)

// FailoverStats summarises leader-crash failovers: from the crash of group
// 0's leader to the election of its successor, and to the successor's
// first delivery as leader. Latencies are in δ; DetectorTimeout is the
// default failure detector's timeout in δ, to read them in timeouts.
type FailoverStats struct {
	Runs            int
	Elected         LatencySummary
	FirstDelivery   LatencySummary
	DetectorTimeout float64
}

// failoverTimeoutTicks is wbcast's default ElectionTicks (one tick per δ).
const failoverTimeoutTicks = 10

// FailoverConfig is one failover run: 3 groups x 3 replicas under a closed
// loop of 8 clients (delays uniform in (0, δ]); group 0's leader, p0,
// crashes for good at a random time between 40δ and 60δ.
func FailoverConfig(seed uint64) Config {
	const delta = 1000
	r := rand.New(rand.NewPCG(seed, 0xfa11))
	at := int64(40*delta + r.Int64N(20*delta))
	return Config{
		Protocol: "wbcast", Groups: 3, Replicas: 3, Seed: seed, Delta: delta, Delay: DelayUniform,
		Workload: Workload{Mode: ClosedLoop, Clients: 8, Messages: 1500, PayloadSize: 16},
		Faults:   Faults{Script: []Fault{{At: at, Kind: FaultCrash, Proc: 0}}, Conv: 20000 * delta},
	}
}

// MeasureFailover runs FailoverConfig for seeds start..start+runs-1, checks
// every history and summarises the failover times.
func MeasureFailover(runs int, start uint64) (*FailoverStats, error) {
	var elected, first []int64
	var delta int64
	for i := 0; i < runs; i++ {
		cfg := FailoverConfig(start + uint64(i))
		crashAt := cfg.Faults.Script[0].At
		res, err := Run(cfg)
		if err != nil {
			return nil, err
		}
		if err := CheckResult(res); err != nil {
			return nil, err
		}
		delta = res.Config.Delta
		var leader wire.ProcID
		var tLead int64 = -1
		for _, ev := range res.LeaderEvents {
			if ev.Group == 0 && ev.T >= crashAt && ev.Proc != 0 {
				leader, tLead = ev.Proc, ev.T
				break
			}
		}
		if tLead < 0 {
			return nil, fmt.Errorf("sim: failover seed %d: group 0 elected no new leader", cfg.Seed)
		}
		tDel := int64(-1)
		for _, ev := range res.History.Events {
			if ev.Ev == "deliver" && ev.Proc == int(leader) && ev.T >= tLead {
				tDel = ev.T
				break
			}
		}
		if tDel < 0 {
			return nil, fmt.Errorf("sim: failover seed %d: new leader p%d never delivered", cfg.Seed, leader)
		}
		elected = append(elected, tLead-crashAt)
		first = append(first, tDel-crashAt)
	}
	return &FailoverStats{Runs: runs, Elected: Summarize(elected, delta), FirstDelivery: Summarize(first, delta),
		DetectorTimeout: failoverTimeoutTicks}, nil
}

// LeaderChurnConfig is the garbage-collection run: messages multicasts
// (3 groups x 3 replicas, destinations of 1-3 groups, 8 closed-loop
// clients, uniform delays) while a leader crashes every ~crashEvery δ and
// restarts ~30δ later, until about when the workload ends.
func LeaderChurnConfig(messages int, seed uint64, crashEvery int64) Config {
	const delta = 1000
	// About 0.32δ of virtual time per multicast with this workload.
	gst := int64(float64(messages)*0.32*delta) + 100*delta
	return Config{
		Protocol: "wbcast", Groups: 3, Replicas: 3, Seed: seed, Delta: delta, Delay: DelayUniform,
		Workload: Workload{Mode: ClosedLoop, Clients: 8, Messages: messages, PayloadSize: 16},
		Faults: Faults{GST: gst, CrashEvery: crashEvery * delta, DownFor: 30 * delta, MaxDown: 1,
			LeaderBias: 1, PermanentProb: 0, Conv: 20000 * delta},
		NoHistory: messages > 200000,
	}
}
