package wbcast

import (
	"testing"

	"github.com/weft-dev/weft/wire"
)

// A client restarted with the same id starts a new session at seq 1: its
// messages must not be taken for the collected messages of the earlier
// incarnation (the leader would answer them "delivered" without ordering
// them).
func TestDoneSetIsPerSession(t *testing.T) {
	d := doneSet{}
	old := wire.MsgID{Client: 9, Session: 1, Seq: 1}
	d.add(old)
	d.add(wire.MsgID{Client: 9, Session: 1, Seq: 3})
	if !d.has(old) || !d.has(wire.MsgID{Client: 9, Session: 1, Seq: 3}) {
		t.Fatal("collected ids are not remembered")
	}
	for _, id := range []wire.MsgID{
		{Client: 9, Session: 2, Seq: 1}, // the restarted client's first message
		{Client: 9, Session: 1, Seq: 2}, // a gap
		{Client: 8, Session: 1, Seq: 1}, // another client
	} {
		if d.has(id) {
			t.Errorf("%s taken for a collected message", id)
		}
	}
	if d.size() != 2 { // one session (its mark covers seq 1) + seq 3 above the mark
		t.Errorf("size %d, want 2", d.size())
	}
}
