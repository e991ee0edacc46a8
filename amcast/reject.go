package amcast

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// ErrRejected is wrapped by every error a protocol returns when it refuses
// remote input that contradicts what the process knows (a known message id
// with another destination set or payload, an ACCEPT for a group that is not
// a destination, a ballot vector of the wrong length, ...). Such input is
// never trusted and never crashes the process: Step counts it under a
// reason, leaves the state unchanged and returns a *RejectError. It also
// wraps ErrBadMessage, so callers that only ask "was it refused" keep
// working.
var ErrRejected = errors.New("amcast: rejected remote input")

// RejectError is a refused input: Reason is a short, stable, snake_case
// label (metrics and logs key on it); Detail says what was wrong.
type RejectError struct {
	Reason string
	Detail string
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("amcast: rejected (%s): %s", e.Reason, e.Detail)
}

// Is makes errors.Is(err, ErrRejected) and errors.Is(err, ErrBadMessage)
// hold for every RejectError.
func (e *RejectError) Is(target error) bool {
	return target == ErrRejected || target == ErrBadMessage
}

// Rejects counts refused inputs by reason. The zero value is ready to use.
// Protocols keep one as an unexported field and expose Rejected().
type Rejects struct {
	n     map[string]uint64
	total uint64
}

// Reject counts one refusal under reason and returns the error Step should
// return. The caller must not have changed any state for this input.
func (r *Rejects) Reject(reason, format string, args ...any) error {
	if r.n == nil {
		r.n = map[string]uint64{}
	}
	r.n[reason]++
	r.total++
	return &RejectError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Counts returns a copy of the counters, by reason.
func (r *Rejects) Counts() map[string]uint64 { return maps.Clone(r.n) }

// Total returns the number of refusals counted.
func (r *Rejects) Total() uint64 { return r.total }

// Reasons returns the reasons counted so far, sorted.
func (r *Rejects) Reasons() []string { return slices.Sorted(maps.Keys(r.n)) }

// RejectCounter is implemented by machines that count refused input, so
// drivers (the node's metrics and logs, the simulator's summaries, fuzz
// targets) can read the counters without reaching into protocol state.
type RejectCounter interface {
	// Rejected returns this incarnation's refusals by reason (a copy).
	Rejected() map[string]uint64
}
