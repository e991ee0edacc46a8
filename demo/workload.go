package demo

// What the demo's clients do: raw multicasts (this file), or weft-kv
// (kvdemo.go).

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weft-dev/weft/client"
)

// workload is what the demo runs against the cluster, between its start
// and its checks.
type workload interface {
	// start starts the workers; ctx ends their operations in flight.
	start(ctx context.Context)
	// progress returns the progress line's figures (called once a second).
	progress() string
	// stop stops submitting and waits for the operations in flight.
	stop()
	// final does what needs the cluster once the workload stopped and
	// the faults are over (the bank's final full-balance read).
	final(ctx context.Context)
	// summarize fills sum's workload figures and runs the workload's own
	// checks, after the agents stopped; it reports whether they passed.
	summarize(sum *Summary) bool
}

// mcastWorkload is Options.Clients closed-loop clients multicasting to one
// or two random groups (run.worker).
type mcastWorkload struct {
	r    *run
	cl   *client.Client
	halt atomic.Bool
	wg   sync.WaitGroup
	last int // completed at the last progress line
}

func (m *mcastWorkload) start(ctx context.Context) {
	for w := range m.r.opt.Clients {
		m.wg.Go(func() { m.r.worker(ctx, m.cl, &m.halt, uint64(w)) })
	}
}

func (m *mcastWorkload) progress() string {
	r := m.r
	r.mu.Lock()
	win := r.window
	r.window = nil
	done, inflight := r.completed, r.inflight
	r.mu.Unlock()
	slices.Sort(win)
	line := fmt.Sprintf("delivered %s  rate %s/s  p50 %s  in flight %d", commas(done), commas(done-m.last), fmtDur(pct(win, 0.5)), inflight)
	m.last = done
	return line
}

func (m *mcastWorkload) stop() {
	m.halt.Store(true)
	m.wg.Wait()
}

func (m *mcastWorkload) final(context.Context) {}

// summarize: every multicast must have had its reply.
func (m *mcastWorkload) summarize(sum *Summary) bool {
	r := m.r
	r.mu.Lock()
	all := slices.Clone(r.lat)
	sum.Completed = r.completed
	failures := r.failures
	r.mu.Unlock()
	slices.Sort(all)
	sum.P50, sum.P99 = pct(all, 0.5), pct(all, 0.99)
	if len(all) > 0 {
		sum.Max = all[len(all)-1]
	}
	sum.Throughput = float64(sum.Completed) / r.opt.Duration.Seconds()
	if failures > 0 {
		r.printf("%d multicasts got no reply", failures)
	}
	return failures == 0
}
