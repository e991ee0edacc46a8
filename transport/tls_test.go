package transport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// pki is a test PKI: a node CA, a client CA and helpers to issue from
// them.
type pki struct {
	t                *testing.T
	cluster          string
	nodeCA, clientCA *DevCA
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	now := time.Now()
	nodeCA, err := NewDevCA("test node CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	clientCA, err := NewDevCA("test client CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return &pki{t: t, cluster: "test", nodeCA: nodeCA, clientCA: clientCA}
}

// issue issues a certificate for id from ca, valid until notAfter.
func (p *pki) issue(ca *DevCA, id Identity, notAfter time.Time) tls.Certificate {
	p.t.Helper()
	is, err := ca.Issue(CertSpec{Cluster: p.cluster, Identity: id, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter})
	if err != nil {
		p.t.Fatal(err)
	}
	return is.TLSCertificate()
}

func (p *pki) cert(ca *DevCA, id Identity) tls.Certificate {
	return p.issue(ca, id, time.Now().Add(time.Hour))
}

// tlsFor is a node's TLS configuration: its certificate from the node CA
// and the node CA, without a client CA.
func (p *pki) tlsFor(id wire.ProcID) *TLS {
	return &TLS{Certificate: p.cert(p.nodeCA, NodeIdentity(id)), NodeCAs: p.nodeCA.Pool()}
}

// logOf gives a config a capturing logger and returns its reader.
func logOf(t *testing.T, c *Config) func() []slog.Record {
	l, recs := newCapture(t)
	c.Logger = l
	return recs
}

// logged reports whether a record with reason mentions every substring
// (in its detail or err attribute).
func logged(recs func() []slog.Record, reason Reason, subs ...string) bool {
	for _, r := range recs() {
		if recordAttr(r, "reason") != reason.String() {
			continue
		}
		text := recordAttr(r, "detail") + recordAttr(r, "err")
		ok := true
		for _, s := range subs {
			ok = ok && strings.Contains(text, s)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestTLSConnects: nodes and a client with certificates from one CA
// connect and exchange messages both ways, over TLS.
func TestTLSConnects(t *testing.T) {
	checkLeaks(t)
	p := newPKI(t)
	nodes := cluster(t, []wire.ProcID{1, 2}, func(c *Config) { c.TLS = p.tlsFor(c.Self) })
	sendSeq(t, nodes[1].tr, 1, 2, 1, 200)
	sendSeq(t, nodes[2].tr, 2, 1, 1, 200)
	waitFor(t, "messages both ways", func() bool { return nodes[2].rec.count(1) == 200 && nodes[1].rec.count(2) == 200 })
	checkRun(t, "1->2", nodes[2].rec.seqs(1), 1, 200)

	// A client (any-id certificate) gets replies on its connection.
	var nodeTr atomic.Pointer[Transport]
	ncfg := baseConfig(t, 10)
	ncfg.Listen = "127.0.0.1:0"
	ncfg.Peers = map[wire.ProcID]string{10: ""}
	ncfg.TLS = p.tlsFor(10)
	rec := newRecorder()
	rec.also = func(from wire.ProcID, m wire.Message) {
		nodeTr.Load().Send(from, &wire.Delivered{ID: m.(*wire.Multicast).M.ID, GTS: wire.Timestamp{T: 1}, Leader: 10})
	}
	ncfg.Handler = rec.handle
	n := startNode(t, ncfg)
	nodeTr.Store(n.tr)
	ccfg := baseConfig(t, 100)
	ccfg.Role = RoleClient
	ccfg.Peers = map[wire.ProcID]string{10: n.tr.Addr().String()}
	ccfg.TLS = &TLS{Certificate: p.cert(p.nodeCA, AnyClientIdentity()), NodeCAs: p.nodeCA.Pool()}
	c := startNode(t, ccfg)
	for s := uint64(1); s <= 50; s++ {
		if err := c.tr.Send(10, &wire.Multicast{M: wire.AppMsg{ID: wire.MsgID{Client: 100, Seq: s}, Dest: []wire.GroupID{0}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "replies", func() bool { return c.rec.count(10) == 50 })
	if st := n.tr.Stats(); len(st.Rejected) != 0 {
		t.Errorf("rejections: %v", st.Rejected)
	}
}

// TestTLSRefusedBothWays: node 2's certificate is refused by node 1
// (another CA, expired), so the two never connect, in either direction:
// node 1 refuses node 2's dial (as acceptor) and node 2's answer (as
// dialer), and node 2 learns why both times from node 1's REJECT; each
// side counts ReasonCertificate and logs the x509 reason.
func TestTLSRefusedBothWays(t *testing.T) {
	for _, tc := range []struct {
		name string
		// node 2's TLS configuration
		tls2 func(p *pki) *TLS
		why  string
	}{
		{"wrong CA", func(p *pki) *TLS {
			// Node 2 trusts node 1's CA, but its own certificate comes
			// from another one.
			other := newPKI(p.t)
			c := other.tlsFor(2)
			c.NodeCAs.AddCert(p.nodeCA.Cert)
			return c
		}, "certificate signed by unknown authority"},
		{"expired", func(p *pki) *TLS {
			return &TLS{Certificate: p.issue(p.nodeCA, NodeIdentity(2), time.Now().Add(-time.Minute)), NodeCAs: p.nodeCA.Pool()}
		}, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			p := newPKI(t)
			logs := map[wire.ProcID]func() []slog.Record{}
			nodes := cluster(t, []wire.ProcID{1, 2}, func(c *Config) {
				logs[c.Self] = logOf(t, c)
				if c.Self == 1 {
					c.TLS = p.tlsFor(1)
				} else {
					c.TLS = tc.tls2(p)
				}
			})
			nodes[1].tr.Send(2, msg(1, 1))
			nodes[2].tr.Send(1, msg(2, 1))
			waitFor(t, "both sides refuse both ways, with the reason", func() bool {
				s1, s2 := nodes[1].tr.Stats(), nodes[2].tr.Stats()
				return s1.DialFailures[ReasonCertificate] > 0 && s1.Rejected[ReasonCertificate] > 0 &&
					s2.DialFailures[ReasonCertificate] > 0 && s2.Rejected[ReasonCertificate] > 0 &&
					logged(logs[1], ReasonCertificate, tc.why) && logged(logs[2], ReasonCertificate, tc.why) &&
					// Each side's log of the other's refusal follows its
					// counters: wait for it rather than race it.
					logged(logs[2], ReasonCertificate, "peer rejected the handshake", tc.why) &&
					logged(logs[2], ReasonCertificate, "refused by the dialer", tc.why)
			})
			if !logged(logs[2], ReasonCertificate, "peer rejected the handshake", tc.why) {
				t.Error("node 2 (dialer) did not learn why node 1 refused it")
			}
			if !logged(logs[2], ReasonCertificate, "refused by the dialer", tc.why) {
				t.Error("node 2 (acceptor) did not learn why node 1 refused its certificate")
			}
			if s := nodes[1].tr.Stats(); s.Connects+s.Accepts != 0 || nodes[2].rec.count(1)+nodes[1].rec.count(2) != 0 {
				t.Fatalf("connected: %+v", s)
			}
		})
	}
}

// rawTLS is a hand-driven TLS connection to a transport: an attacker with
// a stolen or misused certificate, who skips this package's own checks.
func rawTLS(t *testing.T, addr string, cert tls.Certificate) *raw {
	t.Helper()
	d := &net.Dialer{Timeout: guard}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{
		MinVersion: tls.VersionTLS13, InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(guard))
	return &raw{t: t, conn: conn, fr: NewFrameReader(conn, DefaultMaxFrame)}
}

// rejectText reads a REJECT and checks its reason; it returns the text.
func (r *raw) rejectText(reason Reason) string {
	r.t.Helper()
	typ, payload := r.answer()
	n, err := DecodeNotice(payload)
	if typ != FrameReject || err != nil || n.Reason != reason {
		r.t.Fatalf("answer %s %+v (%v), want a REJECT for %s", typ, n, err, reason)
	}
	return n.Text
}

// TestTLSIdentityRefused: the acceptor binds the hello to the dialer's
// certificate. Each misuse is refused with a reason the dialer reads in
// the REJECT and the acceptor counts and logs.
func TestTLSIdentityRefused(t *testing.T) {
	p := newPKI(t)
	clientCAMode := func(c *Config) { c.TLS.ClientCAs = p.clientCA.Pool() }
	for _, tc := range []struct {
		name   string
		mode   func(*Config) // the acceptor's config
		cert   tls.Certificate
		hello  Hello
		reason Reason
		why    string
	}{
		{"id mismatch: node 2's certificate claiming node 3", nil, p.cert(p.nodeCA, NodeIdentity(2)),
			Hello{Role: RoleNode, ID: 3}, ReasonIdentity, "the certificate is node 2's but the hello claims node 3"},
		{"node certificate used by a client", nil, p.cert(p.nodeCA, NodeIdentity(2)),
			Hello{Role: RoleClient, ID: 500}, ReasonIdentity, "node 2's certificate cannot connect as a client"},
		{"client certificate connecting as a node", nil, p.cert(p.nodeCA, AnyClientIdentity()),
			Hello{Role: RoleNode, ID: 2}, ReasonIdentity, "a client certificate cannot connect as a node"},
		{"client bound to another id", nil, p.cert(p.nodeCA, Identity{Role: RoleClient, ID: 77}),
			Hello{Role: RoleClient, ID: 78}, ReasonIdentity, "the certificate is client 77's but the hello claims client 78"},
		{"client CA certificate claiming a node", clientCAMode, p.cert(p.clientCA, NodeIdentity(2)),
			Hello{Role: RoleNode, ID: 2}, ReasonCertificate, "a certificate from the client CA cannot be a node"},
		{"client certificate from the node CA when clients have their own", clientCAMode, p.cert(p.nodeCA, AnyClientIdentity()),
			Hello{Role: RoleClient, ID: 500}, ReasonCertificate, "checked against the client CA"},
		{"certificate for another cluster", nil, func() tls.Certificate {
			is, _ := p.nodeCA.Issue(CertSpec{Cluster: "other", Identity: NodeIdentity(2), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)})
			return is.TLSCertificate()
		}(), Hello{Role: RoleNode, ID: 2}, ReasonCertificate, `the certificate is for cluster "other"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			cfg := baseConfig(t, 1)
			cfg.Listen = "127.0.0.1:0"
			cfg.Peers = map[wire.ProcID]string{1: "", 2: "127.0.0.1:1", 3: "127.0.0.1:1"}
			cfg.TLS = p.tlsFor(1)
			if tc.mode != nil {
				tc.mode(&cfg)
			}
			logs := logOf(t, &cfg)
			n := startNode(t, cfg)
			r := rawTLS(t, n.tr.Addr().String(), tc.cert)
			if tc.reason == ReasonIdentity {
				h := tc.hello
				h.WireVersion, h.To, h.Cluster, h.Nonce = wire.Version, 1, "test", NewNonce()
				r.write(AppendFrame(AppendPreamble(nil), FrameHello, AppendHello(nil, h)))
			}
			if text := r.rejectText(tc.reason); !strings.Contains(text, tc.why) {
				t.Errorf("the dialer reads %q, want it to say %q", text, tc.why)
			}
			r.expectClosed()
			waitFor(t, "the acceptor counts and logs the refusal", func() bool {
				return n.tr.Stats().Rejected[tc.reason] == 1 && logged(logs, tc.reason, tc.why)
			})
			if st := n.tr.Stats(); st.Accepts != 0 || n.rec.count(2)+n.rec.count(3) != 0 {
				t.Errorf("accepted: %+v", st)
			}
		})
	}
}

// TestTLSDialerChecksTheNode: a dialer that reaches a process presenting
// another node's certificate, or a client's, refuses it (ReasonWrongPeer,
// ReasonCertificate), and tells it why.
func TestTLSDialerChecksTheNode(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		name   string
		cert   tls.Certificate
		reason Reason
		why    string
	}{
		{"another node's certificate", p.cert(p.nodeCA, NodeIdentity(2)), ReasonWrongPeer, "presents node 2's certificate; this process dialed node 3"},
		{"a client's certificate", p.cert(p.nodeCA, AnyClientIdentity()), ReasonCertificate, "presents a client's (any id) certificate, not a node's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{tc.cert},
				ClientAuth: tls.RequireAnyClientCert})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			got := make(chan string, 1)
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					got <- err.Error()
					return
				}
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(guard))
				var pre [PreambleLen]byte
				if _, err := io.ReadFull(conn, pre[:]); err != nil {
					got <- err.Error()
					return
				}
				fr := NewFrameReader(conn, DefaultMaxFrame)
				typ, payload, err := fr.Next()
				n, _ := DecodeNotice(payload)
				if err != nil || typ != FrameReject || n.Reason != tc.reason {
					got <- "no reject"
					return
				}
				got <- n.Text
			}()
			cfg := baseConfig(t, 1)
			cfg.Listen = "127.0.0.1:0"
			cfg.Peers = map[wire.ProcID]string{3: ln.Addr().String()}
			cfg.TLS = p.tlsFor(1)
			logs := logOf(t, &cfg)
			n := startNode(t, cfg)
			if text := <-got; !strings.Contains(text, tc.why) {
				t.Errorf("the impostor reads %q, want %q", text, tc.why)
			}
			waitFor(t, "the dialer counts and logs it", func() bool {
				return n.tr.Stats().DialFailures[tc.reason] > 0 && logged(logs, tc.reason, tc.why)
			})
			if n.tr.Stats().Connects != 0 {
				t.Error("connected to an impostor")
			}
		})
	}
}

// TestTLSAgainstPlain: a TLS node and a plain node refuse each other both
// ways (ReasonTLS) and each side says which has no TLS.
func TestTLSAgainstPlain(t *testing.T) {
	checkLeaks(t)
	p := newPKI(t)
	logs := map[wire.ProcID]func() []slog.Record{}
	nodes := cluster(t, []wire.ProcID{1, 2}, func(c *Config) {
		logs[c.Self] = logOf(t, c)
		if c.Self == 2 {
			c.TLS = p.tlsFor(2)
		}
	})
	waitFor(t, "both sides refuse both ways", func() bool {
		s1, s2 := nodes[1].tr.Stats(), nodes[2].tr.Stats()
		return s1.DialFailures[ReasonTLS] > 0 && s1.Rejected[ReasonTLS] > 0 && s2.DialFailures[ReasonTLS] > 0 && s2.Rejected[ReasonTLS] > 0
	})
	for _, c := range []struct {
		id  wire.ProcID
		why string
	}{
		{1, "this node requires TLS"},                 // 1 dialed 2, read 2's plain reject
		{1, "the dialer speaks TLS but this process"}, // 2 dialed 1
		{2, "this node requires TLS"},                 // 1 dialed 2
		{2, "the node answered without TLS"},          // 2 dialed 1
	} {
		// A failure is counted before it is logged: wait for the line.
		waitFor(t, fmt.Sprintf("node %d to log %q", c.id, c.why), func() bool { return logged(logs[c.id], ReasonTLS, c.why) })
	}
}

// TestTLSOwnCertificateChecked: a process refuses to start with a
// certificate that is not its own identity.
func TestTLSOwnCertificateChecked(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		name string
		role Role
		self wire.ProcID
		id   Identity
		want string
	}{
		{"node with another node's certificate", RoleNode, 3, NodeIdentity(2), "its TLS certificate is node 2's"},
		{"node with a client certificate", RoleNode, 3, AnyClientIdentity(), "is not a node's"},
		{"client with a node certificate", RoleClient, 500, NodeIdentity(2), "a client cannot use node 2's TLS certificate"},
		{"client with another client's certificate", RoleClient, 500, Identity{Role: RoleClient, ID: 501}, "certificate is client 501's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(t, tc.self)
			cfg.Role = tc.role
			cfg.Handler = func(wire.ProcID, wire.Message) {}
			if tc.role == RoleNode {
				cfg.Listen = "127.0.0.1:0"
			}
			cfg.TLS = &TLS{Certificate: p.cert(p.nodeCA, tc.id), NodeCAs: p.nodeCA.Pool()}
			tr, err := New(cfg)
			if err == nil {
				tr.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
		})
	}
}

// TestCertIdentity covers the URI forms.
func TestCertIdentity(t *testing.T) {
	p := newPKI(t)
	for _, id := range []Identity{NodeIdentity(0), NodeIdentity(1<<32 - 1), AnyClientIdentity(), {Role: RoleClient, ID: 9}} {
		c := p.cert(p.nodeCA, id)
		leaf, _ := x509.ParseCertificate(c.Certificate[0])
		got, found, err := CertIdentity(leaf, "test")
		if err != nil || !found || got != id {
			t.Errorf("%s: got %s %v %v", id, got, found, err)
		}
		if _, found, err := CertIdentity(leaf, "other"); found || err == nil {
			t.Errorf("%s in another cluster: found %v err %v", id, found, err)
		}
	}
}

// TestDialerRejectReason: a REJECT in place of a HELLO counts under its
// reason only for the refusals a TLS dialer sends; anything else a dialer
// claims is a bad handshake.
func TestDialerRejectReason(t *testing.T) {
	checkLeaks(t)
	cfg := baseConfig(t, 2)
	cfg.Listen = "127.0.0.1:0"
	cfg.Peers = map[wire.ProcID]string{2: ""}
	n := startNode(t, cfg)
	for i, claimed := range []Reason{ReasonAuth, ReasonCertificate} {
		r := dialRaw(t, n.tr.Addr().String())
		r.write(AppendFrame(AppendPreamble(nil), FrameReject, AppendNotice(nil, Notice{Reason: claimed, Text: "no"})))
		r.expectClosed()
		want := ReasonBadHandshake
		if claimed == ReasonCertificate {
			want = ReasonCertificate
		}
		waitFor(t, "counted", func() bool { return n.tr.Stats().Rejected[want] == 1 })
		if st := n.tr.Stats(); st.Rejected[claimed] != uint64(i) {
			t.Errorf("after a REJECT claiming %s: %v", claimed, st.Rejected)
		}
	}
}
