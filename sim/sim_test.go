package sim

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/weft-dev/weft/internal/check"
)

func historyBytes(t *testing.T, cfg Config) []byte {
	t.Helper()
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := check.WriteJSONL(&buf, res.History); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDeterministic: the same seed gives a byte-identical history, another
// seed a different one.
func TestDeterministic(t *testing.T) {
	for _, p := range Protocols {
		cfg := Config{Protocol: p, Groups: 3, Replicas: replicasFor(p), Seed: 7, Delay: DelayHeavy,
			Workload: Workload{Messages: 500, Clients: 4, PayloadSize: 8}}
		a, b := historyBytes(t, cfg), historyBytes(t, cfg)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: same seed, different histories", p)
		}
		cfg.Seed = 8
		if bytes.Equal(a, historyBytes(t, cfg)) {
			t.Fatalf("%s: different seeds, same history", p)
		}
	}
}

func replicasFor(p string) int {
	if p == "skeen" {
		return 1
	}
	return 3
}

// TestRandomRunsPassCheckers runs every protocol over seeds, delay models,
// workloads and group shapes and checks every history.
func TestRandomRunsPassCheckers(t *testing.T) {
	shapes := []struct{ groups, replicas int }{{1, 1}, {2, 3}, {3, 3}, {4, 5}, {5, 1}}
	modes := []Mode{ClosedLoop, OpenLoop}
	delays := []DelayModel{DelayFixed, DelayUniform, DelayHeavy}
	n := 0
	for _, p := range Protocols {
		for _, sh := range shapes {
			if p == "skeen" && sh.replicas != 1 {
				continue
			}
			for _, mode := range modes {
				for _, d := range delays {
					n++
					cfg := Config{Protocol: p, Groups: sh.groups, Replicas: sh.replicas, Seed: uint64(n), Delay: d,
						Workload: Workload{Messages: 300, Clients: 5, Mode: mode, Interval: 300, PayloadSize: 4}}
					t.Run(fmt.Sprintf("%s/%dx%d/mode%d/%s", p, sh.groups, sh.replicas, mode, d), func(t *testing.T) {
						res, err := Run(cfg)
						if err != nil {
							t.Fatal(err)
						}
						if err := CheckResult(res); err != nil {
							t.Fatal(err)
						}
						if res.Stats.Multicasts != 300 {
							t.Fatalf("multicasts = %d", res.Stats.Multicasts)
						}
					})
				}
			}
		}
	}
}

// TestLatencyTable asserts the paper's latency claims on our code: measured
// values never exceed theory and the adversarial schedule reaches it.
func TestLatencyTable(t *testing.T) {
	for _, p := range Protocols {
		row, err := MeasureLatency(p, LatencyOptions{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		cfL, cfF := row.CollisionFree()
		ffL, ffF := row.FailureFree()
		t.Logf("%s: collision-free %.3f/%.3f failure-free %.3f/%.3f", p, cfL, cfF, ffL, ffF)
		th := row.Theory
		if cfL != th.CollisionFreeLeader {
			t.Errorf("%s: collision-free leader %.3f, want exactly %.0f", p, cfL, th.CollisionFreeLeader)
		}
		if th.HasFollower && cfF != th.CollisionFreeFollower {
			t.Errorf("%s: collision-free follower %.3f, want exactly %.0f", p, cfF, th.CollisionFreeFollower)
		}
	}
}

// TestLatencyVerifyRejects: the verifier flags a row above theory and an
// adversarial schedule that falls short.
func TestLatencyVerifyRejects(t *testing.T) {
	th := Theories["wbcast"]
	good := LatencyRow{Protocol: "wbcast", Theory: th, SoloLeader: 3, SoloFollower: 4, RandomLeader: 4, RandomFollower: 5, AdvLeader: 4.998, AdvFollower: 5.998}
	if err := good.verify(); err != nil {
		t.Fatal(err)
	}
	above := good
	above.RandomLeader = 5.2
	if above.verify() == nil {
		t.Fatal("latency above theory not flagged")
	}
	weak := good
	weak.AdvLeader = 4.5
	if weak.verify() == nil {
		t.Fatal("non-adversarial schedule not flagged")
	}
}

// TestCheckerCatchesBrokenProtocol: a history whose deliveries are
// reordered at one replica fails the checkers (the simulator's results are
// really checked).
func TestCheckerCatchesBrokenProtocol(t *testing.T) {
	res, err := Run(Config{Protocol: "wbcast", Groups: 2, Replicas: 3, Seed: 1, Delay: DelayUniform, Workload: Workload{Messages: 50, Clients: 2}})
	if err != nil {
		t.Fatal(err)
	}
	ev := res.History.Events
	var idx []int
	for i, e := range ev {
		if e.Ev == "deliver" && e.Proc == 1 {
			idx = append(idx, i)
		}
	}
	a, b := idx[3], idx[4]
	ev[a].ID, ev[b].ID = ev[b].ID, ev[a].ID
	ev[a].GTS, ev[b].GTS = ev[b].GTS, ev[a].GTS
	ev[a].Digest, ev[b].Digest = ev[b].Digest, ev[a].Digest
	if CheckResult(res) == nil {
		t.Fatal("swapped deliveries at p1 not caught")
	}
}

func TestConfigErrors(t *testing.T) {
	bad := []Config{
		{Protocol: "nope", Groups: 1, Replicas: 1},
		{Protocol: "wbcast", Groups: 0, Replicas: 3},
		{Protocol: "wbcast", Groups: 2, Replicas: 3, Workload: Workload{DestMin: 3}},
		{Protocol: "skeen", Groups: 2, Replicas: 3},
	}
	for i, cfg := range bad {
		if _, err := Run(cfg); err == nil {
			t.Errorf("config %d: no error", i)
		}
	}
}

// BenchmarkSim100k is the performance target: 100,000 multicasts,
// 3 groups x 3 replicas, destinations of 1-3 groups.
func BenchmarkSim100k(b *testing.B) {
	for b.Loop() {
		res, err := Run(Config{Protocol: "wbcast", Groups: 3, Replicas: 3, Seed: 1, Delay: DelayUniform,
			Workload: Workload{Messages: 100000, Clients: 8, DestMin: 1, DestMax: 3, PayloadSize: 16}})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.Stats.Messages), "msgs/run")
	}
}
