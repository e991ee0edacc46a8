package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/weft-dev/weft/wire"
)

// Mutual TLS
//
// With Config.TLS every connection is TLS 1.3 with a certificate on both
// sides, and the certificates say who is who:
//
//   - a node's certificate chains to the node CA (TLS.NodeCAs) and carries
//     the URI SAN weft://<cluster>/node/<id> (NodeURI);
//   - a client's certificate carries weft://<cluster>/client (any client
//     id) or weft://<cluster>/client/<id> (that id only) and chains to the
//     client CA (TLS.ClientCAs) if there is one, else to the node CA; with
//     a client CA, a certificate from it without a weft URI is a client
//     too (any id). A certificate that only the client CA vouches for is
//     never a node, whatever URI it carries.
//
// The TLS handshake itself only proves that each side holds the key of
// the certificate it presented: both sides then verify the other's chain
// (x509, current time, key usage) and identity themselves, so that a
// refusal can travel as a REJECT frame with the reason over the
// encrypted connection instead of a bare TLS alert. Nothing else is read
// or sent before that check passes. The dialer then checks it reached the
// node it dialed (ReasonWrongPeer otherwise), and the acceptor checks the
// HELLO's role and id against the certificate (ReasonIdentity): a client
// certificate cannot connect as a node, a node certificate cannot connect
// as a client or as another node. After the handshake every frame is
// encrypted and integrity-protected by TLS.
//
// A plain (non-TLS) dialer reaching a TLS node gets a plain REJECT
// (ReasonTLS) saying the node requires TLS; a TLS dialer reaching a plain
// node reports that the node answered without TLS. Session resumption is
// off: every connection presents and checks full certificates.

// URIScheme is the scheme of the URI SANs that carry weft identities.
const URIScheme = "weft"

// NodeURI is the URI SAN of node id's certificate in cluster.
func NodeURI(cluster string, id wire.ProcID) *url.URL {
	return &url.URL{Scheme: URIScheme, Host: cluster, Path: "/node/" + strconv.FormatUint(uint64(id), 10)}
}

// ClientURI is the URI SAN of a client certificate in cluster: bound to one
// client id, or to any (any = true; id is then ignored).
func ClientURI(cluster string, id wire.ProcID, any bool) *url.URL {
	u := &url.URL{Scheme: URIScheme, Host: cluster, Path: "/client"}
	if !any {
		u.Path += "/" + strconv.FormatUint(uint64(id), 10)
	}
	return u
}

// Identity is what a verified certificate lets its holder be.
type Identity struct {
	Role Role
	// ID is the node's id, or the client's if AnyClient is false.
	ID wire.ProcID
	// AnyClient: a client certificate not bound to one client id.
	AnyClient bool
}

// owner is "node 2's", "client 7's" or "a client's (any id)".
func (i Identity) owner() string {
	if i.Role == RoleClient && i.AnyClient {
		return "a client's (any id)"
	}
	return i.String() + "'s"
}

func (i Identity) String() string {
	if i.Role == RoleClient && i.AnyClient {
		return "client (any id)"
	}
	return fmt.Sprintf("%s %d", i.Role, i.ID)
}

// CertIdentity returns the weft identity a certificate's URI SANs claim in
// cluster; found is false if it carries none for this cluster. It does not
// verify the certificate. A certificate claiming two identities, or a
// malformed weft URI, is an error.
func CertIdentity(cert *x509.Certificate, cluster string) (id Identity, found bool, err error) {
	var others []string
	for _, u := range cert.URIs {
		if u.Scheme != URIScheme {
			continue
		}
		if u.Host != cluster {
			others = append(others, u.Host)
			continue
		}
		var cur Identity
		parts := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
		switch {
		case len(parts) == 2 && parts[0] == "node":
			cur.Role = RoleNode
		case len(parts) == 1 && parts[0] == "client":
			cur = Identity{Role: RoleClient, AnyClient: true}
		case len(parts) == 2 && parts[0] == "client":
			cur.Role = RoleClient
		default:
			return Identity{}, false, fmt.Errorf("malformed weft identity %q (want weft://%s/node/<id>, weft://%s/client or weft://%s/client/<id>)", u, cluster, cluster, cluster)
		}
		if !cur.AnyClient {
			n, err := strconv.ParseUint(parts[1], 10, 32)
			if err != nil || strconv.FormatUint(n, 10) != parts[1] {
				return Identity{}, false, fmt.Errorf("malformed weft identity %q: bad id", u)
			}
			cur.ID = wire.ProcID(n)
		}
		if found && cur != id {
			return Identity{}, false, fmt.Errorf("the certificate claims two identities, %s and %s", id, cur)
		}
		id, found = cur, true
	}
	if !found && len(others) > 0 {
		return Identity{}, false, fmt.Errorf("the certificate is for cluster %q, not %q", others[0], cluster)
	}
	return id, found, nil
}

// TLS configures mutual TLS (Config.TLS). See LoadTLS.
type TLS struct {
	// Certificate is this process's certificate chain and private key; its
	// leaf must carry this process's identity (NodeURI, or for a client a
	// ClientURI or a client CA's certificate).
	Certificate tls.Certificate
	// NodeCAs verifies node certificates (required).
	NodeCAs *x509.CertPool
	// ClientCAs, if set, verifies client certificates; nil: clients'
	// certificates come from NodeCAs and must carry a ClientURI.
	ClientCAs *x509.CertPool
}

// LoadTLS reads a PEM certificate chain and private key, the node CA
// bundle and, if clientCAFile is not empty, the client CA bundle.
func LoadTLS(certFile, keyFile, caFile, clientCAFile string) (*TLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certificate %s and key %s: %w", certFile, keyFile, err)
	}
	c := &TLS{Certificate: cert}
	if c.NodeCAs, err = LoadCAs(caFile); err != nil {
		return nil, err
	}
	if clientCAFile != "" {
		if c.ClientCAs, err = LoadCAs(clientCAFile); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// LoadCAs reads a bundle of PEM CA certificates.
func LoadCAs(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		ca, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		pool.AddCert(ca)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// leaf returns the parsed leaf certificate.
func (c *TLS) leaf() (*x509.Certificate, error) {
	if c.Certificate.Leaf != nil {
		return c.Certificate.Leaf, nil
	}
	if len(c.Certificate.Certificate) == 0 {
		return nil, errors.New("no certificate")
	}
	return x509.ParseCertificate(c.Certificate.Certificate[0])
}

// validateTLS checks Config.TLS (called by Config.validate once the
// Logger is set) and keeps a copy with the parsed leaf.
func (c *Config) validateTLS() error {
	if c.TLS == nil {
		return nil
	}
	cp := *c.TLS
	warning, err := cp.validate(c.ClusterName, c.Role, c.Self)
	if err != nil {
		return err
	}
	if warning != "" {
		c.Logger.Warn(warning, "self", uint32(c.Self))
	}
	c.TLS = &cp
	return nil
}

// validate checks this process's own certificate: it must carry the
// identity the process will claim. A chain that does not verify (expired,
// another CA) is only returned as a warning: the peers will refuse it, and
// each side will say why.
func (c *TLS) validate(cluster string, role Role, self wire.ProcID) (warning string, err error) {
	if c.NodeCAs == nil {
		return "", errors.New("transport: TLS.NodeCAs is required")
	}
	leaf, err := c.leaf()
	if err != nil {
		return "", fmt.Errorf("transport: TLS certificate: %w", err)
	}
	c.Certificate.Leaf = leaf
	id, found, err := CertIdentity(leaf, cluster)
	if err != nil {
		return "", fmt.Errorf("transport: TLS certificate: %w", err)
	}
	switch {
	case role == RoleNode && (!found || id.Role != RoleNode):
		return "", fmt.Errorf("transport: this process is node %d but its TLS certificate is not a node's (want the URI SAN %s)", self, NodeURI(cluster, self))
	case role == RoleNode && id.ID != self:
		return "", fmt.Errorf("transport: this process is node %d but its TLS certificate is node %d's", self, id.ID)
	case role == RoleClient && found && id.Role != RoleClient:
		return "", fmt.Errorf("transport: a client cannot use %s's TLS certificate", id)
	case role == RoleClient && found && !id.AnyClient && id.ID != self:
		return "", fmt.Errorf("transport: this client is %d but its TLS certificate is client %d's", self, id.ID)
	}
	if role == RoleClient && c.ClientCAs == nil {
		return "", nil // a client need not know the nodes' client CA
	}
	if _, err := c.verify(c.Certificate.Certificate, leaf, cluster, false); err != nil {
		return "this process's own certificate does not verify: " + err.Error(), nil
	}
	return "", nil
}

// serverConfig is the acceptor's tls.Config.
func (c *TLS) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.Certificate},
		// Any certificate at the TLS level: verify checks it once the
		// connection is up, so a refusal can say why (see above).
		ClientAuth:             tls.RequireAnyClientCert,
		SessionTicketsDisabled: true,
	}
}

// clientConfig is the dialer's tls.Config.
func (c *TLS) clientConfig() *tls.Config {
	cert := c.Certificate
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Always present our certificate (the acceptor names no CAs).
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
		// The acceptor's chain and identity are checked by verify right
		// after the handshake, before anything else is sent: the identity
		// is the URI SAN of the node dialed, not a host name.
		InsecureSkipVerify: true,
	}
}

// verify checks a peer's certificate chain (raw DER, leaf first) and
// returns the identity it carries. asServer: the peer is the acceptor we
// dialed (server key usage, and it must be a node).
func (c *TLS) verify(chain [][]byte, leaf *x509.Certificate, cluster string, asServer bool) (Identity, error) {
	if leaf == nil {
		if len(chain) == 0 {
			return Identity{}, errors.New("no certificate presented")
		}
		var err error
		if leaf, err = x509.ParseCertificate(chain[0]); err != nil {
			return Identity{}, err
		}
	}
	inter := x509.NewCertPool()
	for _, der := range chain[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	usage := x509.ExtKeyUsageClientAuth
	if asServer {
		usage = x509.ExtKeyUsageServerAuth
	}
	check := func(roots *x509.CertPool) error {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
	id, found, err := CertIdentity(leaf, cluster)
	if err != nil {
		return Identity{}, err
	}
	switch {
	case asServer && found && id.Role != RoleNode:
		return Identity{}, fmt.Errorf("the acceptor presents %s certificate, not a node's", id.owner())
	case found && id.Role == RoleNode:
		if err := check(c.NodeCAs); err != nil {
			if c.ClientCAs != nil && check(c.ClientCAs) == nil {
				return Identity{}, fmt.Errorf("a certificate from the client CA cannot be a node (it claims %s)", id)
			}
			return Identity{}, fmt.Errorf("%s certificate (serial %x): %w", id.owner(), leaf.SerialNumber, err)
		}
	case found:
		roots, which := c.NodeCAs, "node CA"
		if c.ClientCAs != nil {
			roots, which = c.ClientCAs, "client CA"
		}
		if err := check(roots); err != nil {
			return Identity{}, fmt.Errorf("%s certificate (serial %x, checked against the %s): %w", id.owner(), leaf.SerialNumber, which, err)
		}
	case c.ClientCAs != nil:
		if err := check(c.ClientCAs); err != nil {
			return Identity{}, fmt.Errorf("certificate %q carries no weft identity for cluster %q and the client CA refuses it: %w", leaf.Subject, cluster, err)
		}
		id = Identity{Role: RoleClient, AnyClient: true}
	default:
		return Identity{}, fmt.Errorf("certificate %q carries no weft identity for cluster %q (want a URI SAN %s)", leaf.Subject, cluster, NodeURI(cluster, 0))
	}
	return id, nil
}

// refuses says why a HELLO's role and id are not what the certificate
// allows, or "".
func (i *Identity) refuses(h Hello) string {
	switch {
	case i == nil:
		return ""
	case h.Role == RoleNode && i.Role != RoleNode:
		return fmt.Sprintf("a client certificate cannot connect as a node (the hello claims node %d)", h.ID)
	case h.Role == RoleClient && i.Role == RoleNode:
		return fmt.Sprintf("node %d's certificate cannot connect as a client (the hello claims client %d)", i.ID, h.ID)
	case h.Role == RoleNode && i.ID != h.ID:
		return fmt.Sprintf("the certificate is node %d's but the hello claims node %d", i.ID, h.ID)
	case h.Role == RoleClient && !i.AnyClient && i.ID != h.ID:
		return fmt.Sprintf("the certificate is client %d's but the hello claims client %d", i.ID, h.ID)
	}
	return ""
}

// tlsConn is a TLS connection whose Close closes the TCP connection at
// once (weft's CLOSE frame says goodbye; a close_notify alert could wait
// on a peer that does not read), and whose CloseWrite half-closes it.
type tlsConn struct {
	*tls.Conn
	raw net.Conn
}

func (c *tlsConn) Close() error { return c.raw.Close() }

func (c *tlsConn) CloseWrite() error {
	c.Conn.CloseWrite() // close_notify: the peer's reader sees EOF
	if tc, ok := tcpOf(c.raw); ok {
		return tc.CloseWrite()
	}
	return nil
}

// tlsClient wraps a dialed connection; the handshake runs in
// tlsDialHandshake.
func (t *Transport) tlsClient(raw net.Conn) net.Conn {
	return &tlsConn{Conn: tls.Client(raw, t.cfg.TLS.clientConfig()), raw: raw}
}

// tlsDialHandshake runs the TLS handshake on a dialed connection and
// checks that the acceptor is node to. On a refusal it tells the acceptor
// why (a REJECT frame) before it hangs up.
func (t *Transport) tlsDialHandshake(conn *tlsConn, to wire.ProcID, addr string) (Reason, error) {
	if err := conn.HandshakeContext(t.ctx); err != nil {
		return tlsReason(err), fmt.Errorf("TLS handshake with %s: %w%s", addr, err, plainHint(err))
	}
	cs := conn.ConnectionState()
	var leaf *x509.Certificate
	if len(cs.PeerCertificates) > 0 {
		leaf = cs.PeerCertificates[0]
	}
	r, detail := ReasonNone, ""
	id, err := t.cfg.TLS.verify(rawChain(cs.PeerCertificates), leaf, t.cfg.ClusterName, true)
	switch {
	case err != nil:
		r, detail = ReasonCertificate, err.Error()
	case id.Role != RoleNode:
		r, detail = ReasonCertificate, fmt.Sprintf("%s presents a %s certificate, not a node's", addr, id)
	case id.ID != to:
		r, detail = ReasonWrongPeer, fmt.Sprintf("%s presents node %d's certificate; this process dialed node %d", addr, id.ID, to)
	}
	if r == ReasonNone {
		return ReasonNone, nil
	}
	// Tell the acceptor, best effort, then wait for it to hang up so the
	// reject is not lost to a reset.
	conn.Write(AppendFrame(AppendPreamble(nil), FrameReject, AppendNotice(nil, Notice{Reason: r, Text: "the dialer refuses this node's certificate: " + detail})))
	conn.CloseWrite()
	io.CopyN(io.Discard, conn, rejectDrain)
	return r, errors.New(detail)
}

// tlsAcceptHandshake runs the TLS handshake on an accepted connection and
// checks the dialer's certificate. It returns the connection to go on
// with (the TLS one once its handshake is done, the raw one if the dialer
// does not speak TLS) and either the dialer's identity or why it is
// refused.
func (t *Transport) tlsAcceptHandshake(raw net.Conn) (net.Conn, *Identity, Reason, string) {
	tc := tls.Server(raw, t.cfg.TLS.serverConfig())
	conn := &tlsConn{Conn: tc, raw: raw}
	if err := tc.HandshakeContext(t.ctx); err != nil {
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) && rh.Conn != nil && string(rh.RecordHeader[:len(Magic)]) == Magic {
			return raw, nil, ReasonTLS, "this node requires TLS (it has tls_cert, tls_key and tls_ca; the dialer has none)"
		}
		return nil, nil, tlsReason(err), "TLS handshake: " + err.Error()
	}
	cs := tc.ConnectionState()
	id, err := t.cfg.TLS.verify(rawChain(cs.PeerCertificates), cs.PeerCertificates[0], t.cfg.ClusterName, false)
	if err != nil {
		return conn, nil, ReasonCertificate, err.Error()
	}
	return conn, &id, ReasonNone, ""
}

func rawChain(certs []*x509.Certificate) [][]byte {
	out := make([][]byte, len(certs))
	for i, c := range certs {
		out[i] = c.Raw
	}
	return out
}

// tlsReason classifies a TLS handshake error.
func tlsReason(err error) Reason {
	if errors.Is(err, context.Canceled) {
		return ReasonShutdown
	}
	var rh tls.RecordHeaderError
	var op *net.OpError
	switch {
	case errors.As(err, &rh):
		return ReasonTLS
	case errors.As(err, &op) && op.Op == "remote error":
		return ReasonTLS
	}
	if r := classify(err); r != ReasonNone && r != ReasonIO {
		return r
	} else if r == ReasonNone {
		return ReasonTruncated
	}
	return ReasonTLS
}

// plainHint explains a TLS handshake that met a plain weft acceptor.
func plainHint(err error) string {
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) && string(rh.RecordHeader[:len(Magic)]) == Magic {
		return " (the node answered without TLS: it has no tls_cert configured)"
	}
	return ""
}
