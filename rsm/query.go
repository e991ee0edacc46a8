package rsm

import (
	"errors"
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// Querier is an optional interface of a StateMachine: read-only queries of
// the state, answered without a multicast (READ, docs/reads.md). Query is
// called on the goroutine that calls Apply (the node's loop), between two
// Applies, with the state as of the Driver's applied gts. It must not
// change the state, nor anything a snapshot or a later Apply or Query
// depends on: a query runs at one replica only, so a mutation would make
// the replicas diverge. A query's failure (a malformed query) is an error
// returned to its client, not a failure of the state machine. The result
// is at most the Driver's MaxResult bytes. Query must not keep q.
type Querier interface {
	Query(q []byte) ([]byte, error)
}

// ErrNoQuery is returned by Driver.Query when the state machine does not
// implement Querier.
var ErrNoQuery = errors.New("rsm: the state machine answers no queries (it does not implement rsm.Querier)")

// ErrQuery wraps the error a Querier returned.
var ErrQuery = errors.New("rsm: query failed")

// Query runs q on the state machine and returns its result with the
// applied gts it ran at. The error wraps ErrNoQuery, ErrQuery,
// ErrResultTooLarge, or the state machine's sticky failure.
func (d *Driver) Query(q []byte) ([]byte, wire.Timestamp, error) {
	if d.err != nil {
		return nil, d.applied, d.err
	}
	qr, ok := d.sm.(Querier)
	if !ok {
		return nil, d.applied, ErrNoQuery
	}
	res, err := qr.Query(q)
	if err != nil {
		return nil, d.applied, fmt.Errorf("%w: %w", ErrQuery, err)
	}
	if len(res) > d.cfg.MaxResult {
		return nil, d.applied, fmt.Errorf("%w: a query's result of %d bytes, over the limit of %d", ErrResultTooLarge, len(res), d.cfg.MaxResult)
	}
	return res, d.applied, nil
}
