package transport

import (
	"errors"
	"sync"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// TestBatch: a Batch holds its frames until Flush, then each destination's
// writer takes them all and writes them with one call; a message sent to
// several destinations (one pointer) reaches each of them, this process
// included; a message changed after a Flush is encoded afresh; and a
// Batch and an unbatched Send to one destination keep their order.
func TestBatch(t *testing.T) {
	checkLeaks(t)
	nodes := cluster(t, []wire.ProcID{1, 2, 3}, func(c *Config) { c.PingEvery = -1 }) // no pings: Writes counts ours alone
	a := nodes[1]
	sendSeq(t, a.tr, 1, 2, 1, 1)
	sendSeq(t, a.tr, 1, 3, 1, 1)
	// Counted after the write returns, which may be after the peer read it.
	waitFor(t, "both peers connected", func() bool {
		return nodes[2].rec.count(1) == 1 && nodes[3].rec.count(1) == 1 && a.tr.Stats().FramesOut == 2
	})
	before := a.tr.Stats()

	b := a.tr.NewBatch()
	shared := msg(1, 2).(*wire.Propose)
	for _, to := range []wire.ProcID{2, 3, 1} {
		if err := b.Send(to, shared); err != nil {
			t.Fatalf("Send(%d): %v", to, err)
		}
	}
	for s := uint64(3); s <= 10; s++ {
		if err := b.Send(2, msg(1, s)); err != nil {
			t.Fatalf("Send(2, %d): %v", s, err)
		}
	}
	// Nothing is woken before Flush: the frames wait in the queues.
	if st := a.tr.Stats(); st.Peers[2].Queued != 9 || st.Peers[3].Queued != 1 || st.Writes != before.Writes {
		t.Fatalf("before Flush: queued %d for 2 and %d for 3, %d writes (was %d); want 9, 1 and no write",
			st.Peers[2].Queued, st.Peers[3].Queued, st.Writes, before.Writes)
	}
	b.Flush()
	waitFor(t, "the batch received and counted", func() bool {
		return nodes[2].rec.count(1) == 10 && nodes[3].rec.count(1) == 2 && a.rec.count(1) == 1 &&
			a.tr.Stats().FramesOut >= before.FramesOut+10
	})
	checkRun(t, "peer 2", nodes[2].rec.seqs(1), 1, 10)
	checkRun(t, "peer 3", nodes[3].rec.seqs(1), 1, 2)
	checkRun(t, "self", a.rec.seqs(1), 2, 2)
	after := a.tr.Stats()
	if got := after.Writes - before.Writes; got != 2 {
		t.Errorf("%d writes for one flush to 2 peers, want 2 (one each)", got)
	}
	if got := after.FramesOut - before.FramesOut; got != 10 {
		t.Errorf("%d frames out, want 10", got)
	}

	// After Flush the batch forgets the message: the same pointer, changed,
	// is encoded again.
	shared.ID.Seq = 11
	if err := b.Send(2, shared); err != nil {
		t.Fatal(err)
	}
	// An unbatched Send wakes the writer, which takes the batch's frame
	// too: FIFO across both.
	if err := a.tr.Send(2, msg(1, 12)); err != nil {
		t.Fatal(err)
	}
	b.Flush()
	waitFor(t, "the rest received", func() bool { return nodes[2].rec.count(1) == 12 })
	checkRun(t, "peer 2", nodes[2].rec.seqs(1), 1, 12)
}

// TestBatchRefuses: a Batch refuses what Send refuses, with the same
// errors and counters: records, unknown destinations, oversized messages
// and a queue at its byte budget.
func TestBatchRefuses(t *testing.T) {
	checkLeaks(t)
	cfg := baseConfig(t, 1)
	cfg.Listen = "127.0.0.1:0"
	cfg.Peers = map[wire.ProcID]string{2: freeAddr(t)} // never answers
	cfg.QueueBytes = 16 << 10
	cfg.MaxFrame = MinMaxFrame
	a := startNode(t, cfg)
	b := a.tr.NewBatch()
	if err := b.Send(2, &wire.RecBallot{}); !errors.Is(err, ErrNotMessage) {
		t.Errorf("a record: %v, want ErrNotMessage", err)
	}
	if err := b.Send(9, msg(1, 1)); !errors.Is(err, ErrNoRoute) {
		t.Errorf("an unknown destination: %v, want ErrNoRoute", err)
	}
	big := bigMsg(1, 1, MinMaxFrame)
	for range 2 { // the second time from the batch's cache
		if err := b.Send(2, big); !errors.Is(err, ErrTooLarge) {
			t.Errorf("a message over MaxFrame: %v, want ErrTooLarge", err)
		}
	}
	ok, full := fillQueue(t, func(m wire.Message) error { return b.Send(2, m) }, 100, 500)
	b.Flush()
	st := a.tr.Stats()
	p := st.Peers[2]
	if p.Queued != ok || p.QueuedBytes > int64(cfg.QueueBytes) || p.PeakBytes > int64(cfg.QueueBytes) || full == 0 {
		t.Errorf("%d queued, %d refused: %+v (budget %d)", ok, full, p, cfg.QueueBytes)
	}
	want := map[DropReason]uint64{DropNotMessage: 1, DropNoRoute: 1, DropTooLarge: 2, DropQueueBytes: uint64(full)}
	for r, n := range want {
		if st.Drops[r] != n {
			t.Errorf("drops %v, want %v", st.Drops, want)
			break
		}
	}
}

// TestBatchConcurrentSenders: a Batch flushing from one goroutine and
// plain Sends from two others, into one queue, lose no wake-up: every
// message arrives (the queue is large enough to refuse none), and each
// goroutine's messages in the order it sent them.
func TestBatchConcurrentSenders(t *testing.T) {
	checkLeaks(t)
	const each = 3000
	nodes := cluster(t, []wire.ProcID{1, 2}, func(c *Config) { c.QueueSize, c.QueueBytes = 4*each, 4<<20 })
	a := nodes[1]
	sendSeq(t, a.tr, 1, 2, 1, 1)
	waitFor(t, "connected", func() bool { return nodes[2].rec.count(1) == 1 })
	mk := func(sender, seq uint64) wire.Message {
		return &wire.Propose{ID: wire.MsgID{Client: wire.ProcID(sender), Seq: seq}, G: 1}
	}
	var wg sync.WaitGroup
	for sender := uint64(1); sender <= 2; sender++ {
		wg.Go(func() {
			for s := uint64(1); s <= each; s++ {
				if err := a.tr.Send(2, mk(sender, s)); err != nil {
					t.Errorf("Send: %v", err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		b := a.tr.NewBatch()
		for s := uint64(1); s <= each; s++ {
			if err := b.Send(2, mk(3, s)); err != nil {
				t.Errorf("Batch.Send: %v", err)
				return
			}
			if s%7 == 0 || s == each {
				b.Flush()
			}
		}
	})
	wg.Wait()
	waitFor(t, "every message", func() bool { return nodes[2].rec.count(1) == 1+3*each })
	next := map[wire.ProcID]uint64{}
	nodes[2].rec.mu.Lock()
	defer nodes[2].rec.mu.Unlock()
	for _, m := range nodes[2].rec.msgs[1][1:] {
		id := m.(*wire.Propose).ID
		if next[id.Client]++; id.Seq != next[id.Client] {
			t.Fatalf("sender %d: seq %d where %d was due", id.Client, id.Seq, next[id.Client])
		}
	}
}
