package amcast

import (
	"errors"
	"testing"

	"github.com/weft-dev/weft/wire"
)

func TestRejects(t *testing.T) {
	var r Rejects
	err := r.Reject("dest_mismatch", "message %s", "1.1")
	if !errors.Is(err, ErrRejected) || !errors.Is(err, ErrBadMessage) {
		t.Fatalf("%v should wrap ErrRejected and ErrBadMessage", err)
	}
	var re *RejectError
	if !errors.As(err, &re) || re.Reason != "dest_mismatch" {
		t.Fatalf("errors.As: %v", err)
	}
	_ = r.Reject("dest_mismatch", "again")
	_ = r.Reject("bad_ballot", "x")
	if got := r.Counts(); got["dest_mismatch"] != 2 || got["bad_ballot"] != 1 || r.Total() != 3 {
		t.Fatalf("counts %v total %d", got, r.Total())
	}
	if got := r.Reasons(); len(got) != 2 || got[0] != "bad_ballot" {
		t.Fatalf("reasons %v", got)
	}
	c := r.Counts()
	c["bad_ballot"] = 99
	if r.Counts()["bad_ballot"] != 1 {
		t.Fatal("Counts must return a copy")
	}
}

func TestCheckMulticastSender(t *testing.T) {
	topo, err := NewTopology(2, 3) // replicas 0..5; group 1 is 3..5
	if err != nil {
		t.Fatal(err)
	}
	m := &wire.AppMsg{ID: wire.MsgID{Client: 100, Session: wire.Session(7), Seq: 1}, Dest: []wire.GroupID{1}}
	var r Rejects
	for _, tc := range []struct {
		from   wire.ProcID
		reason string // "" = accepted
	}{
		{100, ""},                  // the client itself
		{4, ""},                    // a member of a destination group (H12)
		{101, "client_mismatch"},   // another client
		{1, "foreign_remulticast"}, // a replica of a group the message does not address
	} {
		err := CheckMulticastSender(topo, &r, tc.from, m)
		var re *RejectError
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("from %d: refused: %v", tc.from, err)
		case tc.reason != "" && (!errors.As(err, &re) || re.Reason != tc.reason):
			t.Errorf("from %d: got %v, want reason %s", tc.from, err, tc.reason)
		}
	}
	if got := r.Counts(); got["client_mismatch"] != 1 || got["foreign_remulticast"] != 1 || r.Total() != 2 {
		t.Errorf("counts %v", got)
	}
}
