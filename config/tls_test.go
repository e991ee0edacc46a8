package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/transport"
)

// devCerts writes a CA and a certificate for identity id (valid until
// notAfter) into a temporary directory and returns the TLS keys naming
// them.
func devCerts(t *testing.T, cluster string, id transport.Identity, notAfter time.Time) string {
	t.Helper()
	dir := t.TempDir()
	ca, err := transport.NewDevCA("test CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	is, err := ca.Issue(transport.CertSpec{Cluster: cluster, Identity: id, NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"ca.crt": ca.CertPEM, "n.crt": is.CertPEM, "n.key": is.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	q := func(n string) string { return strconv.Quote(filepath.Join(dir, n)) }
	return "tls_cert = " + q("n.crt") + "\ntls_key = " + q("n.key") + "\ntls_ca = " + q("ca.crt") + "\n"
}

func TestTLSKeys(t *testing.T) {
	hour := time.Now().Add(time.Hour)
	good := devCerts(t, "weft", transport.NodeIdentity(1), hour)
	c, err := Parse(good+minimal, Agent)
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS() == nil || c.Security() != "mtls" {
		t.Fatalf("TLS %v, security %s", c.TLS(), c.Security())
	}
	if back, err := Parse(c.Format(), Agent); err != nil || back.TLS() == nil || back.TLSCert != c.TLSCert {
		t.Fatalf("round trip: %v", err)
	}
	// A client reading a node's file loads none of it.
	if cc, err := Parse(good+minimal, Cluster); err != nil || cc.TLS() != nil || cc.TLSCA == "" {
		t.Fatalf("kind Cluster: %v %v", cc, err)
	}
	certOnly := good[:strings.Index(good, "tls_key")]
	wantFieldError(t, certOnly+minimal, "tls_key", "TLS needs tls_cert, tls_key and tls_ca together")
	wantFieldError(t, "tls_client_ca = \"/x\"\n"+minimal, "tls_client_ca", "needs tls_cert")
	wantFieldError(t, devCerts(t, "weft", transport.NodeIdentity(2), hour)+minimal, "tls_cert", "is node 2's certificate, but this is node 1")
	wantFieldError(t, devCerts(t, "weft", transport.AnyClientIdentity(), hour)+minimal, "tls_cert", "is client (any id)'s certificate")
	wantFieldError(t, devCerts(t, "other", transport.NodeIdentity(1), hour)+minimal, "tls_cert", `for cluster "other"`)
	wantFieldError(t, devCerts(t, "weft", transport.NodeIdentity(1), time.Now().Add(-time.Minute))+minimal, "tls_cert", "expired")
	// Another CA's certificate.
	line := func(keys, key string) string {
		for l := range strings.SplitSeq(keys, "\n") {
			if strings.HasPrefix(l, key+" ") {
				return l + "\n"
			}
		}
		t.Fatalf("no %s in %q", key, keys)
		return ""
	}
	other := devCerts(t, "weft", transport.NodeIdentity(1), hour)
	mixed := line(good, "tls_cert") + line(good, "tls_key") + line(other, "tls_ca")
	wantFieldError(t, mixed+minimal, "tls_cert", "does not verify against tls_ca")
}

// TestInsecureRefused: an agent listening off loopback needs TLS, a
// cluster key or insecure = true.
func TestInsecureRefused(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, listen := range []string{"0.0.0.0:7001", ":7001", "10.0.0.1:7001", "[::]:7001", "example.com:7001"} {
		l := "listen = " + strconv.Quote(listen) + "\n"
		for _, opt := range []string{"tls_cert, tls_key, tls_ca", "cluster_key_file", "insecure = true"} {
			wantFieldError(t, l+minimal, "listen", opt)
		}
		for _, ok := range []string{"insecure = true\n", "cluster_key_file = " + strconv.Quote(key) + "\n", devCerts(t, "weft", transport.NodeIdentity(1), time.Now().Add(time.Hour))} {
			if _, err := Parse(l+ok+minimal, Agent); err != nil {
				t.Errorf("%s with %s: %v", listen, ok, err)
			}
		}
		// Clients do not listen.
		if _, err := Parse(l+minimal, Cluster); err != nil {
			t.Errorf("kind Cluster: %v", err)
		}
	}
	if _, err := Parse(minimal, Agent); err != nil {
		t.Errorf("loopback without security: %v", err)
	}
}
