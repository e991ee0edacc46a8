// Package kvcheck checks histories of weft-kv's single-key operations for
// linearizability with porcupine (github.com/anishathalye/porcupine): the
// sequential model of one key, and a recorder that concurrent clients
// (in-process tests, the multi-process fault tests in package demo) log
// their operations to. It is test support: it imports porcupine, which
// weft-kv itself does not need.
//
// Operations whose outcome the client never learned (an error, a timeout)
// are recorded as possibly applied at any time after their call, as
// porcupine expects: their return time is after every other operation's,
// and the model accepts any answer for them. A get with an unknown outcome
// changed nothing and is left out.
package kvcheck

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/weft-dev/weft/kv"
)

// Input is a single-key operation as the model sees it.
type Input struct {
	Op            kv.Op
	Key, Value    string
	Expect        string // compare-and-set: the expected value, if ExpectPresent
	ExpectPresent bool
}

// Output is an operation's outcome.
type Output struct {
	OK      bool // get: found; delete: existed; compare-and-set: set
	Value   string
	Present bool // compare-and-set failure: the key exists
	// Unknown: the client never learned the outcome (error, timeout); the
	// operation may or may not have taken effect, and any answer fits.
	Unknown bool
}

// state is one key's value (the model partitions histories by key).
type state struct {
	present bool
	value   string
}

// Model is weft-kv's sequential specification, per key.
var Model = porcupine.Model{
	Partition: partition,
	Init:      func() any { return state{} },
	Step:      step,
	Equal:     func(a, b any) bool { return a.(state) == b.(state) },
	DescribeOperation: func(in, out any) string {
		i, o := in.(Input), out.(Output)
		if o.Unknown {
			return fmt.Sprintf("%s(%s, %q, expect %q/%v) -> unknown", i.Op, i.Key, i.Value, i.Expect, i.ExpectPresent)
		}
		return fmt.Sprintf("%s(%s, %q, expect %q/%v) -> %+v", i.Op, i.Key, i.Value, i.Expect, i.ExpectPresent, o)
	},
	DescribeState: func(s any) string {
		if st := s.(state); st.present {
			return fmt.Sprintf("%q", st.value)
		}
		return "absent"
	},
}

// partition splits a history by key, in order of each key's first
// operation (keys are independent: porcupine checks each alone).
func partition(h []porcupine.Operation) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range h {
		k := op.Input.(Input).Key
		if by[k] == nil {
			keys = append(keys, k)
		}
		by[k] = append(by[k], op)
	}
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, by[k])
	}
	return out
}

func step(st, in, out any) (bool, any) {
	s, i, o := st.(state), in.(Input), out.(Output)
	switch i.Op {
	case kv.OpGet:
		return o.Unknown || o.OK == s.present && (!s.present || o.Value == s.value), s
	case kv.OpPut:
		return true, state{present: true, value: i.Value}
	case kv.OpDelete:
		return o.Unknown || o.OK == s.present, state{}
	default:
		match := s.present == i.ExpectPresent && (!s.present || s.value == i.Expect)
		if match {
			return o.Unknown || o.OK, state{present: true, value: i.Value}
		}
		return o.Unknown || !o.OK && o.Present == s.present && (!s.present || o.Value == s.value), s
	}
}

// opOverhead is what one recorded operation costs besides its strings
// (porcupine.Operation with its boxed Input and Output), for the bound.
const opOverhead = 160

// ErrFull is returned by Check when the history reached its bound and
// dropped operations: a partial history proves nothing.
var ErrFull = errors.New("kvcheck: the history reached its bound and dropped operations")

// History collects the operations of concurrent clients, timed from its
// start. It is safe for concurrent use. It holds at most maxBytes (keys,
// values and a fixed overhead per operation); past that it drops
// operations, counts them and refuses to be checked.
type History struct {
	mu       sync.Mutex
	start    time.Time
	maxBytes int
	bytes    int
	dropped  int
	ops      []porcupine.Operation
	counts   map[string]int
}

// NewHistory returns an empty history holding at most maxBytes.
func NewHistory(maxBytes int) *History {
	return &History{start: time.Now(), maxBytes: maxBytes, counts: map[string]int{}}
}

// Start is when the history's clock started.
func (h *History) Start() time.Time { return h.start }

// Now is the history's clock: the time since its start, in nanoseconds.
// Take an operation's call time from it just before the call.
func (h *History) Now() int64 { return time.Since(h.start).Nanoseconds() }

// Add records client's operation, called at call (from Now) and returned
// now with out.
func (h *History) Add(client int, in Input, out Output, call int64) {
	h.add(client, in, out, call, h.Now())
}

// AddAt records client's operation, called at call and returned at ret
// (both from Now) with out: an operation timed earlier and recorded
// later.
func (h *History) AddAt(client int, in Input, out Output, call, ret int64) {
	h.add(client, in, out, call, ret)
}

// Unknown records client's operation called at call (from Now) whose
// outcome the client did not learn: possibly applied at any time after
// call. A get is left out (it changed nothing). The client should use a
// fresh id for its next operation (porcupine draws one line per id).
func (h *History) Unknown(client int, in Input, call int64) {
	if in.Op == kv.OpGet {
		h.mu.Lock()
		h.counts["unknown get (left out)"]++
		h.mu.Unlock()
		return
	}
	h.add(client, in, Output{Unknown: true}, call, math.MaxInt64)
}

func (h *History) add(client int, in Input, out Output, call, ret int64) {
	n := opOverhead + len(in.Key) + len(in.Value) + len(in.Expect) + len(out.Value)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.bytes+n > h.maxBytes {
		h.dropped++
		return
	}
	h.bytes += n
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	kind := in.Op.String()
	if out.Unknown {
		kind = "unknown " + kind
	}
	h.counts[kind]++
}

// Len returns the number of operations recorded.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Counts returns the number of operations recorded per kind ("get",
// "put", "unknown put", ...; "unknown get (left out)" counts the gets
// left out).
func (h *History) Counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]int, len(h.counts))
	for k, v := range h.counts {
		out[k] = v
	}
	return out
}

// Check checks the history with porcupine within timeout and returns the
// verdict with what porcupine found (for Visualize). It returns ErrFull,
// and no verdict, if the history dropped operations.
func (h *History) Check(timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo, error) {
	h.mu.Lock()
	ops, dropped := h.ops, h.dropped
	h.mu.Unlock()
	if dropped > 0 {
		return porcupine.Unknown, porcupine.LinearizationInfo{}, fmt.Errorf("%w (%d dropped, bound %d bytes)", ErrFull, dropped, h.maxBytes)
	}
	res, info := porcupine.CheckOperationsVerbose(Model, ops, timeout)
	return res, info, nil
}

// Visualize writes porcupine's HTML visualisation of info (from Check) to
// path: the longest linearizable prefix of each key, and where it fails.
func Visualize(info porcupine.LinearizationInfo, path string) error {
	return porcupine.VisualizePath(Model, info, path)
}
