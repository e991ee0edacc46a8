//go:build linux && !386

package transport

import (
	"io"
	"net"
	"sync"
	"syscall"
	"unsafe"
)

// rawTCP is a TCP connection whose reads and writes are raw system calls
// on its non-blocking socket (syscall.RawSyscall through the connection's
// syscall.RawConn). The runtime's poller still does the waiting, and
// deadlines, closing and CloseRead work as on the net.TCPConn.
//
// Why (docs/batching.md, "Raw socket calls"): net.TCPConn enters each read
// and write as a blocking system call. On this class of VM a loopback
// read or write takes tens of microseconds, longer than the runtime's
// system monitor waits (20 µs) before it hands the caller's P to another
// thread; on a busy agent nearly every call then cost a thread wake-up
// (futex), context switches, and kept the monitor polling at its shortest
// period. A call on a non-blocking socket never blocks, so it needs none
// of that. Measured with weft bench at 90 clients (nofsync, 1 group,
// alternated): 126 instead of 163 µs of CPU per multicast, a third fewer
// context switches, about a quarter more multicasts a second.
type rawTCP struct {
	*net.TCPConn
	rc     syscall.RawConn
	rd, wr *rawOp
}

// rawOp is one direction's system call and its operands, built once per
// connection: a closure over a call's own operands escaped to the heap
// with them, three allocations per read or write.
type rawOp struct {
	mu    sync.Mutex // one call at a time (net.Conn allows concurrent callers)
	trap  uintptr
	b     []byte
	n     int
	errno syscall.Errno
	do    func(fd uintptr) bool // rawIO on the fields above
}

func newRawOp(trap uintptr) *rawOp {
	op := &rawOp{trap: trap}
	op.do = func(fd uintptr) bool { return rawIO(op.trap, fd, op.b, &op.n, &op.errno) }
	return op
}

// wrapRaw returns c with raw reads and writes if it is a TCP connection.
func wrapRaw(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &rawTCP{TCPConn: tc, rc: rc, rd: newRawOp(syscall.SYS_READ), wr: newRawOp(syscall.SYS_WRITE)}
}

// tcpOf returns the TCP connection under c, if c is or wraps one.
func tcpOf(c net.Conn) (*net.TCPConn, bool) {
	switch c := c.(type) {
	case *net.TCPConn:
		return c, true
	case *rawTCP:
		return c.TCPConn, true
	}
	return nil, false
}

// rawIO runs one read or write system call on fd and reports whether the
// poller need not wait (anything but EAGAIN).
func rawIO(trap, fd uintptr, b []byte, n *int, errno *syscall.Errno) bool {
	for {
		r, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			r = 0
		}
		*n, *errno = int(r), e
		return e != syscall.EAGAIN
	}
}

func (c *rawTCP) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	op := c.rd
	op.mu.Lock()
	defer op.mu.Unlock()
	op.b = b
	defer func() { op.b = nil }()
	if err := c.rc.Read(op.do); err != nil {
		return 0, c.opError("read", err)
	}
	switch {
	case op.errno != 0:
		return 0, c.opError("read", op.errno)
	case op.n == 0:
		return 0, io.EOF
	}
	return op.n, nil
}

func (c *rawTCP) Write(b []byte) (int, error) {
	op := c.wr
	op.mu.Lock()
	defer op.mu.Unlock()
	defer func() { op.b = nil }()
	done := 0
	for done < len(b) {
		op.b = b[done:]
		if err := c.rc.Write(op.do); err != nil {
			return done, c.opError("write", err)
		}
		if op.errno != 0 {
			return done, c.opError("write", op.errno)
		}
		done += op.n
	}
	return done, nil
}

// opError wraps err as net.TCPConn does: a *net.OpError (whose Timeout
// reports a passed deadline), net.ErrClosed kept recognisable.
func (c *rawTCP) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
