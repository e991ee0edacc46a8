package amcasttest

import (
	"fmt"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// Trace is what one process of a steady-state run received: every input
// in order (an envelope, or a tick where Msg is nil), and where each
// multicast of the run began in that sequence. Replaying it into a fresh
// replica built the same way reproduces the process's run exactly (the
// machines are deterministic), so a benchmark can time and count the
// allocations of that one process's steps alone, with no network, codec
// or other process in the measurement.
type Trace struct {
	// Inputs are the process's inputs in order; a nil Msg is a Tick.
	Inputs []wire.Envelope
	// Marks[k] is the index in Inputs at which the run's k-th multicast
	// was submitted (so the inputs between Marks[a] and Marks[b] are, on
	// average, the work of b-a multicasts).
	Marks []int
	// Outputs counts what the process produced (records, messages and
	// deliveries) over the whole run; Replay returns the same count.
	Outputs int
}

// SteadyOptions shapes RecordSteady's run.
type SteadyOptions struct {
	Protocol         string
	Groups, Replicas int
	// Dests gives the destination groups of the k-th multicast
	// (Dests(k)); every message should include Target's group for each
	// multicast to be work for it.
	Dests func(k int) []wire.GroupID
	// Multicasts is the length of the run.
	Multicasts int
	// Window is the number of messages the client keeps in flight
	// (closed loop; default 8).
	Window int
	// TickEvery ticks every process once per this many multicasts
	// (default 100; heartbeats and timers run as in a real loop).
	TickEvery int
	// Payload is each message's payload size (default 64).
	Payload int
	// Target is the process whose inputs are recorded.
	Target wire.ProcID
}

// RecordSteady runs a topology of newReplica's machines and one client in
// memory, failure-free: the client keeps Window messages in flight, every
// envelope goes through the wire codec and is handed over in FIFO order
// (one global queue, so each link is FIFO), and every Ready is drained at
// once. It returns the inputs of opt.Target. It fails if a multicast does
// not complete or a process refuses an input.
func RecordSteady(newReplica ReplicaFunc, opt SteadyOptions) (*Trace, error) {
	if opt.Window == 0 {
		opt.Window = 8
	}
	if opt.TickEvery == 0 {
		opt.TickEvery = 100
	}
	if opt.Payload == 0 {
		opt.Payload = 64
	}
	topo, err := amcast.NewTopology(opt.Groups, opt.Replicas)
	if err != nil {
		return nil, err
	}
	n := topo.NumReplicas()
	procs := make([]amcast.Machine, n+1)
	for id := range n {
		if procs[id], err = newReplica(opt.Protocol, topo, wire.ProcID(id)); err != nil {
			return nil, err
		}
	}
	cl, err := amcast.NewClient(topo, wire.ProcID(n))
	if err != nil {
		return nil, err
	}
	procs[n] = cl
	tr := &Trace{}
	var queue []wire.Envelope
	done, sent := 0, 0
	payload := make([]byte, opt.Payload)
	drain := func(id wire.ProcID) error {
		m := procs[id]
		for m.HasReady() {
			rd := m.Ready()
			if id == opt.Target {
				tr.Outputs += len(rd.Persist) + len(rd.Messages) + len(rd.Deliveries)
			}
			for _, env := range rd.Messages {
				msg, err := wire.Decode(wire.Append(nil, env.Msg))
				if err != nil {
					return fmt.Errorf("codec round trip of %s: %w", wire.DescribeEnvelope(env), err)
				}
				queue = append(queue, wire.Envelope{From: env.From, To: env.To, Msg: msg})
			}
			if id == wire.ProcID(n) {
				done += len(rd.Deliveries)
			}
			m.Advance()
		}
		return nil
	}
	submit := func() error {
		if sent%opt.TickEvery == 0 && sent > 0 {
			for id, m := range procs {
				if wire.ProcID(id) == opt.Target {
					tr.Inputs = append(tr.Inputs, wire.Envelope{To: opt.Target})
				}
				m.Tick()
				if err := drain(wire.ProcID(id)); err != nil {
					return err
				}
			}
		}
		tr.Marks = append(tr.Marks, len(tr.Inputs))
		sent++
		m := wire.NewAppMsg(wire.MsgID{Client: wire.ProcID(n), Seq: uint64(sent)}, opt.Dests(sent-1), payload)
		if err := cl.Multicast(m); err != nil {
			return err
		}
		return drain(wire.ProcID(n))
	}
	for sent < opt.Multicasts && sent < opt.Window {
		if err := submit(); err != nil {
			return nil, err
		}
	}
	for len(queue) > 0 {
		env := queue[0]
		queue = queue[1:]
		if env.To == opt.Target {
			tr.Inputs = append(tr.Inputs, env)
		}
		if err := procs[env.To].Step(env); err != nil {
			return nil, fmt.Errorf("p%d refused %s: %w", env.To, wire.DescribeEnvelope(env), err)
		}
		before := done
		if err := drain(env.To); err != nil {
			return nil, err
		}
		for range done - before {
			if sent < opt.Multicasts {
				if err := submit(); err != nil {
					return nil, err
				}
			}
		}
	}
	if done != opt.Multicasts {
		return nil, fmt.Errorf("%d of %d multicasts completed", done, opt.Multicasts)
	}
	return tr, nil
}

// Replay feeds m the inputs from index from to index to (a Tick for an
// input without a message), draining its Ready after each, and returns
// the number of records, messages and deliveries m produced. It does not
// allocate by itself: what it allocates is m's.
func (tr *Trace) Replay(m amcast.Machine, from, to int) (int, error) {
	out := 0
	for _, env := range tr.Inputs[from:to] {
		if env.Msg == nil {
			m.Tick()
		} else if err := m.Step(env); err != nil {
			return out, err
		}
		for m.HasReady() {
			rd := m.Ready()
			out += len(rd.Persist) + len(rd.Messages) + len(rd.Deliveries)
			m.Advance()
		}
	}
	return out, nil
}

// Steady-state measurement sizes: the first steadyWarm multicasts of a
// trace bring a fresh replica to steady state (maps and buffers grown,
// ballots joined); the following ones are measured.
const (
	steadyWarm     = 1000
	steadyMeasured = 4000
)

// recordFor records a trace of steadyWarm+steadyMeasured multicasts.
func recordFor(tb testing.TB, newReplica ReplicaFunc, opt SteadyOptions) *Trace {
	tb.Helper()
	opt.Multicasts = steadyWarm + steadyMeasured
	tr, err := RecordSteady(newReplica, opt)
	if err != nil {
		tb.Fatalf("recording %s p%d: %v", opt.Protocol, opt.Target, err)
	}
	return tr
}

// warmReplica builds a fresh opt.Target and replays the trace's warm-up
// into it.
func (tr *Trace) warmReplica(tb testing.TB, newReplica ReplicaFunc, opt SteadyOptions) amcast.Machine {
	tb.Helper()
	topo, err := amcast.NewTopology(opt.Groups, opt.Replicas)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := newReplica(opt.Protocol, topo, opt.Target)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := tr.Replay(m, 0, tr.Marks[steadyWarm]); err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchSteady benchmarks opt.Target's steps in a steady-state run: one
// benchmark op is one multicast's worth of the process's inputs (the
// inputs between consecutive multicasts of a recorded run, see Trace), so
// ns/op and allocs/op (reported) are per multicast, for that process
// alone. It also reports the inputs the process steps per multicast.
func BenchSteady(b *testing.B, newReplica ReplicaFunc, opt SteadyOptions) {
	tr := recordFor(b, newReplica, opt)
	b.ReportAllocs()
	b.ResetTimer()
	var m amcast.Machine
	k := len(tr.Marks) // the next multicast to replay; past the end: start over
	for i := 0; i < b.N; i++ {
		if k+1 >= len(tr.Marks) {
			b.StopTimer()
			m, k = tr.warmReplica(b, newReplica, opt), steadyWarm
			b.StartTimer()
		}
		if _, err := tr.Replay(m, tr.Marks[k], tr.Marks[k+1]); err != nil {
			b.Fatal(err)
		}
		k++
	}
	b.StopTimer()
	steps := tr.Marks[len(tr.Marks)-1] - tr.Marks[steadyWarm]
	b.ReportMetric(float64(steps)/float64(len(tr.Marks)-1-steadyWarm), "steps/multicast")
}

// SteadyAllocs returns the average allocations per multicast of
// opt.Target's steps in a steady-state run (testing.AllocsPerRun over
// chunks of 100 multicasts). It also checks that a replay reproduces the
// recorded run's outputs, so the figure is about the same work.
func SteadyAllocs(tb testing.TB, newReplica ReplicaFunc, opt SteadyOptions) float64 {
	tb.Helper()
	tr := recordFor(tb, newReplica, opt)
	m := tr.warmReplica(tb, newReplica, opt)
	const chunk = 100
	k := steadyWarm
	runs := steadyMeasured/chunk - 2 // AllocsPerRun runs f once more to warm up; the last chunk needs a next mark
	avg := testing.AllocsPerRun(runs, func() {
		if _, err := tr.Replay(m, tr.Marks[k], tr.Marks[k+chunk]); err != nil {
			tb.Fatal(err) // same goroutine: AllocsPerRun calls f directly
		}
		k += chunk
	})
	// The same work: a fresh replica replaying everything produces what
	// the recorded one did.
	topo, _ := amcast.NewTopology(opt.Groups, opt.Replicas)
	fresh, err := newReplica(opt.Protocol, topo, opt.Target)
	if err != nil {
		tb.Fatal(err)
	}
	if out, err := tr.Replay(fresh, 0, len(tr.Inputs)); err != nil || out != tr.Outputs {
		tb.Fatalf("replay of p%d: %d outputs (%v), the recorded run had %d", opt.Target, out, err, tr.Outputs)
	}
	return avg / chunk
}
