package kvsim

import (
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/kvcheck"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/wire"
)

// TestKeysPerShard: n distinct keys on each shard, each on its own shard.
func TestKeysPerShard(t *testing.T) {
	per, all := keysPerShard("k", 3, 4)
	seen := map[string]bool{}
	for g, ks := range per {
		if len(ks) != 3 {
			t.Fatalf("shard %d: %v", g, ks)
		}
		for _, k := range ks {
			if kv.Shard(k, 4) != wire.GroupID(g) || seen[k] {
				t.Fatalf("shard %d holds %s (shard %d, seen %v)", g, k, kv.Shard(k, 4), seen[k])
			}
			seen[k] = true
		}
	}
	if len(all) != 12 || len(seen) != 12 {
		t.Fatalf("all %v", all)
	}
}

// TestReplyOutcome: a reply carries the replier's result for its command,
// as the linearizability model reads it; without a result the outcome is
// unknown.
func TestReplyOutcome(t *testing.T) {
	rs, err := newReplicas(1, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	rp := rs.reps[0]
	cmds := []kv.Command{
		{Op: kv.OpGet, Key: "a"},
		{Op: kv.OpPut, Key: "a", Value: []byte("1")},
		{Op: kv.OpGet, Key: "a"},
		{Op: kv.OpCAS, Key: "a", Value: []byte("2"), Expect: []byte("9"), ExpectPresent: true},
		{Op: kv.OpCAS, Key: "a", Value: []byte("2"), Expect: []byte("1"), ExpectPresent: true},
		{Op: kv.OpDelete, Key: "a"},
		{Op: kv.OpDelete, Key: "a"},
	}
	want := []kvcheck.Output{
		{}, {OK: true}, {OK: true, Value: "1"}, {Present: true, Value: "1"}, {OK: true}, {OK: true}, {},
	}
	for i, c := range cmds {
		m := wire.AppMsg{ID: wire.MsgID{Client: 9, Seq: uint64(i + 1)}, Dest: []wire.GroupID{0}, Payload: c.Encode(nil)}
		if err := rp.Driver.Apply([]rsm.Entry{rsm.EntryOf(&m, wire.Timestamp{T: uint64(i + 1)})}); err != nil {
			t.Fatal(err)
		}
		r := &Reply{ID: m.ID, Cmd: c, Replier: rp}
		out, ok, err := r.Outcome()
		if err != nil || !ok || out != want[i] {
			t.Fatalf("%s: %+v, %v, %v; want %+v", c.Op, out, ok, err, want[i])
		}
	}
	r := &Reply{ID: wire.MsgID{Client: 9, Seq: 99}, Cmd: cmds[0], Replier: rp}
	if _, ok, err := r.Outcome(); ok || err != nil {
		t.Fatalf("a message never applied: ok %v, %v", ok, err)
	}
}

// TestSummary: failures are kept in seed order whatever order the seeds
// finish in, each failed workload is a violation, and the coverage facts
// are required from sim.MinCoverageSeeds seeds on.
func TestSummary(t *testing.T) {
	var s Summary
	full := KVFigures{Checked: 1, Unknown: 1, Installs: 1}
	bank := BankFigures{Committed: 1, Aborted: 1, FullReads: 1, VotesLost: 1, VotesPulled: 1}
	for _, seed := range []uint64{30, 3, 17, 1, 8, 2, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19} {
		r := &SeedResult{Seed: seed, KV: full, Bank: bank}
		switch seed {
		case 3:
			r.KVErr = ErrNotLinearizable
		case 17:
			r.KVErr, r.BankErr = errors.New("diverged"), errors.New("total changed")
		case 30:
			r.BankErr = errors.New("total changed")
		}
		s.Add(r)
	}
	if s.Seeds != 20 || s.Violations != 4 || len(s.Failures) != 3 || s.Failures[0].Seed != 3 || s.Failures[1].Seed != 17 || s.Failures[2].Seed != 30 {
		t.Fatalf("summary %+v", s)
	}
	if d := s.Failures[1].Detail; !strings.Contains(d, "single-key: diverged") || !strings.Contains(d, "bank: total changed") {
		t.Fatalf("detail %q", d)
	}
	if s.KV.Checked != 20 || s.Bank.VotesPulled != 20 || len(s.CoverageGaps()) != 0 {
		t.Fatalf("totals %+v %+v, gaps %v", s.KV, s.Bank, s.CoverageGaps())
	}
	s.Bank.VotesPulled = 0
	if g := s.CoverageGaps(); len(g) != 1 || g[0] != "no vote pulled" {
		t.Fatalf("gaps %v", g)
	}
}

// TestGuard: a panic in a run becomes its error.
func TestGuard(t *testing.T) {
	_, err := guard(func() (KVFigures, error) { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("%v", err)
	}
}
