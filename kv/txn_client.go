package kv

import (
	"context"
	"fmt"
	"slices"
)

// Txn runs t: multicast to exactly the shards its keys live on, executed at
// each at the same position of the global order (txn.go). It returns the
// outcome, the same at every shard (ErrShardsDisagree otherwise: a broken
// executor). An error means the outcome is unknown (ErrResultLost: it was
// applied but the result is no longer held), except ErrTxnTooLarge with a
// result: the transaction ran, but a shard's read values were over its
// limit and are missing from Reads.
func (k *Client) Txn(ctx context.Context, t Txn) (TxnResult, error) {
	if err := t.Check(); err != nil {
		return TxnResult{}, err
	}
	dest := t.Shards(k.shards)
	res, err := k.c.Multicast(ctx, dest, t.Encode(nil))
	if err != nil {
		return TxnResult{}, err
	}
	out := TxnResult{GTS: res.GTS}
	if len(t.Reads) > 0 {
		out.Reads = make([]ReadValue, len(t.Reads))
	}
	var truncated []int
	for i, g := range dest {
		raw, ok := res.Of(g)
		if !ok {
			return TxnResult{}, fmt.Errorf("%w (transaction on shard %d, message %s)", ErrResultLost, g, res.ID)
		}
		r, err := decodeTxnShardResult(raw, &t)
		if err != nil {
			return TxnResult{}, fmt.Errorf("shard %d: %w", g, err)
		}
		if i == 0 {
			out.Committed = r.committed
		} else if r.committed != out.Committed {
			return TxnResult{}, fmt.Errorf("%w: shard %d says committed=%v, shard %d says %v (message %s)",
				ErrShardsDisagree, dest[0], out.Committed, g, r.committed, res.ID)
		}
		out.Failed = append(out.Failed, r.failed...)
		out.BadWrites = append(out.BadWrites, r.bad...)
		for _, rd := range r.reads {
			out.Reads[rd.idx] = ReadValue{Value: rd.v, Present: rd.present}
		}
		if r.truncated {
			truncated = append(truncated, int(g))
		}
	}
	slices.Sort(out.Failed)
	slices.Sort(out.BadWrites)
	if len(truncated) > 0 {
		return out, errorf(ErrTxnTooLarge, "the reads on shards %v are over %d bytes and were not returned (committed=%v)", truncated, maxTxnReadBytes, out.Committed)
	}
	return out, nil
}
