package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/weft-dev/weft/wire"
)

// Framing
//
// After the preamble (see handshake.go) both directions of a connection are
// a sequence of frames:
//
//	u32  length   big-endian length of payload, in bytes (type and CRC excluded)
//	u8   type     FrameType
//	     payload  length bytes
//	u32  crc      big-endian CRC32C (Castagnoli) of type and payload
//
// A reader checks the type byte, then the length against its limit, before
// it reads or allocates anything else, so garbage is reported as an unknown
// frame type and an oversized frame costs no memory.

// FrameType is the one-byte type of a frame. ONLY APPEND: the values are part
// of the protocol.
type FrameType uint8

// Frame types.
const (
	FrameInvalid FrameType = iota
	// FrameHello is the dialer's handshake; the payload is a Hello.
	FrameHello
	// FrameWelcome is the acceptor's answer to an accepted Hello; the
	// payload is a Hello describing the acceptor.
	FrameWelcome
	// FrameReject is the acceptor's answer to a refused handshake; the
	// payload is a Notice. The acceptor closes the connection after it.
	FrameReject
	// FrameMessage carries one message encoded by wire.Append.
	FrameMessage
	// FrameClose announces that the sender is closing the connection on
	// purpose; the payload is a Notice.
	FrameClose
	// FrameAuth proves, in a handshake between processes that share a
	// cluster key, that the sender holds the key; the payload is an
	// HMAC-SHA256 (see handshake.go).
	FrameAuth
	// FramePing keeps a connection without traffic alive (transport
	// version 3); the payload is empty. See Config.IdleTimeout.
	FramePing
	frameEnd
)

var frameNames = [...]string{
	FrameInvalid: "INVALID",
	FrameHello:   "HELLO",
	FrameWelcome: "WELCOME",
	FrameReject:  "REJECT",
	FrameMessage: "MESSAGE",
	FrameClose:   "CLOSE",
	FrameAuth:    "AUTH",
	FramePing:    "PING",
}

func (t FrameType) String() string {
	if t < frameEnd {
		return frameNames[t]
	}
	return fmt.Sprintf("FrameType(%d)", uint8(t))
}

func (t FrameType) valid() bool { return t > FrameInvalid && t < frameEnd }

// Frame layout constants.
const (
	// FrameHeaderLen is the length of the length word and the type byte.
	FrameHeaderLen = 5
	// FrameTrailerLen is the length of the CRC.
	FrameTrailerLen = 4
	// FrameOverhead is the number of bytes a frame adds to its payload.
	FrameOverhead = FrameHeaderLen + FrameTrailerLen
	// DefaultMaxFrame is the default limit on a frame's payload, in bytes:
	// the cap the protocols and the simulator keep messages under.
	DefaultMaxFrame = wire.DefaultMaxFrame
	// MinMaxFrame is the smallest accepted Config.MaxFrame.
	MinMaxFrame = 1 << 10
	// MaxMaxFrame is the largest accepted Config.MaxFrame.
	MaxMaxFrame = 1 << 30
)

// readBufSize is the size of a connection's bufio.Reader. Frames whose
// payload and CRC fit in it are returned without copying.
const readBufSize = 64 << 10

// retainBufSize is the largest spill buffer a FrameReader keeps between
// frames; a larger one, needed for one big frame, is released afterwards.
const retainBufSize = 256 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Frame errors. Errors returned by DecodeFrame and FrameReader.Next wrap
// them; test with errors.Is.
var (
	// ErrFrameType reports an unknown frame type byte (typically garbage).
	ErrFrameType = errors.New("transport: unknown frame type")
	// ErrFrameTooLarge reports a frame whose length exceeds the limit.
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrChecksum reports a frame whose CRC does not match.
	ErrChecksum = errors.New("transport: frame checksum mismatch")
	// ErrTruncated reports input that ends inside a frame. It wraps
	// io.ErrUnexpectedEOF.
	ErrTruncated = fmt.Errorf("transport: truncated frame: %w", io.ErrUnexpectedEOF)
)

// typeCRC[t] is the CRC32C of the one byte t: the state to continue from
// over a payload (so the type byte needs no buffer of its own).
var typeCRC = func() (c [256]uint32) {
	for t := range c {
		c[t] = crc32.Checksum([]byte{byte(t)}, castagnoli)
	}
	return c
}()

func frameChecksum(t FrameType, payload []byte) uint32 {
	return crc32.Update(typeCRC[t], castagnoli, payload)
}

// AppendFrame appends a frame of type t carrying payload to buf.
func AppendFrame(buf []byte, t FrameType, payload []byte) []byte {
	start := len(buf)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(payload)))
	buf = append(buf, byte(t))
	buf = append(buf, payload...)
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf[start+4:], castagnoli))
}

// AppendMessageFrame appends a FrameMessage carrying wire.Append(m) to buf,
// encoding m in place. It panics like wire.Append.
func AppendMessageFrame(buf []byte, m wire.Message) []byte {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0, byte(FrameMessage))
	buf = wire.Append(buf, m)
	binary.BigEndian.PutUint32(buf[start:], uint32(len(buf)-start-FrameHeaderLen))
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf[start+4:], castagnoli))
}

// parseHeader checks a frame header: the type first, then the length.
func parseHeader(h []byte, maxPayload int) (FrameType, int, error) {
	n := binary.BigEndian.Uint32(h)
	t := FrameType(h[4])
	if !t.valid() {
		return 0, 0, fmt.Errorf("%w: type byte %d (length word %#08x)", ErrFrameType, h[4], n)
	}
	if uint64(n) > uint64(maxPayload) {
		return 0, 0, fmt.Errorf("%w: %s frame of %d bytes, limit %d", ErrFrameTooLarge, t, n, maxPayload)
	}
	return t, int(n), nil
}

// checkFrame checks a frame's CRC (trailer, its last 4 bytes) against
// its type and payload.
func checkFrame(t FrameType, payload, trailer []byte) error {
	if got, want := frameChecksum(t, payload), binary.BigEndian.Uint32(trailer); got != want {
		return fmt.Errorf("%w: %s frame of %d bytes: crc %#08x, frame says %#08x", ErrChecksum, t, len(payload), got, want)
	}
	return nil
}

// DecodeFrame decodes the frame at the start of b, whose payload may be at
// most maxPayload bytes. It returns the type, the payload (aliasing b) and
// the number of bytes the frame occupies. Errors wrap ErrFrameType,
// ErrFrameTooLarge, ErrChecksum or ErrTruncated.
func DecodeFrame(b []byte, maxPayload int) (t FrameType, payload []byte, n int, err error) {
	if len(b) < FrameHeaderLen {
		return 0, nil, 0, fmt.Errorf("%w: %d of %d header bytes", ErrTruncated, len(b), FrameHeaderLen)
	}
	t, size, err := parseHeader(b, maxPayload)
	if err != nil {
		return 0, nil, 0, err
	}
	end := FrameHeaderLen + size + FrameTrailerLen
	if len(b) < end {
		return 0, nil, 0, fmt.Errorf("%w: %s frame needs %d bytes, have %d", ErrTruncated, t, end, len(b))
	}
	payload = b[FrameHeaderLen : FrameHeaderLen+size]
	if err := checkFrame(t, payload, b[end-FrameTrailerLen:]); err != nil {
		return 0, nil, 0, err
	}
	return t, payload, end, nil
}

// FrameReader reads frames from a stream. It reads through a bufio.Reader
// (r itself if r is a large enough *bufio.Reader) and returns frames that
// fit in it without copying; larger ones are read into a spill buffer that
// grows with the bytes actually received, never beyond the frame limit.
type FrameReader struct {
	br         *bufio.Reader
	maxPayload int
	spill      []byte
}

// NewFrameReader returns a reader of frames with payloads of at most
// maxPayload bytes.
func NewFrameReader(r io.Reader, maxPayload int) *FrameReader {
	return newFrameReaderSize(r, maxPayload, readBufSize)
}

// newFrameReaderSize is NewFrameReader with a given bufio buffer size (at
// least 16 bytes); tests use small ones to exercise the spill path.
func newFrameReaderSize(r io.Reader, maxPayload, size int) *FrameReader {
	return &FrameReader{br: bufio.NewReaderSize(r, size), maxPayload: maxPayload}
}

// Next reads the next frame. The payload is valid until the next call. At
// a clean end of stream (between frames) it returns io.EOF; errors wrap
// ErrFrameType, ErrFrameTooLarge, ErrChecksum or ErrTruncated, or are the
// underlying reader's.
func (fr *FrameReader) Next() (FrameType, []byte, error) {
	if cap(fr.spill) > retainBufSize {
		fr.spill = nil
	}
	hdr, err := fr.br.Peek(FrameHeaderLen)
	if err != nil {
		switch {
		case err == io.EOF && len(hdr) == 0:
			return 0, nil, io.EOF
		case err == io.EOF:
			return 0, nil, fmt.Errorf("%w: %d of %d header bytes", ErrTruncated, len(hdr), FrameHeaderLen)
		}
		return 0, nil, err
	}
	t, size, err := parseHeader(hdr, fr.maxPayload)
	if err != nil {
		return 0, nil, err
	}
	if _, err := fr.br.Discard(FrameHeaderLen); err != nil {
		return 0, nil, err
	}
	total := size + FrameTrailerLen
	var body []byte
	if total <= fr.br.Size() {
		body, err = fr.br.Peek(total)
		if err != nil {
			return 0, nil, fr.bodyErr(err, t, len(body), total)
		}
		// Discard only moves the read index: body stays valid until the
		// next read from br.
		if _, err := fr.br.Discard(total); err != nil {
			return 0, nil, err
		}
	} else {
		body, err = fr.readSpill(total)
		if err != nil {
			return 0, nil, fr.bodyErr(err, t, len(body), total)
		}
	}
	payload := body[:size]
	if err := checkFrame(t, payload, body[size:]); err != nil {
		return 0, nil, err
	}
	return t, payload, nil
}

// each hands every frame to fn until fn or the stream fails; at a clean
// end of stream it returns io.EOF.
func (fr *FrameReader) each(fn func(FrameType, []byte) error) error {
	for {
		t, payload, err := fr.Next()
		if err != nil {
			return err
		}
		if err := fn(t, payload); err != nil {
			return err
		}
	}
}

// readSpill reads total bytes into the spill buffer, growing it (at most
// doubling, never beyond total) as bytes arrive.
func (fr *FrameReader) readSpill(total int) ([]byte, error) {
	buf := fr.spill[:0]
	for len(buf) < total {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(total, max(2*cap(buf), fr.br.Size())))
			copy(nb, buf)
			buf = nb
		}
		// Read up to total, never to cap: a spill buffer kept from a larger
		// frame would otherwise read into the next frame (and, on a live
		// connection, block until it arrived).
		n, err := io.ReadFull(fr.br, buf[len(buf):min(cap(buf), total)])
		buf = buf[:len(buf)+n]
		if err != nil {
			fr.spill = buf[:0]
			return buf, err
		}
	}
	fr.spill = buf[:0]
	return buf, nil
}

func (fr *FrameReader) bodyErr(err error, t FrameType, have, want int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s frame body: %d of %d bytes", ErrTruncated, t, have, want)
	}
	return err
}
