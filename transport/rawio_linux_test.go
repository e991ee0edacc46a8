//go:build linux && !386

package transport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// rawPair returns both ends of a loopback TCP connection, wrapped as the
// transport wraps its connections.
func rawPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := <-accepted
	if c == nil {
		t.Fatal("accept failed")
	}
	a, b = wrapRaw(d), wrapRaw(c)
	if _, ok := a.(*rawTCP); !ok {
		t.Fatalf("wrapRaw gave %T", a)
	}
	if tc, ok := tcpOf(a); !ok || tc != d {
		t.Fatal("tcpOf does not unwrap")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestRawTCPLargeWrite: a write far larger than the socket buffers waits
// in the poller (EAGAIN) and completes once the reader drains; every byte
// arrives in order.
func TestRawTCPLargeWrite(t *testing.T) {
	a, b := rawPair(t)
	msg := make([]byte, 16<<20)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	errc := make(chan error, 1)
	go func() {
		n, err := a.Write(msg)
		if err == nil && n != len(msg) {
			err = io.ErrShortWrite
		}
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the writer fill the buffers
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatal("bytes differ")
	}
}

// TestRawTCPEnds: deadlines, CloseRead, Close and the peer's close end a
// read with the errors net.TCPConn gives.
func TestRawTCPEnds(t *testing.T) {
	a, b := rawPair(t)
	buf := make([]byte, 16)

	a.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	_, err := a.Read(buf)
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	a.SetReadDeadline(time.Time{})

	if n, err := b.Write([]byte("hello")); n != 5 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if n, err := io.ReadFull(a, buf[:5]); n != 5 || err != nil || string(buf[:5]) != "hello" {
		t.Fatalf("read: %q, %v", buf[:n], err)
	}

	done := make(chan error, 1)
	go func() { _, err := a.Read(buf); done <- err }()
	time.Sleep(20 * time.Millisecond)
	closeRead(a) // wakes the blocked reader
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read after CloseRead returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CloseRead did not wake the reader")
	}

	b.Close()
	c, d := rawPair(t)
	d.Close()
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want EOF", err)
	}
	c.Close()
	if _, err := c.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := c.Write(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v, want net.ErrClosed", err)
	}
}

// TestRawTCPBrokenPipe: writing to a connection the peer reset fails with
// an error (EPIPE or ECONNRESET); the SIGPIPE the kernel raises does not
// stop the process (the runtime ignores it for descriptors other than 1
// and 2, as for net.TCPConn's writes).
func TestRawTCPBrokenPipe(t *testing.T) {
	a, b := rawPair(t)
	if tc, ok := tcpOf(b); ok {
		tc.SetLinger(0) // close with a reset
	}
	b.Close()
	time.Sleep(20 * time.Millisecond)
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = a.Write(make([]byte, 4096))
	}
	if err == nil {
		t.Fatal("writes to a reset connection kept succeeding")
	}
	t.Logf("write to a reset connection: %v", err)

	c, _ := rawPair(t)
	tc, _ := tcpOf(c)
	tc.CloseWrite()
	if _, err := c.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write after CloseWrite: %v, want EPIPE", err)
	}
}
