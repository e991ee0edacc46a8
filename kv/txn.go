package kv

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"

	"github.com/weft-dev/weft/wire"
)

// Transactions (issue #12 item 3; docs/kv.md): one-shot, multi-key,
// across any set of shards, atomic and serializable.
//
// A transaction is multicast to exactly the shards its keys live on
// (genuine: no other shard sees it) and executed at each, deterministically,
// at its position in the global order, as in scalable state-machine
// replication (S-SMR, Bezerra et al., DSN 2014). Every shard evaluates the
// conditions on its own keys; a condition on one shard decides writes on
// another, so the shards exchange what they read: each shard's replicas send
// the others a vote (this shard's conditions all hold, and its integer
// writes are valid), and every shard commits iff every vote is yes
// (rsm.Exchanger: the exchange and its safety are in rsm/exchange.go). The
// transaction's writes take effect at every shard or at none; reads return
// the state just before them. Because every shard executes a transaction
// at the same place in one global order, the transactions and single-key
// operations are serializable in that order, and linearizable: a
// transaction is applied between its call and its return.
//
// A transaction whose keys are all on one shard, or that has no condition
// and no integer write (it cannot abort), needs no exchange.

// CondKind is what a condition checks.
type CondKind uint8

// Condition kinds.
const (
	// CondEqual: the key exists and its value is Value.
	CondEqual CondKind = 1 + iota
	// CondAbsent: the key does not exist.
	CondAbsent
	// CondPresent: the key exists.
	CondPresent
	// CondAtLeast: the key's value, a decimal integer (an absent key is
	// 0), is at least Num. A value that is not an integer fails it.
	CondAtLeast
	condEnd
)

func (k CondKind) String() string {
	switch k {
	case CondEqual:
		return "equal"
	case CondAbsent:
		return "absent"
	case CondPresent:
		return "present"
	case CondAtLeast:
		return "at-least"
	}
	return fmt.Sprintf("cond(%d)", uint8(k))
}

// Cond is one condition of a transaction.
type Cond struct {
	Key   string
	Kind  CondKind
	Value []byte // CondEqual
	Num   int64  // CondAtLeast
}

// WriteKind is what a write does.
type WriteKind uint8

// Write kinds.
const (
	// WritePut sets the key to Value.
	WritePut WriteKind = 1 + iota
	// WriteDelete removes the key (absent already: nothing happens).
	WriteDelete
	// WriteAdd adds Delta to the key's value, a decimal integer (an absent
	// key is 0). A value that is not an integer, or a sum that overflows
	// int64, aborts the transaction (the key's shard votes no).
	WriteAdd
	writeEnd
)

func (k WriteKind) String() string {
	switch k {
	case WritePut:
		return "put"
	case WriteDelete:
		return "del"
	case WriteAdd:
		return "add"
	}
	return fmt.Sprintf("write(%d)", uint8(k))
}

// Write is one write of a transaction.
type Write struct {
	Key   string
	Kind  WriteKind
	Value []byte // WritePut
	Delta int64  // WriteAdd
}

// Txn is a one-shot transaction: if every condition in If holds, the
// writes in Then are applied, in order, atomically at every shard
// involved; either way the keys in Reads are read (before the writes).
type Txn struct {
	If    []Cond
	Reads []string
	Then  []Write
}

// MaxTxnOps bounds a transaction's conditions, reads and writes together
// (its encoding must also fit in one message: wire.MaxPayload).
const MaxTxnOps = 256

// OpTxn is the command byte of a transaction's payload (after OpCAS).
const OpTxn Op = OpCAS + 1

// ErrTxnTooLarge refuses a transaction over MaxTxnOps or wire.MaxPayload.
var ErrTxnTooLarge = fmt.Errorf("kv: transaction too large")

// ErrTxnEmpty refuses a transaction with no operation.
var ErrTxnEmpty = fmt.Errorf("kv: empty transaction")

// ErrShardsDisagree is returned when the shards of a transaction answered
// differently whether it committed: it never happens unless an executor is
// broken (tests use it to show a broken one is caught).
var ErrShardsDisagree = fmt.Errorf("kv: the shards of a transaction disagree on its outcome")

// Check reports whether t is within the limits.
func (t *Txn) Check() error {
	n := len(t.If) + len(t.Reads) + len(t.Then)
	switch {
	case n == 0:
		return ErrTxnEmpty
	case n > MaxTxnOps:
		return errorf(ErrTxnTooLarge, "%d operations, the limit is %d", n, MaxTxnOps)
	}
	for i := range t.If {
		c := &t.If[i]
		if c.Kind < CondEqual || c.Kind >= condEnd {
			return errorf(ErrBadCommand, "condition %d: kind %d", i, c.Kind)
		}
		if err := checkKey(c.Key); err != nil {
			return fmt.Errorf("condition %d: %w", i, err)
		}
		if err := checkValue(c.Value); err != nil {
			return fmt.Errorf("condition %d: %w", i, err)
		}
	}
	for i, k := range t.Reads {
		if err := checkKey(k); err != nil {
			return fmt.Errorf("read %d: %w", i, err)
		}
	}
	for i := range t.Then {
		w := &t.Then[i]
		if w.Kind < WritePut || w.Kind >= writeEnd {
			return errorf(ErrBadCommand, "write %d: kind %d", i, w.Kind)
		}
		if err := checkKey(w.Key); err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
		if err := checkValue(w.Value); err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
	}
	return nil
}

// Shards returns the shards t touches among n, increasing: the
// transaction's destination groups.
func (t *Txn) Shards(n int) []wire.GroupID {
	return t.shardsOf(n, true, func(*Write) bool { return true })
}

// voters returns the shards (among n, increasing) that hold a condition or
// an integer write of t: the parts that can make it abort, whose shards
// vote (txn_apply.go). None: t cannot abort and needs no votes.
func (t *Txn) voters(n int) []wire.GroupID {
	return t.shardsOf(n, false, func(w *Write) bool { return w.Kind == WriteAdd })
}

// shardsOf returns the shards (among n, increasing) of t's conditions'
// keys, of its reads' if reads, and of the writes keep accepts.
func (t *Txn) shardsOf(n int, reads bool, keep func(*Write) bool) []wire.GroupID {
	var gs []wire.GroupID
	add := func(k string) {
		if g := Shard(k, n); !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	for i := range t.If {
		add(t.If[i].Key)
	}
	if reads {
		for _, k := range t.Reads {
			add(k)
		}
	}
	for i := range t.Then {
		if keep(&t.Then[i]) {
			add(t.Then[i].Key)
		}
	}
	slices.Sort(gs)
	return gs
}

// Encode appends t's encoding to buf.
//
// Encoding: OpTxn | uvarint #conds | per cond: kind, key, then value
// (equal) or zigzag varint (at-least) | uvarint #reads | keys | uvarint
// #writes | per write: kind, key, then value (put) or varint (add). Keys
// and values as uvarint length | bytes.
func (t *Txn) Encode(buf []byte) []byte {
	buf = append(buf, byte(OpTxn))
	buf = binary.AppendUvarint(buf, uint64(len(t.If)))
	for i := range t.If {
		c := &t.If[i]
		buf = append(buf, byte(c.Kind))
		buf = appendBytes(buf, []byte(c.Key))
		switch c.Kind {
		case CondEqual:
			buf = appendBytes(buf, c.Value)
		case CondAtLeast:
			buf = binary.AppendVarint(buf, c.Num)
		}
	}
	buf = binary.AppendUvarint(buf, uint64(len(t.Reads)))
	for _, k := range t.Reads {
		buf = appendBytes(buf, []byte(k))
	}
	buf = binary.AppendUvarint(buf, uint64(len(t.Then)))
	for i := range t.Then {
		w := &t.Then[i]
		buf = append(buf, byte(w.Kind))
		buf = appendBytes(buf, []byte(w.Key))
		switch w.Kind {
		case WritePut:
			buf = appendBytes(buf, w.Value)
		case WriteAdd:
			buf = binary.AppendVarint(buf, w.Delta)
		}
	}
	return buf
}

// DecodeTxn decodes a transaction's payload (OpTxn first) and checks its
// limits. It never allocates more than the payload's size.
func DecodeTxn(b []byte) (Txn, error) {
	d := decoder{b: b}
	if Op(d.byte1()) != OpTxn {
		d.fail("transaction operation")
	}
	var t Txn
	n := d.count()
	if n > 0 {
		t.If = make([]Cond, n)
	}
	for i := range t.If {
		c := &t.If[i]
		c.Kind = CondKind(d.byte1())
		c.Key = string(d.bytes(MaxKeyBytes))
		switch c.Kind {
		case CondEqual:
			c.Value = d.bytes(MaxValueBytes)
		case CondAtLeast:
			c.Num = d.varint()
		case CondAbsent, CondPresent:
		default:
			d.fail("condition kind")
		}
	}
	if n = d.count(); n > 0 {
		t.Reads = make([]string, n)
	}
	for i := range t.Reads {
		t.Reads[i] = string(d.bytes(MaxKeyBytes))
	}
	if n = d.count(); n > 0 {
		t.Then = make([]Write, n)
	}
	for i := range t.Then {
		w := &t.Then[i]
		w.Kind = WriteKind(d.byte1())
		w.Key = string(d.bytes(MaxKeyBytes))
		switch w.Kind {
		case WritePut:
			w.Value = d.bytes(MaxValueBytes)
		case WriteAdd:
			w.Delta = d.varint()
		case WriteDelete:
		default:
			d.fail("write kind")
		}
	}
	if d.err == nil && d.off != len(b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return Txn{}, d.err
	}
	return t, t.Check()
}

// count reads a list length: at most MaxTxnOps, and at most the bytes left
// (each element takes at least one), so a hostile length allocates nothing.
func (d *decoder) count() int {
	if d.err != nil {
		return 0
	}
	n, k := binary.Uvarint(d.b[d.off:])
	if k <= 0 {
		d.fail("count")
		return 0
	}
	d.off += k
	if n > MaxTxnOps {
		d.err = errorf(ErrTxnTooLarge, "%d operations in one list, the limit is %d", n, MaxTxnOps)
		return 0
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail("count (past the end)")
		return 0
	}
	return int(n)
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Varint(d.b[d.off:])
	if k <= 0 {
		d.fail("integer")
		return 0
	}
	d.off += k
	return v
}

// parseInt reads an integer value: decimal, as WriteAdd writes it; an
// absent key is 0.
func parseInt(v []byte, present bool) (int64, bool) {
	if !present {
		return 0, true
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// ReadValue is one key's value read by a transaction.
type ReadValue struct {
	Value   []byte
	Present bool
}

// TxnResult is a transaction's outcome.
type TxnResult struct {
	// Committed: every condition held and every write applied, at every
	// shard; otherwise none did.
	Committed bool
	// Failed lists the conditions that did not hold (indexes into If),
	// BadWrites the integer writes that could not apply (indexes into
	// Then): why it aborted.
	Failed, BadWrites []int
	// Reads holds the value of each key of Txn.Reads (same order), as of
	// just before the transaction's writes.
	Reads []ReadValue
	// GTS is the transaction's position in the global order.
	GTS wire.Timestamp
}
