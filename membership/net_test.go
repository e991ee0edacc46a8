package membership

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// t0 is the virtual epoch: 2026-01-01T00:00:00Z in Unix nanoseconds, so
// generations look like real ones.
const t0 = int64(1767225600) * int64(time.Second)

// net is a small deterministic network of Nodes on virtual time: a heap of
// timed events (ticks and deliveries), per-node clock skew, random delays,
// partitions, pauses, crashes and restarts, all driven by one seeded PRNG.
type net struct {
	t        testing.TB
	now      int64
	q        evHeap
	seq      uint64
	rng      *rand.Rand
	seed     uint64
	nodes    []*simNode
	minDelay int64
	maxDelay int64
	// cut reports whether messages from -> to are lost (partitions).
	cut   func(from, to wire.ProcID) bool
	codec bool // encode and decode every message
	// wireBytes counts encoded bytes when codec is on.
	wireBytes uint64
	delivered uint64
	maxMsg    int
	// invariants checks every node's view after each of its steps (small
	// nets only; it is O(view)).
	invariants bool
	// checkEvery is how often runUntil evaluates its condition.
	checkEvery time.Duration
}

type simNode struct {
	id     wire.ProcID
	cfg    Config
	n      *Node // nil while down
	epoch  int   // bumped on crash: cancels scheduled ticks
	stored uint64
	skew   int64
	paused bool
	inbox  []Envelope
	events []timedEvent
	// received counts messages delivered to the node.
	received int
}

type timedEvent struct {
	at int64
	Event
}

type simEv struct {
	at    int64
	seq   uint64
	tick  bool
	node  wire.ProcID
	epoch int
	env   Envelope
	raw   []byte
}

type evHeap []simEv

func (h evHeap) Len() int { return len(h) }
func (h evHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h evHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evHeap) Push(x any)   { *h = append(*h, x.(simEv)) }
func (h *evHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = simEv{}
	*h = old[:len(old)-1]
	return x
}

// newNet creates size nodes with ids 0..size-1 configured by cfg (Rand is
// set by the network) and starts them all at t0.
func newNet(t testing.TB, seed uint64, size int, cfg func(id wire.ProcID) Config) *net {
	nw := &net{
		t: t, now: t0, seed: seed,
		rng:      rand.New(rand.NewPCG(seed, 0x5eed)),
		minDelay: int64(time.Millisecond), maxDelay: int64(5 * time.Millisecond),
		invariants: size <= 50, checkEvery: 100 * time.Millisecond,
	}
	for i := 0; i < size; i++ {
		id := wire.ProcID(i)
		nw.nodes = append(nw.nodes, &simNode{id: id, cfg: cfg(id)})
	}
	for i := 0; i < size; i++ {
		nw.start(wire.ProcID(i))
	}
	return nw
}

func testConfig(base Config, seeds ...wire.ProcID) func(wire.ProcID) Config {
	return func(id wire.ProcID) Config {
		c := base
		c.ID = id
		c.ClusterName = "weft-test"
		c.Seeds = seeds
		return c
	}
}

func (nw *net) node(id wire.ProcID) *Node { return nw.nodes[id].n }

func (nw *net) clock(sn *simNode) int64 { return nw.now + sn.skew }

func (nw *net) push(e simEv) {
	nw.seq++
	e.seq = nw.seq
	heap.Push(&nw.q, e)
}

// start boots (or reboots) a node with its stored generation.
func (nw *net) start(id wire.ProcID) {
	sn := nw.nodes[id]
	cfg := sn.cfg
	cfg.StoredGeneration = sn.stored
	cfg.Rand = rand.NewPCG(nw.seed^uint64(id)<<20, uint64(sn.epoch))
	n, err := NewNode(cfg, nw.clock(sn))
	if err != nil {
		nw.t.Fatalf("node %d: %v", id, err)
	}
	sn.epoch++
	sn.n = n
	sn.paused = false
	sn.inbox = nil
	nw.drain(sn)
	phase := nw.rng.Int64N(int64(cfg.Interval))
	nw.push(simEv{at: nw.now + phase, tick: true, node: id, epoch: sn.epoch})
}

// crash stops a node without a trace; messages to it are lost.
func (nw *net) crash(id wire.ProcID) {
	sn := nw.nodes[id]
	sn.n = nil
	sn.epoch++
}

func (nw *net) pause(id wire.ProcID) { nw.nodes[id].paused = true }

// resume ends a pause: the overdue tick runs first (as a stalled timer
// fires), then the queued messages are processed.
func (nw *net) resume(id wire.ProcID) {
	sn := nw.nodes[id]
	sn.paused = false
	if sn.n == nil {
		return
	}
	sn.n.Tick(nw.clock(sn))
	nw.drain(sn)
	inbox := sn.inbox
	sn.inbox = nil
	for _, env := range inbox {
		nw.step(sn, env)
	}
}

func (nw *net) step(sn *simNode, env Envelope) {
	sn.received++
	if sn.n.Stopped() {
		return
	}
	if err := sn.n.Step(nw.clock(sn), env.From, env.Msg); err != nil {
		nw.t.Fatalf("t=%v node %d: step %s: %v", nw.elapsed(), sn.id, Describe(env.Msg), err)
	}
	nw.drain(sn)
}

func (nw *net) drain(sn *simNode) {
	if nw.invariants {
		checkInvariants(nw.t, sn.n)
	}
	rd := sn.n.Ready()
	if rd.Generation != 0 {
		sn.stored = rd.Generation // "durable" before anything is sent
	}
	for _, env := range rd.Messages {
		if nw.cut != nil && nw.cut(env.From, env.To) {
			continue
		}
		e := simEv{at: nw.now + nw.minDelay + nw.rng.Int64N(nw.maxDelay-nw.minDelay+1), node: env.To, env: env}
		if nw.codec {
			e.raw = Append(nil, env.Msg)
			nw.wireBytes += uint64(len(e.raw))
			nw.maxMsg = max(nw.maxMsg, len(e.raw))
			if sz := Size(env.Msg); sz != len(e.raw) {
				nw.t.Fatalf("Size %d != encoded %d for %s", sz, len(e.raw), Describe(env.Msg))
			}
			e.env.Msg = nil
		}
		nw.push(e)
	}
	for _, ev := range rd.Events {
		sn.events = append(sn.events, timedEvent{nw.now, ev})
	}
	sn.n.Advance()
}

// runUntil processes events up to deadline (absolute) and returns early,
// true, as soon as cond holds (checked every 100 ms of virtual time).
func (nw *net) runUntil(deadline int64, cond func() bool) bool {
	check := nw.now
	for {
		if cond != nil && nw.now >= check {
			if cond() {
				return true
			}
			check = nw.now + int64(nw.checkEvery)
		}
		if len(nw.q) == 0 || nw.q[0].at > deadline {
			nw.now = max(nw.now, deadline)
			return cond != nil && cond()
		}
		if cond != nil && nw.q[0].at > check {
			nw.now = check
			continue
		}
		e := heap.Pop(&nw.q).(simEv)
		nw.now = e.at
		sn := nw.nodes[e.node]
		if e.tick {
			if e.epoch != sn.epoch || sn.n == nil {
				continue
			}
			next := nw.now + int64(sn.cfg.Interval) + nw.rng.Int64N(int64(sn.cfg.Interval)/50+1)
			nw.push(simEv{at: next, tick: true, node: e.node, epoch: e.epoch})
			if sn.paused {
				continue
			}
			sn.n.Tick(nw.clock(sn))
			nw.drain(sn)
			continue
		}
		if sn.n == nil {
			continue
		}
		env := e.env
		if e.raw != nil {
			m, err := Decode(e.raw)
			if err != nil {
				nw.t.Fatalf("decode: %v", err)
			}
			env.Msg = m
		}
		nw.delivered++
		if sn.paused {
			sn.inbox = append(sn.inbox, env)
			continue
		}
		nw.step(sn, env)
	}
}

func (nw *net) runFor(d time.Duration) { nw.runUntil(nw.now+int64(d), nil) }

func (nw *net) elapsed() time.Duration { return time.Duration(nw.now - t0) }

// up returns the ids of running, non-stopped nodes.
func (nw *net) up() []wire.ProcID {
	var ids []wire.ProcID
	for _, sn := range nw.nodes {
		if sn.n != nil && !sn.n.Stopped() {
			ids = append(ids, sn.id)
		}
	}
	return ids
}

// allSeeAlive reports whether every node in ids judges every other node in
// ids alive.
func (nw *net) allSeeAlive(ids []wire.ProcID) bool {
	for _, a := range ids {
		n := nw.nodes[a].n
		if n == nil {
			return false
		}
		for _, b := range ids {
			if a != b && !n.IsAlive(b) {
				return false
			}
		}
	}
	return true
}

// events returns node id's events of kind about node about (-1: any).
func (nw *net) events(id wire.ProcID, kind EventKind, about int) []timedEvent {
	var out []timedEvent
	for _, e := range nw.nodes[id].events {
		if e.Kind == kind && (about < 0 || e.Node == wire.ProcID(about)) {
			out = append(out, e)
		}
	}
	return out
}

func ids(from, to int) []wire.ProcID {
	var out []wire.ProcID
	for i := from; i < to; i++ {
		out = append(out, wire.ProcID(i))
	}
	return out
}

// converge starts nothing; it runs until every running node sees every
// other alive, failing after limit.
func (nw *net) converge(limit time.Duration) time.Duration {
	start := nw.now
	if !nw.runUntil(nw.now+int64(limit), func() bool { return nw.allSeeAlive(nw.up()) }) {
		nw.t.Fatalf("no convergence after %v: %s", limit, nw.summary())
	}
	return time.Duration(nw.now - start)
}

func (nw *net) summary() string {
	s := ""
	for _, sn := range nw.nodes {
		if sn.n == nil {
			s += fmt.Sprintf("[%d down]", sn.id)
			continue
		}
		st := sn.n.Stats()
		s += fmt.Sprintf("[%d: %d known %d live]", sn.id, st.Endpoints, st.Live)
	}
	return s
}
