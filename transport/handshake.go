package transport

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
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
//	u8       1 if the sender holds a cluster key, else 0
//	16 bytes nonce (random, fresh for every handshake)
//
// Cluster key (Config.Key). When both sides hold one, the handshake has
// two more frames: the acceptor sends FrameAuth right after its Welcome,
// with HMAC-SHA256(key, "weft-acceptor" | hello | welcome), and the dialer,
// having checked it, answers with FrameAuth carrying HMAC-SHA256(key,
// "weft-dialer" | hello | welcome), where hello and welcome are the two
// Hello payloads. Each side's proof covers the other's fresh nonce, so a
// recorded handshake cannot be replayed, and neither side's proof can be
// reflected as the other's. The acceptor delivers nothing from a dialer
// before its proof checks. A side without a key and a side with one refuse
// each other (ReasonAuth). The key authenticates processes, not frames:
// someone who can rewrite a TCP stream in flight is not stopped (that
// needs TLS).
//
// The recipient id lets the acceptor refuse a dialer that has it mistaken
// for another process (a wrong address in its configuration) before the
// connection could displace the dialer's legitimate one.
//
// Mutual TLS (Config.TLS, see tls.go) wraps all of the above: the TLS
// handshake comes first, each side checks the other's certificate, and a
// refusal is a REJECT frame (ReasonCertificate, ReasonWrongPeer) sent
// over TLS by the side that refuses, in place of its Hello or Welcome.
// The acceptor then also refuses a Hello whose role and id the dialer's
// certificate does not carry (ReasonIdentity).
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
// the preamble. Version 2 added the key flag and the nonce to the Hello,
// version 3 the ping frame (FramePing).
const TransportVersion = 3

// tlsHandshakeRecord is the first byte of a TLS connection (a handshake
// record), which a preamble never starts with.
const tlsHandshakeRecord = 0x16

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
	// NonceLen is the length of a Hello's nonce.
	NonceLen = 16
	// helloTailLen follows the cluster name: the key flag and the nonce.
	helloTailLen = 1 + NonceLen
	// MinKeyLen and MaxKeyLen bound a cluster key, in bytes.
	MinKeyLen = 16
	MaxKeyLen = 1024
	// macLen is the length of a FrameAuth payload.
	macLen         = sha256.Size
	noticeFixedLen = 1 + 2
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
	// Keyed says the sender holds a cluster key.
	Keyed bool
	// Nonce is fresh for every handshake (NewNonce).
	Nonce [NonceLen]byte
}

// NewNonce returns a random nonce.
func NewNonce() [NonceLen]byte {
	var n [NonceLen]byte
	rand.Read(n[:])
	return n
}

// Proof roles for authMAC.
const (
	proofAcceptor = "weft-acceptor"
	proofDialer   = "weft-dialer"
)

// authMAC is one side's proof of the cluster key for a handshake whose
// Hello payloads are hello (the dialer's) and welcome (the acceptor's).
func authMAC(key []byte, role string, hello, welcome []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(role))
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(hello)))
	m.Write(n[:])
	m.Write(hello)
	m.Write(welcome)
	return m.Sum(nil)
}

// checkMAC reports whether payload is role's proof for the handshake.
func checkMAC(key []byte, role string, hello, welcome, payload []byte) bool {
	return len(payload) == macLen && hmac.Equal(payload, authMAC(key, role, hello, welcome))
}

// AppendPreamble appends the preamble to buf.
func AppendPreamble(buf []byte) []byte {
	return append(append(buf, Magic...), TransportVersion)
}

// checkPreamble returns ReasonNone for a valid preamble, otherwise why not.
func checkPreamble(p []byte) (Reason, string) {
	if p[0] == tlsHandshakeRecord {
		return ReasonTLS, "the dialer speaks TLS but this process has no TLS configured (tls_cert, tls_key, tls_ca)"
	}
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
	buf = append(buf, h.Cluster...)
	keyed := byte(0)
	if h.Keyed {
		keyed = 1
	}
	buf = append(buf, keyed)
	return append(buf, h.Nonce[:]...)
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
	if rest := len(b) - helloFixedLen - helloTailLen; rest != n {
		return Hello{}, fmt.Errorf("%w: cluster name of %d bytes and %d bytes of key flag and nonce, but %d bytes follow", ErrHandshake, n, helloTailLen, len(b)-helloFixedLen)
	}
	h.Cluster = string(b[helloFixedLen : helloFixedLen+n])
	tail := b[helloFixedLen+n:]
	switch tail[0] {
	case 0:
	case 1:
		h.Keyed = true
	default:
		return Hello{}, fmt.Errorf("%w: key flag %d", ErrHandshake, tail[0])
	}
	copy(h.Nonce[:], tail[1:])
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
	// ReasonAuth: the cluster key proof failed, or one side has a key and
	// the other none.
	ReasonAuth
	// ReasonTooManyConns: the acceptor is at its connection cap, in all
	// or for the dialer's address (Config.MaxConns, MaxConnsPerHost).
	ReasonTooManyConns
	// ReasonIdle: an accepted connection carried nothing for
	// Config.IdleTimeout.
	ReasonIdle
	// ReasonCertificate: a TLS certificate that does not verify (unknown
	// CA, expired, wrong key usage) or carries no weft identity for this
	// cluster; also a node's certificate that only the client CA vouches
	// for.
	ReasonCertificate
	// ReasonIdentity: the Hello claims a role or id its TLS certificate
	// does not carry (a client certificate connecting as a node, node 2's
	// certificate claiming node 3).
	ReasonIdentity
	// ReasonTLS: the TLS handshake failed, or one side uses TLS and the
	// other does not.
	ReasonTLS
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
	ReasonAuth:             "auth_failed",
	ReasonTooManyConns:     "too_many_connections",
	ReasonIdle:             "idle_timeout",
	ReasonCertificate:      "bad_certificate",
	ReasonIdentity:         "identity_mismatch",
	ReasonTLS:              "tls_failed",
}

func (r Reason) String() string {
	if r < reasonEnd {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason_%d", uint8(r))
}
