package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/wire"
)

// deliveryLog is the node's record of its deliveries, for test harnesses
// and the demo: a history file in the internal/check JSON-lines format (a
// config line, then one "deliver" event per delivery, in delivery order,
// with T in Unix microseconds). A delivery is written only after its
// record is durable in the log, and each Ready's deliveries are written
// with one write(2), so the file survives SIGKILL. It is fsynced only
// before the WAL is compacted (sync): a power loss may lose the tail
// written since, which the WAL, still holding those deliveries, then
// reconciles on restart (see Node); the deliveries a compaction drops from
// the WAL are already durable here. A torn last line is cut off when the
// file is reopened.
type deliveryLog struct {
	f     *os.File
	buf   bytes.Buffer
	w     *check.Writer
	proc  int
	group int
	lastT int64
	// last is the gts of the last delivery in the file (zero if none).
	last wire.Timestamp
	n    uint64 // deliveries written by this incarnation
}

// openDeliveryLog opens (creating if needed) the log at path, repairs a
// torn last line and reads the gts of its last delivery.
func openDeliveryLog(path string, cfg check.Config, proc, group int) (*deliveryLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node: deliveries log: %w", err)
	}
	l := &deliveryLog{f: f, proc: proc, group: group}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("node: deliveries log: %w", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 != len(data) {
		// A torn last line (the process died inside a write): cut it off.
		data = data[:i+1]
		if err := f.Truncate(int64(len(data))); err != nil {
			f.Close()
			return nil, fmt.Errorf("node: deliveries log: %w", err)
		}
	}
	if _, err := f.Seek(int64(len(data)), io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("node: deliveries log: %w", err)
	}
	l.w = check.NewWriter(&l.buf, cfg)
	if err := l.w.Flush(); err != nil {
		f.Close()
		return nil, err
	}
	if len(data) == 0 {
		// A new file starts with the config line.
		if _, err := f.Write(l.buf.Bytes()); err != nil {
			f.Close()
			return nil, fmt.Errorf("node: deliveries log: %w", err)
		}
	} else {
		h, err := check.ReadJSONL(bytes.NewReader(data))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("node: deliveries log %s: %w", path, err)
		}
		if h.Config.Protocol != cfg.Protocol {
			f.Close()
			return nil, fmt.Errorf("node: deliveries log %s was written by a %s node, not %s", path, h.Config.Protocol, cfg.Protocol)
		}
		if h.Config.Groups != cfg.Groups || h.Config.Replicas != cfg.Replicas {
			f.Close()
			return nil, fmt.Errorf("node: deliveries log %s was written for %d groups x %d replicas, not %d x %d",
				path, h.Config.Groups, h.Config.Replicas, cfg.Groups, cfg.Replicas)
		}
		for i := len(h.Events) - 1; i >= 0; i-- {
			if ev := h.Events[i]; ev.Ev == check.EvDeliver {
				l.last = wire.Timestamp{T: ev.GTS.T, G: wire.GroupID(ev.GTS.G)}
				l.lastT = ev.T
				break
			}
		}
	}
	l.buf.Reset()
	return l, nil
}

// add buffers one delivery; flush writes the buffered ones.
func (l *deliveryLog) add(m *wire.AppMsg, gts wire.Timestamp, now time.Time) {
	t := max(now.UnixMicro(), l.lastT) // never backwards within the file
	l.lastT = t
	l.last = gts
	l.n++
	l.w.Write(check.Event{Ev: check.EvDeliver, Proc: l.proc, Group: l.group, ID: m.ID.String(),
		GTS: check.GTS{T: gts.T, G: int(gts.G)}, T: t})
}

func (l *deliveryLog) flush() error {
	if err := l.w.Flush(); err != nil {
		return err
	}
	if l.buf.Len() == 0 {
		return nil
	}
	_, err := l.f.Write(l.buf.Bytes())
	l.buf.Reset()
	if err != nil {
		return fmt.Errorf("node: deliveries log: %w", err)
	}
	return nil
}

// sync writes the buffered deliveries and fsyncs the file.
func (l *deliveryLog) sync() error {
	if err := l.flush(); err != nil {
		return err
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("node: deliveries log: %w", err)
	}
	return nil
}

func (l *deliveryLog) close() error {
	err := l.flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}

var errClosed = errors.New("node: closed")
