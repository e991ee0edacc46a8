package node

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

const testLogPath = "/log/d.jsonl"

// openTestLog opens a deliveries log of process 0 on fsys; walLast is the
// last delivery durable in the (imaginary) WAL.
func openTestLog(fsys vfs.FS, walLast uint64, maxBytes int64, files int) (*deliveryLog, error) {
	return openDeliveryLog(deliveryLogConfig{fs: fsys, path: testLogPath, cursorPath: "/data/" + cursorFile,
		maxBytes: maxBytes, files: files, hist: check.Config{Protocol: "wbcast", Groups: 1, Replicas: 1},
		walLast: wire.Timestamp{T: walLast}, log: slog.New(slog.DiscardHandler)})
}

// logDeliveries adds deliveries with gts from..to (inclusive) and flushes.
func logDeliveries(l *deliveryLog, from, to uint64) error {
	for t := from; t <= to; t++ {
		l.add(&wire.AppMsg{ID: wire.MsgID{Client: 1, Seq: t}}, wire.Timestamp{T: t}, time.Unix(0, 0))
	}
	return l.flush()
}

// handOver does what the node does on start: logs the deliveries the WAL
// holds (walFirst..walLast) above the log's last.
func handOver(l *deliveryLog, walFirst, walLast uint64) error {
	var durable []*wire.RecDelivered
	for t := walFirst; t <= walLast; t++ {
		durable = append(durable, &wire.RecDelivered{M: wire.AppMsg{ID: wire.MsgID{Client: 1, Seq: t}}, GTS: wire.Timestamp{T: t}})
	}
	l.handOver(durable, nil, time.Unix(0, 0), func(*wire.RecDelivered) {})
	return l.flush()
}

// TestDeliveryLogHandsOverInstalls: a state transfer durable in the WAL
// but missing from the log (a crash between the install's sync and the
// log write) is written again, in gts order with the deliveries around
// it (15, below the install's point, was delivered before the install),
// and nothing the log already has is written twice.
func TestDeliveryLogHandsOverInstalls(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l, err := openTestLog(mem, 0, 1<<20, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := logDeliveries(l, 1, 10); err != nil {
		t.Fatal(err)
	}
	l.close()
	l, err = openTestLog(mem, 22, 1<<20, 4)
	if err != nil {
		t.Fatal(err)
	}
	var durable []*wire.RecDelivered
	for _, t := range []uint64{9, 10, 11, 12, 15, 21, 22} {
		durable = append(durable, &wire.RecDelivered{M: wire.AppMsg{ID: wire.MsgID{Client: 1, Seq: t}}, GTS: wire.Timestamp{T: t}})
	}
	var handed []uint64
	n := l.handOver(durable, []wire.Timestamp{{T: 30}, {T: 20}}, time.Unix(0, 0), func(d *wire.RecDelivered) { handed = append(handed, d.GTS.T) })
	if err := l.flush(); err != nil {
		t.Fatal(err)
	}
	l.close()
	if n != 5 || fmt.Sprint(handed) != "[11 12 15 21 22]" {
		t.Errorf("handed over %d: %v, want 11 12 15 21 22", n, handed)
	}
	h, err := readDeliveryLog(mem, testLogPath)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range h.Events[10:] {
		got = append(got, fmt.Sprintf("%s@%d", ev.Ev, ev.GTS.T))
	}
	if want := "[deliver@11 deliver@12 deliver@15 install@20 deliver@21 deliver@22 install@30]"; fmt.Sprint(got) != want {
		t.Errorf("logged after 10: %v, want %s", got, want)
	}
}

// loggedGTS reads the log back: the gts times, in file order.
func loggedGTS(t *testing.T, fsys vfs.FS) []uint64 {
	t.Helper()
	h, err := readDeliveryLog(fsys, testLogPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, ev := range h.Events {
		out = append(out, ev.GTS.T)
	}
	return out
}

func wantRun(t *testing.T, got []uint64, from, to uint64) {
	t.Helper()
	ok := len(got) == int(to-from+1)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i] == from+uint64(i)
	}
	if !ok {
		t.Fatalf("logged gts %v, want %d..%d exactly once each, in order", got, from, to)
	}
}

// TestDeliveryLogRotationBound writes far more than the bound allows: the
// log keeps exactly `files` files, none over maxBytes, holding the latest
// deliveries without a gap.
func TestDeliveryLogRotationBound(t *testing.T) {
	for _, files := range []int{1, 3} {
		t.Run(fmt.Sprint(files, " files"), func(t *testing.T) {
			const maxBytes = 4096
			mem := vfs.NewCrashableMem()
			l, err := openTestLog(mem, 0, maxBytes, files)
			if err != nil {
				t.Fatal(err)
			}
			var last uint64
			for batch := range 300 {
				n := uint64(batch%7 + 1)
				if err := logDeliveries(l, last+1, last+n); err != nil {
					t.Fatal(err)
				}
				last += n
			}
			if err := l.close(); err != nil {
				t.Fatal(err)
			}
			names, _ := mem.List("/log")
			if len(names) != files {
				t.Fatalf("files %v, want %d", names, files)
			}
			var total int64
			for _, name := range names {
				fi, err := mem.Stat("/log/" + name)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() > maxBytes {
					t.Errorf("%s is %d bytes, over the bound %d", name, fi.Size(), maxBytes)
				}
				total += fi.Size()
			}
			got := loggedGTS(t, mem)
			if len(got) == 0 || int64(len(got))*80 > int64(files)*maxBytes {
				t.Fatalf("%d deliveries kept in %d bytes", len(got), total)
			}
			wantRun(t, got, last-uint64(len(got))+1, last)
			// At least files-1 full files: nothing is dropped early.
			if total <= int64(files-1)*(maxBytes-200) {
				t.Errorf("%d bytes kept in %d files of at most %d", total, files, maxBytes)
			}
		})
	}
}

// TestDeliveryLogCrashAnywhere: storage dies at a random operation (every
// later one fails, as if the process was gone), then the machine loses
// power (vfs.MemFS.CrashClone: unsynced writes lost, torn or reordered),
// then the log is reopened and handed the deliveries the WAL still holds
// (those after the last sync point, where the node may cut its WAL). The
// log must then hold every delivery exactly once, in order, across
// rotations.
func TestDeliveryLogCrashAnywhere(t *testing.T) {
	const seeds = 400
	opened := map[string]int{}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 7))
		mem := vfs.NewCrashableMem()
		failAt, ops := 1+rng.IntN(400), 0
		fsys := vfs.WithErrors(mem, vfs.InjectorFunc(func(vfs.Op, string) error {
			if ops++; ops >= failAt {
				return vfs.ErrInjected
			}
			return nil
		}))
		var written, cut uint64 // in the WAL: cut+1..written
		if l, err := openTestLog(fsys, 0, 2048, 1000); err == nil {
			for written < 400 {
				n := 1 + rng.Uint64N(12)
				written += n // durable in the WAL before the log sees them
				if err := logDeliveries(l, written-n+1, written); err != nil {
					break
				}
				if rng.IntN(6) == 0 {
					if err := l.sync(); err != nil {
						break
					}
					cut = written // compaction: the WAL forgets what the log has synced
				}
			}
		}
		var crashed *vfs.MemFS
		if seed%10 == 0 {
			crashed = mem.CrashClone(nil) // only what was synced
		} else {
			crashed = mem.CrashClone(rng)
		}
		l, err := openTestLog(crashed, written, 2048, 1000)
		if err != nil {
			t.Fatalf("seed %d: reopening after the crash: %v", seed, err)
		}
		opened[l.opened]++
		if err := handOver(l, cut+1, written); err != nil {
			t.Fatal(err)
		}
		if err := l.close(); err != nil {
			t.Fatal(err)
		}
		if written == 0 {
			continue
		}
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { wantRun(t, loggedGTS(t, crashed), 1, written) })
	}
	t.Logf("reopened %d logs after a crash: %v", seeds, opened)
	for _, how := range []string{"cursor", "torn", "replaced"} {
		if opened[how] == 0 {
			t.Errorf("no crash left the log %q (reopened: %v); the test does not reach that case", how, opened)
		}
	}
}

// TestDeliveryLogReopen covers the starts that are not crashes: a clean
// restart, the log deleted (nothing comes back as a duplicate), the
// cursor deleted (the old file is kept aside and the log restarts at the
// WAL's end), a file of another protocol (refused).
func TestDeliveryLogReopen(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l, err := openTestLog(mem, 0, 1<<20, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := logDeliveries(l, 1, 50); err != nil {
		t.Fatal(err)
	}
	l.close()

	// Clean restart: the WAL holds 41..50, all logged.
	l, err = openTestLog(mem, 50, 1<<20, 4)
	if err != nil || l.opened != "cursor" || l.last.T != 50 {
		t.Fatalf("clean restart: %v %q last %v", err, l.opened, l.last)
	}
	handOver(l, 41, 50)
	logDeliveries(l, 51, 60)
	l.close()
	wantRun(t, loggedGTS(t, mem), 1, 60)

	// The log deleted: the WAL's 51..60 are not logged again.
	if err := mem.Remove(testLogPath); err != nil {
		t.Fatal(err)
	}
	l, err = openTestLog(mem, 60, 1<<20, 4)
	if err != nil || l.opened != "replaced" || l.last.T != 60 {
		t.Fatalf("after deleting the log: %v %q last %v", err, l.opened, l.last)
	}
	handOver(l, 51, 60)
	logDeliveries(l, 61, 70)
	l.close()
	wantRun(t, loggedGTS(t, mem), 61, 70)

	// The cursor deleted: the file moves to .1, the log restarts after the WAL's last.
	if err := mem.Remove("/data/" + cursorFile); err != nil {
		t.Fatal(err)
	}
	l, err = openTestLog(mem, 70, 1<<20, 4)
	if err != nil || l.opened != "new" || l.last.T != 70 {
		t.Fatalf("after deleting the cursor: %v %q last %v", err, l.opened, l.last)
	}
	handOver(l, 61, 70)
	logDeliveries(l, 71, 80)
	l.close()
	if _, err := mem.Stat(testLogPath + ".1"); err != nil {
		t.Fatal(err)
	}
	wantRun(t, loggedGTS(t, mem), 61, 80)

	// Another protocol's file.
	l, err = openDeliveryLog(deliveryLogConfig{fs: mem, path: testLogPath, cursorPath: "/data/" + cursorFile,
		maxBytes: 1 << 20, files: 4, hist: check.Config{Protocol: "ftskeen", Groups: 1, Replicas: 1}, log: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "written by a wbcast node") {
		t.Fatalf("a wbcast log opened as ftskeen's: %v", err)
	}
	if _, err := mem.Stat(testLogPath); err != nil {
		t.Fatal("the refused file is gone:", err)
	}
}

// rewindCursor sets node p's deliveries-log cursor (synced) to the end of
// the delivery `back` lines before the end of its log, as a crash between
// the WAL sync and the log write (or between the log write and the cursor
// update) leaves it.
func rewindCursor(t *testing.T, c *cluster, p wire.ProcID, back int) {
	t.Helper()
	b, err := os.ReadFile(c.dlogPath(p))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty tail after the last newline
	keep := lines[:len(lines)-back]
	h, err := check.ReadJSONL(bytes.NewReader(bytes.Join(keep, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ev := h.Events[len(h.Events)-1]
	pos := logPos{GTS: wire.Timestamp{T: ev.GTS.T, G: wire.GroupID(ev.GTS.G)}, Off: int64(len(bytes.Join(keep, nil))), T: ev.T}
	cur, found, err := openCursor(vfs.OS(), filepath.Join(c.dirs[p], cursorFile))
	if err != nil || !found {
		t.Fatalf("cursor: %v (found %v)", err, found)
	}
	if err := cur.store(pos, true); err != nil {
		t.Fatal(err)
	}
	cur.f.Close()
}

// TestNodeHandsOverDeliveriesMissingFromTheLog simulates a crash between
// the WAL sync and the write to the deliveries log (with a torn last
// line): on restart the node writes exactly the missing deliveries.
func TestNodeHandsOverDeliveriesMissingFromTheLog(t *testing.T) {
	for _, protocol := range []string{ProtocolWbCast, ProtocolFTSkeen, ProtocolFastCast} {
		t.Run(protocol, func(t *testing.T) { testHandOver(t, protocol) })
	}
}

func testHandOver(t *testing.T, protocol string) {
	c := newCluster(t, 1, 3, func(cfg *Config) { cfg.Protocol = protocol })
	cl := c.client()
	multicast(t, cl, 60, 4, func(int) []wire.GroupID { return []wire.GroupID{0} })
	c.waitDelivered(t, 60)
	const p = 2
	c.stop(p)
	path := c.dlogPath(p)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The last 6 deliveries never reached the log; the process died inside
	// the write of the 6th (half a line).
	rewindCursor(t, c, p, 6)
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines = lines[:len(lines)-1]
	keep := bytes.Join(lines[:len(lines)-6], nil)
	torn := lines[len(lines)-6][:10]
	if err := os.WriteFile(path, append(keep, torn...), 0o644); err != nil {
		t.Fatal(err)
	}
	c.restart(p)
	st := c.nodes[p].Status()
	if st.Stats.Recovered != 6 {
		t.Errorf("recovered %d deliveries, want 6", st.Stats.Recovered)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.Split(bytes.TrimSpace(after), []byte("\n"))) != 61 || !bytes.HasSuffix(after, []byte("\n")) {
		t.Errorf("log after restart:\n%s", after)
	}
	multicast(t, cl, 20, 4, func(int) []wire.GroupID { return []wire.GroupID{0} })
	c.waitDelivered(t, 80)
	rep := check.Check(c.history(t), check.Options{Termination: check.TermAll})
	if !rep.OK() {
		t.Fatal(rep.Error())
	}
}

// waitDeliveredAt waits until n delivered want messages since it started.
func waitDeliveredAt(t *testing.T, n *Node, want uint64) {
	t.Helper()
	waitUntil(t, 15*time.Second, fmt.Sprintf("p%d to deliver %d messages", n.ID(), want), func() bool {
		return n.Status().Stats.Delivered >= want
	})
}

// TestNodeDeliveryLogRestarts: a cursor behind the file (the process died
// between the log write and the cursor update) cuts the lines past it and
// hands them over once; a deleted log replays nothing; a log that is off
// leaves no cursor behind, so turning it on later replays nothing either.
func TestNodeDeliveryLogRestarts(t *testing.T) {
	c := newCluster(t, 1, 3, nil)
	cl := c.client()
	multicast(t, cl, 40, 4, func(int) []wire.GroupID { return []wire.GroupID{0} })
	c.waitDelivered(t, 40)
	const p = 2
	restart := func(what string, wantRecovered uint64) {
		t.Helper()
		c.restart(p)
		if got := c.nodes[p].Status().Stats.Recovered; got != wantRecovered {
			t.Errorf("%s: recovered %d deliveries, want %d", what, got, wantRecovered)
		}
	}
	countIDs := func() (int, int) {
		t.Helper()
		h, err := ReadDeliveryLog(c.dlogPath(p))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, ev := range h.Events {
			seen[ev.ID] = true
		}
		return len(h.Events), len(seen)
	}

	c.stop(p)
	rewindCursor(t, c, p, 3)
	restart("cursor behind the file", 3)
	if n, distinct := countIDs(); n != 40 || distinct != 40 {
		t.Errorf("cursor behind the file: %d deliveries logged, %d distinct, want 40", n, distinct)
	}

	c.stop(p)
	if err := os.Remove(c.dlogPath(p)); err != nil {
		t.Fatal(err)
	}
	restart("log deleted", 0)
	multicast(t, cl, 10, 2, func(int) []wire.GroupID { return []wire.GroupID{0} })
	waitDeliveredAt(t, c.nodes[p], 10)
	if n, distinct := countIDs(); n != 10 || distinct != 10 {
		t.Errorf("log deleted: %d deliveries logged, %d distinct, want the 10 new ones", n, distinct)
	}

	c.stop(p)
	tune := c.tune
	c.tune = func(cfg *Config) { cfg.DeliveryLog = "" }
	restart("log off", 0)
	if _, err := os.Stat(filepath.Join(c.dirs[p], cursorFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a node without a deliveries log kept the cursor: %v", err)
	}
	multicast(t, cl, 10, 2, func(int) []wire.GroupID { return []wire.GroupID{0} })
	waitDeliveredAt(t, c.nodes[p], 10)
	c.stop(p)
	c.tune = tune
	restart("log on again", 0)
	if n, _ := countIDs(); n != 10 {
		t.Errorf("log on again: %d deliveries logged, want the 10 from before it was off", n)
	}
}

// TestNodeDeliveryLogRotates runs real nodes with a small rotation bound
// (about 30 deliveries per file), restarts one, and checks the history read
// back from every node's rotated files.
func TestNodeDeliveryLogRotates(t *testing.T) {
	c := newCluster(t, 1, 3, func(cfg *Config) { cfg.DeliveryLogMaxBytes, cfg.DeliveryLogFiles = 4096, 1000 })
	cl := c.client()
	multicast(t, cl, 100, 4, func(int) []wire.GroupID { return []wire.GroupID{0} })
	c.waitDelivered(t, 100)
	const p = 1
	c.stop(p)
	c.restart(p)
	multicast(t, cl, 20, 4, func(int) []wire.GroupID { return []wire.GroupID{0} })
	c.waitDelivered(t, 120)
	ks, err := rotatedFiles(vfs.OS(), c.dlogPath(p))
	if err != nil || len(ks) < 3 {
		t.Fatalf("rotated files %v (%v), want several", ks, err)
	}
	rep := check.Check(c.history(t), check.Options{Termination: check.TermAll})
	if !rep.OK() {
		t.Fatal(rep.Error())
	}
}
