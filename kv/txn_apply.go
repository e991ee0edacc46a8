package kv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/wire"
)

// A shard's execution of a transaction (txn.go): its conditions, its
// integer writes' validity and its reads are evaluated on the shard's own
// keys at the transaction's position; the votes of the other shards (rsm
// Exchanger) decide whether its writes apply.

var _ rsm.Exchanger = (*Store)(nil)

// maxTxnReadBytes bounds the values one shard returns for a transaction's
// reads, so that its result fits a DELIVERED reply (wire.MaxPayload) with
// room to spare; past it the shard returns no values and says so
// (txnShardResult.truncated).
const maxTxnReadBytes = wire.MaxPayload / 2

// Vote bytes.
var (
	voteYes = []byte{1}
	voteNo  = []byte{0}
)

// StatusAborted is a transaction's status when a condition failed or an
// integer write could not apply, at this or another shard.
const StatusAborted Status = StatusError + 1

// txnOf decodes e's transaction and checks that its destinations are
// exactly its keys' shards. Every shard decides it from the entry alone,
// so they refuse a transaction alike and never wait for a refusing
// shard's vote.
func (s *Store) txnOf(e *rsm.Entry) (Txn, error) {
	t, err := DecodeTxn(e.Payload)
	if err != nil {
		return Txn{}, err
	}
	if want := t.Shards(s.shards); !slices.Equal(want, e.Dest) {
		return Txn{}, errorf(ErrWrongShard, "a transaction to shards %v whose keys are on shards %v", e.Dest, want)
	}
	return t, nil
}

// Voters implements rsm.Exchanger: the shards of a valid transaction that
// hold one of its conditions or integer writes (the parts that can make
// it abort) vote on it; a shard with only puts, deletes and reads cannot,
// and neither votes nor holds the others up.
func (s *Store) Voters(e rsm.Entry) []wire.GroupID {
	if len(e.Dest) < 2 || len(e.Payload) == 0 || Op(e.Payload[0]) != OpTxn {
		return nil
	}
	t, err := s.txnOf(&e)
	if err != nil {
		return nil
	}
	return t.voters(s.shards)
}

// Vote implements rsm.Exchanger: yes iff this shard's conditions hold and
// its integer writes can apply, on the state after every entry before e.
func (s *Store) Vote(e rsm.Entry) []byte {
	t, err := s.txnOf(&e)
	if err != nil {
		return voteNo // not reached: Voters refused it
	}
	if x := s.evalTxn(&t); len(x.failed) == 0 && len(x.bad) == 0 {
		return voteYes
	}
	return voteNo
}

// txnEval is a transaction's evaluation at one shard: the conditions that
// failed and the integer writes that cannot apply (indexes into If and
// Then), and the shard's writes as they would leave its keys.
type txnEval struct {
	failed, bad []int
	writes      map[string]pendingWrite
	order       []string // keys of writes, in first-write order
}

type pendingWrite struct {
	v       []byte
	present bool
}

// evalTxn evaluates t's operations on this shard's keys without changing
// the store.
func (s *Store) evalTxn(t *Txn) txnEval {
	var x txnEval
	for i := range t.If {
		c := &t.If[i]
		if Shard(c.Key, s.shards) != s.shard {
			continue
		}
		cur, present := s.data[c.Key]
		var ok bool
		switch c.Kind {
		case CondEqual:
			ok = present && bytes.Equal(cur, c.Value)
		case CondAbsent:
			ok = !present
		case CondPresent:
			ok = present
		default: // CondAtLeast (DecodeTxn checked the kind)
			n, isInt := parseInt(cur, present)
			ok = isInt && n >= c.Num
		}
		if !ok {
			x.failed = append(x.failed, i)
		}
	}
	for i := range t.Then {
		w := &t.Then[i]
		if Shard(w.Key, s.shards) != s.shard {
			continue
		}
		if x.writes == nil {
			x.writes = map[string]pendingWrite{}
		}
		cur, seen := x.writes[w.Key]
		if !seen {
			x.order = append(x.order, w.Key)
			cur.v, cur.present = s.data[w.Key]
		}
		switch w.Kind {
		case WritePut:
			cur = pendingWrite{v: w.Value, present: true}
		case WriteDelete:
			cur = pendingWrite{}
		default: // WriteAdd
			n, isInt := parseInt(cur.v, cur.present)
			if !isInt || (w.Delta > 0 && n > math.MaxInt64-w.Delta) || (w.Delta < 0 && n < math.MinInt64-w.Delta) {
				x.bad = append(x.bad, i)
				continue
			}
			cur = pendingWrite{v: strconv.AppendInt(nil, n+w.Delta, 10), present: true}
		}
		x.writes[w.Key] = cur
	}
	return x
}

// applyTxn executes the transaction of entry e at this shard.
func (s *Store) applyTxn(e *rsm.Entry) []byte {
	t, err := s.txnOf(e)
	if err != nil {
		s.stats.Refused++
		r := refusal(err)
		return r.encode()
	}
	s.stats.Txns++
	x := s.evalTxn(&t)
	commit := len(x.failed) == 0 && len(x.bad) == 0
	if e.Votes != nil {
		for i, g := range e.Dest {
			if v := e.Votes[i]; g != s.shard && v != nil && !bytes.Equal(v, voteYes) {
				commit = false
			}
		}
	}
	r := txnShardResult{committed: commit, failed: x.failed, bad: x.bad}
	size := 0
	for i, k := range t.Reads {
		if Shard(k, s.shards) != s.shard {
			continue
		}
		v, present := s.data[k]
		size += len(v)
		r.reads = append(r.reads, txnRead{idx: i, present: present, v: v})
	}
	if size > maxTxnReadBytes {
		r.reads, r.truncated = nil, true
	}
	out := r.encode() // before the writes: the reads' values may be replaced
	if !commit {
		s.stats.TxnAborted++
		return out
	}
	for _, k := range x.order {
		if w := x.writes[k]; w.present {
			s.set(k, w.v)
		} else if _, ok := s.data[k]; ok {
			s.del(k)
		}
	}
	return out
}

// txnShardResult is one shard's answer to a transaction.
//
// Encoding: status (StatusOK: committed, StatusAborted) | uvarint count,
// failed condition indexes | uvarint count, bad write indexes | truncated
// byte | uvarint count, then per read: uvarint index into Reads, present
// byte, value (uvarint length | bytes). A refused transaction is answered
// like a refused command (StatusError, Result's encoding).
type txnShardResult struct {
	committed bool
	failed    []int
	bad       []int
	truncated bool
	reads     []txnRead
}

type txnRead struct {
	idx     int
	present bool
	v       []byte
}

func (r *txnShardResult) encode() []byte {
	st := StatusAborted
	if r.committed {
		st = StatusOK
	}
	buf := []byte{byte(st)}
	for _, l := range [][]int{r.failed, r.bad} {
		buf = binary.AppendUvarint(buf, uint64(len(l)))
		for _, i := range l {
			buf = binary.AppendUvarint(buf, uint64(i))
		}
	}
	buf = append(buf, boolByte(r.truncated))
	buf = binary.AppendUvarint(buf, uint64(len(r.reads)))
	for _, rd := range r.reads {
		buf = binary.AppendUvarint(buf, uint64(rd.idx))
		buf = append(buf, boolByte(rd.present))
		buf = appendBytes(buf, rd.v)
	}
	return buf
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// decodeTxnShardResult decodes a shard's answer to t (a refusal is
// returned as the error it stands for).
func decodeTxnShardResult(b []byte, t *Txn) (txnShardResult, error) {
	if len(b) > 0 && Status(b[0]) == StatusError {
		_, err := decodeAnswer(b)
		return txnShardResult{}, err
	}
	d := decoder{b: b}
	var r txnShardResult
	switch Status(d.byte1()) {
	case StatusOK:
		r.committed = true
	case StatusAborted:
	default:
		d.fail("transaction status")
	}
	lists := [2]*[]int{&r.failed, &r.bad}
	limits := [2]int{len(t.If), len(t.Then)}
	for li, l := range lists {
		n := d.count()
		for range n {
			i := d.uvarint()
			if i >= uint64(limits[li]) {
				d.fail("operation index")
				break
			}
			*l = append(*l, int(i))
		}
	}
	switch d.byte1() {
	case 0:
	case 1:
		r.truncated = true
	default:
		d.fail("truncated flag")
	}
	n := d.count()
	for range n {
		i := d.uvarint()
		if i >= uint64(len(t.Reads)) {
			d.fail("read index")
			break
		}
		rd := txnRead{idx: int(i)}
		switch d.byte1() {
		case 0:
		case 1:
			rd.present = true
		default:
			d.fail("present flag")
		}
		rd.v = d.bytes(MaxValueBytes)
		r.reads = append(r.reads, rd)
	}
	if d.err == nil && d.off != len(b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return txnShardResult{}, fmt.Errorf("kv: bad transaction result from the shard: %w", d.err)
	}
	return r, nil
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.b[d.off:])
	if k <= 0 {
		d.fail("integer")
		return 0
	}
	d.off += k
	return v
}

// TxnReads decodes the read values in one shard's answer to t (the keys of
// t.Reads on that shard, in t.Reads's order), for tools and tests that see
// a shard's raw results (the simulator's checks).
func TxnReads(raw []byte, t *Txn) ([]ReadValue, error) {
	r, err := decodeTxnShardResult(raw, t)
	if err != nil {
		return nil, err
	}
	out := make([]ReadValue, 0, len(r.reads))
	for _, rd := range r.reads {
		out = append(out, ReadValue{Value: rd.v, Present: rd.present})
	}
	return out, nil
}
