package amcast

import (
	"errors"
	"testing"
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
