// Package kv is weft-kv, the reference replicated service on weft: a
// key-value store whose keys are placed on shards (the replica groups of
// the cluster), each shard a replicated state machine (package rsm) that
// every replica of its group applies in the order atomic multicast gives.
//
// Placement: key k lives on shard Shard(k, n) = FNV-1a-64(k) mod n, n the
// number of groups. Every client and node computes it the same way; a
// command that reaches a shard that does not own its key is answered with
// ErrWrongShard (a client whose layout disagrees with the cluster's).
//
// Operations (one key each, multicast to the key's shard only): Get, Put,
// Delete, and CompareAndSet. Every operation, reads included, goes through
// the order: a Get is delivered like a write and answered by the shard's
// state after every operation ordered before it, so single-key operations
// are linearizable by construction (reads cost a multicast; read leases or
// a read index are future work: issue #12).
//
// Limits: a key is 1 to MaxKeyBytes bytes, a value at most MaxValueBytes
// (so that a compare-and-set, which carries two values, fits in one
// message: wire.MaxPayload).
//
// The state machine (Store) is deterministic and pure; Client (client.go)
// is the Go client, a thin layer over package client.
package kv

import (
	"errors"
	"hash/fnv"

	"github.com/weft-dev/weft/wire"
)

// Limits.
const (
	MaxKeyBytes   = 1 << 10
	MaxValueBytes = 256 << 10
)

// Errors. Test with errors.Is.
var (
	// ErrEmptyKey and ErrKeyTooLarge refuse a key outside 1..MaxKeyBytes
	// bytes; ErrValueTooLarge a value over MaxValueBytes.
	ErrEmptyKey      = errors.New("kv: empty key")
	ErrKeyTooLarge   = errors.New("kv: key too large")
	ErrValueTooLarge = errors.New("kv: value too large")
	// ErrWrongShard: the shard that received the command does not own its
	// key: the client's number of shards differs from the cluster's.
	ErrWrongShard = errors.New("kv: key does not belong to this shard (the client's shard layout differs from the cluster's)")
	// ErrUnknownShard: a shard number outside the cluster's.
	ErrUnknownShard = errors.New("kv: unknown shard")
	// ErrBadCommand: the shard could not decode the command (a client of
	// another version, or a hostile one).
	ErrBadCommand = errors.New("kv: bad command")
	// ErrResultLost: the operation was applied, but the shard no longer
	// holds its result (a retry answered after the result was forgotten:
	// docs/rsm.md). A Put or Delete took effect; a Get must be retried.
	ErrResultLost = errors.New("kv: operation applied, result no longer held")
)

// Shard returns the shard (group) of key among n shards.
func Shard(key string, n int) wire.GroupID {
	h := fnv.New64a()
	h.Write([]byte(key))
	return wire.GroupID(h.Sum64() % uint64(n))
}

// checkKey and checkValue enforce the limits.
func checkKey(key string) error {
	switch {
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > MaxKeyBytes:
		return errorf(ErrKeyTooLarge, "%d bytes, the limit is %d", len(key), MaxKeyBytes)
	}
	return nil
}

func checkValue(v []byte) error {
	if len(v) > MaxValueBytes {
		return errorf(ErrValueTooLarge, "%d bytes, the limit is %d", len(v), MaxValueBytes)
	}
	return nil
}
