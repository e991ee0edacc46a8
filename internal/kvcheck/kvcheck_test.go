package kvcheck

import (
	"errors"
	"maps"
	"math"
	"path/filepath"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/weft-dev/weft/kv"
)

func op(client int, in Input, out Output, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func linearizable(ops ...porcupine.Operation) bool { return porcupine.CheckOperations(Model, ops) }

// TestModelRefuses: the model is not vacuous. After a put of "a", a read
// of a value never written, a read that misses the put (stale), a
// compare-and-set that succeeds against another value, and a lost write
// (a later read returns the value the put overwrote) are not
// linearizable.
func TestModelRefuses(t *testing.T) {
	put := op(0, Input{Op: kv.OpPut, Key: "k", Value: "a"}, Output{}, 0, 10)
	for _, bad := range []porcupine.Operation{
		op(1, Input{Op: kv.OpGet, Key: "k"}, Output{OK: true, Value: "b"}, 20, 30),
		op(1, Input{Op: kv.OpGet, Key: "k"}, Output{}, 20, 30), // stale: misses the put
		op(1, Input{Op: kv.OpCAS, Key: "k", Expect: "z", ExpectPresent: true, Value: "c"}, Output{OK: true}, 20, 30),
		op(1, Input{Op: kv.OpDelete, Key: "k"}, Output{OK: false}, 20, 30),
	} {
		if linearizable(put, bad) {
			t.Errorf("linearizable: %s", Model.DescribeOperation(bad.Input, bad.Output))
		}
	}
	// A lost write: "b" overwrote "a", then a read returns "a".
	over := op(1, Input{Op: kv.OpPut, Key: "k", Value: "b"}, Output{}, 20, 30)
	stale := op(2, Input{Op: kv.OpGet, Key: "k"}, Output{OK: true, Value: "a"}, 40, 50)
	if linearizable(put, over, stale) {
		t.Error("a read of an overwritten value after the overwrite returned is linearizable")
	}
	// The same keys apart: partitioned by key, an op on another key does
	// not excuse it.
	other := op(3, Input{Op: kv.OpPut, Key: "j", Value: "a"}, Output{}, 35, 45)
	if linearizable(put, over, other, stale) {
		t.Error("an operation on another key made a stale read linearizable")
	}
}

// TestModelAccepts: concurrent operations may take effect in either
// order, and an operation of unknown outcome may or may not have taken
// effect, at any time after its call.
func TestModelAccepts(t *testing.T) {
	put := op(0, Input{Op: kv.OpPut, Key: "k", Value: "a"}, Output{}, 0, 10)
	if !linearizable(put, op(1, Input{Op: kv.OpGet, Key: "k"}, Output{}, 5, 30)) {
		t.Error("a read concurrent with the put that misses it is not linearizable")
	}
	lost := op(1, Input{Op: kv.OpPut, Key: "k", Value: "b"}, Output{Unknown: true}, 20, math.MaxInt64)
	for _, read := range []string{"a", "b"} {
		if !linearizable(put, lost, op(2, Input{Op: kv.OpGet, Key: "k"}, Output{OK: true, Value: read}, 40, 50)) {
			t.Errorf("after a put of unknown outcome, a read of %q is not linearizable", read)
		}
	}
	// It cannot take effect before its call.
	if linearizable(put, lost, op(2, Input{Op: kv.OpGet, Key: "k"}, Output{OK: true, Value: "b"}, 12, 15)) {
		t.Error("a put of unknown outcome took effect before it was called")
	}
	cas := op(1, Input{Op: kv.OpCAS, Key: "k", Expect: "a", ExpectPresent: true, Value: "c"}, Output{Unknown: true}, 20, math.MaxInt64)
	if !linearizable(put, cas, op(2, Input{Op: kv.OpGet, Key: "k"}, Output{OK: true, Value: "c"}, 40, 50)) {
		t.Error("a compare-and-set of unknown outcome that matched is not linearizable")
	}
}

// TestHistory: the recorder times operations, leaves out gets of unknown
// outcome, counts each kind, and a history that a real stale read enters
// fails the check.
func TestHistory(t *testing.T) {
	h := NewHistory(1 << 20)
	call := h.Now()
	h.Add(0, Input{Op: kv.OpPut, Key: "k", Value: "a"}, Output{}, call)
	h.Unknown(1, Input{Op: kv.OpGet, Key: "k"}, h.Now())
	h.Unknown(1, Input{Op: kv.OpPut, Key: "k", Value: "b"}, h.Now())
	if res, _, err := h.Check(0); err != nil || res != porcupine.Ok {
		t.Fatalf("check: %v %v", res, err)
	}
	h.Add(2, Input{Op: kv.OpGet, Key: "k"}, Output{}, h.Now()) // absent: stale
	res, info, err := h.Check(0)
	if err != nil || res != porcupine.Illegal {
		t.Fatalf("a stale read: %v %v, want illegal", res, err)
	}
	if err := Visualize(info, filepath.Join(t.TempDir(), "v.html")); err != nil {
		t.Error(err)
	}
	want := map[string]int{"put": 1, "unknown put": 1, "get": 1, "unknown get (left out)": 1}
	if got := h.Counts(); !maps.Equal(got, want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	if h.Len() != 3 {
		t.Errorf("%d operations recorded, want 3", h.Len())
	}
}

// TestHistoryBound drives a history to its bound: past it, operations are
// dropped and the history refuses to be checked.
func TestHistoryBound(t *testing.T) {
	in := Input{Op: kv.OpPut, Key: "k", Value: "0123456789"}
	per := opOverhead + len(in.Key) + len(in.Value)
	h := NewHistory(3 * per)
	for range 3 {
		h.Add(0, in, Output{}, h.Now())
	}
	if _, _, err := h.Check(0); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	h.Add(0, in, Output{}, h.Now())
	if h.Len() != 3 {
		t.Errorf("%d operations held past a bound of 3", h.Len())
	}
	if _, _, err := h.Check(0); !errors.Is(err, ErrFull) {
		t.Errorf("a history that dropped an operation checked: %v", err)
	}
}
