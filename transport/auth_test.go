package transport

import (
	"bytes"
	"testing"

	"github.com/weft-dev/weft/wire"
)

var (
	keyA = bytes.Repeat([]byte{0xa5}, 32)
	keyB = bytes.Repeat([]byte{0x5a}, 32)
)

// TestClusterKeyConnects: nodes sharing a key connect and exchange
// messages, in both directions.
func TestClusterKeyConnects(t *testing.T) {
	checkLeaks(t)
	nodes := cluster(t, []wire.ProcID{1, 2}, func(c *Config) { c.Key = keyA })
	sendSeq(t, nodes[1].tr, 1, 2, 1, 20)
	sendSeq(t, nodes[2].tr, 2, 1, 1, 20)
	waitFor(t, "messages both ways", func() bool {
		return nodes[2].rec.count(1) == 20 && nodes[1].rec.count(2) == 20
	})
}

// TestClusterKeyRefused: a wrong key, a key against none and none against
// a key are all refused (ReasonAuth) by each side's dialer (with a wrong
// key the dialer, checking the acceptor's proof first, hangs up), and no
// message crosses.
func TestClusterKeyRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		k1, k2 []byte
	}{
		{"different keys", keyA, keyB},
		{"key against none", keyA, nil},
		{"none against a key", nil, keyA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := cluster(t, []wire.ProcID{1, 2}, func(c *Config) {
				if c.Self == 1 {
					c.Key = tc.k1
				} else {
					c.Key = tc.k2
				}
			})
			waitFor(t, "both sides refuse", func() bool {
				s1, s2 := nodes[1].tr.Stats(), nodes[2].tr.Stats()
				return s1.DialFailures[ReasonAuth] > 0 && s2.DialFailures[ReasonAuth] > 0
			})
			nodes[1].tr.Send(2, msg(1, 1))
			if st := nodes[1].tr.Stats(); st.Connects != 0 || nodes[2].rec.count(1) != 0 {
				t.Fatalf("connected without the same key: %+v", st)
			}
		})
	}
}

// TestClusterKeyProofNotReplayable: a dialer replaying a recorded Hello and
// key proof is refused, because the proof covers the acceptor's fresh
// nonce.
func TestClusterKeyProofNotReplayable(t *testing.T) {
	cfg := baseConfig(t, 2)
	cfg.Listen = "127.0.0.1:0"
	cfg.Peers = map[wire.ProcID]string{1: "127.0.0.1:1"}
	cfg.Key = keyA
	n := startNode(t, cfg)
	hello := AppendHello(nil, Hello{WireVersion: wire.Version, Role: RoleNode, ID: 1, To: 2, Cluster: "test", Keyed: true, Nonce: NewNonce()})

	// A legitimate handshake, recorded.
	r1 := dialRaw(t, n.tr.Addr().String())
	r1.write(AppendFrame(AppendPreamble(nil), FrameHello, hello))
	typ, welcome := r1.answer()
	if typ != FrameWelcome {
		t.Fatalf("answer %s", typ)
	}
	if typ, proof, err := r1.fr.Next(); err != nil || typ != FrameAuth || !checkMAC(keyA, proofAcceptor, hello, welcome, proof) {
		t.Fatalf("acceptor's proof: %s %v", typ, err)
	}
	recorded := authMAC(keyA, proofDialer, hello, welcome)
	r1.write(AppendFrame(nil, FrameAuth, recorded))
	r1.write(AppendMessageFrame(nil, msg(1, 1)))
	waitFor(t, "the recorded handshake accepted", func() bool { return n.rec.count(1) == 1 })

	// The replay: same Hello, same proof, new connection.
	r2 := dialRaw(t, n.tr.Addr().String())
	r2.write(AppendFrame(AppendPreamble(nil), FrameHello, hello))
	if typ, _ := r2.answer(); typ != FrameWelcome {
		t.Fatalf("answer %s", typ)
	}
	if typ, _, err := r2.fr.Next(); err != nil || typ != FrameAuth {
		t.Fatalf("acceptor's proof: %s %v", typ, err)
	}
	r2.write(AppendFrame(nil, FrameAuth, recorded))
	typ, payload, err := r2.fr.Next()
	if err != nil || typ != FrameReject {
		t.Fatalf("replayed proof answered with %s, %v", typ, err)
	}
	if no, _ := DecodeNotice(payload); no.Reason != ReasonAuth {
		t.Fatalf("replayed proof rejected for %s", no.Reason)
	}
}

func TestClusterKeyLength(t *testing.T) {
	for _, k := range [][]byte{{}, make([]byte, MinKeyLen-1), make([]byte, MaxKeyLen+1)} {
		cfg := baseConfig(t, 1)
		cfg.Listen = "127.0.0.1:0"
		cfg.Handler = func(wire.ProcID, wire.Message) {}
		cfg.Key = k
		if tr, err := New(cfg); err == nil {
			tr.Close()
			t.Errorf("a %d-byte key was accepted", len(k))
		}
	}
}
