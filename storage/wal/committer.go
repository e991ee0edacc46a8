package wal

import (
	"fmt"
	"sync"
)

// Committer is a concurrent group-commit front for a WAL: any number of
// goroutines call Commit, and one flusher goroutine appends every batch
// waiting at that moment and makes them all durable with a single Sync.
// While it syncs, new batches queue up for the next round, so the number of
// fdatasyncs per second stays bounded by the disk while throughput grows
// with the number of committers.
//
// The Committer owns the WAL until Close: do not use the WAL directly
// meanwhile.
type Committer struct {
	w    *WAL
	wake chan struct{} // capacity 1: "there is work"
	done chan struct{} // closed when the flusher exits

	mu struct {
		sync.Mutex
		cur     *commitGroup // batches waiting for the next flush
		closing bool
	}
}

// commitGroup is the set of batches made durable by one Sync.
type commitGroup struct {
	recs [][]byte
	n    int           // batches in the group
	done chan struct{} // closed when err is set
	err  error
}

// NewCommitter starts a Committer on w.
func NewCommitter(w *WAL) *Committer {
	c := &Committer{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	c.mu.cur = &commitGroup{done: make(chan struct{})}
	go c.flusher()
	return c
}

// Commit appends recs to the log as one batch and returns once they are
// durable, or with the error that prevented it. Batches from concurrent
// calls are appended whole, in some serial order. recs must not be modified
// until Commit returns. A record longer than Options.MaxRecordSize fails the
// call with ErrTooLarge and nothing else. After a failure every Commit fails (the log is
// sticky-failed, see WAL.Sync).
func (c *Committer) Commit(recs ...[]byte) error {
	// Check sizes here, so an oversized batch fails alone rather than the
	// whole group it would join. (opts is immutable after Open.)
	for _, r := range recs {
		if len(r) > c.w.opts.MaxRecordSize {
			return fmt.Errorf("%w: %d bytes, maximum %d", ErrTooLarge, len(r), c.w.opts.MaxRecordSize)
		}
	}
	c.mu.Lock()
	if c.mu.closing {
		c.mu.Unlock()
		return ErrClosed
	}
	g := c.mu.cur
	g.recs = append(g.recs, recs...)
	g.n++
	select { // under mu, so Close cannot close wake in between
	case c.wake <- struct{}{}:
	default:
	}
	c.mu.Unlock()
	<-g.done
	return g.err
}

func (c *Committer) flusher() {
	defer close(c.done)
	for {
		_, open := <-c.wake
		for {
			c.mu.Lock()
			g := c.mu.cur
			empty := g.n == 0
			if !empty {
				c.mu.cur = &commitGroup{done: make(chan struct{}), recs: make([][]byte, 0, cap(g.recs))}
			}
			c.mu.Unlock()
			if empty {
				break
			}
			g.err = c.w.Append(g.recs...)
			if g.err == nil {
				g.err = c.w.Sync()
			}
			clear(g.recs)
			close(g.done)
		}
		if !open {
			return
		}
	}
}

// Close waits for every batch already committed to be flushed, stops the
// flusher and closes the WAL. Commit calls after Close fail with ErrClosed.
func (c *Committer) Close() error {
	c.mu.Lock()
	if c.mu.closing {
		c.mu.Unlock()
		return ErrClosed
	}
	c.mu.closing = true
	close(c.wake)
	c.mu.Unlock()
	<-c.done
	return c.w.Close()
}
