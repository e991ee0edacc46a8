package amcast_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// unbatchAll takes every envelope of out apart (amcast.Unbatch).
func unbatchAll(out []wire.Envelope) []wire.Envelope {
	var got []wire.Envelope
	for _, e := range out {
		for x := range amcast.Unbatch(e) {
			got = append(got, x)
		}
	}
	return got
}

// perLink returns the messages of msgs to each recipient, in order.
func perLink(msgs []wire.Envelope) map[wire.ProcID][]wire.Message {
	m := map[wire.ProcID][]wire.Message{}
	for _, e := range msgs {
		m[e.To] = append(m[e.To], e.Msg)
	}
	return m
}

func TestCoalesce(t *testing.T) {
	replica := func(to wire.ProcID) bool { return to < 3 }
	acc := func(seq uint64) wire.Message {
		return &wire.Accept{M: wire.AppMsg{ID: wire.MsgID{Client: 9, Seq: seq}, Dest: []wire.GroupID{0}}}
	}
	a1, a2, hb := acc(1), acc(2), &wire.Heartbeat{}
	reply := &wire.Delivered{ID: wire.MsgID{Client: 9, Seq: 1}}
	from := wire.ProcID(0)
	env := func(to wire.ProcID, m wire.Message) wire.Envelope { return wire.Envelope{From: from, To: to, Msg: m} }
	// A leader's Ready: ACCEPT 1 and 2 to members 1 and 2, a heartbeat to
	// 2, two replies to client 9.
	in := []wire.Envelope{env(1, a1), env(2, a1), env(9, reply), env(1, a2), env(2, a2), env(9, reply), env(2, hb)}
	orig := slices.Clone(in)
	out := amcast.Coalesce(in, replica, 0)
	if !slices.Equal(in, orig) {
		t.Fatal("Coalesce changed its input")
	}
	// Each link carries the same messages in the same order, and only
	// replicas get batches.
	got := unbatchAll(out)
	want, have := perLink(in), perLink(got)
	for to, ms := range want {
		if !slices.Equal(ms, have[to]) {
			t.Errorf("to p%d: %v, want %v", to, have[to], ms)
		}
	}
	var batches []*wire.Batch
	for _, e := range out {
		if b, ok := e.Msg.(*wire.Batch); ok {
			if !replica(e.To) {
				t.Errorf("a batch to client p%d", e.To)
			}
			if _, err := wire.Decode(wire.Append(nil, b)); err != nil {
				t.Errorf("a batch the codec refuses: %v", err)
			}
			batches = append(batches, b)
		}
	}
	if len(batches) != 2 || len(out) != 4 {
		t.Fatalf("out %d envelopes with %d batches, want 4 with 2 (one per member, the replies as they were): %v", len(out), len(batches), out)
	}
	// Members 1 and 2 get different batches (2 also has the heartbeat);
	// without it they share one value, encoded once downstream.
	if batches[0] == batches[1] {
		t.Error("different contents share a batch")
	}
	out = amcast.Coalesce(in[:5], replica, 0)
	if len(out) != 3 || out[0].Msg != out[1].Msg || out[0].To == out[1].To {
		t.Errorf("identical lists to consecutive members: %v, want one shared batch for both", out)
	}
	// A recipient with one message gets it alone; nothing to combine
	// returns the input.
	single := []wire.Envelope{env(1, a1), env(2, a1)}
	if out := amcast.Coalesce(single, replica, 0); &out[0] != &single[0] {
		t.Errorf("nothing to batch: got a copy %v", out)
	}
}

// TestCoalesceBytes: batches stay under the byte bound; a message larger
// than it travels alone; the order holds across the batches of a link.
func TestCoalesceBytes(t *testing.T) {
	var in []wire.Envelope
	for i := range 40 {
		size := 100
		if i == 17 {
			size = 5000 // alone larger than the bound
		}
		m := &wire.Accept{M: wire.AppMsg{ID: wire.MsgID{Client: 9, Seq: uint64(i + 1)}, Dest: []wire.GroupID{0}, Payload: make([]byte, size)}}
		in = append(in, wire.Envelope{From: 0, To: 1, Msg: m})
	}
	const bound = 1000
	out := amcast.Coalesce(in, func(wire.ProcID) bool { return true }, bound)
	if len(out) < 6 {
		t.Fatalf("%d envelopes for 40 messages of ~120 bytes under a %d-byte bound", len(out), bound)
	}
	for _, e := range out {
		if b, ok := e.Msg.(*wire.Batch); ok && wire.Size(b) > bound+8 {
			t.Errorf("a batch of %d bytes, bound %d", wire.Size(b), bound)
		}
	}
	if got := unbatchAll(out); !slices.Equal(got, in) {
		t.Errorf("order or contents changed across batches")
	}
}

// describeOut renders a Coalesce result for comparison: each envelope's
// link and its message pointers (a batch as its list), and which
// envelopes share one *wire.Batch value.
func describeOut(out []wire.Envelope) []string {
	var s []string
	seen := map[*wire.Batch]int{}
	for i, e := range out {
		d := fmt.Sprintf("%d>%d:", e.From, e.To)
		if b, ok := e.Msg.(*wire.Batch); ok {
			if j, ok := seen[b]; ok {
				d += fmt.Sprintf("same batch as %d", j)
			} else {
				seen[b] = i
				d += fmt.Sprintf("batch%p", b.Msgs)[:5] + fmt.Sprint(b.Msgs)
			}
		} else {
			d += fmt.Sprintf("%p", e.Msg)
		}
		s = append(s, d)
	}
	return s
}

// TestCoalescerReuse: a Coalescer called Ready after Ready returns what a
// fresh Coalesce returns for each (same envelopes, same messages, the
// same sharing of batches between recipients), whatever the earlier calls
// left in its buffers: random Readies from two senders to five processes
// (three replicas), of 0 to 60 messages, some to every member in a row, a
// small byte bound so that links split into several batches. And each
// call's batches are new values, which a transport.Batch needs to tell
// them from the last one it encoded.
func TestCoalescerReuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	replica := func(to wire.ProcID) bool { return to < 3 }
	var c amcast.Coalescer
	var last []*wire.Batch
	for round := range 2000 {
		var in []wire.Envelope
		for range rng.IntN(61) {
			from := wire.ProcID(rng.IntN(2))
			m := &wire.Accept{M: wire.AppMsg{ID: wire.MsgID{Client: 9, Seq: rng.Uint64()}, Dest: []wire.GroupID{0}, Payload: make([]byte, rng.IntN(300))}}
			if rng.IntN(3) == 0 { // to every member, as a leader's ACCEPT
				for to := range wire.ProcID(3) {
					in = append(in, wire.Envelope{From: from, To: to, Msg: m})
				}
				continue
			}
			in = append(in, wire.Envelope{From: from, To: wire.ProcID(rng.IntN(5)), Msg: m})
		}
		want := describeOut(amcast.Coalesce(in, replica, 1500))
		out := c.Coalesce(in, replica, 1500)
		if got := describeOut(out); !slices.Equal(got, want) {
			t.Fatalf("round %d: the reused Coalescer returned\n%v\nwant\n%v", round, got, want)
		}
		// Each link (sender, recipient) carries its messages in order.
		links := func(es []wire.Envelope) map[[2]wire.ProcID][]wire.Message {
			m := map[[2]wire.ProcID][]wire.Message{}
			for _, e := range es {
				k := [2]wire.ProcID{e.From, e.To}
				m[k] = append(m[k], e.Msg)
			}
			return m
		}
		got := links(unbatchAll(out))
		for k, ms := range links(in) {
			if !slices.Equal(got[k], ms) {
				t.Fatalf("round %d: link %v carries %v, want %v", round, k, got[k], ms)
			}
		}
		var now []*wire.Batch
		for _, e := range out {
			if b, ok := e.Msg.(*wire.Batch); ok {
				if slices.Contains(last, b) {
					t.Fatalf("round %d: a batch value of the call before came back", round)
				}
				now = append(now, b)
			}
		}
		last = now
	}
}
