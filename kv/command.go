package kv

import (
	"encoding/binary"
	"fmt"
)

// Op is a command's operation.
type Op uint8

// Operations.
const (
	OpGet Op = 1 + iota
	OpPut
	OpDelete
	OpCAS
)

func (o Op) String() string {
	switch o {
	case OpGet:
		return "get"
	case OpPut:
		return "put"
	case OpDelete:
		return "del"
	case OpCAS:
		return "cas"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Command is one operation on one key: a message's payload.
//
// Encoding: op byte | uvarint key length | key | then for put: value;
// for cas: expect-present byte (0/1), expected value if present, value;
// each value as uvarint length | bytes.
type Command struct {
	Op  Op
	Key string
	// Value is what Put and CompareAndSet write.
	Value []byte
	// Expect is what CompareAndSet compares the current value with;
	// ExpectPresent false means "the key must be absent".
	Expect        []byte
	ExpectPresent bool
}

// Check reports whether c is within the limits.
func (c *Command) Check() error {
	if c.Op < OpGet || c.Op > OpCAS {
		return errorf(ErrBadCommand, "operation %d", c.Op)
	}
	if err := checkKey(c.Key); err != nil {
		return err
	}
	if err := checkValue(c.Value); err != nil {
		return err
	}
	return checkValue(c.Expect)
}

// Encode appends c's encoding to buf.
func (c *Command) Encode(buf []byte) []byte {
	buf = append(buf, byte(c.Op))
	buf = appendBytes(buf, []byte(c.Key))
	switch c.Op {
	case OpPut:
		buf = appendBytes(buf, c.Value)
	case OpCAS:
		if c.ExpectPresent {
			buf = append(buf, 1)
			buf = appendBytes(buf, c.Expect)
		} else {
			buf = append(buf, 0)
		}
		buf = appendBytes(buf, c.Value)
	}
	return buf
}

// DecodeCommand decodes a command and checks its limits. It never
// allocates more than the payload's size.
func DecodeCommand(b []byte) (Command, error) {
	d := decoder{b: b}
	var c Command
	c.Op = Op(d.byte1())
	c.Key = string(d.bytes(MaxKeyBytes))
	switch c.Op {
	case OpGet, OpDelete:
	case OpPut:
		c.Value = d.bytes(MaxValueBytes)
	case OpCAS:
		switch d.byte1() {
		case 0:
		case 1:
			c.ExpectPresent = true
			c.Expect = d.bytes(MaxValueBytes)
		default:
			d.fail("expect flag")
		}
		c.Value = d.bytes(MaxValueBytes)
	default:
		d.fail("operation")
	}
	if d.err == nil && d.off != len(b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return Command{}, d.err
	}
	return c, c.Check()
}

// Status is the outcome of a command at its shard.
type Status uint8

// Statuses.
const (
	StatusOK        Status = iota // done; Get: the value is in Value
	StatusNotFound                // Get, Delete: no such key
	StatusCASFailed               // CompareAndSet: the current value (Present, Value) differs
	StatusError                   // the command was refused: Value is the reason
)

// Result is a command's result: the bytes its shard's state machine
// returns to the client.
//
// Encoding: status byte | present byte | uvarint length | value.
type Result struct {
	Status  Status
	Present bool // StatusCASFailed: whether the key exists
	Value   []byte
}

func (r *Result) encode() []byte {
	buf := []byte{byte(r.Status), 0}
	if r.Present {
		buf[1] = 1
	}
	return appendBytes(buf, r.Value)
}

// DecodeResult decodes a shard's result.
func DecodeResult(b []byte) (Result, error) {
	d := decoder{b: b}
	r := Result{Status: Status(d.byte1())}
	switch d.byte1() {
	case 0:
	case 1:
		r.Present = true
	default:
		d.fail("present flag")
	}
	r.Value = d.bytes(MaxValueBytes + MaxKeyBytes)
	if d.err == nil && (d.off != len(b) || r.Status > StatusError) {
		d.fail("status or trailing bytes")
	}
	if d.err != nil {
		return Result{}, fmt.Errorf("kv: bad result from the shard: %w", d.err)
	}
	return r, nil
}

func appendBytes(buf, b []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	return append(buf, b...)
}

type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = errorf(ErrBadCommand, "malformed %s at byte %d", what, d.off)
	}
}

func (d *decoder) byte1() byte {
	if d.err != nil || d.off >= len(d.b) {
		d.fail("encoding (short)")
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *decoder) bytes(limit int) []byte {
	if d.err != nil {
		return nil
	}
	n, k := binary.Uvarint(d.b[d.off:])
	if k <= 0 {
		d.fail("length")
		return nil
	}
	d.off += k
	if n > uint64(limit) {
		d.err = errorf(ErrValueTooLarge, "a field of %d bytes, the limit is %d", n, limit)
		if limit == MaxKeyBytes {
			d.err = errorf(ErrKeyTooLarge, "%d bytes, the limit is %d", n, limit)
		}
		return nil
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail("field (past the end)")
		return nil
	}
	out := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return out
}

// errorf wraps a sentinel error with detail.
func errorf(err error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", err, fmt.Sprintf(format, args...))
}
