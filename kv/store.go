package kv

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"

	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/wire"
)

// Store is one shard's state machine (rsm.StateMachine): the keys of one
// group. Apply is deterministic: replicas that apply the same commands hold
// the same keys and answer the same results. Not safe for concurrent use
// (the node calls it from one goroutine).
type Store struct {
	shard  wire.GroupID
	shards int
	data   map[string][]byte
	bytes  int64 // keys and values held
	stats  Stats
}

// Stats counts a store's commands by outcome.
type Stats struct {
	Gets, Puts, Deletes, CAS, CASFailed uint64
	// Txns counts the transactions this shard executed, TxnAborted those
	// of them that aborted (here or at another shard).
	Txns, TxnAborted uint64
	// Refused counts commands answered StatusError (bad, or for another
	// shard).
	Refused uint64
}

var _ rsm.StateMachine = (*Store)(nil)

// NewStore returns the empty state of shard among shards.
func NewStore(shard wire.GroupID, shards int) (*Store, error) {
	if shards < 1 || int(shard) >= shards {
		return nil, fmt.Errorf("%w: %d of %d", ErrUnknownShard, shard, shards)
	}
	return &Store{shard: shard, shards: shards, data: map[string][]byte{}}, nil
}

// Len returns the number of keys; Bytes their size with the values'.
func (s *Store) Len() int     { return len(s.data) }
func (s *Store) Bytes() int64 { return s.bytes }

// Stats returns the store's counters.
func (s *Store) Stats() Stats { return s.stats }

// Get returns key's value (for tests and local inspection; clients read
// through the order: Client.Get).
func (s *Store) Get(key string) ([]byte, bool) {
	v, ok := s.data[key]
	return v, ok
}

// Digest is a hash of the whole state (keys and values in key order):
// replicas of a shard that applied the same commands have the same digest.
func (s *Store) Digest() uint64 {
	h := fnv.New64a()
	var n [binary.MaxVarintLen64]byte
	for _, k := range s.keys() {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
		h.Write([]byte(k))
		v := s.data[k]
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(v)))])
		h.Write(v)
	}
	return h.Sum64()
}

func (s *Store) keys() []string {
	ks := make([]string, 0, len(s.data))
	for k := range s.data {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Apply implements rsm.StateMachine: each entry's payload is a Command.
// A refused command (undecodable, over a limit, for another shard) is a
// StatusError result, never an error: the replicas refuse it alike.
func (s *Store) Apply(batch []rsm.Entry) ([][]byte, error) {
	out := make([][]byte, len(batch))
	for i := range batch {
		if p := batch[i].Payload; len(p) > 0 && Op(p[0]) == OpTxn {
			out[i] = s.applyTxn(&batch[i]) // txn_apply.go
			continue
		}
		r := s.apply(batch[i].Payload)
		out[i] = r.encode()
	}
	return out, nil
}

func (s *Store) apply(payload []byte) Result {
	c, refused, ok := s.decode(payload)
	if !ok {
		s.stats.Refused++
		return refused
	}
	cur, present := s.data[c.Key]
	switch c.Op {
	case OpGet:
		s.stats.Gets++
		return s.get(c.Key)
	case OpPut:
		s.stats.Puts++
		s.set(c.Key, c.Value)
		return Result{Status: StatusOK}
	case OpDelete:
		s.stats.Deletes++
		if !present {
			return Result{Status: StatusNotFound}
		}
		s.del(c.Key)
		return Result{Status: StatusOK}
	default: // OpCAS (DecodeCommand checked the operation)
		s.stats.CAS++
		if present != c.ExpectPresent || (present && !bytes.Equal(cur, c.Expect)) {
			s.stats.CASFailed++
			return Result{Status: StatusCASFailed, Present: present, Value: cur}
		}
		s.set(c.Key, c.Value)
		return Result{Status: StatusOK}
	}
}

func (s *Store) set(key string, v []byte) {
	if old, ok := s.data[key]; ok {
		s.bytes -= int64(len(key) + len(old))
	}
	s.data[key] = bytes.Clone(v) // the payload is not ours to keep
	if s.data[key] == nil {
		s.data[key] = []byte{}
	}
	s.bytes += int64(len(key) + len(v))
}

func (s *Store) del(key string) {
	s.bytes -= int64(len(key) + len(s.data[key]))
	delete(s.data, key)
}

// refusal is the StatusError result for err: "code: detail", the code
// naming the error class (see errorOf).
func refusal(err error) Result {
	code := "bad_command"
	for _, c := range refusalCodes {
		if errors.Is(err, c.err) {
			code = c.code
			break
		}
	}
	return Result{Status: StatusError, Value: []byte(code + ": " + err.Error())}
}

var refusalCodes = []struct {
	code string
	err  error
}{
	{"wrong_shard", ErrWrongShard}, {"empty_key", ErrEmptyKey}, {"key_too_large", ErrKeyTooLarge},
	{"value_too_large", ErrValueTooLarge}, {"txn_too_large", ErrTxnTooLarge}, {"txn_empty", ErrTxnEmpty},
	{"bad_command", ErrBadCommand},
}

// errorOf turns a StatusError result back into an error wrapping its
// class.
func errorOf(r *Result) error {
	msg := string(r.Value)
	for _, c := range refusalCodes {
		if rest, ok := strings.CutPrefix(msg, c.code+": "); ok {
			return fmt.Errorf("%w (the shard said: %s)", c.err, rest)
		}
	}
	return fmt.Errorf("%w (the shard said: %s)", ErrBadCommand, msg)
}

// Snapshot implements rsm.StateMachine: the shard, the key count, then
// every key and value in key order, streamed.
//
// Encoding (uvarints): shard | shards | count | count x (key length, key,
// value length, value).
func (s *Store) Snapshot(w io.Writer) error {
	var buf []byte
	buf = binary.AppendUvarint(buf, uint64(s.shard))
	buf = binary.AppendUvarint(buf, uint64(s.shards))
	buf = binary.AppendUvarint(buf, uint64(len(s.data)))
	if _, err := w.Write(buf); err != nil {
		return err
	}
	for _, k := range s.keys() {
		buf = appendBytes(buf[:0], []byte(k))
		buf = appendBytes(buf, s.data[k])
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// Restore implements rsm.StateMachine. A snapshot of another shard or
// layout is refused.
func (s *Store) Restore(r io.Reader) error {
	br, ok := r.(io.ByteReader)
	if !ok {
		b := bufio.NewReader(r)
		br, r = b, b
	}
	var hdr [3]uint64
	for i := range hdr {
		v, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("kv: snapshot header: %w", err)
		}
		hdr[i] = v
	}
	if hdr[0] != uint64(s.shard) || hdr[1] != uint64(s.shards) {
		return fmt.Errorf("kv: the snapshot is of shard %d of %d, this store is shard %d of %d", hdr[0], hdr[1], s.shard, s.shards)
	}
	data := map[string][]byte{}
	var size int64
	read := func(limit uint64) ([]byte, error) {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return nil, err
		}
		if n > limit {
			return nil, fmt.Errorf("a field of %d bytes, over the limit of %d", n, limit)
		}
		b := make([]byte, n)
		_, err = io.ReadFull(r, b)
		return b, err
	}
	for i := range hdr[2] {
		k, err := read(MaxKeyBytes)
		if err != nil {
			return fmt.Errorf("kv: snapshot key %d: %w", i, err)
		}
		v, err := read(MaxValueBytes)
		if err != nil {
			return fmt.Errorf("kv: snapshot value %d: %w", i, err)
		}
		data[string(k)] = v
		size += int64(len(k) + len(v))
	}
	s.data, s.bytes = data, size
	return nil
}
