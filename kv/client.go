package kv

import (
	"context"
	"fmt"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/wire"
)

// Client is weft-kv's Go client: each operation is multicast to its key's
// shard (Shard) through a client.Client and answered by that shard's state
// machine. It is safe for concurrent use; operations of one Client may be
// in flight together.
type Client struct {
	c      *client.Client
	shards int
}

// NewClient returns a kv client over c, whose topology's groups are the
// shards. c should be created with client.Config.AllGroups (a kv node
// answers from every destination group; single-key operations have one).
func NewClient(c *client.Client, shards int) (*Client, error) {
	if shards < 1 {
		return nil, fmt.Errorf("%w: %d shards", ErrUnknownShard, shards)
	}
	return &Client{c: c, shards: shards}, nil
}

// Shards returns the number of shards.
func (k *Client) Shards() int { return k.shards }

// Do sends one command to its key's shard and returns the shard's result.
// A refusal (StatusError) is returned as an error wrapping its class
// (ErrWrongShard, ErrBadCommand, ...).
//
// Do multicasts every command, gets included (an Ordered get); DoAt
// serves a get at another consistency level.
func (k *Client) Do(ctx context.Context, cmd Command) (Result, error) {
	r, _, err := k.do(ctx, cmd)
	return r, err
}

// do multicasts cmd and returns its result with its gts.
func (k *Client) do(ctx context.Context, cmd Command) (Result, wire.Timestamp, error) {
	if err := cmd.Check(); err != nil {
		return Result{}, wire.Timestamp{}, err
	}
	g := Shard(cmd.Key, k.shards)
	res, err := k.c.Multicast(ctx, []wire.GroupID{g}, cmd.Encode(nil))
	if err != nil {
		return Result{}, wire.Timestamp{}, err
	}
	raw, ok := res.Of(g)
	if !ok {
		return Result{}, wire.Timestamp{}, fmt.Errorf("%w (%s %.40q on shard %d, message %s)", ErrResultLost, cmd.Op, cmd.Key, g, res.ID)
	}
	r, err := decodeAnswer(raw)
	return r, res.GTS, err
}

// Get returns key's value and whether it exists, read at consistency
// level c (at most one; default Linearizable, through the shard leader's
// read index; see Consistency and docs/reads.md).
func (k *Client) Get(ctx context.Context, key string, c ...Consistency) ([]byte, bool, error) {
	level := Linearizable
	switch len(c) {
	case 0:
	case 1:
		level = c[0]
	default:
		return nil, false, errorf(ErrBadCommand, "Get takes at most one consistency level, got %d", len(c))
	}
	r, err := k.ReadAt(ctx, key, level)
	if err != nil {
		return nil, false, err
	}
	return r.Value, r.Present, nil
}

// Put sets key to value.
func (k *Client) Put(ctx context.Context, key string, value []byte) error {
	_, err := k.Do(ctx, Command{Op: OpPut, Key: key, Value: value})
	return err
}

// Delete removes key and reports whether it existed.
func (k *Client) Delete(ctx context.Context, key string) (bool, error) {
	r, err := k.Do(ctx, Command{Op: OpDelete, Key: key})
	if err != nil {
		return false, err
	}
	return r.Status == StatusOK, nil
}

// CompareAndSet sets key to value if its current value is expect (expect
// nil: if the key is absent; an empty non-nil slice is the empty value).
// It reports whether it did, and otherwise the current value and whether
// the key exists.
func (k *Client) CompareAndSet(ctx context.Context, key string, expect, value []byte) (ok bool, current []byte, present bool, err error) {
	r, err := k.Do(ctx, Command{Op: OpCAS, Key: key, Value: value, Expect: expect, ExpectPresent: expect != nil})
	if err != nil {
		return false, nil, false, err
	}
	if r.Status == StatusCASFailed {
		return false, r.Value, r.Present, nil
	}
	return true, nil, false, nil
}
