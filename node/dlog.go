package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

// Deliveries log defaults (Config.DeliveryLogMaxBytes, DeliveryLogFiles).
const (
	DefaultDeliveryLogMaxBytes = 64 << 20
	DefaultDeliveryLogFiles    = 4
)

// deliveryLog is the node's record of its deliveries, for debugging, test
// harnesses and the demo: a history file in the internal/check JSON-lines
// format (a config line, then one "deliver" event per delivery, in
// delivery order, with T in Unix microseconds). It is off unless
// Config.DeliveryLog names a file.
//
// A delivery is written only after its record is durable in the WAL, and
// each Ready's deliveries with one write, so the file survives SIGKILL.
//
// Rotation. Before a write would take the file past maxBytes, the file is
// synced and renamed PATH.1 (PATH.1 becomes PATH.2, and so on), the oldest
// beyond PATH.(files-1) is deleted, and a new PATH starts with the config
// line: at most files x maxBytes on disk (plus one Ready's deliveries).
// ReadDeliveryLog reads the files back in order.
//
// The cursor (a small file in the data directory, see logCursor) says
// where the log ends: the gts of its last delivery and that line's end
// offset ("cur", rewritten after every write), and the same for the last
// point at which the file was fsynced ("synced", rewritten with an fsync
// at every sync point: before the WAL is compacted, at a rotation, at
// Close). On start the node hands over the deliveries durable in the WAL
// above the cursor's gts (a crash between the WAL sync and the write left
// them out) and nothing else: the file is never parsed whole, and a
// deleted log does not bring back old deliveries as duplicates. Opening:
//
//   - the file is as long as cur says and the lines since synced parse
//     (normal start, SIGKILL): cut anything past cur (lines written after
//     the cursor's last update, which the WAL hands over again);
//   - it is shorter than cur or those lines are torn (a power loss): cut
//     back to synced; every delivery after it is still in the WAL, because
//     compaction syncs the log first;
//   - it is missing or shorter than synced (deleted, or replaced by a
//     crash inside a rotation): start a new file after cur's gts;
//   - there is no cursor (the log was just enabled, or the cursor was
//     deleted): an existing file is rotated away untouched, a new one
//     starts, and only new deliveries are logged.
type deliveryLog struct {
	cfg    deliveryLogConfig
	f      vfs.File // the current file
	size   int64    // its length: where the next write goes
	header []byte   // its config line
	cur    *logCursor
	buf    bytes.Buffer
	w      *check.Writer
	// pos is the end of the last delivery written to the file (or
	// buffered, between add and flush).
	pos logPos
	// last is the gts of the last delivery logged: deliveries the WAL
	// holds above it are handed over on start.
	last wire.Timestamp
	// opened says how open found the file ("cursor", "torn", "replaced",
	// "new"), for the node's log and the tests.
	opened string
	n      uint64 // deliveries written by this incarnation
}

type deliveryLogConfig struct {
	fs         vfs.FS
	path       string // the current file; rotated ones are path.1, path.2, ...
	cursorPath string
	maxBytes   int64
	files      int
	hist       check.Config
	proc       int
	group      int
	// walLast is the gts of the last delivery durable in the WAL: where a
	// log without a cursor starts.
	walLast wire.Timestamp
	log     *slog.Logger
}

// logPos is a point in the current file: the end offset of the line of
// the delivery with this gts, written at wall-clock T (Unix µs; a new line
// is never stamped earlier).
type logPos struct {
	GTS wire.Timestamp
	Off int64
	T   int64
}

func openDeliveryLog(cfg deliveryLogConfig) (*deliveryLog, error) {
	l := &deliveryLog{cfg: cfg}
	var hb bytes.Buffer
	if err := check.NewWriter(&hb, cfg.hist).Flush(); err != nil {
		return nil, err
	}
	l.header = hb.Bytes()
	l.w = check.NewWriter(&l.buf, cfg.hist)
	l.w.Flush()
	l.buf.Reset()
	if err := l.open(); err != nil {
		l.closeFiles()
		return nil, fmt.Errorf("node: deliveries log %s: %w", cfg.path, err)
	}
	return l, nil
}

func (l *deliveryLog) open() error {
	fsys, path := l.cfg.fs, l.cfg.path
	for _, dir := range []string{filepath.Dir(path), filepath.Dir(l.cfg.cursorPath)} {
		// The directory's own name must be durable too (it may be new).
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := vfs.SyncDir(fsys, filepath.Dir(dir)); err != nil {
			return err
		}
	}
	cur, found, err := openCursor(fsys, l.cfg.cursorPath)
	if err != nil {
		return err
	}
	l.cur = cur
	fi, err := fsys.Stat(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var keep logPos
	switch {
	case !found:
		// No cursor: whatever file is there is not known to be ours up to
		// any point. Keep it, rotated away, and log from the WAL's end.
		if exists && fi.Size() > 0 {
			if err := l.shift(); err != nil {
				return err
			}
			l.cfg.log.Warn("deliveries log: no cursor; the existing file is kept as "+path+".1 and the log restarts",
				"cursor", l.cfg.cursorPath)
		}
		keep, l.opened = logPos{GTS: l.cfg.walLast}, "new"
	case !exists || fi.Size() < cur.rec.synced.Off:
		if exists && fi.Size() > int64(len(l.header)) {
			// Not the file the cursor describes, and not empty: keep it.
			if err := l.shift(); err != nil {
				return err
			}
		}
		keep, l.opened = logPos{GTS: cur.rec.cur.GTS, T: cur.rec.cur.T}, "replaced"
	default:
		if l.f, err = fsys.OpenReadWrite(path); err != nil {
			return err
		}
		if err := l.checkHeader(); err != nil {
			return err
		}
		keep, l.opened = cur.rec.cur, "cursor"
		if !l.linesValid(fi.Size(), cur.rec.synced, cur.rec.cur) {
			keep, l.opened = cur.rec.synced, "torn"
		}
	}
	if l.f == nil || keep.Off == 0 {
		if l.f != nil {
			l.f.Close()
		}
		if l.f, err = l.create(); err != nil {
			return err
		}
		keep.Off = int64(len(l.header))
	}
	if err := l.f.Truncate(keep.Off); err != nil {
		return err
	}
	if err := l.f.Sync(); err != nil {
		return err
	}
	l.size, l.pos, l.last = keep.Off, keep, keep.GTS
	return l.cur.store(l.pos, true)
}

// create starts a new current file with the config line.
func (l *deliveryLog) create() (vfs.File, error) {
	f, err := l.cfg.fs.Create(l.cfg.path)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteAt(l.header, 0); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := vfs.SyncDir(l.cfg.fs, filepath.Dir(l.cfg.path)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkHeader refuses a file written for another protocol or topology.
func (l *deliveryLog) checkHeader() error {
	b := make([]byte, len(l.header))
	if _, err := l.f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if bytes.Equal(b, l.header) {
		return nil
	}
	first := b
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		first = b[:i+1]
	}
	h, err := check.ReadJSONL(bytes.NewReader(first))
	if err != nil {
		return fmt.Errorf("its first line is not a history config line: %w", err)
	}
	want := l.cfg.hist
	return fmt.Errorf("it was written by a %s node of %d groups x %d replicas, not %s with %d x %d",
		h.Config.Protocol, h.Config.Groups, h.Config.Replicas, want.Protocol, want.Groups, want.Replicas)
}

// linesValid reports whether the file holds, between synced and cur,
// complete delivery lines of this process in increasing gts order ending
// with cur's: only the lines written since the last sync are read.
func (l *deliveryLog) linesValid(size int64, synced, cur logPos) bool {
	if cur.Off < synced.Off || size < cur.Off {
		return false
	}
	if cur.Off == synced.Off {
		return cur.GTS == synced.GTS
	}
	b := make([]byte, cur.Off-synced.Off)
	if _, err := l.f.ReadAt(b, synced.Off); err != nil || b[len(b)-1] != '\n' {
		return false
	}
	h, err := check.ReadJSONL(io.MultiReader(bytes.NewReader(l.header), bytes.NewReader(b)))
	if err != nil || len(h.Events) == 0 {
		return false
	}
	prev := synced.GTS
	for _, ev := range h.Events {
		gts := wire.Timestamp{T: ev.GTS.T, G: wire.GroupID(ev.GTS.G)}
		if (ev.Ev != check.EvDeliver && ev.Ev != check.EvInstall) || ev.Proc != l.cfg.proc || !prev.Less(gts) {
			return false
		}
		prev = gts
	}
	return prev == cur.GTS
}

// add buffers one delivery; flush writes the buffered ones. A delivery at
// or below the log's last one is not written again: a member that lost
// its data directory (the log lives elsewhere) delivers or installs the
// group's prefix again after it rejoined.
func (l *deliveryLog) add(m *wire.AppMsg, gts wire.Timestamp, now time.Time) {
	if !l.last.Less(gts) {
		return
	}
	l.pos.T = max(now.UnixMicro(), l.pos.T) // never backwards within the log
	l.last = gts
	l.n++
	l.w.Write(check.Event{Ev: check.EvDeliver, Proc: l.cfg.proc, Group: l.cfg.group, ID: m.ID.Full(),
		GTS: check.GTS{T: gts.T, G: int(gts.G)}, T: l.pos.T})
}

// install buffers a state transfer (amcast.Delivery.Install): the node's
// delivered prefix jumped to gts (check's "install" event).
func (l *deliveryLog) install(gts wire.Timestamp, now time.Time) {
	if !l.last.Less(gts) {
		return
	}
	l.pos.T = max(now.UnixMicro(), l.pos.T)
	l.last = gts
	l.n++
	l.w.Write(check.Event{Ev: check.EvInstall, Proc: l.cfg.proc, Group: l.cfg.group, GTS: check.GTS{T: gts.T, G: int(gts.G)}, T: l.pos.T})
}

// handOver buffers the deliveries (sorted by gts) and state transfers
// (installs: their points) durable in the WAL that the log lacks (a crash
// between the sync and the write), in gts order (the order they happened
// in: a delivery below an install's point came before it), calls each for
// every delivery it buffers, and returns how many. Nothing at or below the
// log's last line is written again.
func (l *deliveryLog) handOver(durable []*wire.RecDelivered, installs []wire.Timestamp, now time.Time, each func(*wire.RecDelivered)) uint64 {
	installs = slices.SortedFunc(slices.Values(installs), wire.Timestamp.Compare)
	var n uint64
	for _, d := range durable {
		for len(installs) > 0 && !d.GTS.Less(installs[0]) {
			l.install(installs[0], now)
			installs = installs[1:]
		}
		if !l.last.Less(d.GTS) {
			continue
		}
		l.add(&d.M, d.GTS, now)
		n++
		each(d)
	}
	for _, p := range installs {
		l.install(p, now)
	}
	return n
}

// flush writes the buffered deliveries with one write, rotating first if
// the file would outgrow maxBytes, then moves the cursor past them.
func (l *deliveryLog) flush() error {
	if err := l.w.Flush(); err != nil {
		return err
	}
	if l.buf.Len() == 0 {
		return nil
	}
	if l.size > int64(len(l.header)) && l.size+int64(l.buf.Len()) > l.cfg.maxBytes {
		if err := l.rotate(); err != nil {
			return fmt.Errorf("node: deliveries log: rotating: %w", err)
		}
	}
	n, err := l.f.WriteAt(l.buf.Bytes(), l.size)
	l.size += int64(n)
	l.buf.Reset()
	if err != nil {
		return fmt.Errorf("node: deliveries log: %w", err)
	}
	l.pos.GTS, l.pos.Off = l.last, l.size
	if err := l.cur.store(l.pos, false); err != nil {
		return fmt.Errorf("node: deliveries log cursor: %w", err)
	}
	return nil
}

// sync writes the buffered deliveries, fsyncs the file and then records
// the point as synced in the cursor (fsynced too).
func (l *deliveryLog) sync() error {
	if err := l.flush(); err != nil {
		return err
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("node: deliveries log: %w", err)
	}
	if err := l.cur.store(l.pos, true); err != nil {
		return fmt.Errorf("node: deliveries log cursor: %w", err)
	}
	return nil
}

// rotate syncs the current file, shifts it to path.1 and starts a new one.
func (l *deliveryLog) rotate() error {
	if err := l.f.Sync(); err != nil {
		return err
	}
	// Synced before the rename: a crash inside the rotation finds the
	// current file missing or shorter than synced, and carries on from
	// the cursor's gts.
	if err := l.cur.store(l.pos, true); err != nil {
		return err
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return err
	}
	if err := l.shift(); err != nil {
		return err
	}
	if l.f, err = l.create(); err != nil {
		return err
	}
	l.size = int64(len(l.header))
	l.pos.Off = l.size
	return l.cur.store(l.pos, true)
}

// shift renames path to path.1, path.1 to path.2 and so on, and deletes
// the files beyond path.(files-1) (with files = 1: deletes path).
func (l *deliveryLog) shift() error {
	fsys, path := l.cfg.fs, l.cfg.path
	rotated, err := rotatedFiles(fsys, path)
	if err != nil {
		return err
	}
	for _, k := range rotated {
		if k >= l.cfg.files-1 {
			if err := fsys.Remove(rotatedName(path, k)); err != nil {
				return err
			}
		}
	}
	for k := l.cfg.files - 2; k >= 1; k-- {
		if slices.Contains(rotated, k) {
			if err := fsys.Rename(rotatedName(path, k), rotatedName(path, k+1)); err != nil {
				return err
			}
		}
	}
	if l.cfg.files > 1 {
		err = fsys.Rename(path, rotatedName(path, 1))
	} else {
		err = fsys.Remove(path)
	}
	if err != nil {
		return err
	}
	return vfs.SyncDir(fsys, filepath.Dir(path))
}

func rotatedName(path string, k int) string { return path + "." + strconv.Itoa(k) }

// rotatedFiles returns the indices k of the files path.k, in increasing
// order.
func rotatedFiles(fsys vfs.FS, path string) ([]int, error) {
	names, err := fsys.List(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	var ks []int
	prefix := filepath.Base(path) + "."
	for _, name := range names {
		if s, ok := strings.CutPrefix(name, prefix); ok {
			if k, err := strconv.Atoi(s); err == nil && k > 0 && strconv.Itoa(k) == s {
				ks = append(ks, k)
			}
		}
	}
	slices.Sort(ks)
	return ks, nil
}

func (l *deliveryLog) close() error {
	err := l.sync()
	if cerr := l.closeFiles(); err == nil {
		err = cerr
	}
	return err
}

func (l *deliveryLog) closeFiles() error {
	var err error
	if l.f != nil {
		err = l.f.Close()
		l.f = nil
	}
	if l.cur != nil {
		if cerr := l.cur.f.Close(); err == nil {
			err = cerr
		}
		l.cur = nil
	}
	return err
}

// ReadDeliveryLog reads a deliveries log (Config.DeliveryLog) with its
// rotated files, oldest first, as one history. A torn last line of a file
// (the process died inside a write) is left out.
func ReadDeliveryLog(path string) (*check.History, error) {
	return readDeliveryLog(vfs.OS(), path)
}

func readDeliveryLog(fsys vfs.FS, path string) (*check.History, error) {
	ks, err := rotatedFiles(fsys, path)
	if err != nil {
		return nil, err
	}
	names := []string{path}
	for _, k := range ks {
		names = append([]string{rotatedName(path, k)}, names...)
	}
	var h *check.History
	for _, name := range names {
		b, err := readAll(fsys, name)
		if errors.Is(err, fs.ErrNotExist) && name == path && h != nil {
			continue // a crash inside a rotation
		}
		if err != nil {
			return nil, err
		}
		b = b[:bytes.LastIndexByte(b, '\n')+1]
		ph, err := check.ReadJSONL(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if h == nil {
			h = ph
			continue
		}
		if ph.Config != h.Config {
			return nil, fmt.Errorf("%s: config %+v differs from the older files' %+v", name, ph.Config, h.Config)
		}
		h.Events = append(h.Events, ph.Events...)
	}
	return h, nil
}

func readAll(fsys vfs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// logCursor is the deliveries log's cursor file: two copies of one record
// in two sectors (at 0 and cursorSlot), each with a sequence number and a
// CRC32C. A store goes to the slot after the newest, so a torn store can
// damage only one copy and the other, no older than the last synced
// store, survives; a synced store writes both and fsyncs. Record: magic,
// seq, then cur and synced (gts time, gts group, offset, wall time).
type logCursor struct {
	f   vfs.File
	rec cursorRecord
}

type cursorRecord struct {
	seq         uint64
	cur, synced logPos
}

const (
	cursorMagic = "WDLC"
	cursorSlot  = 512
	cursorLen   = 4 + 8 + 2*(8+4+8+8) + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (r cursorRecord) encode() []byte {
	b := append(make([]byte, 0, cursorLen), cursorMagic...)
	b = binary.LittleEndian.AppendUint64(b, r.seq)
	for _, p := range []logPos{r.cur, r.synced} {
		b = binary.LittleEndian.AppendUint64(b, p.GTS.T)
		b = binary.LittleEndian.AppendUint32(b, uint32(p.GTS.G))
		b = binary.LittleEndian.AppendUint64(b, uint64(p.Off))
		b = binary.LittleEndian.AppendUint64(b, uint64(p.T))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCursor(b []byte) (cursorRecord, bool) {
	var r cursorRecord
	if len(b) < cursorLen || string(b[:4]) != cursorMagic ||
		crc32.Checksum(b[:cursorLen-4], castagnoli) != binary.LittleEndian.Uint32(b[cursorLen-4:]) {
		return r, false
	}
	r.seq = binary.LittleEndian.Uint64(b[4:])
	b = b[12:]
	for _, p := range []*logPos{&r.cur, &r.synced} {
		p.GTS.T = binary.LittleEndian.Uint64(b)
		p.GTS.G = wire.GroupID(binary.LittleEndian.Uint32(b[8:]))
		p.Off = int64(binary.LittleEndian.Uint64(b[12:]))
		p.T = int64(binary.LittleEndian.Uint64(b[20:]))
		b = b[28:]
	}
	return r, r.cur.Off >= 0 && r.synced.Off >= 0 && r.synced.Off <= r.cur.Off
}

// openCursor opens the cursor file, creating it if needed; found reports
// whether it held a valid record.
func openCursor(fsys vfs.FS, path string) (c *logCursor, found bool, err error) {
	c = &logCursor{}
	c.f, err = fsys.OpenReadWrite(path)
	if errors.Is(err, fs.ErrNotExist) {
		if c.f, err = fsys.Create(path); err == nil {
			err = vfs.SyncDir(fsys, filepath.Dir(path))
		}
	}
	if err != nil {
		if c.f != nil {
			c.f.Close()
		}
		return nil, false, err
	}
	b := make([]byte, cursorSlot+cursorLen)
	n, err := c.f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		c.f.Close()
		return nil, false, err
	}
	b = b[:n]
	for _, off := range []int{0, cursorSlot} {
		if off < len(b) {
			if r, ok := decodeCursor(b[off:]); ok && (!found || r.seq > c.rec.seq) {
				c.rec, found = r, true
			}
		}
	}
	return c, found, nil
}

// store records pos as the end of the log, in the slot after the newest
// (record seq goes to slot seq%2); with synced, also as the synced point,
// in both slots, fsynced.
func (c *logCursor) store(pos logPos, synced bool) error {
	c.rec.cur = pos
	copies := 1
	if synced {
		c.rec.synced = pos
		copies = 2
	}
	for range copies {
		c.rec.seq++
		if _, err := c.f.WriteAt(c.rec.encode(), int64(c.rec.seq%2)*cursorSlot); err != nil {
			return err
		}
	}
	if synced {
		return c.f.Sync()
	}
	return nil
}

var errClosed = errors.New("node: closed")

// cursorFile is the deliveries log's cursor, in the data directory: it
// describes what the log holds, wherever the log is.
const cursorFile = "deliveries.cursor"

// openDeliveryLog opens the deliveries log, if configured, and hands it
// (and OnDeliver) the deliveries durable in the WAL that it lacks. Without
// a log, a cursor left by an earlier run is removed: it would make a log
// enabled later hand over deliveries made while it was off.
func (n *Node) openDeliveryLog(durable []*wire.RecDelivered, installs []wire.Timestamp) error {
	cfg := &n.cfg
	fsys := cfg.FS
	cursorPath := filepath.Join(cfg.DataDir, cursorFile)
	if cfg.DeliveryLog == "" {
		if err := fsys.Remove(cursorPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("node: removing the deliveries log cursor: %w", err)
		}
		return nil
	}
	var walLast wire.Timestamp
	if len(durable) > 0 {
		walLast = durable[len(durable)-1].GTS
	}
	for _, p := range installs {
		walLast = wire.MaxTS(walLast, p)
	}
	var err error
	n.dlog, err = openDeliveryLog(deliveryLogConfig{
		fs: fsys, path: cfg.DeliveryLog, cursorPath: cursorPath, maxBytes: cfg.DeliveryLogMaxBytes, files: cfg.DeliveryLogFiles,
		hist: check.Config{Protocol: n.proto.name, Groups: cfg.Topology.NumGroups(), Replicas: len(cfg.Topology.Groups[0])},
		proc: int(cfg.ID), group: int(n.group), walLast: walLast, log: n.log,
	})
	if err != nil {
		return err
	}
	n.stats.Recovered += n.dlog.handOver(durable, installs, time.Now(), func(d *wire.RecDelivered) {
		if cfg.OnDeliver != nil {
			cfg.OnDeliver(Delivery{M: d.M, GTS: d.GTS, Recovered: true})
		}
	})
	if n.stats.Recovered > 0 || n.dlog.opened != "cursor" {
		n.log.Info("deliveries log opened", "path", cfg.DeliveryLog, "found", n.dlog.opened,
			"last_gts", n.dlog.last, "handed_over", n.stats.Recovered)
	}
	return n.dlog.flush()
}
