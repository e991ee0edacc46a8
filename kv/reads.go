package kv

import (
	"context"
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// Reads (docs/reads.md): a get can be served three ways, each with its
// consistency level.

// Consistency is the consistency level of a get (Client.Get).
type Consistency uint8

// Consistency levels.
const (
	// Linearizable (the default): the key's shard's leader serves the get
	// from its state once it confirmed, with a round to a quorum of its
	// group, that it still leads, and applied every write delivered
	// before the get started (a read index; amcast/wbcast/readindex.go).
	// The value reflects every write completed before Get was called. One
	// round trip to the leader and one from it to a quorum; no multicast,
	// nothing written to any log.
	Linearizable Consistency = iota
	// Ordered: the get is multicast to the shard and ordered with the
	// writes, like one (the only read before read indexes existed).
	// Linearizable too, at the cost of a multicast: an fsync at a quorum.
	Ordered
	// Local: any replica of the shard answers from its own state, as is.
	// Possibly stale, by as much as that replica lags (a follower cut off
	// from its leader can lag without bound); the answer's Index is the
	// position of the state it read. Cheapest; for monitoring, caches and
	// reads that tolerate staleness.
	Local
	consistencyEnd
)

func (c Consistency) String() string {
	switch c {
	case Linearizable:
		return "linearizable"
	case Ordered:
		return "ordered"
	case Local:
		return "local"
	}
	return fmt.Sprintf("consistency(%d)", uint8(c))
}

// ParseConsistency parses "linearizable", "ordered" or "local" ("" is
// Linearizable).
func ParseConsistency(s string) (Consistency, error) {
	switch s {
	case "", "linearizable":
		return Linearizable, nil
	case "ordered":
		return Ordered, nil
	case "local":
		return Local, nil
	}
	return 0, errorf(ErrBadCommand, "consistency %q is not linearizable, ordered or local", s)
}

// Read is the answer to a get with its position.
type Read struct {
	Value   []byte
	Present bool
	// Index is the position of the state the get read: the gts of its
	// last delivery (Linearizable, Local), or the get's own gts (Ordered).
	Index wire.Timestamp
	// Node is the replica that answered (Linearizable, Local; zero for
	// Ordered: the shard's leader).
	Node wire.ProcID
}

// Query implements rsm.Querier: q is an encoded get Command, answered from
// the store as is (no counter moves: a query runs at one replica only).
// A refused query (not a get, undecodable, another shard's key) is a
// StatusError result, like a refused command.
func (s *Store) Query(q []byte) ([]byte, error) {
	c, r, ok := s.decode(q)
	switch {
	case !ok:
	case c.Op != OpGet:
		r = refusal(errorf(ErrBadCommand, "a query must be a get, not a %s", c.Op))
	default:
		r = s.get(c.Key)
	}
	return r.encode(), nil
}

// decode decodes a command for this shard, or returns its refusal.
func (s *Store) decode(payload []byte) (Command, Result, bool) {
	c, err := DecodeCommand(payload)
	if err != nil {
		return c, refusal(err), false
	}
	if g := Shard(c.Key, s.shards); g != s.shard {
		return c, refusal(errorf(ErrWrongShard, "key %.40q is on shard %d of %d, this is shard %d", c.Key, g, s.shards, s.shard)), false
	}
	return c, Result{}, true
}

// get is a get's result.
func (s *Store) get(key string) Result {
	v, ok := s.data[key]
	if !ok {
		return Result{Status: StatusNotFound}
	}
	return Result{Status: StatusOK, Present: true, Value: v}
}

// ReadAt gets key with consistency c and returns its position too.
func (k *Client) ReadAt(ctx context.Context, key string, c Consistency) (Read, error) {
	r, idx, node, err := k.get(ctx, Command{Op: OpGet, Key: key}, c)
	if err != nil {
		return Read{}, err
	}
	return Read{Value: r.Value, Present: r.Status == StatusOK, Index: idx, Node: node}, nil
}

// DoAt is Do with the consistency level c for a get (other commands are
// always ordered: c is ignored), and returns the position too: for a
// get, of the state it read (Read.Index); for another command, its gts.
func (k *Client) DoAt(ctx context.Context, cmd Command, c Consistency) (Result, wire.Timestamp, error) {
	r, at, _, err := k.get(ctx, cmd, c)
	return r, at, err
}

func (k *Client) get(ctx context.Context, cmd Command, c Consistency) (Result, wire.Timestamp, wire.ProcID, error) {
	if c >= consistencyEnd {
		return Result{}, wire.Timestamp{}, 0, errorf(ErrBadCommand, "consistency %d", c)
	}
	if cmd.Op != OpGet || c == Ordered {
		r, at, err := k.do(ctx, cmd)
		return r, at, 0, err
	}
	if err := cmd.Check(); err != nil {
		return Result{}, wire.Timestamp{}, 0, err
	}
	mode := wire.ReadLinearizable
	if c == Local {
		mode = wire.ReadLocal
	}
	g := Shard(cmd.Key, k.shards)
	res, err := k.c.Read(ctx, g, cmd.Encode(nil), mode)
	if err != nil {
		return Result{}, wire.Timestamp{}, 0, err
	}
	r, err := decodeAnswer(res.Result)
	return r, res.Index, res.Node, err
}

// decodeAnswer decodes a shard's result; a refusal (StatusError) is
// returned as an error wrapping its class too.
func decodeAnswer(raw []byte) (Result, error) {
	r, err := DecodeResult(raw)
	if err != nil {
		return Result{}, err
	}
	if r.Status == StatusError {
		return r, errorOf(&r)
	}
	return r, nil
}
