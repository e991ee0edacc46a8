//go:build linux && !386

package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"syscall"
	"unsafe"
)

// Reading frames without the read that finds nothing.
//
// Go's poller clears a socket's readiness at the start of every read
// call, so a reader that pulls frames one read at a time (FrameReader over
// a net.Conn) must try a read after each batch of frames to learn that
// the socket is empty: a system call that returns EAGAIN, about half of a
// busy agent's reads (strace of a leader at 90 clients: 3,796 of 8,090).
// rawFrames instead runs the connection's whole read loop inside one
// syscall.RawConn.Read: its callback reads, hands every complete frame to
// the consumer, and asks the poller to wait right away when the kernel
// said the read left nothing behind. Readiness is cleared only once,
// before the first read, and the poller records every edge after that, so
// data arriving after the read wakes the wait.
//
// What the kernel says: with TCP_INQ set, each recvmsg returns the bytes
// still queued (a control message), or 1 once the peer's FIN has arrived,
// so that an end of stream read together with the last data is not
// waited for (its edge came before the read). A short read alone would
// not do: data and FIN arriving together leave one edge and a short read.
// A reset arriving together with the last data is not reported (the
// kernel counts nothing queued); the connection's writer finds it at its
// next write or ping (Config.PingEvery) and closes the connection, which
// ends the wait. Without TCP_INQ (kernels before 4.18) the loop reads
// until EAGAIN, as a pull reader does.

// rawFrames is a frame reader on a raw TCP connection (rawio_linux.go)
// that pushes frames to a consumer.
type rawFrames struct {
	c          *rawTCP
	maxPayload int
	buf        []byte // buf[r:w] is read and not yet consumed
	r, w       int
	fn         func(FrameType, []byte) error
	err        error     // what ended the loop: the consumer's error, a frame error, EOF
	empty      int       // reads that found nothing (EAGAIN): for tests
	st         *counters // Stats.Reads and ReadsRecvmsg

	inq  bool // TCP_INQ is set: recvmsg says what is left
	hdr  syscall.Msghdr
	iov  syscall.Iovec
	cmsg [64]byte
}

// tcpInq and tcpCmInq are Linux's TCP_INQ socket option and the type of
// its control message (include/uapi/linux/tcp.h).
const (
	tcpInq   = 36
	tcpCmInq = tcpInq
)

// errNoRoom ends a connection whose read buffer room could not make room
// in: a bug of room's, never a peer's doing.
var errNoRoom = errors.New("transport: no room to read into (a bug: please report it)")

// eachFrame hands every frame that arrives on c, starting with the bytes
// br holds already (a handshake read through it), to fn, until fn fails,
// a frame is malformed or the stream ends. A payload is valid only during
// its call. It returns io.EOF at a clean end of stream (between frames);
// errors are otherwise fn's, wrap ErrFrameType, ErrFrameTooLarge,
// ErrChecksum or ErrTruncated, or are the connection's (*net.OpError).
func (c *rawTCP) eachFrame(br *bufio.Reader, maxPayload int, st *counters, fn func(FrameType, []byte) error) error {
	return c.frames(br, maxPayload, st, fn).run()
}

// frames returns the frame reader eachFrame runs.
func (c *rawTCP) frames(br *bufio.Reader, maxPayload int, st *counters, fn func(FrameType, []byte) error) *rawFrames {
	rf := &rawFrames{c: c, maxPayload: maxPayload, buf: make([]byte, max(readBufSize, br.Buffered())), fn: fn, st: st}
	pre, _ := br.Peek(br.Buffered())
	rf.w = copy(rf.buf, pre)
	br.Discard(len(pre))
	return rf
}

// run is eachFrame's loop.
func (rf *rawFrames) run() error {
	if err := rf.parse(); err != nil {
		return err
	}
	c := rf.c
	op := c.rd
	op.mu.Lock()
	defer op.mu.Unlock()
	if err := c.rc.Control(func(fd uintptr) {
		rf.inq = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpInq, 1) == nil
	}); err != nil {
		return c.opError("read", err)
	}
	for rf.err == nil {
		if err := c.rc.Read(func(fd uintptr) bool {
			space := rf.room()
			if space == 0 {
				// Not reachable by any input (room); should room ever
				// break, this connection ends, not the process.
				rf.err = errNoRoom
				return true
			}
			n, left, errno := rf.recv(fd)
			rf.st.reads.Add(1)
			if rf.inq {
				rf.st.recvmsgs.Add(1)
			}
			switch {
			case errno == syscall.EAGAIN:
				rf.empty++
				return false // wait for the poller
			case errno != 0:
				rf.err = c.opError("read", errno)
				return true
			case n == 0:
				rf.err = io.EOF
				if rf.w > rf.r {
					rf.err = fmt.Errorf("%w: the stream ended %d bytes into a frame", ErrTruncated, rf.w-rf.r)
				}
				return true
			}
			if rf.err = rf.took(n); rf.err != nil {
				return true
			}
			if rf.inq && left == 0 {
				return false // nothing left: wait without asking the socket again
			}
			if !rf.inq && n < space {
				return false // the room was not filled: wait without asking again
			}
			return true // read again, in a new call that checks the deadline
		}); err != nil {
			return c.opError("read", err)
		}
	}
	return rf.err
}

// recv is one read system call on fd into buf[w:], with TCP_INQ a
// recvmsg that also returns the bytes left (-1: not said).
func (rf *rawFrames) recv(fd uintptr) (n, left int, errno syscall.Errno) {
	b := rf.buf[rf.w:]
	for {
		var r uintptr
		var e syscall.Errno
		if rf.inq {
			rf.iov.Base = unsafe.SliceData(b)
			rf.iov.SetLen(len(b))
			rf.hdr.Iov, rf.hdr.Iovlen = &rf.iov, 1
			rf.hdr.Control = &rf.cmsg[0]
			rf.hdr.SetControllen(len(rf.cmsg))
			r, _, e = syscall.RawSyscall(syscall.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&rf.hdr)), 0)
		} else {
			r, _, e = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
		}
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, -1, e
		}
		if !rf.inq {
			return int(r), -1, 0
		}
		return int(r), rf.inqLeft(), 0
	}
}

// cmsgAlign rounds a control message's length up to the kernel's
// alignment (the size of a long).
func cmsgAlign(n int) int {
	const a = int(unsafe.Sizeof(uintptr(0)))
	return (n + a - 1) &^ (a - 1)
}

// inqLeft is the TCP_CM_INQ control message's count, -1 if there is none.
func (rf *rawFrames) inqLeft() int {
	cm := rf.cmsg[:min(int(rf.hdr.Controllen), len(rf.cmsg))]
	for len(cm) >= syscall.SizeofCmsghdr {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&cm[0]))
		if h.Len < syscall.SizeofCmsghdr || int(h.Len) > len(cm) {
			return -1
		}
		if h.Level == syscall.IPPROTO_TCP && h.Type == tcpCmInq && int(h.Len) >= syscall.SizeofCmsghdr+4 {
			return int(int32(binary.NativeEndian.Uint32(cm[syscall.SizeofCmsghdr:])))
		}
		cm = cm[min(len(cm), cmsgAlign(int(h.Len))):]
	}
	return -1
}

// took accounts n bytes just read into buf[w:] and hands on the frames
// they complete.
func (rf *rawFrames) took(n int) error {
	rf.w += n
	return rf.parse()
}

// parse hands every complete frame in buf[r:w] to fn.
func (rf *rawFrames) parse() error {
	for rf.w-rf.r >= FrameHeaderLen {
		t, size, err := parseHeader(rf.buf[rf.r:], rf.maxPayload)
		if err != nil {
			return err
		}
		end := rf.r + FrameHeaderLen + size + FrameTrailerLen
		if end > rf.w {
			break
		}
		payload := rf.buf[rf.r+FrameHeaderLen : end-FrameTrailerLen]
		if err := checkFrame(t, payload, rf.buf[end-FrameTrailerLen:end]); err != nil {
			return err
		}
		rf.r = end
		if err := rf.fn(t, payload); err != nil {
			return err
		}
	}
	if rf.r == rf.w {
		rf.r, rf.w = 0, 0
		if len(rf.buf) > retainBufSize {
			rf.buf = make([]byte, readBufSize) // a big frame's buffer goes with it
		}
	}
	return nil
}

// room makes space to read into and returns its size, never 0: the
// unconsumed bytes move to the front when the buffer's end is reached or
// the frame under way would not fit after them, and a frame larger than
// the buffer grows it, at most doubling at a time and never beyond the
// frame, so a header's claim costs memory only as its bytes arrive.
//
// Never 0, whatever the peer sends: parse has checked the header of the
// incomplete frame at buf[r:] (or there is no whole header yet), so its
// size need is at most the frame limit, and w-r < need (the frame is
// incomplete). Moving the bytes to the front leaves w = w-r < need <=
// len(buf); growing leaves w-r below the new size (it is need, or twice
// the old size, which held w-r). FuzzRawFramesRoom feeds any bytes in any
// pieces through room and took.
func (rf *rawFrames) room() int {
	need := FrameHeaderLen
	if rf.w-rf.r >= FrameHeaderLen {
		need = FrameHeaderLen + int(binary.BigEndian.Uint32(rf.buf[rf.r:])) + FrameTrailerLen // checked by parse
	}
	switch {
	case rf.w < len(rf.buf) && rf.r+need <= len(rf.buf):
	case need > len(rf.buf):
		nb := make([]byte, min(need, max(2*len(rf.buf), readBufSize)))
		rf.w = copy(nb, rf.buf[rf.r:rf.w])
		rf.r, rf.buf = 0, nb
	default:
		rf.w = copy(rf.buf, rf.buf[rf.r:rf.w])
		rf.r = 0
	}
	return len(rf.buf) - rf.w // never 0 (above); the read loop refuses 0 all the same
}
