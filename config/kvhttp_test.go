package config

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/transport"
)

// TestKVHTTP: the [kv] table's defaults, its round trip through Format,
// and every refusal: an API without service = "kv", off loopback without
// a token, on another of the node's ports, on a TLS cluster without a
// client certificate (or with a node's), and values out of range.
func TestKVHTTP(t *testing.T) {
	for _, key := range []string{"\n[kv]\n", "# http =", "# token_file =", "\ntimeout =", "\nmax_requests ="} {
		if !strings.Contains(Sample, key) {
			t.Errorf("sample lacks %q", key)
		}
	}
	d, err := Parse(minimal, Agent)
	if err != nil || d.KV.HTTP != "" || d.KV.Timeout != DefaultKVHTTPTimeout || d.KV.MaxRequests != DefaultKVHTTPMaxRequests || d.KVToken() != nil {
		t.Fatalf("defaults: %+v %v", d.KV, err)
	}
	kv := "service = \"kv\"\n" + minimal
	c, err := Parse(kv+"[kv]\nhttp = \"127.0.0.1:7480\"\ntimeout = \"2s\"\nmax_requests = 8\n", Agent)
	if err != nil || c.KV.HTTP != "127.0.0.1:7480" || c.KV.Timeout != 2*time.Second || c.KV.MaxRequests != 8 {
		t.Fatalf("%+v %v", c.KV, err)
	}
	if back, err := Parse(c.Format(), Agent); err != nil || back.KV.HTTP != c.KV.HTTP || back.KV.Timeout != c.KV.Timeout || back.KV.MaxRequests != c.KV.MaxRequests {
		t.Fatalf("round trip: %+v %v\n%s", back, err, c.Format())
	}
	// Off loopback: only with a token, which is read and kept.
	tokPath := writeToken(t, 0o600, "0123456789abcdef0123456789abcdef\n")
	wantFieldError(t, kv+"[kv]\nhttp = \"0.0.0.0:7480\"\n", "kv.http", "needs kv.token_file")
	wantFieldError(t, kv+"[kv]\nhttp = \":7480\"\n", "kv.http", "needs kv.token_file")
	c, err = Parse(kv+"[kv]\nhttp = \"0.0.0.0:7480\"\ntoken_file = "+strconv.Quote(tokPath)+"\n", Agent)
	if err != nil || string(c.KVToken()) != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("with a token: %q %v", c.KVToken(), err)
	}
	if back, err := Parse(c.Format(), Agent); err != nil || string(back.KVToken()) != string(c.KVToken()) {
		t.Fatalf("round trip with a token: %v", err)
	}
	wantFieldError(t, kv+"[kv]\ntoken_file = "+strconv.Quote(writeToken(t, 0o644, "0123456789abcdef0123456789abcdef"))+"\n", "kv.token_file", "chmod 600")
	wantFieldError(t, kv+"[kv]\ntoken_file = "+strconv.Quote(writeToken(t, 0o600, "short"))+"\n", "kv.token_file", "token of 5 bytes")

	wantFieldError(t, minimal+"[kv]\nhttp = \"127.0.0.1:7480\"\n", "kv.http", `needs service = "kv"`)
	wantFieldError(t, kv+"[kv]\nhttp = \"7480\"\n", "kv.http", "not a host:port")
	// The node's own ports (listen and client_addr default to 127.0.0.1:7001).
	wantFieldError(t, kv+"[kv]\nhttp = \"localhost:7001\"\n", "kv.http", "node's listen address")
	wantFieldError(t, "admin = \"127.0.0.1:7200\"\n"+kv+"[kv]\nhttp = \"127.0.0.1:7200\"\n", "kv.http", "node's admin address")

	// On a TLS cluster the API's client needs a client certificate.
	hour := time.Now().Add(time.Hour)
	tlsKV := devCerts(t, "weft", transport.NodeIdentity(1), hour) + kv + "[kv]\nhttp = \"127.0.0.1:7480\"\n"
	certKeys := func(id transport.Identity) string { // the tls_cert and tls_key lines
		lines := strings.SplitAfter(devCerts(t, "weft", id, hour), "\n")
		return lines[0] + lines[1]
	}
	wantFieldError(t, tlsKV, "kv.tls_cert", "needs a client certificate")
	wantFieldError(t, tlsKV+certKeys(transport.NodeIdentity(1)), "kv.tls_cert", "node 1's certificate, not a client's")
	c, err = Parse(tlsKV+certKeys(transport.AnyClientIdentity()), Agent)
	if err != nil || c.KVClientTLS() == nil || c.KVClientTLS() == c.TLS() {
		t.Fatalf("a client certificate: %v", err)
	}
	if back, err := Parse(c.Format(), Agent); err != nil || back.KVClientTLS() == nil {
		t.Fatalf("round trip with a client certificate: %v\n%s", err, c.Format())
	}
	wantFieldError(t, kv+"[kv]\nhttp = \"127.0.0.1:7480\"\n"+certKeys(transport.AnyClientIdentity()), "kv.tls_cert", "does not use TLS")

	wantFieldError(t, kv+"[kv]\ntimeout = \"0s\"\n", "kv.timeout", "between 10ms and 10m0s")
	wantFieldError(t, kv+"[kv]\ntimeout = \"11m\"\n", "kv.timeout", "between 10ms and 10m0s")
	wantFieldError(t, kv+"[kv]\nmax_requests = 0\n", "kv.max_requests", "between 1 and 65536")
	wantFieldError(t, kv+"[kv]\nmax_requests = 70000\n", "kv.max_requests", "between 1 and 65536")
}
