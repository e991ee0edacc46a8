// Package kvhttp is weft-kv's HTTP/JSON API (docs/kv-http.md): a
// handler over a kv.Client for clients in any language, and a server with
// bounded timeouts, header size and requests in progress. Agents with
// [kv] http serve it (cmd/weft). It lives outside package kv, whose state
// machine is a protocol core kept free of I/O (purity_test.go).
package kvhttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/internal/httpauth"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/wire"
)

// HTTP API defaults and bounds (Options).
const (
	DefaultTimeout     = 5 * time.Second
	DefaultMaxRequests = 64
	// MaxCASBody bounds a compare-and-set's JSON body: two values at
	// kv.MaxValueBytes in base64 (4/3 each) fit with room to spare; a
	// value given as a JSON string with many escapes may not, and
	// should be sent as base64.
	MaxCASBody = 1 << 20
)

// Prefix is the path under which every key lives.
const Prefix = "/v1/kv/"

// Options configure the HTTP/JSON API (NewHandler).
type Options struct {
	// Token is the bearer token every request must carry
	// ("Authorization: Bearer TOKEN"). Nil: none; then only requests
	// that name a loopback host are answered (Listen refuses to
	// serve an address other machines reach without a token).
	Token []byte
	// Timeout is each request's deadline for the cluster's answer
	// (default DefaultTimeout); past it the request fails with 504.
	Timeout time.Duration
	// MaxRequests bounds the requests being served at once, bodies
	// included (default DefaultMaxRequests); more are answered 503
	// at once. Memory is at most about MaxRequests x 3 MiB.
	MaxRequests int
	// Logger receives refused and failed requests (default: discard).
	Logger *slog.Logger
}

// Response is the JSON body of every answer. Value is the value as a
// JSON string when it is valid UTF-8 (omitted otherwise); ValueBase64 is
// always the value in standard base64, so binary values round-trip.
type Response struct {
	// Key is the key the request named (as a JSON string: bytes that are
	// not UTF-8 read as U+FFFD).
	Key string `json:"key,omitempty"`
	// Found: GET and a failed compare-and-set, whether the key exists.
	Found *bool `json:"found,omitempty"`
	// OK: a PUT, DELETE or compare-and-set took effect.
	OK          bool    `json:"ok,omitempty"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
	// Consistency and Index: a GET's consistency level and the position
	// of the state it read (the gts of its last delivery, "12.g0"; for an
	// ordered GET, the GET's own gts).
	Consistency string `json:"consistency,omitempty"`
	Index       string `json:"index,omitempty"`
	// Error and Class describe a failure; Class is one word a program
	// can switch on (docs/kv-http.md lists them).
	Error string `json:"error,omitempty"`
	Class string `json:"class,omitempty"`
}

// CASRequest is the JSON body of POST /v1/kv/{key}/cas: exactly one
// of Expect, ExpectBase64 and ExpectAbsent, and exactly one of Value and
// ValueBase64.
type CASRequest struct {
	Expect       *string `json:"expect,omitempty"`
	ExpectBase64 *string `json:"expect_base64,omitempty"`
	ExpectAbsent bool    `json:"expect_absent,omitempty"`
	Value        *string `json:"value,omitempty"`
	ValueBase64  *string `json:"value_base64,omitempty"`
}

// Handler serves weft-kv over HTTP/JSON for clients in any language:
//
//	GET    /v1/kv/{key}      200 {"key","found":true,"value","value_base64","consistency","index"}; 404 if absent
//	                         (Accept: application/octet-stream: the raw value)
//	                         ?consistency=linearizable (default) | ordered | local
//	PUT    /v1/kv/{key}      body = the value (raw bytes); 200 {"key","ok":true}
//	DELETE /v1/kv/{key}      200 {"key","ok":true}; 404 if absent
//	POST   /v1/kv/{key}/cas  body = CASRequest (application/json); 200 if set,
//	                         409 with the current value ("found", "value", "value_base64")
//	POST   /v1/txn           body = TxnRequest (application/json): a transaction
//	                         on any keys (txn.go); 200 committed, 409 aborted
//
// {key} is the rest of the path, percent-decoded (a key may hold '/';
// the last "/cas" of a POST names the operation). Every failure is an
// Response with Error and Class, and a status: 400 bad key, value or
// body; 401 missing or wrong token; 403 a non-loopback Host without a
// token; 405 wrong method; 415 a POST that is not JSON; 503 the API's
// request bound full, the node overloaded, or the result lost; 410 the
// client session expired; 504 no answer before the deadline; 502 the
// cluster's layout disagrees.
//
// It sends each request through a kv.Client, like any other client:
// writes are ordered (multicast); a GET is linearizable (a read index at
// the shard's leader), ordered (multicast like a write) or local (any
// replica's state, possibly stale), as ?consistency= asks (docs/reads.md).
type Handler struct {
	do      func(context.Context, kv.Command, kv.Consistency) (kv.Result, wire.Timestamp, error)
	txn     func(context.Context, kv.Txn) (kv.TxnResult, error)
	timeout time.Duration
	sem     chan struct{}
	token   httpauth.Token
	log     *slog.Logger

	mu     sync.Mutex
	counts map[string]uint64 // by class: bounded by the fixed set of classes
}

// NewHandler returns the HTTP/JSON API over c.
func NewHandler(c *kv.Client, opt Options) *Handler {
	h := newHandler(c.DoAt, opt)
	h.txn = c.Txn
	return h
}

func newHandler(do func(context.Context, kv.Command, kv.Consistency) (kv.Result, wire.Timestamp, error), opt Options) *Handler {
	h := &Handler{do: do, timeout: opt.Timeout, log: opt.Logger, counts: map[string]uint64{}}
	h.txn = func(context.Context, kv.Txn) (kv.TxnResult, error) {
		return kv.TxnResult{}, fmt.Errorf("%w: this handler serves no transactions", kv.ErrBadCommand)
	}
	if h.timeout <= 0 {
		h.timeout = DefaultTimeout
	}
	n := opt.MaxRequests
	if n <= 0 {
		n = DefaultMaxRequests
	}
	h.sem = make(chan struct{}, n)
	h.token = httpauth.NewToken(opt.Token)
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// Failures returns the failed and refused requests so far, by class
// ("missing_token", "value_too_large", "timeout", "busy", ...; "not_found"
// and "cas_failed", which are answers, are not counted).
func (h *Handler) Failures() map[string]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.counts)
}

// httpError is a failure to answer: status, class and message.
type httpError struct {
	status int
	class  string
	msg    string
}

func httpRefusal(status int, class, format string, args ...any) *httpError {
	return &httpError{status: status, class: class, msg: fmt.Sprintf(format, args...)}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e := h.serve(w, r); e != nil {
		h.fail(w, e, "")
	}
}

// serve answers the request, or returns why it cannot.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) *httpError {
	if e := h.authorize(w, r); e != nil {
		return e
	}
	if r.URL.Path == TxnPath {
		return h.serveTxn(w, r) // txn.go
	}
	// The path arrives percent-decoded: "a%2Fb" and "a/b" are one key.
	key, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		return httpRefusal(http.StatusNotFound, "no_such_endpoint", "%s is not an endpoint: keys are under %s{key}", r.URL.Path, Prefix)
	}
	op := kv.OpGet
	switch r.Method {
	case http.MethodGet:
	case http.MethodPut:
		op = kv.OpPut
	case http.MethodDelete:
		op = kv.OpDelete
	case http.MethodPost:
		if key, ok = strings.CutSuffix(key, "/cas"); !ok {
			w.Header().Set("Allow", "GET, PUT, DELETE")
			return httpRefusal(http.StatusMethodNotAllowed, "wrong_method", "POST is for compare-and-set only: POST %s{key}/cas", Prefix)
		}
		op = kv.OpCAS
	default:
		w.Header().Set("Allow", "GET, PUT, DELETE, POST")
		return httpRefusal(http.StatusMethodNotAllowed, "wrong_method", "%s: use GET, PUT or DELETE %s{key}, or POST %s{key}/cas", r.Method, Prefix, Prefix)
	}
	level := kv.Linearizable
	if q := r.URL.Query(); q.Has("consistency") {
		var err error
		if level, err = kv.ParseConsistency(q.Get("consistency")); err != nil {
			return httpRefusal(http.StatusBadRequest, "bad_consistency", "%v", err)
		}
		if op != kv.OpGet {
			return httpRefusal(http.StatusBadRequest, "bad_consistency", "?consistency= applies to GET only: %s is always ordered", r.Method)
		}
	}
	// The key's limits before the body is read (the command carries no
	// value yet).
	if err := (&kv.Command{Op: op, Key: key}).Check(); err != nil {
		return errorReply(err)
	}
	if op == kv.OpCAS {
		// A form POST from a web page needs no CORS preflight; a JSON one
		// does, and this API never answers one.
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			return httpRefusal(http.StatusUnsupportedMediaType, "not_json", "a compare-and-set takes Content-Type application/json, got %q", r.Header.Get("Content-Type"))
		}
	}
	select {
	case h.sem <- struct{}{}:
		defer func() { <-h.sem }()
	default:
		return httpRefusal(http.StatusServiceUnavailable, "busy", "%d requests in progress, the most this API serves at once; retry later", cap(h.sem))
	}
	cmd := kv.Command{Op: op, Key: key}
	var err error
	switch op {
	case kv.OpPut:
		if cmd.Value, err = readBody(w, r, kv.MaxValueBytes); err != nil {
			return bodyError(err, "the value", kv.MaxValueBytes)
		}
	case kv.OpCAS:
		if e := readCAS(w, r, &cmd); e != nil {
			return e
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	res, at, err := h.do(ctx, cmd, level)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
			return httpRefusal(http.StatusGatewayTimeout, "timeout", "no answer from the cluster within %v (a put, delete or compare-and-set may still take effect)", h.timeout)
		}
		return errorReply(err)
	}
	return h.answer(w, r, key, op, res, level, at)
}

// answer writes a command's result.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, key string, op kv.Op, res kv.Result, level kv.Consistency, at wire.Timestamp) *httpError {
	out := Response{Key: key}
	if op == kv.OpGet {
		out.Consistency, out.Index = level.String(), at.String()
	}
	switch {
	case res.Status == kv.StatusNotFound:
		h.fail(w, httpRefusal(http.StatusNotFound, "not_found", "%s: no such key", op), key)
		return nil
	case res.Status == kv.StatusCASFailed:
		out.Found = &res.Present
		if res.Present {
			out.setValue(res.Value)
		}
		out.Error, out.Class = "compare-and-set failed: the current value differs", "cas_failed"
		if !res.Present {
			out.Error = "compare-and-set failed: the key does not exist"
		}
		writeJSON(w, http.StatusConflict, &out)
		return nil
	case op == kv.OpGet:
		if r.Header.Get("Accept") == "application/octet-stream" {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Weft-Index", at.String())
			w.Write(res.Value)
			return nil
		}
		found := true
		out.Found = &found
		out.setValue(res.Value)
	default:
		out.OK = true
	}
	writeJSON(w, http.StatusOK, &out)
	return nil
}

func (o *Response) setValue(v []byte) {
	b := base64.StdEncoding.EncodeToString(v)
	o.ValueBase64 = &b
	if utf8.Valid(v) {
		s := string(v)
		o.Value = &s
	}
}

// fail writes e as a JSON error and counts and logs it (refusals are
// logged at the 1st, 2nd, 4th, 8th, ... time for a class, so whoever
// sends bad requests cannot flood the agent's log).
func (h *Handler) fail(w http.ResponseWriter, e *httpError, key string) {
	if e.class != "not_found" {
		h.mu.Lock()
		h.counts[e.class]++
		n := h.counts[e.class]
		h.mu.Unlock()
		if n&(n-1) == 0 {
			h.log.Warn("kv http: request failed", "class", e.class, "status", e.status, "detail", e.msg, "failed_for_this_class", n)
		}
	}
	out := Response{Key: key, Error: e.msg, Class: e.class}
	if e.class == "not_found" {
		out.Found = new(bool)
	}
	if e.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.status, &out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	// Values as stored: "<" stays "<" (the answer is JSON, never HTML:
	// nosniff).
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// authorize checks the bearer token, or without one that the request
// names a loopback host: a web page that rebinds its DNS name to
// 127.0.0.1 sends its own name as Host, so it cannot read the store
// through the visitor's browser.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request) *httpError {
	if !h.token.Set() {
		if !httpauth.LoopbackHost(r.Host) {
			return httpRefusal(http.StatusForbidden, "non_loopback_host", "Host %q is not a loopback name (this API has no token: it answers loopback names only)", r.Host)
		}
		return nil
	}
	switch reason, ok := h.token.Check(w, r, "weft kv"); {
	case ok:
		return nil
	case reason == httpauth.MissingToken:
		return httpRefusal(http.StatusUnauthorized, reason, "this API needs its token: Authorization: Bearer TOKEN (kv.token_file)")
	default:
		return httpRefusal(http.StatusUnauthorized, reason, "wrong token")
	}
}

// readBody reads at most limit bytes of the request's body.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}

func bodyError(err error, what string, limit int) *httpError {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return httpRefusal(http.StatusBadRequest, "value_too_large", "%s is over %d bytes, the limit", what, limit)
	}
	return httpRefusal(http.StatusBadRequest, "bad_body", "reading the body: %v", err)
}

// readCAS decodes a compare-and-set's body into cmd.
func readCAS(w http.ResponseWriter, r *http.Request, cmd *kv.Command) *httpError {
	body, err := readBody(w, r, MaxCASBody)
	if err != nil {
		return bodyError(err, "a compare-and-set's body", MaxCASBody)
	}
	var req CASRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return httpRefusal(http.StatusBadRequest, "bad_body", `a compare-and-set takes {"expect" or "expect_base64" or "expect_absent": true, "value" or "value_base64"}: %v`, err)
	}
	if dec.More() {
		return httpRefusal(http.StatusBadRequest, "bad_body", "trailing data after the JSON object")
	}
	n := 0
	for _, set := range []bool{req.Expect != nil, req.ExpectBase64 != nil, req.ExpectAbsent} {
		if set {
			n++
		}
	}
	if n != 1 {
		return httpRefusal(http.StatusBadRequest, "bad_body", `give exactly one of "expect", "expect_base64" and "expect_absent": true (got %d)`, n)
	}
	if (req.Value != nil) == (req.ValueBase64 != nil) {
		return httpRefusal(http.StatusBadRequest, "bad_body", `give exactly one of "value" and "value_base64"`)
	}
	if cmd.Value, err = fieldBytes("value", req.Value, req.ValueBase64); err != nil {
		return httpRefusal(http.StatusBadRequest, "bad_body", "%v", err)
	}
	if !req.ExpectAbsent {
		if cmd.Expect, err = fieldBytes("expect", req.Expect, req.ExpectBase64); err != nil {
			return httpRefusal(http.StatusBadRequest, "bad_body", "%v", err)
		}
		cmd.ExpectPresent = true
	}
	if err := cmd.Check(); err != nil {
		return errorReply(err)
	}
	return nil
}

// fieldBytes returns a value given as a string or in base64 (never nil:
// an empty value is a value).
func fieldBytes(name string, s, b64 *string) ([]byte, error) {
	if s != nil {
		return []byte(*s), nil
	}
	v, err := base64.StdEncoding.DecodeString(*b64)
	if err != nil {
		return nil, fmt.Errorf("%s_base64: %v", name, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// errorReply maps an error of the kv client to a status and class.
func errorReply(err error) *httpError {
	for _, m := range []struct {
		err    error
		status int
		class  string
	}{
		{kv.ErrEmptyKey, http.StatusBadRequest, "empty_key"},
		{kv.ErrKeyTooLarge, http.StatusBadRequest, "key_too_large"},
		{kv.ErrValueTooLarge, http.StatusBadRequest, "value_too_large"},
		{kv.ErrTxnTooLarge, http.StatusBadRequest, "txn_too_large"},
		{kv.ErrTxnEmpty, http.StatusBadRequest, "txn_empty"},
		{kv.ErrShardsDisagree, http.StatusInternalServerError, "shards_disagree"},
		{client.ErrOverloaded, http.StatusServiceUnavailable, "overloaded"},
		{client.ErrReadFailed, http.StatusBadGateway, "read_failed"},
		{client.ErrSessionExpired, http.StatusGone, "session_expired"},
		{kv.ErrResultLost, http.StatusServiceUnavailable, "result_lost"},
		{client.ErrClosed, http.StatusServiceUnavailable, "unavailable"},
		{context.Canceled, http.StatusServiceUnavailable, "canceled"},
		{kv.ErrWrongShard, http.StatusBadGateway, "wrong_shard"},
		{kv.ErrBadCommand, http.StatusBadGateway, "bad_command"},
	} {
		if errors.Is(err, m.err) {
			return &httpError{status: m.status, class: m.class, msg: err.Error()}
		}
	}
	return &httpError{status: http.StatusInternalServerError, class: "internal", msg: err.Error()}
}
