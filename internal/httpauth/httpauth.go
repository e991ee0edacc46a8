// Package httpauth holds the request checks weft's HTTP endpoints share
// (the node's admin endpoint, weft-kv's HTTP API): a bearer token
// compared in constant time, and whether a request names a loopback host.
package httpauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"
)

// Token is a bearer token, kept as its digest so that the comparison
// takes the same time whatever the length of the token presented.
type Token struct {
	sum [sha256.Size]byte
	set bool
}

// NewToken returns the token b (empty: no token).
func NewToken(b []byte) Token {
	if len(b) == 0 {
		return Token{}
	}
	return Token{sum: sha256.Sum256(b), set: true}
}

// Set reports whether there is a token.
func (t Token) Set() bool { return t.set }

// Refusal reasons of Check.
const (
	MissingToken = "missing_token"
	WrongToken   = "wrong_token"
)

// Check reports whether r carries the token ("Authorization: Bearer
// TOKEN"). If not, it sets WWW-Authenticate for realm on w and returns
// MissingToken or WrongToken.
func (t Token) Check(w http.ResponseWriter, r *http.Request, realm string) (reason string, ok bool) {
	got, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
		return MissingToken, false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	if !t.set || subtle.ConstantTimeCompare(sum[:], t.sum[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`", error="invalid_token"`)
		return WrongToken, false
	}
	return "", true
}

// LoopbackHost reports whether hostport (a Host header: a name or an IP,
// with or without a port) names this machine's loopback interface. An
// endpoint without a token answers only such requests: a web page that
// rebinds its DNS name to 127.0.0.1 still sends its own name as Host.
func LoopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
