package kv

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/wire"
)

// keyOn returns a key of shard g among n.
func keyOn(g wire.GroupID, n int, prefix string) string {
	for i := 0; ; i++ {
		k := prefix + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if Shard(k, n) == g {
			return k
		}
	}
}

func apply(t *testing.T, s *Store, cmds ...Command) []Result {
	t.Helper()
	var batch []rsm.Entry
	for i, c := range cmds {
		batch = append(batch, rsm.Entry{ID: wire.MsgID{Client: 100, Seq: uint64(i + 1)}, Dest: []wire.GroupID{s.shard}, Payload: c.Encode(nil),
			GTS: wire.Timestamp{T: uint64(i + 1)}})
	}
	raw, err := s.Apply(batch)
	if err != nil {
		t.Fatal(err)
	}
	var out []Result
	for _, b := range raw {
		r, err := DecodeResult(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestStoreOperations(t *testing.T) {
	s, err := NewStore(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	k := keyOn(1, 3, "k")
	rs := apply(t, s,
		Command{Op: OpGet, Key: k},
		Command{Op: OpPut, Key: k, Value: []byte("v1")},
		Command{Op: OpGet, Key: k},
		Command{Op: OpCAS, Key: k, Expect: []byte("nope"), ExpectPresent: true, Value: []byte("v2")},
		Command{Op: OpCAS, Key: k, Expect: []byte("v1"), ExpectPresent: true, Value: []byte("v2")},
		Command{Op: OpCAS, Key: k, Value: []byte("v3")}, // must be absent
		Command{Op: OpDelete, Key: k},
		Command{Op: OpDelete, Key: k},
		Command{Op: OpCAS, Key: k, Value: []byte("v4")},
		Command{Op: OpGet, Key: k},
	)
	want := []struct {
		st      Status
		present bool
		v       string
	}{
		{StatusNotFound, false, ""}, {StatusOK, false, ""}, {StatusOK, true, "v1"}, {StatusCASFailed, true, "v1"},
		{StatusOK, false, ""}, {StatusCASFailed, true, "v2"}, {StatusOK, false, ""}, {StatusNotFound, false, ""},
		{StatusOK, false, ""}, {StatusOK, true, "v4"},
	}
	for i, w := range want {
		if r := rs[i]; r.Status != w.st || r.Present != w.present || string(r.Value) != w.v {
			t.Errorf("command %d: %+v, want %+v", i, r, w)
		}
	}
	if st := s.Stats(); st.Gets != 3 || st.Puts != 1 || st.Deletes != 2 || st.CAS != 4 || st.CASFailed != 2 || s.Len() != 1 {
		t.Fatalf("stats %+v len %d", st, s.Len())
	}
}

// TestStoreRefuses: commands for another shard, undecodable or over a
// limit are answered StatusError with their class, and change nothing.
func TestStoreRefuses(t *testing.T) {
	s, _ := NewStore(0, 2)
	other := keyOn(1, 2, "o")
	raw, err := s.Apply([]rsm.Entry{
		{Payload: (&Command{Op: OpPut, Key: other, Value: []byte("x")}).Encode(nil)},
		{Payload: []byte{9, 1, 'a'}},
		{Payload: append((&Command{Op: OpGet, Key: "a"}).Encode(nil), 0)},
		{Payload: append([]byte{byte(OpGet)}, appendBytes(nil, bytes.Repeat([]byte("k"), MaxKeyBytes+1))...)},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantErr := []error{ErrWrongShard, ErrBadCommand, ErrBadCommand, ErrKeyTooLarge}
	for i, b := range raw {
		r, err := DecodeResult(b)
		if err != nil || r.Status != StatusError {
			t.Fatalf("command %d: %+v %v", i, r, err)
		}
		if err := errorOf(&r); !errors.Is(err, wantErr[i]) {
			t.Errorf("command %d: %v, want %v", i, err, wantErr[i])
		}
	}
	if s.Len() != 0 || s.Stats().Refused != 4 {
		t.Fatalf("len %d stats %+v", s.Len(), s.Stats())
	}
	if _, err := NewStore(2, 2); !errors.Is(err, ErrUnknownShard) {
		t.Fatalf("shard 2 of 2: %v", err)
	}
}

// TestLimits drives each limit to its bound: at it is accepted, one past
// is refused, and the largest command fits in a message.
func TestLimits(t *testing.T) {
	maxKey := strings.Repeat("k", MaxKeyBytes)
	maxVal := bytes.Repeat([]byte("v"), MaxValueBytes)
	ok := Command{Op: OpCAS, Key: maxKey, Expect: maxVal, ExpectPresent: true, Value: maxVal}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	enc := ok.Encode(nil)
	if len(enc) > wire.MaxPayload {
		t.Fatalf("the largest command is %d bytes, over wire.MaxPayload", len(enc))
	}
	if back, err := DecodeCommand(enc); err != nil || back.Key != maxKey || !bytes.Equal(back.Value, maxVal) {
		t.Fatalf("round trip: %v", err)
	}
	for _, c := range []struct {
		cmd  Command
		want error
	}{
		{Command{Op: OpGet, Key: maxKey + "k"}, ErrKeyTooLarge},
		{Command{Op: OpGet, Key: ""}, ErrEmptyKey},
		{Command{Op: OpPut, Key: "a", Value: append(maxVal, 'v')}, ErrValueTooLarge},
		{Command{Op: OpCAS, Key: "a", Expect: append(maxVal, 'v'), ExpectPresent: true}, ErrValueTooLarge},
	} {
		if err := c.cmd.Check(); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.cmd.Op, err, c.want)
		}
		// A hostile client skipping the check: the shard refuses it too.
		if _, err := DecodeCommand(c.cmd.Encode(nil)); !errors.Is(err, c.want) {
			t.Errorf("decode %s: %v, want %v", c.cmd.Op, err, c.want)
		}
	}
}

// TestStoreSnapshot: a restored store has the same state (digest) and
// refuses another shard's snapshot.
func TestStoreSnapshot(t *testing.T) {
	s, _ := NewStore(1, 2)
	var cmds []Command
	for i := range 200 {
		cmds = append(cmds, Command{Op: OpPut, Key: keyOn(1, 2, string(rune('A'+i%50))), Value: bytes.Repeat([]byte{byte(i)}, i)})
	}
	apply(t, s, cmds...)
	var buf bytes.Buffer
	if err := s.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	back, _ := NewStore(1, 2)
	if err := back.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if back.Digest() != s.Digest() || back.Len() != s.Len() || back.Bytes() != s.Bytes() {
		t.Fatalf("restored digest %x len %d bytes %d, want %x %d %d", back.Digest(), back.Len(), back.Bytes(), s.Digest(), s.Len(), s.Bytes())
	}
	wrong, _ := NewStore(0, 2)
	if err := wrong.Restore(bytes.NewReader(buf.Bytes())); err == nil {
		t.Fatal("shard 0 restored shard 1's snapshot")
	}
	if err := back.Restore(bytes.NewReader(buf.Bytes()[:buf.Len()-1])); err == nil {
		t.Fatal("restored a truncated snapshot")
	}
}

func TestShardSpread(t *testing.T) {
	per := make([]int, 3)
	for i := range 3000 {
		per[Shard("key"+string(rune(i)), 3)]++
	}
	for g, n := range per {
		if n < 800 {
			t.Errorf("shard %d got %d of 3000 keys", g, n)
		}
	}
}
