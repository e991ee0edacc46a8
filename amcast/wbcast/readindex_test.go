package wbcast_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/wire"
)

// Read index tests (readindex.go): one group of three, p0 p1 p2, driven
// by a small in-test network whose links can be cut or held back, and a
// client, p100, whose acknowledgements are recorded with the network's
// step count so a read's start can be ordered after them.

const riClient wire.ProcID = 100

type riNet struct {
	t     *testing.T
	procs []*wbcast.Process
	queue []wire.Envelope
	held  []wire.Envelope
	// hold, if set, keeps the envelopes it returns true for in held
	// (release puts them back in order); cut drops every envelope between
	// the two processes.
	hold  func(env wire.Envelope) bool
	cut   map[[2]wire.ProcID]bool
	reads map[uint64]amcast.ReadState
	acks  map[wire.MsgID]wire.Timestamp // client acknowledgements: gts
	sent  map[wire.Kind]int             // messages handed out, by kind
	seq   uint64
}

func newRINet(t *testing.T, mut func(*wbcast.Config)) *riNet {
	t.Helper()
	topo, err := amcast.NewTopology(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	n := &riNet{t: t, cut: map[[2]wire.ProcID]bool{}, reads: map[uint64]amcast.ReadState{},
		acks: map[wire.MsgID]wire.Timestamp{}, sent: map[wire.Kind]int{}}
	for i := range 3 {
		cfg := wbcast.Config{Topology: topo, ID: wire.ProcID(i)}
		if mut != nil {
			mut(&cfg)
		}
		p, err := wbcast.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n.procs = append(n.procs, p)
	}
	return n
}

func (n *riNet) isolate(p wire.ProcID, on bool) {
	for q := range n.procs {
		n.cut[[2]wire.ProcID{p, wire.ProcID(q)}] = on
		n.cut[[2]wire.ProcID{wire.ProcID(q), p}] = on
	}
}

// collect takes every process's Ready (except those in skip).
func (n *riNet) collect(skip map[wire.ProcID]bool) bool {
	any := false
	for i, p := range n.procs {
		if skip[wire.ProcID(i)] || !p.HasReady() {
			continue
		}
		any = true
		rd := p.Ready()
		for _, env := range rd.Messages {
			n.sent[env.Msg.Kind()]++
			n.queue = append(n.queue, env)
		}
		for _, rs := range rd.Reads {
			if _, dup := n.reads[rs.Ctx]; dup {
				n.t.Fatalf("read %d decided twice", rs.Ctx)
			}
			n.reads[rs.Ctx] = rs
		}
		p.Advance()
	}
	return any
}

// pump moves messages until nothing is left to move; processes in skip
// are paused (they neither receive nor send).
func (n *riNet) pump(skip map[wire.ProcID]bool) {
	for range 10000 {
		n.collect(skip)
		if len(n.queue) == 0 {
			return
		}
		q := n.queue
		n.queue = nil
		for _, env := range q {
			switch {
			case n.cut[[2]wire.ProcID{env.From, env.To}]:
			case env.To == riClient:
				if d, ok := env.Msg.(*wire.Delivered); ok {
					n.acks[d.ID] = d.GTS
				}
			case skip[env.To] || (n.hold != nil && n.hold(env)):
				n.held = append(n.held, env)
			default:
				_ = n.procs[env.To].Step(env)
			}
		}
	}
	n.t.Fatal("the network does not settle")
}

func (n *riNet) release() {
	n.queue = append(n.queue, n.held...)
	n.held = nil
}

func (n *riNet) tick(k int, skip map[wire.ProcID]bool) {
	for range k {
		for i, p := range n.procs {
			if !skip[wire.ProcID(i)] {
				p.Tick()
			}
		}
		n.pump(skip)
	}
}

// write multicasts a one-group message through leader and pumps it to
// its acknowledgement.
func (n *riNet) write(leader wire.ProcID, skip map[wire.ProcID]bool) wire.MsgID {
	n.t.Helper()
	n.seq++
	m := wire.NewAppMsg(wire.MsgID{Client: riClient, Seq: n.seq}, []wire.GroupID{0}, []byte(fmt.Sprint("w", n.seq)))
	if err := n.procs[leader].Step(wire.Envelope{From: riClient, To: leader, Msg: &wire.Multicast{M: m}}); err != nil {
		n.t.Fatal(err)
	}
	n.pump(skip)
	if _, ok := n.acks[m.ID]; !ok {
		n.t.Fatalf("write %s through p%d not acknowledged", m.ID, leader)
	}
	return m.ID
}

// staleness reports the acknowledged writes a read released with index
// misses: every write acknowledged before the read started must be at or
// below its index (the read-index protocol's safety property).
func (n *riNet) staleness(index wire.Timestamp, before map[wire.MsgID]wire.Timestamp) []wire.MsgID {
	var missed []wire.MsgID
	for id, gts := range before {
		if index.Less(gts) {
			missed = append(missed, id)
		}
	}
	return missed
}

func cloneAcks(m map[wire.MsgID]wire.Timestamp) map[wire.MsgID]wire.Timestamp {
	c := make(map[wire.MsgID]wire.Timestamp, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// deposeP0 runs the scenario of a deposed leader: p0 leads and delivers a
// write; it is then cut off and paused while p1 and p2 establish a new
// ballot led by p1, which delivers a second write. p0, paused, still
// believes it leads ballot 0.
func deposeP0(t *testing.T, n *riNet) {
	t.Helper()
	n.write(0, nil)
	n.isolate(0, true)
	paused := map[wire.ProcID]bool{0: true}
	for i := 0; i < 100 && !n.procs[1].IsLeader(); i++ {
		n.tick(1, paused)
	}
	if !n.procs[1].IsLeader() || !n.procs[0].IsLeader() {
		t.Fatalf("want p1 leading a new ballot and p0 still believing it leads: p0 %s, p1 %s", n.procs[0].Status(), n.procs[1].Status())
	}
	n.write(1, paused)
	n.held = nil // p0's inbox while paused: lost
}

// TestReadIndexDeposedLeader: a leader cut off while its group established
// a new ballot must not serve a read, though it still believes it leads:
// the members it asks answer with their higher promise. The broken
// variant (reads served without the round) returns a state that misses a
// write acknowledged before the read started, and the check catches it.
func TestReadIndexDeposedLeader(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprintf("broken=%v", broken), func(t *testing.T) {
			n := newRINet(t, nil)
			deposeP0(t, n)
			if broken {
				wbcast.ReadWithoutQuorum(n.procs[0])
			}
			before := cloneAcks(n.acks)
			n.isolate(0, false) // p0's messages reach the group again
			n.procs[0].ReadIndex(1)
			n.pump(nil)
			rs, ok := n.reads[1]
			if !ok {
				t.Fatal("the read was neither released nor failed")
			}
			if rs.Err == nil {
				missed := n.staleness(rs.Index, before)
				if !broken {
					t.Fatalf("deposed p0 served a read at %s (missing %v)", rs.Index, missed)
				}
				if len(missed) == 0 {
					t.Fatalf("broken variant: the stale read at %s was not caught by the check (acks %v)", rs.Index, before)
				}
				return
			}
			if broken {
				t.Fatalf("broken variant failed the read: %v", rs.Err)
			}
			if !errors.Is(rs.Err, amcast.ErrNotLeader) {
				t.Fatalf("deposed p0 failed the read with %v, want ErrNotLeader", rs.Err)
			}
		})
	}
}

// TestReadIndexPartitionedLeaderTimesOut: a leader cut off from its group
// gets no acknowledgement and fails its read (by its round's timeout or
// by stepping down), never releasing it.
func TestReadIndexPartitionedLeaderTimesOut(t *testing.T) {
	n := newRINet(t, nil)
	n.write(0, nil)
	n.isolate(0, true)
	n.procs[0].ReadIndex(1)
	n.pump(nil)
	if _, ok := n.reads[1]; ok {
		t.Fatalf("a read was decided without acknowledgements: %+v", n.reads[1])
	}
	n.tick(10, nil)
	rs, ok := n.reads[1]
	if !ok || !errors.Is(rs.Err, amcast.ErrNotLeader) {
		t.Fatalf("after ElectionTicks the cut-off leader's read is %+v (decided %v), want ErrNotLeader", rs, ok)
	}
}

// TestReadIndexQuorumServes: the leader of a quorum releases reads after
// one round, at its last delivery, and a burst of reads asked for before
// the round leaves shares that round.
func TestReadIndexQuorumServes(t *testing.T) {
	n := newRINet(t, nil)
	deposeP0(t, n)
	before := cloneAcks(n.acks)
	paused := map[wire.ProcID]bool{0: true}
	rounds := n.sent[wire.KindReadIndex]
	for ctx := uint64(1); ctx <= 5; ctx++ {
		n.procs[1].ReadIndex(ctx)
	}
	n.pump(paused)
	if got := n.sent[wire.KindReadIndex] - rounds; got != 2 {
		t.Errorf("5 reads asked for at once sent %d READ_INDEX, want one round (2 members)", got)
	}
	for ctx := uint64(1); ctx <= 5; ctx++ {
		rs, ok := n.reads[ctx]
		if !ok || rs.Err != nil {
			t.Fatalf("read %d at the new leader: %+v (decided %v)", ctx, rs, ok)
		}
		if missed := n.staleness(rs.Index, before); len(missed) > 0 || rs.Index != n.procs[1].MaxDelivered() {
			t.Fatalf("read %d released at %s, leader delivered %s, missing %v", ctx, rs.Index, n.procs[1].MaxDelivered(), missed)
		}
	}
}

// TestReadIndexRoundAfterRequest: a read that arrives after a round left
// is not covered by that round's acknowledgements (they may predate it):
// it waits for a round of its own.
func TestReadIndexRoundAfterRequest(t *testing.T) {
	n := newRINet(t, nil)
	n.write(0, nil)
	n.procs[0].ReadIndex(1)
	n.collect(nil) // round 1 leaves
	n.procs[0].ReadIndex(2)
	n.hold = func(env wire.Envelope) bool {
		a, ok := env.Msg.(*wire.ReadIndexAck)
		return ok && a.Seq >= 2
	}
	n.pump(nil)
	if rs, ok := n.reads[1]; !ok || rs.Err != nil {
		t.Fatalf("read 1: %+v (decided %v)", rs, ok)
	}
	if rs, ok := n.reads[2]; ok {
		t.Fatalf("read 2, asked for after round 1 left, was decided by round 1's acks: %+v", rs)
	}
	n.hold = nil
	n.release()
	n.pump(nil)
	if rs, ok := n.reads[2]; !ok || rs.Err != nil {
		t.Fatalf("read 2 after its round: %+v (decided %v)", rs, ok)
	}
}

// TestReadIndexBallotChangeFails: a leader that joins a higher ballot
// while its round is out fails the round's reads, whatever acks follow.
func TestReadIndexBallotChangeFails(t *testing.T) {
	n := newRINet(t, nil)
	n.write(0, nil)
	n.procs[0].ReadIndex(1)
	n.collect(nil)
	n.queue = nil // the round's READ_INDEXes are in flight...
	// ...when p2 starts a ballot and p0 joins it.
	if err := n.procs[0].Step(wire.Envelope{From: 2, To: 0, Msg: &wire.NewLeader{B: wire.Ballot{N: 1, P: 2}}}); err != nil {
		t.Fatal(err)
	}
	n.collect(nil)
	rs, ok := n.reads[1]
	if !ok || !errors.Is(rs.Err, amcast.ErrNotLeader) {
		t.Fatalf("read across a ballot change: %+v (decided %v), want ErrNotLeader", rs, ok)
	}
	// A late ack of the old ballot changes nothing.
	_ = n.procs[0].Step(wire.Envelope{From: 1, To: 0, Msg: &wire.ReadIndexAck{B: wire.Ballot{N: 0, P: 0}, Seq: 1}})
	if n.procs[0].HasReady() && len(n.procs[0].Ready().Reads) > 0 {
		t.Fatal("a late ack decided a read again")
	}
}

// TestReadIndexNotLeader: a follower fails a read at once.
func TestReadIndexNotLeader(t *testing.T) {
	n := newRINet(t, nil)
	n.procs[1].ReadIndex(7)
	n.collect(nil)
	if rs, ok := n.reads[7]; !ok || !errors.Is(rs.Err, amcast.ErrNotLeader) {
		t.Fatalf("read at a follower: %+v (decided %v), want ErrNotLeader", rs, ok)
	}
}

// TestReadIndexBound: reads past MaxPendingReads fail with
// ErrReadOverloaded; the bound frees as reads are decided.
func TestReadIndexBound(t *testing.T) {
	n := newRINet(t, func(c *wbcast.Config) { c.MaxPendingReads = 3 })
	n.isolate(0, true) // no acks: the reads stay pending
	for ctx := uint64(1); ctx <= 4; ctx++ {
		n.procs[0].ReadIndex(ctx)
	}
	n.collect(nil)
	for ctx := uint64(1); ctx <= 3; ctx++ {
		if rs, ok := n.reads[ctx]; ok {
			t.Fatalf("read %d within the bound decided: %+v", ctx, rs)
		}
	}
	if rs, ok := n.reads[4]; !ok || !errors.Is(rs.Err, amcast.ErrReadOverloaded) {
		t.Fatalf("read past the bound: %+v (decided %v), want ErrReadOverloaded", rs, ok)
	}
	n.isolate(0, false)
	n.pump(nil)
	n.procs[0].ReadIndex(5)
	n.pump(nil)
	for ctx := uint64(1); ctx <= 5; ctx++ {
		if ctx == 4 {
			continue
		}
		if rs, ok := n.reads[ctx]; !ok || rs.Err != nil {
			t.Fatalf("read %d once acks flow: %+v (decided %v)", ctx, rs, ok)
		}
	}
}

// TestReadIndexBarrier (the safety argument's b < B): p0 delivers and
// acknowledges a write whose DELIVERs are lost, then crashes; p1 takes
// over holding the write ACCEPTED, undelivered. A read at p1 is held
// until p1 re-delivered the write, and its index covers it.
func TestReadIndexBarrier(t *testing.T) {
	n := newRINet(t, nil)
	n.hold = func(env wire.Envelope) bool { _, ok := env.Msg.(*wire.Deliver); return ok && env.From == 0 }
	id := n.write(0, nil)
	n.held = nil // the DELIVERs are lost
	n.hold = nil
	n.isolate(0, true) // p0 crashed
	down := map[wire.ProcID]bool{0: true}
	// Hold p2's acks of p1's retried ACCEPT: p1 leads, the write still
	// ACCEPTED, undelivered.
	n.hold = func(env wire.Envelope) bool { _, ok := env.Msg.(*wire.AcceptAck); return ok }
	for i := 0; i < 100 && !n.procs[1].IsLeader(); i++ {
		n.tick(1, down)
	}
	if !n.procs[1].IsLeader() || !n.procs[1].MaxDelivered().Less(n.acks[id]) {
		t.Fatalf("want p1 leading without having delivered %s at %s: status %s, delivered %s", id, n.acks[id], n.procs[1].Status(), n.procs[1].MaxDelivered())
	}
	n.procs[1].ReadIndex(1)
	n.pump(down)
	if rs, ok := n.reads[1]; ok {
		t.Fatalf("p1 decided a read before re-delivering its predecessor's write: %+v", rs)
	}
	n.hold = nil
	n.release()
	n.pump(down)
	rs, ok := n.reads[1]
	if !ok || rs.Err != nil || rs.Index.Less(n.acks[id]) {
		t.Fatalf("read after the re-delivery: %+v (decided %v), want an index at or above %s", rs, ok, n.acks[id])
	}
}
