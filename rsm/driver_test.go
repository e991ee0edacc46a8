package rsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// counter is a test state machine: it adds each payload's first byte to a
// running sum and answers the sum; payload "fail" makes Apply fail, "big"
// returns a result of 100 bytes.
type counter struct {
	sum     uint64
	applied []wire.MsgID
}

func (c *counter) Apply(batch []Entry) ([][]byte, error) {
	out := make([][]byte, len(batch))
	for i, e := range batch {
		switch string(e.Payload) {
		case "fail":
			return nil, errors.New("boom")
		case "big":
			out[i] = make([]byte, 100)
			continue
		}
		if len(e.Payload) > 0 {
			c.sum += uint64(e.Payload[0])
		}
		c.applied = append(c.applied, e.ID)
		out[i] = binary.AppendUvarint(nil, c.sum)
	}
	return out, nil
}

func (c *counter) Snapshot(w io.Writer) error {
	_, err := w.Write(binary.AppendUvarint(nil, c.sum))
	return err
}

func (c *counter) Restore(r io.Reader) error {
	var b [binary.MaxVarintLen64]byte
	n, err := io.ReadFull(r, b[:1])
	for err == nil && b[n-1]&0x80 != 0 {
		var k int
		k, err = io.ReadFull(r, b[n:n+1])
		n += k
	}
	if err != nil {
		return err
	}
	c.sum, _ = binary.Uvarint(b[:n])
	c.applied = nil
	return nil
}

func id(seq uint64) wire.MsgID { return wire.MsgID{Client: 100, Session: wire.Session(7), Seq: seq} }

func entry(seq, t uint64, p string) Entry {
	return Entry{ID: id(seq), Dest: []wire.GroupID{0}, Payload: []byte(p), GTS: wire.Timestamp{T: t}}
}

func sumOf(t *testing.T, d *Driver, id wire.MsgID) uint64 {
	t.Helper()
	r, ok := d.Result(id)
	if !ok {
		t.Fatal("no result")
	}
	v, _ := binary.Uvarint(r)
	return v
}

func newDriver(t *testing.T, cfg Config) (*Driver, *counter) {
	t.Helper()
	c := &counter{}
	d, err := NewDriver(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d, c
}

// TestApplyExactlyOnce: entries at or below the applied gts (a restart's
// replay) are skipped, within a batch and across batches.
func TestApplyExactlyOnce(t *testing.T) {
	d, c := newDriver(t, Config{})
	if err := d.Apply([]Entry{entry(1, 1, "\x01"), entry(2, 3, "\x02")}); err != nil {
		t.Fatal(err)
	}
	// Replay of both plus a new one, and an out-of-order duplicate.
	if err := d.Apply([]Entry{entry(1, 1, "\x01"), entry(2, 3, "\x02"), entry(3, 5, "\x04"), entry(2, 3, "\x02")}); err != nil {
		t.Fatal(err)
	}
	if c.sum != 7 || len(c.applied) != 3 {
		t.Fatalf("sum %d applied %v, want 7 and 3 entries", c.sum, c.applied)
	}
	st := d.Stats()
	if st.Applied != 3 || st.Skipped != 3 || st.Batches != 2 || d.Applied() != (wire.Timestamp{T: 5}) {
		t.Fatalf("stats %+v applied %s", st, d.Applied())
	}
	if got := sumOf(t, d, id(2)); got != 3 {
		t.Fatalf("result of 2: %d, want 3", got)
	}
}

// TestFloorForgetsResults: a client's floor forgets its answered results.
func TestFloorForgetsResults(t *testing.T) {
	d, _ := newDriver(t, Config{})
	for s := uint64(1); s <= 4; s++ {
		if err := d.Apply([]Entry{entry(s, s, "\x01")}); err != nil {
			t.Fatal(err)
		}
	}
	e := entry(5, 5, "\x01")
	e.Floor = 3
	if err := d.Apply([]Entry{e}); err != nil {
		t.Fatal(err)
	}
	for s := uint64(1); s <= 5; s++ {
		_, ok := d.Result(id(s))
		if want := s > 3; ok != want {
			t.Errorf("result of %d held: %v, want %v", s, ok, want)
		}
	}
	if st := d.Stats(); st.Replies != 2 || st.Evicted != 0 || st.ReplyBytes != 2*(1+replyOverhead) {
		t.Fatalf("stats %+v", st)
	}
}

// TestReplyBounds drives both bounds: the oldest results are evicted.
func TestReplyBounds(t *testing.T) {
	d, _ := newDriver(t, Config{MaxReplies: 3})
	for s := uint64(1); s <= 10; s++ {
		if err := d.Apply([]Entry{entry(s, s, "\x01")}); err != nil {
			t.Fatal(err)
		}
	}
	if st := d.Stats(); st.Replies != 3 || st.Evicted != 7 {
		t.Fatalf("count bound: %+v", st)
	}
	if _, ok := d.Result(id(7)); ok {
		t.Fatal("result 7 held past the bound")
	}
	if _, ok := d.Result(id(8)); !ok {
		t.Fatal("result 8 not held")
	}
	d, _ = newDriver(t, Config{MaxReplyBytes: 4 * (replyOverhead + 1)})
	for s := uint64(1); s <= 10; s++ {
		if err := d.Apply([]Entry{entry(s, s, "\x01")}); err != nil {
			t.Fatal(err)
		}
	}
	if st := d.Stats(); st.Replies != 4 || st.ReplyBytes > 4*(replyOverhead+1) || st.Evicted != 6 {
		t.Fatalf("byte bound: %+v", st)
	}
	// Many floors and few evictions must not grow the apply-order queue.
	d, _ = newDriver(t, Config{})
	for s := uint64(1); s <= 10000; s++ {
		e := entry(s, s, "\x01")
		e.Floor = s - 1
		if err := d.Apply([]Entry{e}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(d.replies.order) - d.replies.head; d.replies.len() != 1 || n > 2+64 {
		t.Fatalf("held %d, queue %d", d.replies.len(), n)
	}
}

// TestResultTooLarge: a result over MaxResult stops the driver (sticky),
// and nothing of the batch is recorded as applied.
func TestResultTooLarge(t *testing.T) {
	d, _ := newDriver(t, Config{MaxResult: 99})
	err := d.Apply([]Entry{entry(1, 1, "big")})
	if !errors.Is(err, ErrResultTooLarge) || !strings.Contains(err.Error(), "100 bytes") {
		t.Fatalf("err %v", err)
	}
	if err := d.Apply([]Entry{entry(2, 2, "\x01")}); !errors.Is(err, ErrResultTooLarge) {
		t.Fatalf("not sticky: %v", err)
	}
	if d.Applied() != (wire.Timestamp{}) || d.Stats().Applied != 0 {
		t.Fatal("a failed batch counted as applied")
	}
	if _, err := NewDriver(&counter{}, Config{MaxResult: wire.MaxPayload + 1}); err == nil {
		t.Fatal("MaxResult over wire.MaxPayload accepted")
	}
	d, _ = newDriver(t, Config{})
	if err := d.Apply([]Entry{entry(1, 1, "fail")}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("state machine error: %v", err)
	}
}

// TestSnapshotRestore: a restored driver continues where the snapshot
// was taken: same state, applied gts, count and results; replay above it
// applies only the new entries.
func TestSnapshotRestore(t *testing.T) {
	d, c := newDriver(t, Config{})
	var all []Entry
	for s := uint64(1); s <= 50; s++ {
		all = append(all, entry(s, 2*s, string([]byte{byte(s)})))
	}
	if err := d.Apply(all[:30]); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := d.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(all[30:]); err != nil {
		t.Fatal(err)
	}
	d2, c2 := newDriver(t, Config{})
	if err := d2.Restore(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if d2.Applied() != all[29].GTS || d2.Stats().Applied != 30 || d2.Stats().Replies != 30 {
		t.Fatalf("restored applied %s stats %+v", d2.Applied(), d2.Stats())
	}
	if err := d2.Apply(all); err != nil { // the log's replay: everything it holds
		t.Fatal(err)
	}
	if c2.sum != c.sum || len(c2.applied) != 20 || d2.Stats().Applied != 50 || d2.Stats().Skipped != 30 {
		t.Fatalf("after replay: sum %d want %d, applied %d, stats %+v", c2.sum, c.sum, len(c2.applied), d2.Stats())
	}
	for s := uint64(1); s <= 50; s++ {
		if a, b := sumOf(t, d, id(s)), sumOf(t, d2, id(s)); a != b {
			t.Fatalf("result %d: %d vs %d", s, a, b)
		}
	}
}

// TestSnapshotDamage: every truncation and a flipped byte are refused.
func TestSnapshotDamage(t *testing.T) {
	d, _ := newDriver(t, Config{})
	for s := uint64(1); s <= 5; s++ {
		if err := d.Apply([]Entry{entry(s, s, "\x01")}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := d.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	for n := 0; n < len(b); n++ {
		d2, _ := newDriver(t, Config{})
		if err := d2.Restore(bytes.NewReader(b[:n])); err == nil {
			t.Fatalf("restored from %d of %d bytes", n, len(b))
		}
	}
	for i := range b {
		bad := bytes.Clone(b)
		bad[i] ^= 0x40
		d2, _ := newDriver(t, Config{})
		if err := d2.Restore(bytes.NewReader(bad)); err == nil {
			t.Fatalf("restored with byte %d flipped", i)
		}
	}
	d2, _ := newDriver(t, Config{})
	if err := d2.Restore(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotStreams: a large state goes through in chunks, never more
// than one chunk buffered by the framing.
func TestSnapshotStreams(t *testing.T) {
	big := &blob{data: bytes.Repeat([]byte("x"), 5*chunkSize+17)}
	d, err := NewDriver(big, Config{})
	if err != nil {
		t.Fatal(err)
	}
	var w countWriter
	if err := d.Snapshot(&w); err != nil {
		t.Fatal(err)
	}
	if w.maxWrite > chunkSize {
		t.Fatalf("a write of %d bytes", w.maxWrite)
	}
	back := &blob{}
	d2, _ := NewDriver(back, Config{})
	if err := d2.Restore(bytes.NewReader(w.buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.data, big.data) {
		t.Fatal("state differs")
	}
}

type blob struct{ data []byte }

func (b *blob) Apply(batch []Entry) ([][]byte, error) { return make([][]byte, len(batch)), nil }
func (b *blob) Snapshot(w io.Writer) error {
	for p := b.data; len(p) > 0; {
		k := min(len(p), 1000)
		if _, err := w.Write(p[:k]); err != nil {
			return err
		}
		p = p[k:]
	}
	return nil
}
func (b *blob) Restore(r io.Reader) error {
	var err error
	b.data, err = io.ReadAll(r)
	return err
}

type countWriter struct {
	buf      bytes.Buffer
	maxWrite int
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.maxWrite = max(c.maxWrite, len(p))
	return c.buf.Write(p)
}
