package transport

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/wire"
)

func TestHelloRoundTrip(t *testing.T) {
	for _, h := range []Hello{
		{WireVersion: wire.Version, Role: RoleNode, ID: 0, To: 0, Cluster: "c"},
		{WireVersion: 9, Role: RoleClient, ID: 1<<32 - 1, To: 17, Cluster: strings.Repeat("x", MaxClusterName)},
	} {
		b := AppendHello(nil, h)
		got, err := DecodeHello(b)
		if err != nil || got != h {
			t.Fatalf("DecodeHello(AppendHello(%+v)) = %+v, %v", h, got, err)
		}
	}
	// Layout, byte by byte.
	nonce := [NonceLen]byte{0: 0xaa, NonceLen - 1: 0xbb}
	b := AppendHello(nil, Hello{WireVersion: 1, Role: RoleClient, ID: 0x01020304, To: 0x0a0b0c0d, Cluster: "ab", Keyed: true, Nonce: nonce})
	want := append([]byte{1, 2, 1, 2, 3, 4, 10, 11, 12, 13, 2, 'a', 'b', 1}, nonce[:]...)
	if !bytes.Equal(b, want) {
		t.Fatalf("hello layout %v, want %v", b, want)
	}
}

func TestHelloErrors(t *testing.T) {
	good := AppendHello(nil, Hello{WireVersion: 1, Role: RoleNode, ID: 5, Cluster: "abc"})
	tests := map[string][]byte{
		"empty":         nil,
		"short":         good[:5],
		"role zero":     func() []byte { b := bytes.Clone(good); b[1] = 0; return b }(),
		"role unknown":  func() []byte { b := bytes.Clone(good); b[1] = 3; return b }(),
		"empty cluster": {1, 1, 0, 0, 0, 5, 0, 0, 0, 2, 0},
		"truncated":     good[:len(good)-1],
		"trailing":      append(bytes.Clone(good), 0),
	}
	for name, in := range tests {
		if _, err := DecodeHello(in); !errors.Is(err, ErrHandshake) {
			t.Errorf("%s: DecodeHello = %v, want ErrHandshake", name, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxClusterName+1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AppendHello with a %d-byte cluster name did not panic", len(bad))
				}
			}()
			AppendHello(nil, Hello{Role: RoleNode, Cluster: bad})
		}()
	}
}

func TestNoticeRoundTrip(t *testing.T) {
	for _, n := range []Notice{
		{Reason: ReasonClusterName, Text: ""},
		{Reason: ReasonShutdown, Text: "bye"},
		{Reason: Reason(250), Text: strings.Repeat("y", MaxNoticeText)},
	} {
		got, err := DecodeNotice(AppendNotice(nil, n))
		if err != nil || got != n {
			t.Fatalf("DecodeNotice(AppendNotice(%+v)) = %+v, %v", n, got, err)
		}
	}
	long := AppendNotice(nil, Notice{Reason: ReasonIO, Text: strings.Repeat("z", 5000)})
	if n, err := DecodeNotice(long); err != nil || len(n.Text) != MaxNoticeText {
		t.Fatalf("long text: %d bytes, %v", len(n.Text), err)
	}
	for name, in := range map[string][]byte{
		"empty":     nil,
		"short":     {1, 0},
		"truncated": {1, 0, 3, 'a'},
		"trailing":  {1, 0, 1, 'a', 'b'},
		"over cap":  append([]byte{1, 0x04, 0x01}, make([]byte, 1025)...),
	} {
		if _, err := DecodeNotice(in); !errors.Is(err, ErrHandshake) {
			t.Errorf("%s: DecodeNotice = %v, want ErrHandshake", name, err)
		}
	}
}

func TestPreamble(t *testing.T) {
	p := AppendPreamble(nil)
	if string(p) != "WEFT\x03" || len(p) != PreambleLen {
		t.Fatalf("preamble %q", p)
	}
	if r, _ := checkPreamble(p); r != ReasonNone {
		t.Fatalf("own preamble rejected: %s", r)
	}
	if r, _ := checkPreamble([]byte("GET /")); r != ReasonBadMagic {
		t.Fatalf("HTTP preamble: %s", r)
	}
	if r, _ := checkPreamble([]byte{0x16, 3, 1, 0, 0xf0}); r != ReasonTLS {
		t.Fatalf("TLS ClientHello: %s", r)
	}
	if r, _ := checkPreamble([]byte("WEFT\x07")); r != ReasonTransportVersion {
		t.Fatalf("version 7 preamble: %s", r)
	}
}

// TestReasonCodes pins the on-the-wire values of reasons and their names,
// which metrics and logs use.
func TestReasonCodes(t *testing.T) {
	pinned := map[Reason]uint8{
		ReasonNone: 0, ReasonBadMagic: 1, ReasonTransportVersion: 2, ReasonWireVersion: 3,
		ReasonClusterName: 4, ReasonUnknownPeer: 5, ReasonBadHandshake: 6, ReasonFrameTooLarge: 7,
		ReasonChecksum: 8, ReasonFrameType: 9, ReasonUnexpectedFrame: 10, ReasonBadMessage: 11,
		ReasonForbiddenKind: 12, ReasonTruncated: 13, ReasonTimeout: 14, ReasonIO: 15,
		ReasonWrongPeer: 16, ReasonDial: 17, ReasonShutdown: 18, ReasonAuth: 19,
		ReasonTooManyConns: 20, ReasonIdle: 21,
		ReasonCertificate: 22, ReasonIdentity: 23, ReasonTLS: 24,
	}
	if len(pinned) != int(reasonEnd) {
		t.Fatalf("%d reasons pinned, %d defined", len(pinned), reasonEnd)
	}
	seen := map[string]bool{}
	for r, code := range pinned {
		if uint8(r) != code {
			t.Errorf("%s = %d, want %d", r, uint8(r), code)
		}
		s := r.String()
		if s == "" || seen[s] || strings.ContainsAny(s, " ()") {
			t.Errorf("reason %d has name %q", code, s)
		}
		seen[s] = true
	}
	if got := Reason(200).String(); got != "reason_200" {
		t.Errorf("unknown reason prints %q", got)
	}
	for d := DropReason(0); d < dropEnd; d++ {
		if s := d.String(); s == "" || seen[s] {
			t.Errorf("drop reason %d has name %q", d, s)
		}
	}
	if RoleNode.String() != "node" || RoleClient.String() != "client" || Role(0).String() != "Role(0)" {
		t.Error("role names")
	}
}

// FuzzDecodeHello checks DecodeHello never panics, stays within its caps
// and accepts only canonical encodings.
func FuzzDecodeHello(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendHello(nil, Hello{WireVersion: 1, Role: RoleNode, ID: 3, To: 4, Cluster: "weft"}))
	f.Add(AppendHello(nil, Hello{WireVersion: 1, Role: RoleClient, ID: 1 << 31, To: 2, Cluster: strings.Repeat("a", 255)}))
	f.Add([]byte{1, 1, 0, 0, 0, 1, 0, 0, 0, 2, 200, 'x'})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := DecodeHello(data)
		if err != nil {
			if !errors.Is(err, ErrHandshake) {
				t.Fatalf("error %v does not wrap ErrHandshake", err)
			}
			return
		}
		if len(h.Cluster) == 0 || len(h.Cluster) > MaxClusterName || !h.Role.valid() {
			t.Fatalf("decoded %+v", h)
		}
		if re := AppendHello(nil, h); !bytes.Equal(re, data) {
			t.Fatalf("re-encoding differs: %x vs %x", re, data)
		}
	})
}

// FuzzDecodeNotice is FuzzDecodeHello for notices.
func FuzzDecodeNotice(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendNotice(nil, Notice{Reason: ReasonBadMagic, Text: "preamble \"GET /\""}))
	f.Add([]byte{5, 0xff, 0xff, 'a'})
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := DecodeNotice(data)
		if err != nil {
			if !errors.Is(err, ErrHandshake) {
				t.Fatalf("error %v does not wrap ErrHandshake", err)
			}
			return
		}
		if len(n.Text) > MaxNoticeText {
			t.Fatalf("text of %d bytes", len(n.Text))
		}
		if re := AppendNotice(nil, n); !bytes.Equal(re, data) {
			t.Fatalf("re-encoding differs: %x vs %x", re, data)
		}
	})
}
