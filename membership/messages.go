package membership

import (
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// Kind identifies a gossip message type; it is byte 1 of the encoding.
type Kind uint8

// Message kinds.
const (
	KindSyn  Kind = 1
	KindAck  Kind = 2
	KindAck2 Kind = 3
	// KindPing and KindPong are the direct probes between probe peers
	// (probe.go), wire version 3.
	KindPing Kind = 4
	KindPong Kind = 5
)

func (k Kind) String() string {
	switch k {
	case KindSyn:
		return "SYN"
	case KindAck:
		return "ACK"
	case KindAck2:
		return "ACK2"
	case KindPing:
		return "PING"
	case KindPong:
		return "PONG"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Message is one of *Syn, *Ack, *Ack2, *Ping, *Pong.
//
// Messages a Node puts in Ready are immutable: the Node may hand the same
// message (and the same slices) to several recipients, and may share
// AppState slices with its own records. Drivers and receivers must not
// modify them.
type Message interface {
	Kind() Kind
	isMessage()
}

// Digest summarises what a node holds about one endpoint: its generation
// and the highest version it has of that endpoint's record.
//
// In an Ack's Requests, a Digest is a request: Generation and Version are
// what the requester holds (0, 0 when it holds nothing), and the answer is
// every item newer than that (the whole record if the answerer's generation
// is newer).
type Digest struct {
	Node       wire.ProcID
	Generation uint64
	Version    uint64
}

// AppState is one application state of an endpoint: the value and the
// version (from the owner's single counter) at which it was set.
type AppState struct {
	Key     Key
	Version uint64
	Value   string
}

// EndpointState carries the part of an endpoint's record newer than Base:
// the heartbeat if its version is above Base (else Heartbeat is 0) and the
// application states whose versions are above Base, sorted by key. Base 0
// is the whole record.
//
// A paged delta carries a version prefix (Base, w] of the record; the
// receiver's maximum version becomes w and it asks for the rest next
// round. A receiver applies a delta only if it holds the same generation
// up to at least Base (or Base is 0 and the generation is new), so records
// never have gaps.
type EndpointState struct {
	Node       wire.ProcID
	Generation uint64
	Base       uint64
	Heartbeat  uint64
	States     []AppState
}

// MaxVersion returns the highest version in s (Base if it carries nothing).
func (s *EndpointState) MaxVersion() uint64 {
	v := max(s.Base, s.Heartbeat)
	for i := range s.States {
		v = max(v, s.States[i].Version)
	}
	return v
}

// Syn opens an exchange: the initiator's wall time when it sent it (Unix
// ns, the now of its Tick; 0: unstamped), its cluster name and one digest
// per endpoint it knows (a contiguous page of them when the full list
// would exceed the message cap), sorted by node.
type Syn struct {
	Sent    int64
	Cluster string
	Digests []Digest
}

// Times are the wall-clock stamps of a reply (Unix ns, each side's own
// clock), from which the receiver estimates its offset to the sender
// NTP-style (clock.go): Echo is the Sent time of the message answered (the
// receiver's own clock), Recv when the sender received that message and
// Sent when it sent this reply (the sender's clock). All zero: unstamped
// (no clock sample); otherwise all are positive and Sent >= Recv.
type Times struct {
	Echo, Recv, Sent int64
}

// Ack answers a Syn: its Times (Echo is the SYN's Sent), requests for what
// the receiver lacks and the states the initiator lacks, both sorted by
// node.
type Ack struct {
	Times
	Requests []Digest
	States   []EndpointState
}

// Ack2 closes an exchange: its Times (Echo is the ACK's Sent) and the
// states the Ack requested, sorted by node.
type Ack2 struct {
	Times
	States []EndpointState
}

// Kind implements Message.
func (*Syn) Kind() Kind { return KindSyn }

// Kind implements Message.
func (*Ack) Kind() Kind { return KindAck }

// Kind implements Message.
func (*Ack2) Kind() Kind { return KindAck2 }

// Ping is a direct liveness probe to a probe peer (Config.ProbePeers,
// probe.go), sent every round. It carries the sender's wall time (echoed
// by the Pong), generation and heartbeat, so the receiver knows how far
// the sender's record had come when it was last heard from directly.
type Ping struct {
	Sent       int64
	Generation uint64
	Heartbeat  uint64
}

// Pong answers a Ping: Echo is the Ping's Sent, Generation and Heartbeat
// the answering node's.
type Pong struct {
	Echo       int64
	Generation uint64
	Heartbeat  uint64
}

// Kind returns KindPing.
func (*Ping) Kind() Kind { return KindPing }

// Kind returns KindPong.
func (*Pong) Kind() Kind { return KindPong }

func (*Syn) isMessage()  {}
func (*Ack) isMessage()  {}
func (*Ack2) isMessage() {}
func (*Ping) isMessage() {}
func (*Pong) isMessage() {}

// Envelope is a message with its sender and recipient.
type Envelope struct {
	From, To wire.ProcID
	Msg      Message
}

// Describe renders a message on one line, for tests and traces.
func Describe(m Message) string {
	switch m := m.(type) {
	case *Syn:
		return fmt.Sprintf("SYN%s cluster=%q digests=%s", describeSent(m.Sent), m.Cluster, describeDigests(m.Digests))
	case *Ack:
		return fmt.Sprintf("ACK%s req=%s states=%s", m.Times.describe(), describeDigests(m.Requests), describeStates(m.States))
	case *Ack2:
		return fmt.Sprintf("ACK2%s states=%s", m.Times.describe(), describeStates(m.States))
	case *Ping:
		return fmt.Sprintf("PING%s gen=%d hb=%d", describeSent(m.Sent), m.Generation, m.Heartbeat)
	case *Pong:
		return fmt.Sprintf("PONG%s gen=%d hb=%d", describeSent(m.Echo), m.Generation, m.Heartbeat)
	}
	return fmt.Sprintf("%T", m)
}

// describeSent and describe show stamps only when present, so the
// descriptions of unstamped messages (tests) stay short.
func describeSent(t int64) string {
	if t == 0 {
		return ""
	}
	return fmt.Sprintf(" t=%d", t)
}

func (t Times) describe() string {
	if t == (Times{}) {
		return ""
	}
	return fmt.Sprintf(" t=%d/%d/%d", t.Echo, t.Recv, t.Sent)
}

func describeDigests(ds []Digest) string {
	b := []byte{'['}
	for i, d := range ds {
		if i > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "%d:%d.%d", d.Node, d.Generation, d.Version)
	}
	return string(append(b, ']'))
}

func describeStates(ss []EndpointState) string {
	b := []byte{'['}
	for i := range ss {
		s := &ss[i]
		if i > 0 {
			b = append(b, ' ')
		}
		b = fmt.Appendf(b, "{%d:%d >%d", s.Node, s.Generation, s.Base)
		if s.Heartbeat != 0 {
			b = fmt.Appendf(b, " hb=%d", s.Heartbeat)
		}
		for _, a := range s.States {
			b = fmt.Appendf(b, " %s@%d=%q", a.Key, a.Version, a.Value)
		}
		b = append(b, '}')
	}
	return string(append(b, ']'))
}
