package rsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"

	"github.com/weft-dev/weft/wire"
)

// A snapshot, as Driver.Snapshot writes it, is a sequence of chunks, each
// "u32 length | data | u32 CRC32C(data)", ended by a zero-length chunk;
// truncation and corruption are detected without holding the snapshot in
// memory. The chunks' data is:
//
//	"WEFTRSM5" | applied gts (T, G) | applied count | results held:
//	  count, then each: client, session, seq, digest, length, bytes |
//	entries held for votes (exchange.go): count, then each: client,
//	  session, seq, digest, gts (T, G), floor, destination count and
//	  groups, payload length and bytes |
//	votes kept for pulls (exchange.go's decided, oldest first): count,
//	  then each: client, session, seq, digest, gts (T, G), destination
//	  count and groups, then per destination a vote length + 1 (0: that
//	  group does not vote) and bytes |
//	the state machine's own stream
//
// (numbers as uvarints; a session is two, wire.SessionID's Hi and Lo).
// The applied gts travels in front of the
// application's stream so the two can never disagree: a restored replica
// replays exactly the deliveries above it (docs/rsm.md).
//
// Earlier formats are refused: 2: reply ids carry their digest
// (wire.MsgID.Digest); 3: entries held for votes; 4: votes kept for pulls;
// 5: 128-bit sessions. Wire version 5 (the same change) makes a data
// directory of an earlier release unreadable anyway, so no snapshot of an
// earlier format can reach a driver of this one.
const snapMagic = "WEFTRSM5"

// chunkSize is the data per chunk; a reader never buffers more than one.
const chunkSize = 64 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot writes the driver's state (the applied gts and the results held)
// and then the state machine's, at the current delivery boundary, to w.
func (d *Driver) Snapshot(w io.Writer) error {
	if d.err != nil {
		return d.err
	}
	cw := &chunkWriter{w: w}
	bw := bufio.NewWriterSize(cw, chunkSize)
	var buf []byte
	buf = append(buf, snapMagic...)
	buf = binary.AppendUvarint(buf, d.applied.T)
	buf = binary.AppendUvarint(buf, uint64(d.applied.G))
	buf = binary.AppendUvarint(buf, d.stats.Applied)
	buf = binary.AppendUvarint(buf, uint64(d.replies.len()))
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	err := d.replies.each(func(id wire.MsgID, r []byte) error {
		buf = appendID(buf[:0], id)
		buf = binary.AppendUvarint(buf, uint64(len(r)))
		buf = append(buf, r...)
		_, err := bw.Write(buf)
		return err
	})
	if err != nil {
		return err
	}
	// The held entries are deliveries the log may drop once this snapshot
	// is written (the node cuts its log at the protocol's last delivery),
	// so they travel in it.
	buf = binary.AppendUvarint(buf[:0], uint64(len(d.x.pending)))
	for i := range d.x.pending {
		e := &d.x.pending[i].Entry
		buf = appendID(buf, e.ID)
		buf = binary.AppendUvarint(buf, e.GTS.T)
		buf = binary.AppendUvarint(buf, uint64(e.GTS.G))
		buf = binary.AppendUvarint(buf, e.Floor)
		buf = binary.AppendUvarint(buf, uint64(len(e.Dest)))
		for _, g := range e.Dest {
			buf = binary.AppendUvarint(buf, uint64(g))
		}
		buf = binary.AppendUvarint(buf, uint64(len(e.Payload)))
		buf = append(buf, e.Payload...)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
	}
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	// The votes kept for pulls: a replica of another group that still
	// waits for one may ask this replica after it restarted from this
	// snapshot, or a member that installed it (docs/kv.md).
	if err := d.x.writeDecided(bw); err != nil {
		return err
	}
	if err := d.sm.Snapshot(bw); err != nil {
		return fmt.Errorf("rsm: the state machine's snapshot: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return cw.close()
}

// Restore replaces the driver's state and the state machine's by the
// snapshot r holds. On an error the state machine's state is undefined and
// the driver must not be used.
func (d *Driver) Restore(r io.Reader) error {
	cr := &chunkReader{r: r}
	br := bufio.NewReaderSize(cr, chunkSize)
	magic := make([]byte, len(snapMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return fmt.Errorf("%w: no snapshot header (%v)", ErrBadSnapshot, snapErr(cr, err))
	}
	if string(magic) != snapMagic {
		return fmt.Errorf("%w: header %q, want %q (a snapshot of another release)", ErrBadSnapshot, magic, snapMagic)
	}
	var hdr [4]uint64
	for i := range hdr {
		v, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("%w: header: %v", ErrBadSnapshot, snapErr(cr, err))
		}
		hdr[i] = v
	}
	if hdr[1] > wire.MaxGroups {
		return fmt.Errorf("%w: group %d out of range", ErrBadSnapshot, hdr[1])
	}
	// What the writer held is restored whole (the bounds apply again from
	// the next put), so that replicas keep holding the same results.
	var t replyTable
	t.init(math.MaxInt, math.MaxInt64)
	for range hdr[3] {
		id, err := readID(br)
		if err != nil {
			return fmt.Errorf("%w: results: %v", ErrBadSnapshot, snapErr(cr, err))
		}
		size, err := binary.ReadUvarint(br)
		if err != nil {
			return fmt.Errorf("%w: results: %v", ErrBadSnapshot, snapErr(cr, err))
		}
		if size > uint64(d.cfg.MaxResult) {
			return fmt.Errorf("%w: result of %s with %d bytes", ErrBadSnapshot, id, size)
		}
		res := make([]byte, size)
		if _, err := io.ReadFull(br, res); err != nil {
			return fmt.Errorf("%w: results: %v", ErrBadSnapshot, snapErr(cr, err))
		}
		t.put(id, 0, res)
	}
	held, err := readHeld(br, cr)
	if err != nil {
		return err
	}
	decided, err := readDecided(br, cr, cap(d.x.ring)+d.x.maxKept)
	if err != nil {
		return err
	}
	if err := d.sm.Restore(br); err != nil {
		return fmt.Errorf("rsm: the state machine's restore: %w", err)
	}
	// The state machine must have read its whole stream: anything left is
	// a snapshot of another format, or a state machine that stopped early.
	if n, err := io.Copy(io.Discard, br); err != nil || n > 0 {
		return fmt.Errorf("%w: %d bytes after the state machine's state (%v)", ErrBadSnapshot, n, snapErr(cr, err))
	}
	if !cr.done {
		return fmt.Errorf("%w: truncated", ErrBadSnapshot)
	}
	t.max, t.maxBytes = d.cfg.MaxReplies, d.cfg.MaxReplyBytes
	d.replies = t
	d.applied = wire.Timestamp{T: hdr[0], G: wire.GroupID(hdr[1])}
	d.received = d.applied
	d.stats = Stats{Applied: hdr[2]}
	d.err = nil
	d.x.init(d.x.ex, d.x.group, cap(d.x.ring), d.x.maxKept)
	for i := range decided {
		d.x.remember(&decided[i])
	}
	if len(held) == 0 {
		return nil
	}
	for i := range held {
		p := &held[i]
		if p.GTS.LessEq(d.received) {
			return fmt.Errorf("%w: held entry %s at gts %s not above %s", ErrBadSnapshot, p.ID, p.GTS, d.received)
		}
		d.received = p.GTS
		p.voters = d.x.votersOf(&p.Entry)
	}
	d.hold(held)
	return d.drain() // casts this group's vote on the first again
}

// appendID appends a message id: client, session (Hi, Lo), seq, digest.
func appendID(buf []byte, id wire.MsgID) []byte {
	buf = binary.AppendUvarint(buf, uint64(id.Client))
	buf = binary.AppendUvarint(buf, id.Session.Hi)
	buf = binary.AppendUvarint(buf, id.Session.Lo)
	buf = binary.AppendUvarint(buf, id.Seq)
	return append(buf, id.Digest[:]...)
}

// readID reads what appendID appends.
func readID(br *bufio.Reader) (wire.MsgID, error) {
	var f [4]uint64 // client, session Hi and Lo, seq
	for i := range f {
		v, err := binary.ReadUvarint(br)
		if err != nil {
			return wire.MsgID{}, err
		}
		f[i] = v
	}
	if f[0] > math.MaxUint32 {
		return wire.MsgID{}, fmt.Errorf("client %d out of range", f[0])
	}
	id := wire.MsgID{Client: wire.ProcID(f[0]), Session: wire.SessionID{Hi: f[1], Lo: f[2]}, Seq: f[3]}
	if _, err := io.ReadFull(br, id.Digest[:]); err != nil {
		return wire.MsgID{}, err
	}
	return id, nil
}

// readHeld reads the entries held for votes. Every allocation is bounded:
// a payload by wire.MaxPayload, destinations by wire.MaxGroups.
func readHeld(br *bufio.Reader, cr *chunkReader) ([]pendingEntry, error) {
	bad := func(what string, err error) error {
		return fmt.Errorf("%w: held entries: %s (%v)", ErrBadSnapshot, what, snapErr(cr, err))
	}
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, bad("count", err)
	}
	var held []pendingEntry
	for range n {
		var e Entry
		if e.ID, err = readID(br); err != nil {
			return nil, bad("id", err)
		}
		var g [5]uint64 // gts T, G, floor, destination count, then each group
		for i := range g[:4] {
			if g[i], err = binary.ReadUvarint(br); err != nil {
				return nil, bad("header", err)
			}
		}
		if g[1] > wire.MaxGroups || g[3] > wire.MaxGroups {
			return nil, bad("field out of range", nil)
		}
		e.GTS, e.Floor = wire.Timestamp{T: g[0], G: wire.GroupID(g[1])}, g[2]
		e.Dest = make([]wire.GroupID, g[3])
		for i := range e.Dest {
			v, err := binary.ReadUvarint(br)
			if err != nil || v > wire.MaxGroups {
				return nil, bad("destination", err)
			}
			e.Dest[i] = wire.GroupID(v)
		}
		size, err := binary.ReadUvarint(br)
		if err != nil || size > wire.MaxPayload {
			return nil, bad("payload length", err)
		}
		e.Payload = make([]byte, size)
		if _, err := io.ReadFull(br, e.Payload); err != nil {
			return nil, bad("payload", err)
		}
		held = append(held, pendingEntry{Entry: e})
	}
	return held, nil
}

// writeDecided writes the votes kept for pulls, oldest first: those kept
// past the ring for a group that has not applied their message, then the
// ring's.
func (x *exchange) writeDecided(w io.Writer) error {
	n := len(x.ring)
	ids := slices.Clone(x.kept)
	for k := range n {
		ids = append(ids, x.ring[(x.next+k)%n]) // the oldest is next in a full ring, 0 otherwise
	}
	buf := binary.AppendUvarint(nil, uint64(len(ids)))
	for _, id := range ids {
		dv := x.decided[id]
		buf = appendID(buf, id)
		buf = binary.AppendUvarint(buf, dv.gts.T)
		buf = binary.AppendUvarint(buf, uint64(dv.gts.G))
		buf = binary.AppendUvarint(buf, uint64(len(dv.dest)))
		for _, g := range dv.dest {
			buf = binary.AppendUvarint(buf, uint64(g))
		}
		for i := range dv.dest {
			var v []byte
			if i < len(dv.votes) {
				v = dv.votes[i]
			}
			if v == nil {
				buf = binary.AppendUvarint(buf, 0)
				continue
			}
			buf = binary.AppendUvarint(buf, uint64(len(v))+1)
			buf = append(buf, v...)
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		buf = buf[:0]
	}
	_, err := w.Write(buf)
	return err
}

// readDecided reads the votes kept for pulls, keeping the last max of
// them (this driver's VoteCache and MaxVotesKept): memory stays bounded
// whatever the count says (a snapshot may come from another member, by
// state transfer).
func readDecided(br *bufio.Reader, cr *chunkReader, max int) ([]pendingEntry, error) {
	bad := func(what string, err error) error {
		return fmt.Errorf("%w: votes kept: %s (%v)", ErrBadSnapshot, what, snapErr(cr, err))
	}
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, bad("count", err)
	}
	out := make([]pendingEntry, 0, min(n, uint64(max)))
	oldest := 0 // in out, once full: a ring of the last max
	for range n {
		id, err := readID(br)
		if err != nil {
			return nil, bad("id", err)
		}
		var f [3]uint64 // gts T, G and the destination count
		for i := range f {
			if f[i], err = binary.ReadUvarint(br); err != nil {
				return nil, bad("header", err)
			}
		}
		if f[1] > wire.MaxGroups || f[2] > wire.MaxGroups {
			return nil, bad("field out of range", nil)
		}
		p := pendingEntry{Entry: Entry{ID: id, GTS: wire.Timestamp{T: f[0], G: wire.GroupID(f[1])}}}
		p.Dest = make([]wire.GroupID, f[2])
		for i := range p.Dest {
			v, err := binary.ReadUvarint(br)
			if err != nil || v > wire.MaxGroups {
				return nil, bad("destination", err)
			}
			p.Dest[i] = wire.GroupID(v)
		}
		p.Votes = make([][]byte, len(p.Dest))
		for i := range p.Votes {
			l, err := binary.ReadUvarint(br)
			if err != nil || l > MaxVote+1 {
				return nil, bad("vote length", err)
			}
			if l == 0 {
				continue
			}
			p.Votes[i] = make([]byte, l-1)
			if _, err := io.ReadFull(br, p.Votes[i]); err != nil {
				return nil, bad("vote", err)
			}
		}
		switch {
		case max == 0:
		case len(out) < max:
			out = append(out, p)
		default:
			out[oldest] = p
			oldest = (oldest + 1) % max
		}
	}
	return append(out[oldest:], out[:oldest]...), nil // oldest first
}

// snapErr names the cause of a read failure: the chunk layer's (corrupt,
// truncated) if it failed, else err.
func snapErr(cr *chunkReader, err error) error {
	if cr.err != nil && !errors.Is(cr.err, io.EOF) {
		return cr.err
	}
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// chunkWriter frames what it is given into checksummed chunks.
type chunkWriter struct {
	w   io.Writer
	hdr [4]byte
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), chunkSize)
		if err := c.chunk(p[:k]); err != nil {
			return n, err
		}
		p, n = p[k:], n+k
	}
	return n, nil
}

func (c *chunkWriter) chunk(p []byte) error {
	binary.BigEndian.PutUint32(c.hdr[:], uint32(len(p)))
	if _, err := c.w.Write(c.hdr[:]); err != nil {
		return err
	}
	if _, err := c.w.Write(p); err != nil {
		return err
	}
	binary.BigEndian.PutUint32(c.hdr[:], crc32.Checksum(p, castagnoli))
	_, err := c.w.Write(c.hdr[:])
	return err
}

func (c *chunkWriter) close() error { return c.chunk(nil) }

// chunkReader reads what chunkWriter wrote, checking every chunk; it
// returns io.EOF after the end chunk, and an error naming the problem if
// the stream ends before it or a chunk is corrupt.
type chunkReader struct {
	r    io.Reader
	buf  []byte
	off  int
	done bool
	err  error
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for c.off == len(c.buf) {
		if c.err != nil {
			return 0, c.err
		}
		c.err = c.next()
	}
	n := copy(p, c.buf[c.off:])
	c.off += n
	return n, nil
}

func (c *chunkReader) next() error {
	var hdr [4]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return fmt.Errorf("%w: truncated (%v)", ErrBadSnapshot, err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > chunkSize {
		return fmt.Errorf("%w: chunk of %d bytes", ErrBadSnapshot, n)
	}
	if cap(c.buf) < int(n) {
		c.buf = make([]byte, n, chunkSize)
	}
	c.buf, c.off = c.buf[:n], 0
	if _, err := io.ReadFull(c.r, c.buf); err != nil {
		return fmt.Errorf("%w: truncated (%v)", ErrBadSnapshot, err)
	}
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return fmt.Errorf("%w: truncated (%v)", ErrBadSnapshot, err)
	}
	if crc32.Checksum(c.buf, castagnoli) != binary.BigEndian.Uint32(hdr[:]) {
		c.buf = c.buf[:0]
		return fmt.Errorf("%w: chunk checksum mismatch", ErrBadSnapshot)
	}
	if n == 0 {
		c.done = true
		return io.EOF
	}
	return nil
}
