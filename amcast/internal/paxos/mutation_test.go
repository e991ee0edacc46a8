package paxos

import (
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// member is one log driven by hand: its outbox and every record it
// persisted (its durable store).
type member struct {
	l   *Log
	h   *host
	out *amcast.Outbox
	st  *Store
}

// take returns the messages member m sent to `to` since the last take,
// applying its records to its store first (persist before send).
func (m *member) take(t *testing.T, to wire.ProcID) []wire.Message {
	t.Helper()
	rd := m.out.Ready()
	for _, r := range rd.Persist {
		if !m.st.Apply(r) {
			t.Fatalf("store refused %s", wire.Describe(r))
		}
	}
	var msgs []wire.Message
	for _, e := range rd.Messages {
		if e.To == to {
			msgs = append(msgs, e.Msg)
		}
	}
	m.out.Advance()
	return msgs
}

// deliver hands what from sent to `to` (since the last take) to `to`.
func deliver(t *testing.T, ms []*member, from, to wire.ProcID) {
	t.Helper()
	for _, msg := range ms[from].take(t, to) {
		if _, err := ms[to].l.Step(from, msg); err != nil {
			t.Fatalf("p%d refused %s from p%d: %v", to, wire.Describe(msg), from, err)
		}
	}
}

// TestForgetPromiseTargeted is the schedule that MutForgetPromise needs,
// which the swarm does not produce (see sim/mutation_baselines_test.go):
// p2 promises p1's ballot 1.p1 (p1 wins phase 1 with {p1, p2}, finding slot
// 0 empty), crashes and restarts, then votes for deposed leader p0's value
// at slot 0, which p0 learns as chosen; p1 proposes its own value there and
// p2 votes again. With the promise persisted, the restarted p2 refuses p0's
// stale proposal and only p1's value is chosen; with the knob, two values
// are chosen at one slot.
func TestForgetPromiseTargeted(t *testing.T) {
	for _, mut := range []Mutation{0, MutForgetPromise} {
		topo, err := amcast.NewTopology(1, 3)
		if err != nil {
			t.Fatal(err)
		}
		cfg := func(id wire.ProcID) Config { return Config{Topology: topo, ID: id, Mutation: mut} }
		ms := make([]*member, 3)
		for i := range ms {
			m := &member{h: &host{}, out: &amcast.Outbox{}, st: NewStore()}
			if m.l, err = New(cfg(wire.ProcID(i)), m.h, m.out); err != nil {
				t.Fatal(err)
			}
			ms[i] = m
		}
		// Phase 1 of 1.p1 with p2 only.
		ms[1].l.startBallotAbove(ms[1].l.Ballot())
		deliver(t, ms, 1, 2)
		deliver(t, ms, 2, 1)
		if !ms[1].l.IsLeader() {
			t.Fatalf("mutation %d: p1 does not lead after phase 1", mut)
		}
		// p2 crashes and restarts from its store.
		ms[2].take(t, 99) // flush what is left of its Ready into its store
		m2 := &member{h: &host{}, out: &amcast.Outbox{}, st: ms[2].st}
		if m2.l, err = Restore(cfg(2), m2.h, m2.out, ms[2].st); err != nil {
			t.Fatal(err)
		}
		ms[2] = m2
		// Deposed p0 proposes v at slot 0; p2 votes; p0 learns it.
		v, w := noop(1), noop(2)
		ms[0].l.Propose(v)
		deliver(t, ms, 0, 2)
		deliver(t, ms, 2, 0)
		// p1 proposes w at slot 0; p2 votes; p1 learns it.
		ms[1].l.Propose(w)
		deliver(t, ms, 1, 2)
		deliver(t, ms, 2, 1)
		chosen := map[string]bool{}
		for _, i := range []int{0, 1} {
			if sl := ms[i].l.slots; len(sl) > 0 && sl[0].decided {
				chosen[wire.DescribeCommand(&sl[0].cmd)] = true
			}
		}
		switch {
		case mut == 0 && len(chosen) > 1:
			t.Fatalf("two values chosen at slot 0 with the promise persisted: %v", chosen)
		case mut == 0 && len(chosen) == 0:
			t.Fatalf("nothing chosen at slot 0 with the promise persisted")
		case mut != 0 && len(chosen) != 2:
			t.Fatalf("MutForgetPromise: chosen %v, want two values (the schedule no longer exposes it)", chosen)
		}
	}
}
