package amcast

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weft-dev/weft/wire"
)

func describeEnvs(envs []wire.Envelope) string {
	var b strings.Builder
	for i, e := range envs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s>p%d", e.Msg.Kind(), e.To)
	}
	return b.String()
}

func describePending(ps []Pending) string {
	var b strings.Builder
	for i, e := range ps {
		if i > 0 {
			b.WriteString(" | ")
		}
		fmt.Fprintf(&b, "@%d %s d%d r%d", e.At, describeEnvs(e.Messages), len(e.Deliveries), len(e.Reads))
	}
	return b.String()
}

// TestPipeline walks a Pipeline through the cases a driver meets: early
// messages leave at once unless something is held for their recipient,
// which keeps each link FIFO; Release hands back Readys in order, up to
// the durable position; Reset forgets everything.
func TestPipeline(t *testing.T) {
	early := func(m wire.Message) bool {
		_, ok := m.(*wire.Accept)
		return ok
	}
	p := NewPipeline(early)
	env := func(to wire.ProcID, m wire.Message) wire.Envelope { return wire.Envelope{From: 0, To: to, Msg: m} }
	acc := func(to wire.ProcID) wire.Envelope { return env(to, &wire.Accept{}) }
	ack := func(to wire.ProcID) wire.Envelope { return env(to, &wire.AcceptAck{}) }

	rd1 := Ready{Messages: []wire.Envelope{acc(1), ack(3), acc(2)}, Deliveries: []Delivery{{}}}
	if got, want := describeEnvs(p.Add(&rd1, 5)), "ACCEPT>p1 ACCEPT>p2"; got != want {
		t.Fatalf("first Ready sends %q now, want %q", got, want)
	}
	// p3 waits for an ack: an ACCEPT to it waits behind; p1 does not.
	rd2 := Ready{Messages: []wire.Envelope{acc(3), acc(1)}, Reads: []ReadState{{Ctx: 1}}}
	if got, want := describeEnvs(p.Add(&rd2, 7)), "ACCEPT>p1"; got != want {
		t.Fatalf("second Ready sends %q now, want %q", got, want)
	}
	if !p.Holds(3) || p.Holds(1) || p.Len() != 2 || p.Bytes() == 0 {
		t.Fatalf("holds p3 %v p1 %v, %d Readys, %d bytes", p.Holds(3), p.Holds(1), p.Len(), p.Bytes())
	}
	if got := p.Release(4); got != nil {
		t.Fatalf("Release(4) = %s, want nothing", describePending(got))
	}
	if got, want := describePending(p.Release(6)), "@5 ACCEPT_ACK>p3 d1 r0"; got != want {
		t.Fatalf("Release(6) = %q, want %q", got, want)
	}
	rd3 := Ready{Messages: []wire.Envelope{acc(3)}} // p3 still has rd2's ACCEPT held
	if got := p.Add(&rd3, 7); len(got) != 0 {
		t.Fatalf("third Ready sends %s now, want nothing", describeEnvs(got))
	}
	if got, want := describePending(p.Release(100)), "@7 ACCEPT>p3 d0 r1 | @7 ACCEPT>p3 d0 r0"; got != want {
		t.Fatalf("Release(100) = %q, want %q", got, want)
	}
	if p.Len() != 0 || p.Bytes() != 0 || p.Holds(3) {
		t.Fatalf("after releasing everything: %d Readys, %d bytes, p3 held %v", p.Len(), p.Bytes(), p.Holds(3))
	}
	if got := p.Add(&rd1, 8); describeEnvs(got) != "ACCEPT>p1 ACCEPT>p2" {
		t.Fatalf("after a full release the first Ready again sends %q", describeEnvs(got))
	}
	p.Reset()
	if p.Len() != 0 || p.Bytes() != 0 || p.Holds(3) || p.Release(100) != nil {
		t.Fatalf("after Reset: %d Readys, %d bytes, p3 held %v", p.Len(), p.Bytes(), p.Holds(3))
	}
}

// TestPipelineFull drives a Pipeline to its bound: Full turns true once
// PipelineBytes are held, and false again when a release frees them.
func TestPipelineFull(t *testing.T) {
	p := NewPipeline(nil)
	payload := make([]byte, 64<<10)
	at := uint64(0)
	for !p.Full() {
		at++
		rd := Ready{Deliveries: []Delivery{{M: wire.AppMsg{Payload: payload}}}}
		p.Add(&rd, at)
		if at > uint64(2*PipelineBytes/len(payload)) {
			t.Fatalf("not full after %d Readys holding %d bytes", at, p.Bytes())
		}
	}
	if p.Bytes() < PipelineBytes {
		t.Fatalf("full at %d bytes, bound %d", p.Bytes(), PipelineBytes)
	}
	p.Release(at / 2)
	if p.Full() {
		t.Fatalf("still full after releasing half: %d bytes", p.Bytes())
	}
}
