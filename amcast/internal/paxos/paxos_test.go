package paxos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// host records what its member executes.
type host struct {
	exec    []string
	leading bool
}

func (h *host) Execute(slot uint64, c *wire.Command) {
	h.exec = append(h.exec, fmt.Sprintf("%d:%s", slot, wire.DescribeCommand(c)))
}

func (h *host) Lead(leading bool) { h.leading = leading }

func (h *host) CheckCommand(*wire.Command) error { return nil }

// cluster is one group of members wired by in-memory FIFO links through
// the codec; down members drop what they are sent.
type cluster struct {
	t     *testing.T
	logs  []*Log
	hosts []*host
	outs  []*amcast.Outbox
	down  []bool
	q     []wire.Envelope
	rng   *rand.Rand
}

func newCluster(t *testing.T, n int, seed uint64) *cluster {
	topo, err := amcast.NewTopology(1, n)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, down: make([]bool, n), rng: rand.New(rand.NewPCG(seed, 1))}
	for i := range n {
		h, out := &host{}, &amcast.Outbox{}
		l, err := New(Config{Topology: topo, ID: wire.ProcID(i)}, h, out)
		if err != nil {
			t.Fatal(err)
		}
		c.logs, c.hosts, c.outs = append(c.logs, l), append(c.hosts, h), append(c.outs, out)
	}
	return c
}

// drain moves every member's outputs into the network.
func (c *cluster) drain() {
	for i, out := range c.outs {
		rd := out.Ready()
		for _, e := range rd.Messages {
			m, err := wire.Decode(wire.Append(nil, e.Msg))
			if err != nil {
				c.t.Fatal(err)
			}
			if !c.down[i] {
				c.q = append(c.q, wire.Envelope{From: e.From, To: e.To, Msg: m})
			}
		}
		out.Advance()
	}
}

// step delivers the messages in flight (in a shuffled order that keeps
// each link FIFO), then ticks every live member.
func (c *cluster) step() {
	c.drain()
	q := c.q
	c.q = nil
	// Shuffle across links only: a stable sort on a random key per link.
	key := map[[2]wire.ProcID]int{}
	for _, e := range q {
		k := [2]wire.ProcID{e.From, e.To}
		if _, ok := key[k]; !ok {
			key[k] = c.rng.IntN(1000)
		}
	}
	slices.SortStableFunc(q, func(a, b wire.Envelope) int {
		return key[[2]wire.ProcID{a.From, a.To}] - key[[2]wire.ProcID{b.From, b.To}]
	})
	for _, e := range q {
		if c.down[e.To] {
			continue
		}
		if ok, err := c.logs[e.To].Step(e.From, e.Msg); !ok || err != nil {
			c.t.Fatalf("p%d refused %s: %v %v", e.To, wire.Describe(e.Msg), ok, err)
		}
		c.logs[e.To].Heard(e.From)
		c.drain()
	}
	for i, l := range c.logs {
		if !c.down[i] {
			l.Tick()
		}
	}
	c.drain()
}

func (c *cluster) leader() *Log {
	for i, l := range c.logs {
		if !c.down[i] && l.IsLeader() {
			return l
		}
	}
	return nil
}

func noop(id uint64) wire.Command {
	return wire.Command{Op: wire.CmdAssign, M: wire.AppMsg{ID: wire.MsgID{Client: 99, Seq: id}, Dest: []wire.GroupID{0}}}
}

// TestLogAgreementAcrossLeaderChanges: members execute the same commands
// in the same slots, every proposed command of a leader that stays up is
// executed, and the log survives its leaders crashing one after another.
func TestLogAgreementAcrossLeaderChanges(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		c := newCluster(t, 5, seed)
		next := uint64(1)
		for round := 0; round < 120; round++ {
			if l := c.leader(); l != nil && round%3 == 0 {
				l.Propose(noop(next))
				next++
			}
			if round == 30 || round == 70 {
				if l := c.leader(); l != nil {
					c.down[l.ID()] = true // crash the leader (2 of 5 at most)
				}
			}
			c.step()
		}
		for range 40 {
			c.step()
		}
		var ref []string
		for i, h := range c.hosts {
			if c.down[i] {
				continue
			}
			if ref == nil {
				ref = h.exec
			}
			if !slices.Equal(h.exec, ref) {
				t.Fatalf("seed %d: p%d executed\n%v\nbut another member\n%v", seed, i, h.exec, ref)
			}
		}
		if l := c.leader(); l == nil || l.Counters().LeaderChanges < 1 {
			t.Fatalf("seed %d: no leader after the crashes", seed)
		}
		if len(ref) < 20 {
			t.Fatalf("seed %d: only %d commands executed", seed, len(ref))
		}
	}
}
