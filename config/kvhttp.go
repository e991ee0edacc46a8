package config

import (
	"crypto/x509"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/weft-dev/weft/transport"
)

// [kv] defaults and bounds: the HTTP/JSON API of weft-kv (kvhttp.Handler).
const (
	DefaultKVHTTPTimeout     = 5 * time.Second
	MinKVHTTPTimeout         = 10 * time.Millisecond
	MaxKVHTTPTimeout         = 10 * time.Minute
	DefaultKVHTTPMaxRequests = 64
	MaxKVHTTPMaxRequests     = 1 << 16
)

// KV is the [kv] table: weft-kv's HTTP/JSON API on the agent
// (docs/kv-http.md), for clients in languages without a weft client.
type KV struct {
	// HTTP is the API's listen address (host:port). It needs service =
	// "kv", must be a loopback address unless TokenFile is set (the store
	// is never open on the network by accident), and must differ from the
	// node's listen, client_addr and admin ports. Key "kv.http"; default
	// "" (no API).
	HTTP string `toml:"http"`
	// TokenFile names a file holding the API's bearer token, with the
	// admin token's rules (16 to 1024 bytes, mode 0600 or stricter): with
	// it every request needs "Authorization: Bearer TOKEN". Give the API
	// its own token, not the admin one: its holders should not be able to
	// make the node leave. Key "kv.token_file"; default "" (none).
	TokenFile string `toml:"token_file"`
	token     []byte // read from TokenFile by validate
	// Timeout is each request's deadline for the cluster's answer; past it
	// the API answers 504. Key "kv.timeout" (a duration); default 5s;
	// 10ms to 10m.
	Timeout time.Duration `toml:"timeout"`
	// MaxRequests bounds the API's requests in progress; more are
	// answered 503. Key "kv.max_requests"; default 64; 1 to 65536.
	MaxRequests int `toml:"max_requests"`
	// TLSCert and TLSKey are the client certificate and key the API's
	// client presents on a cluster with mutual TLS (tls_ca; a node's
	// certificate cannot connect as a client): one from the client CA,
	// or with the URI SAN weft://<cluster>/client[/<id>] (`weft certs`
	// writes client.crt and client.key). Required with http on such a
	// cluster. Keys "kv.tls_cert", "kv.tls_key"; default "".
	TLSCert string         `toml:"tls_cert"`
	TLSKey  string         `toml:"tls_key"`
	tls     *transport.TLS // loaded by validate
}

func (c *Config) setKVDefaults(md toml.MetaData) {
	if !md.IsDefined("kv", "timeout") {
		c.KV.Timeout = DefaultKVHTTPTimeout
	}
	if !md.IsDefined("kv", "max_requests") {
		c.KV.MaxRequests = DefaultKVHTTPMaxRequests
	}
}

// validateKV checks the [kv] table (agents).
func (c *Config) validateKV() error {
	k := &c.KV
	var err error
	if k.token, err = readTokenKey("kv.token_file", k.TokenFile); err != nil {
		return err
	}
	// Parse fills absent keys, so a zero here was written in the file.
	if k.Timeout < MinKVHTTPTimeout || k.Timeout > MaxKVHTTPTimeout {
		return &FieldError{Field: "kv.timeout", Msg: fmt.Sprintf("must be between %v and %v, got %v", MinKVHTTPTimeout, MaxKVHTTPTimeout, k.Timeout)}
	}
	if k.MaxRequests < 1 || k.MaxRequests > MaxKVHTTPMaxRequests {
		return &FieldError{Field: "kv.max_requests", Msg: fmt.Sprintf("must be between 1 and %d, got %d", MaxKVHTTPMaxRequests, k.MaxRequests)}
	}
	if k.HTTP == "" {
		return nil
	}
	if err := checkAddr("kv.http", k.HTTP, false); err != nil {
		return err
	}
	if c.Service != ServiceKV {
		return &FieldError{Field: "kv.http", Msg: fmt.Sprintf("the API serves weft-kv: it needs service = %q (service is %q)", ServiceKV, c.Service)}
	}
	for _, o := range []struct{ key, addr string }{{"listen", c.Listen}, {"client_addr", c.ClientAddr}, {"admin", c.Admin}} {
		if o.addr != "" && sameEndpoint(k.HTTP, o.addr) {
			return &FieldError{Field: "kv.http", Msg: fmt.Sprintf("%q is the node's %s address (%q); give the API a port of its own", k.HTTP, o.key, o.addr)}
		}
	}
	if !IsLoopback(k.HTTP) && k.token == nil {
		return &FieldError{Field: "kv.http", Msg: fmt.Sprintf("%q is not a loopback address: an API reachable from other machines needs kv.token_file", k.HTTP)}
	}
	return c.validateKVTLS()
}

// validateKVTLS loads the API client's certificate on a cluster with
// mutual TLS, and refuses a node's: the nodes would refuse it.
func (c *Config) validateKVTLS() error {
	k := &c.KV
	k.tls = nil
	switch {
	case c.TLSCA == "" && (k.TLSCert != "" || k.TLSKey != ""):
		return &FieldError{Field: "kv.tls_cert", Msg: "the cluster does not use TLS (no tls_ca): leave kv.tls_cert and kv.tls_key out"}
	case c.TLSCA == "":
		return nil
	case k.TLSCert == "" || k.TLSKey == "":
		return &FieldError{Field: "kv.tls_cert", Msg: "the cluster uses mutual TLS (tls_ca): the API's client needs a client certificate, kv.tls_cert and kv.tls_key (weft certs writes client.crt and client.key)"}
	}
	t, err := transport.LoadTLS(k.TLSCert, k.TLSKey, c.TLSCA, "")
	if err != nil {
		return &FieldError{Field: "kv.tls_cert", Msg: err.Error()}
	}
	leaf, err := x509.ParseCertificate(t.Certificate.Certificate[0])
	if err != nil {
		return &FieldError{Field: "kv.tls_cert", Msg: err.Error()}
	}
	if id, found, err := transport.CertIdentity(leaf, c.Cluster); err != nil || (found && id.Role != transport.RoleClient) {
		msg := fmt.Sprintf("%s is %s's certificate, not a client's", k.TLSCert, id)
		if err != nil {
			msg = fmt.Sprintf("%s: %v", k.TLSCert, err)
		}
		return &FieldError{Field: "kv.tls_cert", Msg: msg}
	}
	k.tls = t
	return nil
}

// KVClientTLS returns the API client's TLS configuration (kv.tls_cert),
// or nil.
func (c *Config) KVClientTLS() *transport.TLS { return c.KV.tls }

// KVToken returns the token read from kv.token_file, or nil.
func (c *Config) KVToken() []byte { return c.KV.token }

// formatKV writes the [kv] table; zero fields (a Config built in Go) are
// left out, so they read back as the defaults.
func (c *Config) formatKV(sb *strings.Builder) {
	k := &c.KV
	if k.HTTP == "" && k.TokenFile == "" && k.Timeout == 0 && k.MaxRequests == 0 && k.TLSCert == "" {
		return
	}
	sb.WriteString("\n[kv]\n")
	if k.HTTP != "" {
		fmt.Fprintf(sb, "http = %s\n", strconv.Quote(k.HTTP))
	}
	if k.TokenFile != "" {
		fmt.Fprintf(sb, "token_file = %s\n", strconv.Quote(k.TokenFile))
	}
	if k.Timeout != 0 {
		fmt.Fprintf(sb, "timeout = %q\n", k.Timeout.String())
	}
	if k.MaxRequests != 0 {
		fmt.Fprintf(sb, "max_requests = %d\n", k.MaxRequests)
	}
	if k.TLSCert != "" {
		fmt.Fprintf(sb, "tls_cert = %s\n", strconv.Quote(k.TLSCert))
	}
	if k.TLSKey != "" {
		fmt.Fprintf(sb, "tls_key = %s\n", strconv.Quote(k.TLSKey))
	}
}
