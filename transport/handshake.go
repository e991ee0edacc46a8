package transport

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// Handshake
//
// Each side starts its half of a connection with a preamble:
//
//	4 bytes  Magic "WEFT"
//	u8       TransportVersion
//
// The dialer sends its preamble and a FrameHello at once. The acceptor
// reads them and answers with its own preamble and either a FrameWelcome
// (the connection is up) or a FrameReject carrying the reason, after which
// it closes the connection. Hello and Welcome carry a Hello:
//
//	u8       wire version (wire.Version)
//	u8       role (RoleNode or RoleClient)
//	u32      sender id (wire.ProcID), big-endian
//	u32      id of the process the sender means to reach, big-endian
//	u8       length of the cluster name (1..MaxClusterName)
//	         cluster name
//
// The recipient id lets the acceptor refuse a dialer that has it mistaken
// for another process (a wrong address in its configuration) before the
// connection could displace the dialer's legitimate one.
//
// Reject and Close carry a Notice:
//
//	u8       reason (Reason)
//	u16      length of the text (0..MaxNoticeText), big-endian
//	         text (for humans; not interpreted)
//
// Decoding is strict: trailing bytes, an empty cluster name or an unknown
// role are errors. Unknown reason codes are accepted (a newer peer may know
// more reasons).

// Magic opens every connection, in both directions.
const Magic = "WEFT"

// TransportVersion is the version of the framing and handshake, byte 4 of
// the preamble.
const TransportVersion = 1

// PreambleLen is the length of the preamble.
const PreambleLen = len(Magic) + 1

// Handshake limits.
const (
	// MaxClusterName is the longest cluster name, in bytes.
	MaxClusterName = 255
	// MaxNoticeText is the longest Notice text, in bytes.
	MaxNoticeText = 1024
	// maxHandshakePayload bounds the payload of a frame read before the
	// handshake completes (Hello, Welcome, Reject).
	maxHandshakePayload = 2 << 10
	helloFixedLen       = 1 + 1 + 4 + 4 + 1
	noticeFixedLen      = 1 + 2
)

// ErrHandshake reports a malformed Hello or Notice.
var ErrHandshake = errors.New("transport: malformed handshake")

// Role is what a connecting process is: a node (a replica, which exchanges
// protocol messages with its peers) or a client (which sends MULTICASTs and
// receives replies on the same connection).
type Role uint8

// Roles. The values are part of the protocol.
const (
	RoleNode   Role = 1
	RoleClient Role = 2
)

func (r Role) String() string {
	switch r {
	case RoleNode:
		return "node"
	case RoleClient:
		return "client"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

func (r Role) valid() bool { return r == RoleNode || r == RoleClient }

// Hello is the payload of FrameHello and FrameWelcome.
type Hello struct {
	WireVersion uint8
	// Role and ID describe the sender.
	Role Role
	ID   wire.ProcID
	// To is the process the sender means to reach.
	To      wire.ProcID
	Cluster string
}

// AppendPreamble appends the preamble to buf.
func AppendPreamble(buf []byte) []byte {
	return append(append(buf, Magic...), TransportVersion)
}

// checkPreamble returns ReasonNone for a valid preamble, otherwise why not.
func checkPreamble(p []byte) (Reason, string) {
	if string(p[:len(Magic)]) != Magic {
		return ReasonBadMagic, fmt.Sprintf("preamble %q, want %q", p, Magic)
	}
	if v := p[len(Magic)]; v != TransportVersion {
		return ReasonTransportVersion, fmt.Sprintf("transport version %d, want %d", v, TransportVersion)
	}
	return ReasonNone, ""
}

// AppendHello appends the encoding of h to buf. It panics if the cluster
// name is empty or longer than MaxClusterName (Config validation prevents
// both).
func AppendHello(buf []byte, h Hello) []byte {
	if len(h.Cluster) == 0 || len(h.Cluster) > MaxClusterName {
		panic(fmt.Sprintf("transport: cluster name of %d bytes", len(h.Cluster)))
	}
	buf = append(buf, h.WireVersion, byte(h.Role))
	buf = binary.BigEndian.AppendUint32(buf, uint32(h.ID))
	buf = binary.BigEndian.AppendUint32(buf, uint32(h.To))
	buf = append(buf, byte(len(h.Cluster)))
	return append(buf, h.Cluster...)
}

// DecodeHello decodes a Hello. Errors wrap ErrHandshake.
func DecodeHello(b []byte) (Hello, error) {
	if len(b) < helloFixedLen {
		return Hello{}, fmt.Errorf("%w: hello of %d bytes, need at least %d", ErrHandshake, len(b), helloFixedLen)
	}
	h := Hello{
		WireVersion: b[0],
		Role:        Role(b[1]),
		ID:          wire.ProcID(binary.BigEndian.Uint32(b[2:])),
		To:          wire.ProcID(binary.BigEndian.Uint32(b[6:])),
	}
	if !h.Role.valid() {
		return Hello{}, fmt.Errorf("%w: unknown role %d", ErrHandshake, b[1])
	}
	n := int(b[helloFixedLen-1])
	if n == 0 {
		return Hello{}, fmt.Errorf("%w: empty cluster name", ErrHandshake)
	}
	if rest := len(b) - helloFixedLen; rest != n {
		return Hello{}, fmt.Errorf("%w: cluster name of %d bytes but %d bytes follow", ErrHandshake, n, rest)
	}
	h.Cluster = string(b[helloFixedLen:])
	return h, nil
}

// Notice is the payload of FrameReject and FrameClose.
type Notice struct {
	Reason Reason
	Text   string
}

// AppendNotice appends the encoding of n to buf; Text is cut to
// MaxNoticeText bytes.
func AppendNotice(buf []byte, n Notice) []byte {
	text := n.Text
	if len(text) > MaxNoticeText {
		text = text[:MaxNoticeText]
	}
	buf = append(buf, byte(n.Reason))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(text)))
	return append(buf, text...)
}

// DecodeNotice decodes a Notice. Errors wrap ErrHandshake.
func DecodeNotice(b []byte) (Notice, error) {
	if len(b) < noticeFixedLen {
		return Notice{}, fmt.Errorf("%w: notice of %d bytes, need at least %d", ErrHandshake, len(b), noticeFixedLen)
	}
	n := int(binary.BigEndian.Uint16(b[1:]))
	if n > MaxNoticeText {
		return Notice{}, fmt.Errorf("%w: notice text of %d bytes, limit %d", ErrHandshake, n, MaxNoticeText)
	}
	if rest := len(b) - noticeFixedLen; rest != n {
		return Notice{}, fmt.Errorf("%w: notice text of %d bytes but %d bytes follow", ErrHandshake, n, rest)
	}
	return Notice{Reason: Reason(b[0]), Text: string(b[noticeFixedLen:])}, nil
}

// Reason says why a handshake was refused or a connection dropped. Reasons
// travel in Reject and Close frames. ONLY APPEND: the values are part of the
// protocol. String gives the stable snake_case name used in logs and
// metrics.
type Reason uint8

// Reasons.
const (
	// ReasonNone: no failure (a clean close).
	ReasonNone Reason = iota
	// ReasonBadMagic: the preamble does not start with Magic.
	ReasonBadMagic
	// ReasonTransportVersion: the preamble has another TransportVersion.
	ReasonTransportVersion
	// ReasonWireVersion: the Hello has another wire.Version.
	ReasonWireVersion
	// ReasonClusterName: the Hello names another cluster.
	ReasonClusterName
	// ReasonUnknownPeer: the sender id and role are not allowed here.
	ReasonUnknownPeer
	// ReasonBadHandshake: a malformed Hello, Welcome or Notice, or a frame
	// of the wrong type during the handshake.
	ReasonBadHandshake
	// ReasonFrameTooLarge: a frame longer than the limit.
	ReasonFrameTooLarge
	// ReasonChecksum: a frame whose CRC does not match.
	ReasonChecksum
	// ReasonFrameType: an unknown frame type byte (garbage).
	ReasonFrameType
	// ReasonUnexpectedFrame: a known frame type that is not allowed on this
	// connection in its current state.
	ReasonUnexpectedFrame
	// ReasonBadMessage: a message frame whose payload wire.Decode refuses,
	// or a durable record sent as a message.
	ReasonBadMessage
	// ReasonForbiddenKind: a client sent a message kind clients may not
	// send.
	ReasonForbiddenKind
	// ReasonTruncated: the stream ended inside a preamble or frame.
	ReasonTruncated
	// ReasonTimeout: a handshake or write deadline passed.
	ReasonTimeout
	// ReasonIO: any other network error.
	ReasonIO
	// ReasonWrongPeer: the acceptor is not the process the dialer meant
	// to reach (the Hello's To is not the acceptor, or the Welcome names
	// another process).
	ReasonWrongPeer
	// ReasonDial: the TCP connection could not be made.
	ReasonDial
	// ReasonShutdown: the sender is shutting down.
	ReasonShutdown
	reasonEnd
)

var reasonNames = [...]string{
	ReasonNone:             "none",
	ReasonBadMagic:         "bad_magic",
	ReasonTransportVersion: "transport_version",
	ReasonWireVersion:      "wire_version",
	ReasonClusterName:      "cluster_name",
	ReasonUnknownPeer:      "unknown_peer",
	ReasonBadHandshake:     "bad_handshake",
	ReasonFrameTooLarge:    "frame_too_large",
	ReasonChecksum:         "bad_checksum",
	ReasonFrameType:        "bad_frame_type",
	ReasonUnexpectedFrame:  "unexpected_frame",
	ReasonBadMessage:       "bad_message",
	ReasonForbiddenKind:    "forbidden_kind",
	ReasonTruncated:        "truncated",
	ReasonTimeout:          "timeout",
	ReasonIO:               "io_error",
	ReasonWrongPeer:        "wrong_peer",
	ReasonDial:             "dial_failed",
	ReasonShutdown:         "shutdown",
}

func (r Reason) String() string {
	if r < reasonEnd {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason_%d", uint8(r))
}
