package kv

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/wire"
)

// runTxn applies t at store s as entry gts, with the given votes (nil: not
// exchanged), and decodes s's answer.
func runTxn(t *testing.T, s *Store, tx Txn, gts uint64, votes [][]byte) (txnShardResult, error) {
	t.Helper()
	e := rsm.Entry{ID: wire.MsgID{Client: 100, Seq: gts}, Dest: tx.Shards(s.shards), Payload: tx.Encode(nil), GTS: wire.Timestamp{T: gts}, Votes: votes}
	raw, err := s.Apply([]rsm.Entry{e})
	if err != nil {
		t.Fatal(err)
	}
	return decodeTxnShardResult(raw[0], &tx)
}

func TestTxnCodec(t *testing.T) {
	tx := Txn{
		If: []Cond{{Key: "a", Kind: CondEqual, Value: []byte("x")}, {Key: "b", Kind: CondAbsent}, {Key: "c", Kind: CondPresent},
			{Key: "d", Kind: CondAtLeast, Num: -7}},
		Reads: []string{"a", "e"},
		Then:  []Write{{Key: "a", Kind: WritePut, Value: []byte("y")}, {Key: "b", Kind: WriteDelete}, {Key: "d", Kind: WriteAdd, Delta: math.MinInt64}},
	}
	got, err := DecodeTxn(tx.Encode(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tx) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, tx)
	}
	many := Txn{Reads: make([]string, MaxTxnOps+1)}
	for i := range many.Reads {
		many.Reads[i] = "k"
	}
	bad := []struct {
		tx   Txn
		want error
	}{
		{Txn{}, ErrTxnEmpty},
		{many, ErrTxnTooLarge},
		{Txn{If: []Cond{{Key: "a", Kind: 9}}}, ErrBadCommand},
		{Txn{Then: []Write{{Key: "a", Kind: 0}}}, ErrBadCommand},
		{Txn{Reads: []string{""}}, ErrEmptyKey},
		{Txn{Then: []Write{{Key: "a", Kind: WritePut, Value: make([]byte, MaxValueBytes+1)}}}, ErrValueTooLarge},
	}
	for i, c := range bad {
		if err := c.tx.Check(); !errors.Is(err, c.want) {
			t.Errorf("case %d: Check = %v, want %v", i, err, c.want)
		}
	}
	// Decoding refuses what Check refuses, and malformed bytes.
	enc := many.Encode(nil)
	if _, err := DecodeTxn(enc); !errors.Is(err, ErrTxnTooLarge) {
		t.Fatalf("decoding %d reads: %v", len(many.Reads), err)
	}
	good := tx.Encode(nil)
	for _, b := range [][]byte{nil, {byte(OpPut)}, good[:len(good)-1], append(bytes.Clone(good), 0)} {
		if _, err := DecodeTxn(b); err == nil {
			t.Errorf("decoded %x", b)
		}
	}
}

// TestTxnAtOneShard: conditions, reads before writes, integer writes, and
// an abort that leaves the state as it was.
func TestTxnAtOneShard(t *testing.T) {
	s, _ := NewStore(0, 1)
	apply(t, s, Command{Op: OpPut, Key: "n", Value: []byte("10")}, Command{Op: OpPut, Key: "s", Value: []byte("text")})
	r, err := runTxn(t, s, Txn{
		If:    []Cond{{Key: "n", Kind: CondAtLeast, Num: 10}, {Key: "s", Kind: CondEqual, Value: []byte("text")}, {Key: "z", Kind: CondAbsent}},
		Reads: []string{"n", "z"},
		Then:  []Write{{Key: "n", Kind: WriteAdd, Delta: -4}, {Key: "z", Kind: WriteAdd, Delta: 2}, {Key: "n", Kind: WriteAdd, Delta: 1}, {Key: "s", Kind: WriteDelete}},
	}, 10, nil)
	if err != nil || !r.committed || len(r.reads) != 2 || string(r.reads[0].v) != "10" || r.reads[1].present {
		t.Fatalf("commit: %+v %v", r, err)
	}
	for k, want := range map[string]string{"n": "7", "z": "2"} {
		if v, ok := s.Get(k); !ok || string(v) != want {
			t.Fatalf("%s = %q %v, want %q", k, v, ok, want)
		}
	}
	if _, ok := s.Get("s"); ok {
		t.Fatal("s not deleted")
	}
	before := s.Digest()
	r, err = runTxn(t, s, Txn{
		If:   []Cond{{Key: "n", Kind: CondAtLeast, Num: 8}, {Key: "z", Kind: CondPresent}, {Key: "s", Kind: CondPresent}},
		Then: []Write{{Key: "n", Kind: WritePut, Value: []byte("x")}, {Key: "n", Kind: WriteAdd, Delta: 1}, {Key: "z", Kind: WriteAdd, Delta: math.MaxInt64}},
	}, 11, nil)
	if err != nil || r.committed || !reflect.DeepEqual(r.failed, []int{0, 2}) || !reflect.DeepEqual(r.bad, []int{1, 2}) {
		t.Fatalf("abort: %+v %v (want conditions 0 and 2 failed; writes 1 (add to a non-integer) and 2 (overflow) bad)", r, err)
	}
	if s.Digest() != before {
		t.Fatal("an aborted transaction changed the state")
	}
	if st := s.Stats(); st.Txns != 2 || st.TxnAborted != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestTxnVotes: at a shard of a transaction to two, the other shard's no
// aborts it whatever this shard's conditions say; Voters and Vote
// answer from the entry and the state.
func TestTxnVotes(t *testing.T) {
	const n = 2
	a, b := keyOn(0, n, "a"), keyOn(1, n, "b")
	s, _ := NewStore(0, n)
	tx := Txn{If: []Cond{{Key: a, Kind: CondAbsent}}, Then: []Write{{Key: a, Kind: WritePut, Value: []byte("1")}, {Key: b, Kind: WritePut, Value: []byte("1")}}}
	e := rsm.Entry{Dest: tx.Shards(n), Payload: tx.Encode(nil)}
	if vs := s.Voters(e); !slices.Equal(vs, []wire.GroupID{0}) || !bytes.Equal(s.Vote(e), voteYes) {
		t.Fatalf("voters %v: a transaction with a condition on shard 0 alone (shard 1 only written) has shard 0 alone vote, and yes here", vs)
	}
	if blind := (Txn{Then: tx.Then}); s.Voters(rsm.Entry{Dest: blind.Shards(n), Payload: blind.Encode(nil)}) != nil {
		t.Fatal("a transaction that cannot abort needs no votes")
	}
	adds := Txn{If: tx.If, Then: []Write{{Key: b, Kind: WriteAdd, Delta: 1}}}
	if vs := s.Voters(rsm.Entry{Dest: adds.Shards(n), Payload: adds.Encode(nil)}); !slices.Equal(vs, []wire.GroupID{0, 1}) {
		t.Fatalf("voters %v: an integer write on shard 1 can fail there: both vote", vs)
	}
	r, err := runTxn(t, s, tx, 1, [][]byte{voteYes, voteNo})
	if err != nil || r.committed {
		t.Fatalf("with shard 1 voting no: %+v %v", r, err)
	}
	if _, ok := s.Get(a); ok {
		t.Fatal("written although shard 1 voted no")
	}
	if r, err = runTxn(t, s, tx, 2, [][]byte{voteYes, voteYes}); err != nil || !r.committed {
		t.Fatalf("with both yes: %+v %v", r, err)
	}
	if !bytes.Equal(s.Vote(e), voteNo) {
		t.Fatal("the condition no longer holds: the vote must be no")
	}
	// A transaction whose destinations are not its keys' shards is refused
	// alike at every shard (and never waits for votes).
	wrong := rsm.Entry{ID: wire.MsgID{Client: 1, Seq: 9}, Dest: []wire.GroupID{0}, Payload: tx.Encode(nil), GTS: wire.Timestamp{T: 3}}
	if s.Voters(wrong) != nil {
		t.Fatal("exchanged a refused transaction")
	}
	raw, _ := s.Apply([]rsm.Entry{wrong})
	if _, err := decodeTxnShardResult(raw[0], &tx); !errors.Is(err, ErrWrongShard) || !strings.Contains(err.Error(), "keys are on shards") {
		t.Fatalf("wrong destinations: %v", err)
	}
}

func FuzzDecodeTxn(f *testing.F) {
	f.Add((&Txn{If: []Cond{{Key: "a", Kind: CondAtLeast, Num: 3}}, Reads: []string{"b"}, Then: []Write{{Key: "a", Kind: WriteAdd, Delta: -1}}}).Encode(nil))
	f.Add((&Txn{Then: []Write{{Key: "a", Kind: WritePut, Value: []byte("v")}, {Key: "c", Kind: WriteDelete}}}).Encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		tx, err := DecodeTxn(b)
		if err != nil {
			return
		}
		if again, err := DecodeTxn(tx.Encode(nil)); err != nil || !reflect.DeepEqual(again, tx) {
			t.Fatalf("re-encoding changed %+v: %+v %v", tx, again, err)
		}
		// Every shard's answer to it decodes.
		for g := range 3 {
			s, _ := NewStore(wire.GroupID(g), 3)
			e := rsm.Entry{ID: wire.MsgID{Client: 1, Seq: 1}, Dest: tx.Shards(3), Payload: b, GTS: wire.Timestamp{T: 1}}
			if len(s.Voters(e)) > 0 {
				e.Votes = make([][]byte, len(e.Dest))
			}
			raw, err := s.Apply([]rsm.Entry{e})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decodeTxnShardResult(raw[0], &tx); err != nil && !errors.Is(err, ErrWrongShard) {
				t.Fatalf("shard %d's answer: %v", g, err)
			}
		}
	})
}

func TestParseTxn(t *testing.T) {
	got, err := ParseTxn([]string{"if a = hello world", "if b absent", "if c present", "if d >= -3", "read a", "put e some value", "del b", "add d 7"})
	if err != nil {
		t.Fatal(err)
	}
	want := Txn{
		If: []Cond{{Key: "a", Kind: CondEqual, Value: []byte("hello world")}, {Key: "b", Kind: CondAbsent}, {Key: "c", Kind: CondPresent},
			{Key: "d", Kind: CondAtLeast, Num: -3}},
		Reads: []string{"a"},
		Then:  []Write{{Key: "e", Kind: WritePut, Value: []byte("some value")}, {Key: "b", Kind: WriteDelete}, {Key: "d", Kind: WriteAdd, Delta: 7}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range [][]string{nil, {"if a"}, {"if a = "}, {"if a >= x"}, {"if a absent b"}, {"read"}, {"read a b"}, {"put a"},
		{"add a"}, {"add a 1 2"}, {"del a b"}, {"swap a b"}, {"if a ~ b"}} {
		if _, err := ParseTxn(bad); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}
