// Package gossipsim measures gossip dissemination on virtual time, in the
// simulator's conventions: a seeded math/rand/v2 PCG, no clock, no
// goroutines, no I/O, the same seed giving the same output.
//
// Two models run:
//
//   - The idealised epidemics of the gossip seed document (push, pull,
//     push-pull): one informed node at round 0; in every synchronous
//     round each node contacts one uniformly random other node (never
//     itself); push informs the target if the caller knows, pull informs
//     the caller if the target knows, push-pull does both; every decision
//     uses the state at the start of the round. Spread counts the rounds
//     until every node is informed.
//   - The real gossip core (package membership) for N nodes ticking on
//     virtual time, every message encoded and decoded by membership's
//     codec (RunFull).
package gossipsim

import (
	"fmt"
	"math/rand/v2"
)

// Mode is a dissemination model.
type Mode int

// Modes.
const (
	Push Mode = iota
	Pull
	PushPull
	// Full runs membership.Node (RunFull).
	Full
)

var modeNames = [...]string{"push", "pull", "pushpull", "full"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses push, pull, pushpull (or push-pull) and full.
func ParseMode(s string) (Mode, error) {
	if s == "push-pull" {
		return PushPull, nil
	}
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("gossipsim: unknown mode %q (want push, pull, pushpull or full)", s)
}

// runSeed derives run r's seed from the configured one.
func runSeed(seed uint64, r int) uint64 { return seed + uint64(r)*0x9e3779b97f4a7c15 }

// Spread runs one idealised epidemic among n >= 2 nodes (push, pull or
// push-pull), rumour at node 0, and returns the rounds until every node
// knows it. Each round draws exactly n peers from rng, in node order,
// whatever the mode.
func Spread(n int, mode Mode, rng *rand.Rand) int {
	if n < 2 {
		panic("gossipsim: Spread needs at least 2 nodes")
	}
	push := mode == Push || mode == PushPull
	pull := mode == Pull || mode == PushPull
	if !push && !pull {
		panic("gossipsim: Spread of mode " + mode.String())
	}
	cur := make([]bool, n)
	next := make([]bool, n)
	cur[0] = true
	count, rounds := 1, 0
	for count < n {
		rounds++
		copy(next, cur) // synchronous: decide from the start-of-round state
		for i := 0; i < n; i++ {
			j := rng.IntN(n - 1)
			if j >= i {
				j++ // never yourself
			}
			if push && cur[i] {
				next[j] = true
			}
			if pull && cur[j] {
				next[i] = true
			}
		}
		cur, next = next, cur
		count = 0
		for _, k := range cur {
			if k {
				count++
			}
		}
	}
	return rounds
}

// SpreadInRound is Spread with in-round updates, as the real gossip
// core's asynchronous rounds have: every node acts once per round at its
// own fixed phase (a random order drawn once per run, the rumour's source
// first, as in full mode where the value is set just before the source's
// tick), and what it learns is visible to the nodes acting after it in
// the same round. A round that informs the last node counts in full.
func SpreadInRound(n int, mode Mode, rng *rand.Rand) int {
	if n < 2 {
		panic("gossipsim: SpreadInRound needs at least 2 nodes")
	}
	push := mode == Push || mode == PushPull
	pull := mode == Pull || mode == PushPull
	if !push && !pull {
		panic("gossipsim: SpreadInRound of mode " + mode.String())
	}
	order := rng.Perm(n)
	for k, i := range order {
		if i == 0 { // the source acts first
			order[0], order[k] = order[k], order[0]
			break
		}
	}
	known := make([]bool, n)
	known[0] = true
	count, rounds := 1, 0
	for count < n {
		rounds++
		for _, i := range order {
			j := rng.IntN(n - 1)
			if j >= i {
				j++
			}
			if push && known[i] && !known[j] {
				known[j] = true
				count++
			}
			if pull && known[j] && !known[i] {
				known[i] = true
				count++
			}
		}
	}
	return rounds
}

// Result summarises runs of one mode. Rounds are integers for the
// idealised modes (rounds until everyone knows) and for full mode
// (ceil of the spread time in gossip intervals, see FullRun).
type Result struct {
	Mode   string  `json:"mode"`
	Nodes  int     `json:"nodes"`
	Runs   int     `json:"runs"`
	Seed   uint64  `json:"seed"`
	Mean   float64 `json:"mean"`
	Min    int     `json:"min"`
	Max    int     `json:"max"`
	Rounds []int   `json:"rounds"` // per run
	*FullSummary
}

func summarise(res *Result) {
	res.Min, res.Max = 0, 0
	sum := 0
	for i, r := range res.Rounds {
		if i == 0 || r < res.Min {
			res.Min = r
		}
		if i == 0 || r > res.Max {
			res.Max = r
		}
		sum += r
	}
	if len(res.Rounds) > 0 {
		res.Mean = float64(sum) / float64(len(res.Rounds))
	}
}

// RunIdeal runs an idealised mode runs times, run r with its own PCG
// seeded from (seed, r).
func RunIdeal(mode Mode, nodes, runs int, seed uint64) (*Result, error) {
	switch {
	case mode == Full || mode < 0 || mode > Full:
		return nil, fmt.Errorf("gossipsim: RunIdeal of mode %v", mode)
	case nodes < 2:
		return nil, fmt.Errorf("gossipsim: need at least 2 nodes, got %d", nodes)
	case runs < 1:
		return nil, fmt.Errorf("gossipsim: need at least 1 run, got %d", runs)
	}
	res := &Result{Mode: mode.String(), Nodes: nodes, Runs: runs, Seed: seed}
	for r := 0; r < runs; r++ {
		rng := rand.New(rand.NewPCG(runSeed(seed, r), 0x5eed))
		res.Rounds = append(res.Rounds, Spread(nodes, mode, rng))
	}
	summarise(res)
	return res, nil
}
