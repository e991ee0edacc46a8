package config

import (
	"crypto/x509"
	"fmt"
	"strconv"
	"strings"

	"github.com/weft-dev/weft/transport"
)

// validateTLS loads the agent's TLS files (tls_cert, tls_key, tls_ca,
// tls_client_ca) and checks that the certificate is this node's and
// verifies against tls_ca now. A client reading a node's file (kind
// Cluster) loads nothing: its certificate is not the node's (see
// TLSCA).
func (c *Config) validateTLS(kind Kind) error {
	c.tls = nil
	set := map[string]bool{"tls_cert": c.TLSCert != "", "tls_key": c.TLSKey != "", "tls_ca": c.TLSCA != ""}
	n := 0
	for _, v := range set {
		if v {
			n++
		}
	}
	if n != 0 && n != 3 {
		for _, k := range []string{"tls_cert", "tls_key", "tls_ca"} {
			if !set[k] {
				return &FieldError{Field: k, Msg: "missing: TLS needs tls_cert, tls_key and tls_ca together"}
			}
		}
	}
	if c.TLSClientCA != "" && n == 0 {
		return &FieldError{Field: "tls_client_ca", Msg: "needs tls_cert, tls_key and tls_ca"}
	}
	if n == 0 || kind != Agent {
		return nil
	}
	t, err := transport.LoadTLS(c.TLSCert, c.TLSKey, c.TLSCA, c.TLSClientCA)
	if err != nil {
		return &FieldError{Field: "tls_cert", Msg: err.Error()}
	}
	leaf := t.Certificate.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(t.Certificate.Certificate[0]); err != nil {
			return &FieldError{Field: "tls_cert", Msg: err.Error()}
		}
	}
	want := transport.NodeIdentity(c.ID)
	id, found, err := transport.CertIdentity(leaf, c.Cluster)
	switch {
	case err != nil:
		return &FieldError{Field: "tls_cert", Msg: fmt.Sprintf("%s: %v", c.TLSCert, err)}
	case !found:
		return &FieldError{Field: "tls_cert", Msg: fmt.Sprintf("%s carries no weft identity for cluster %q: node %d's certificate needs the URI SAN %s (weft certs makes one)", c.TLSCert, c.Cluster, c.ID, transport.NodeURI(c.Cluster, c.ID))}
	case id != want:
		return &FieldError{Field: "tls_cert", Msg: fmt.Sprintf("%s is %s's certificate, but this is node %d", c.TLSCert, id, c.ID)}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: t.NodeCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return &FieldError{Field: "tls_cert", Msg: fmt.Sprintf("%s does not verify against tls_ca %s: %v", c.TLSCert, c.TLSCA, err)}
	}
	c.tls = t
	return nil
}

// validateSecurity refuses an agent that anyone on the network could join
// as a node: listening off loopback with neither TLS nor a cluster key,
// unless insecure = true.
func (c *Config) validateSecurity() error {
	if IsLoopback(c.Listen) || c.tls != nil || c.key != nil || c.Insecure {
		return nil
	}
	return &FieldError{Field: "listen", Msg: fmt.Sprintf("%q is not a loopback address and the node has neither TLS nor a cluster key: "+
		"anyone who can reach it could join as a node. Configure mutual TLS (tls_cert, tls_key, tls_ca; `weft certs` makes development certificates), "+
		"or a shared cluster key (cluster_key_file), or set insecure = true to run unauthenticated on purpose", c.Listen)}
}

// TLS returns the agent's TLS configuration read by validation, or nil.
func (c *Config) TLS() *transport.TLS { return c.tls }

// Security names the transport security in use, for the agent's start-up
// line: "mtls", "mtls+cluster_key", "cluster_key" or "none".
func (c *Config) Security() string {
	var parts []string
	if c.tls != nil {
		parts = append(parts, "mtls")
	}
	if c.key != nil {
		parts = append(parts, "cluster_key")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

func (c *Config) formatTLS(sb *strings.Builder) {
	q := strconv.Quote
	for _, kv := range []struct{ k, v string }{{"tls_cert", c.TLSCert}, {"tls_key", c.TLSKey}, {"tls_ca", c.TLSCA}, {"tls_client_ca", c.TLSClientCA}} {
		if kv.v != "" {
			fmt.Fprintf(sb, "%s = %s\n", kv.k, q(kv.v))
		}
	}
	if c.Insecure {
		sb.WriteString("insecure = true\n")
	}
}
