//go:build linux && !386

package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"
)

// frameStream is n frames of random sizes (some far larger than the read
// buffer), each payload telling its index.
func frameStream(rng *rand.Rand, n int) (stream []byte, payloads [][]byte) {
	for i := range n {
		size := rng.IntN(300)
		switch rng.IntN(20) {
		case 0:
			size = readBufSize + rng.IntN(3*readBufSize) // grows the buffer
		case 1:
			size = readBufSize - FrameOverhead - rng.IntN(8) // about the buffer's size
		}
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(i + j)
		}
		payloads = append(payloads, p)
		stream = AppendFrame(stream, FrameMessage, p)
	}
	return stream, payloads
}

// TestRawFrames: frames written in pieces cut anywhere, some of them
// larger than the read buffer and some already in the handshake's bufio
// reader, all reach the handler whole and in order; the stream's clean end
// is io.EOF.
func TestRawFrames(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 4 {
		a, b := rawPair(t)
		stream, payloads := frameStream(rng, 400)
		// Part of the stream reaches a bufio reader first, as a handshake's
		// read would leave it.
		pre := rng.IntN(2000)
		wr := rand.New(rand.NewPCG(uint64(round), 5)) // the writer's own
		go func() {
			for off := 0; off < len(stream); {
				n := min(len(stream)-off, 1+wr.IntN(40000))
				if _, err := b.Write(stream[off : off+n]); err != nil {
					return
				}
				off += n
				if wr.IntN(4) == 0 {
					time.Sleep(time.Duration(wr.IntN(300)) * time.Microsecond)
				}
			}
			b.Close()
		}()
		br := bufio.NewReaderSize(a, 4096)
		if _, err := br.Peek(min(pre, 4096)); err != nil {
			t.Fatal(err)
		}
		var got int
		err := a.(*rawTCP).eachFrame(br, 1<<20, new(counters), func(ft FrameType, p []byte) error {
			if ft != FrameMessage || !bytes.Equal(p, payloads[got]) {
				return fmt.Errorf("frame %d: type %s, %d bytes, want %d", got, ft, len(p), len(payloads[got]))
			}
			got++
			return nil
		})
		if err != io.EOF || got != len(payloads) {
			t.Fatalf("round %d: %d of %d frames, then %v (want io.EOF)", round, got, len(payloads), err)
		}
	}
}

// TestRawFramesNoEmptyReads: frames that arrive one at a time, each on an
// empty socket, are read without a read that finds nothing after each
// (the point of rawFrames); a reader over net.Conn's Read makes one per
// frame.
func TestRawFramesNoEmptyReads(t *testing.T) {
	a, b := rawPair(t)
	const n = 100
	go func() {
		for i := range n {
			b.Write(AppendFrame(nil, FrameMessage, []byte{byte(i)}))
			time.Sleep(time.Millisecond)
		}
		b.Close()
	}()
	got := 0
	st := new(counters)
	rf := a.(*rawTCP).frames(bufio.NewReader(a), 1<<10, st, func(_ FrameType, p []byte) error {
		if len(p) != 1 || p[0] != byte(got) {
			return fmt.Errorf("frame %d: %v", got, p)
		}
		got++
		return nil
	})
	if err := rf.run(); err != io.EOF || got != n {
		t.Fatalf("%d of %d frames, then %v", got, n, err)
	}
	// A read that finds nothing is left only when a frame arrives between
	// the poller's wake-up and the read that takes it (counted twice).
	if rf.empty > n/10 {
		t.Fatalf("%d reads, %d of them found nothing", st.reads.Load(), rf.empty)
	}
	t.Logf("%d reads for %d frames, %d found nothing", st.reads.Load(), n, rf.empty)
}

// lastWithEnd starts a read loop on a whose first frame makes the peer
// b send a last frame and end the connection (end closes b), and waits
// 50 ms there so that both arrive before the loop's next read. It
// returns the loop's result and the frames it got (read after the result).
func lastWithEnd(a, b net.Conn, end func()) (<-chan error, *int) {
	b.Write(AppendFrame(nil, FrameMessage, []byte("first")))
	got := new(int)
	done := make(chan error, 1)
	go func() {
		done <- a.(*rawTCP).eachFrame(bufio.NewReader(a), 1<<10, new(counters), func(FrameType, []byte) error {
			if *got++; *got == 1 {
				b.Write(AppendFrame(nil, FrameMessage, []byte("last")))
				end()
				time.Sleep(50 * time.Millisecond)
			}
			return nil
		})
	}()
	return done, got
}

// TestRawFramesEndWithData: the last frame and the peer's FIN arrive
// together while the reader is busy (one edge for both): the read that
// takes the frame is short, and the loop still sees the end at once
// (TCP_INQ counts the FIN) rather than waiting for an edge that will not
// come.
func TestRawFramesEndWithData(t *testing.T) {
	a, b := rawPair(t)
	done, got := lastWithEnd(a, b, func() { b.Close() })
	select {
	case err := <-done:
		if err != io.EOF || *got != 2 {
			t.Fatalf("%d frames, then %v", *got, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the end of stream that came with the last frame was waited for")
	}
}

// TestRawFramesResetWithData: a reset that arrives together with the
// last frame is not counted by TCP_INQ, so the loop may wait after the
// frame (the doc's known case); closing the connection, as the
// transport does when its writer's next write or ping fails, ends it.
func TestRawFramesResetWithData(t *testing.T) {
	a, b := rawPair(t)
	done, got := lastWithEnd(a, b, func() {
		tc, _ := tcpOf(b)
		tc.SetLinger(0)
		b.Close() // a reset
	})
	select {
	case err := <-done: // the kernel signalled the reset after all
		t.Logf("ended by itself: %v", err)
		return
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := a.Write([]byte("x")); err == nil {
		t.Fatal("a write to the reset connection succeeded")
	}
	a.Close()
	select {
	case err := <-done:
		if *got != 2 || err == nil {
			t.Fatalf("%d frames, then %v", *got, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the connection did not end the loop")
	}
}

// TestRawFramesErrors: a bad checksum, an oversized or unknown frame, a
// stream cut inside a frame, the handler's error, CloseRead and a passed
// deadline all end the loop with their error.
func TestRawFramesErrors(t *testing.T) {
	good := AppendFrame(nil, FrameMessage, []byte("hello"))
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 1
	stop := errors.New("stop")
	for _, tc := range []struct {
		name  string
		bytes []byte
		fn    error
		want  error
	}{
		{"checksum", bad, nil, ErrChecksum},
		{"too large", AppendFrame(nil, FrameMessage, make([]byte, 2000)), nil, ErrFrameTooLarge},
		{"type", []byte{0, 0, 0, 0, 0xee, 0, 0, 0, 0}, nil, ErrFrameType},
		{"truncated", good[:7], nil, ErrTruncated},
		{"handler", good, stop, stop},
	} {
		a, b := rawPair(t)
		b.Write(tc.bytes)
		b.Close()
		err := a.(*rawTCP).eachFrame(bufio.NewReader(a), 1<<10, new(counters), func(FrameType, []byte) error { return tc.fn })
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}

	a, _ := rawPair(t)
	done := make(chan error, 1)
	go func() {
		done <- a.(*rawTCP).eachFrame(bufio.NewReader(a), 1<<10, new(counters), func(FrameType, []byte) error { return nil })
	}()
	time.Sleep(20 * time.Millisecond)
	closeRead(a)
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("after CloseRead: %v, want io.EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CloseRead did not end the loop")
	}

	c, _ := rawPair(t)
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if err := c.(*rawTCP).eachFrame(bufio.NewReader(c), 1<<10, new(counters), func(FrameType, []byte) error { return nil }); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("past the deadline: %v", err)
	}
}

// FuzzRawFramesRoom: any bytes, arriving in any pieces (each at most the
// room offered), go through room and took as a FrameReader reads them:
// room always offers room (its panic is unreachable), the frames and the
// error are the same, and the buffer never grows past the largest frame
// the stream declares (up to the limit) plus the read buffer.
func FuzzRawFramesRoom(f *testing.F) {
	f.Add(AppendFrame(AppendFrame(nil, FrameMessage, []byte("hello")), FramePing, nil), []byte{3, 200, 1})
	f.Add(AppendFrame(nil, FrameMessage, make([]byte, 3*readBufSize)), []byte{255, 255, 255})
	f.Add([]byte{0, 0, 0x10, 0, byte(FrameMessage), 1, 2, 3}, []byte{1})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		const limit = 4 * readBufSize
		var want [][]byte
		fr := NewFrameReader(bytes.NewReader(stream), limit)
		wantErr := fr.each(func(_ FrameType, p []byte) error {
			want = append(want, bytes.Clone(p))
			return nil
		})
		var got [][]byte
		rf := &rawFrames{maxPayload: limit, buf: make([]byte, readBufSize), fn: func(_ FrameType, p []byte) error {
			got = append(got, bytes.Clone(p))
			return nil
		}}
		rest, err := stream, error(nil)
		for i := 0; len(rest) > 0 && err == nil; i++ {
			space := rf.room()
			if space == 0 {
				t.Fatalf("room made no room: r %d, w %d, buffer %d", rf.r, rf.w, len(rf.buf))
			}
			n := space
			if len(cuts) > 0 {
				n = min(space, 1+int(cuts[i%len(cuts)])*97)
			}
			n = copy(rf.buf[rf.w:rf.w+min(n, len(rest))], rest)
			rest = rest[n:]
			err = rf.took(n)
			if len(rf.buf) > limit+FrameOverhead+readBufSize {
				t.Fatalf("buffer of %d bytes", len(rf.buf))
			}
		}
		if err == nil && rf.w > rf.r {
			err = ErrTruncated
		}
		if len(got) != len(want) {
			t.Fatalf("%d frames, the FrameReader %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d differs", i)
			}
		}
		if (err == nil) != (wantErr == io.EOF) {
			t.Fatalf("end: %v, the FrameReader's %v", err, wantErr)
		}
	})
}
