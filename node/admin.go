package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/weft-dev/weft/internal/httpauth"
	"github.com/weft-dev/weft/wire"
)

// AdminOptions secure the admin endpoint (see AdminHandler).
type AdminOptions struct {
	// Token is the bearer token every mutating request must carry
	// ("Authorization: Bearer TOKEN"), and every request when the
	// endpoint is not Loopback. Nil: mutating endpoints are refused.
	Token []byte
	// Loopback: the endpoint is reachable from this machine only, so
	// /status and /members answer without the token. ServeAdmin sets it
	// from the address it bound.
	Loopback bool
	// Logger receives refused requests (default: discard).
	Logger *slog.Logger
	// DashboardEvery is the dashboard history's sampling interval
	// (default 1 s; dashboard.go).
	DashboardEvery time.Duration
}

// maxAdminBody bounds a mutating request's JSON body.
const maxAdminBody = 4 << 10

// AdminHandler serves the node's status and gossip operations:
//
//	GET  /status                  Report (Status, readiness, fsync p99, send queues) as JSON
//	GET  /members                 the gossip view ([]Member) as JSON
//	GET  /metrics                 Prometheus metrics (metrics.go)
//	GET  /healthz                 200 while the node runs (no token needed)
//	GET  /readyz                  Readiness as JSON: 200 if ready, else 503 (no token needed)
//	GET  /debug/pprof/...         net/http/pprof: always needs the token
//	GET  /dashboard/              the live dashboard (dashboard.go): page without a token, data by the read rules
//	POST /leave        {}         depart: LEAVING, hand leadership over if leading, LEFT (Leave); answers with the hand-over
//	POST /assassinate  {"id":N}   remove member N from gossip (Assassinate);
//	POST /assassinate  {"addr":A} the same, naming the member by its address
//
// A mutating request (POST) needs the bearer token and Content-Type
// application/json: a web page the operator visits can make the browser
// send a GET or a form POST to a loopback port, but neither a JSON POST
// nor an Authorization header without a CORS preflight, which this
// endpoint never answers (no CSRF). Without the token, or when the
// endpoint is not on loopback, the reads need the token too; read on
// loopback without it, a request must name a loopback host (so a DNS
// name rebound to 127.0.0.1 by a web page cannot read the status either).
// Refusals and errors are plain text with a 4xx/5xx status; refusals are
// counted by reason (Admin.Refused).
//
// /healthz and /readyz answer anyone, on any Host, without the token: load
// balancers and orchestrators probe them without credentials, and they
// disclose only whether the node is up and ready (and why not). The
// profiler needs the token even on loopback: a profile reveals memory
// contents and costs CPU.
func AdminHandler(n *Node, opt AdminOptions) http.Handler { return newAdminHandler(n, opt) }

// adminHandler is AdminHandler's http.Handler.
type adminHandler struct {
	n        *Node
	mux      *http.ServeMux
	token    httpauth.Token
	loopback bool
	log      *slog.Logger

	dash *dashHistory // dashboard.go

	mu      sync.Mutex
	refused map[string]uint64
}

func newAdminHandler(n *Node, opt AdminOptions) *adminHandler {
	h := &adminHandler{n: n, mux: http.NewServeMux(), loopback: opt.Loopback, log: opt.Logger, refused: map[string]uint64{}}
	h.token = httpauth.NewToken(opt.Token)
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.mux.HandleFunc("/status", h.read(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, n.Report())
	}))
	h.mux.Handle("/metrics", h.read(promhttp.HandlerFor(n.Registry(), promhttp.HandlerOpts{}).ServeHTTP))
	h.mux.HandleFunc("/healthz", h.probe(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-n.Done():
			http.Error(w, fmt.Sprintf("stopped: %v", n.Err()), http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	}))
	h.mux.HandleFunc("/readyz", h.probe(func(w http.ResponseWriter, r *http.Request) {
		rd := n.Readiness()
		if !rd.Ready {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(rd)
			return
		}
		writeJSON(w, rd)
	}))
	h.mux.HandleFunc("/debug/pprof/", h.profile(pprof.Index))
	h.mux.HandleFunc("/debug/pprof/cmdline", h.profile(pprof.Cmdline))
	h.mux.HandleFunc("/debug/pprof/profile", h.profile(pprof.Profile))
	h.mux.HandleFunc("/debug/pprof/symbol", h.profile(pprof.Symbol))
	h.mux.HandleFunc("/debug/pprof/trace", h.profile(pprof.Trace))
	h.mux.HandleFunc("/members", h.read(func(w http.ResponseWriter, r *http.Request) {
		if n.cfg.Gossip == nil {
			http.Error(w, errNoGossip.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, n.Members())
	}))
	h.mux.HandleFunc("/leave", h.mutate(func(w http.ResponseWriter, body []byte) {
		var req struct{}
		if err := decodeStrict(body, &req); err != nil {
			h.refuse(w, "bad_body", http.StatusBadRequest, "/leave takes an empty JSON object ({}): %v", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.handOverTimeout()+5*time.Second)
		defer cancel()
		d, err := n.Leave(ctx)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		fmt.Fprintf(w, "leaving: %s; LEFT announced in gossip\n", d)
	}))
	h.mux.HandleFunc("/assassinate", h.mutate(func(w http.ResponseWriter, body []byte) {
		var req AssassinateRequest
		if err := decodeStrict(body, &req); err != nil {
			h.refuse(w, "bad_body", http.StatusBadRequest, `/assassinate takes {"id": N} or {"addr": "host:port"}: %v`, err)
			return
		}
		target, err := n.memberByTarget(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := n.Assassinate(target); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		fmt.Fprintf(w, "assassinating p%d: watching it for heartbeat progress before removing it\n", target)
	}))
	h.registerDashboard(opt.DashboardEvery)
	return h
}

func (h *adminHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Refused returns the requests refused so far, by reason.
func (h *adminHandler) Refused() map[string]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.refused)
}

// refuse answers a refused request and counts it.
func (h *adminHandler) refuse(w http.ResponseWriter, reason string, code int, format string, args ...any) {
	h.mu.Lock()
	h.refused[reason]++
	count := h.refused[reason]
	h.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	// Logged at the 1st, 2nd, 4th, 8th, ... refusal for a reason: whoever
	// sends bad requests cannot flood the agent's log.
	if count&(count-1) == 0 {
		h.log.Warn("admin: refused a request", "reason", reason, "detail", msg, "refused_for_this_reason", count)
	}
	http.Error(w, "refused ("+reason+"): "+msg, code)
}

// authorized checks the request's bearer token; it answers and returns
// false if the request may not proceed.
func (h *adminHandler) authorized(w http.ResponseWriter, r *http.Request) bool {
	if !h.token.Set() {
		h.refuse(w, "no_token_configured", http.StatusForbidden, "%s needs the admin token, and this node has none (set admin_token_file)", r.URL.Path)
		return false
	}
	switch reason, ok := h.token.Check(w, r, "weft admin"); {
	case ok:
		return true
	case reason == httpauth.MissingToken:
		h.refuse(w, reason, http.StatusUnauthorized, "%s needs the admin token (Authorization: Bearer ...; weft --token-file)", r.URL.Path)
	default:
		h.refuse(w, reason, http.StatusUnauthorized, "wrong admin token")
	}
	return false
}

// read guards a read-only endpoint: GET (or HEAD); the token unless the
// endpoint is on loopback, where a request without one must name a
// loopback host.
func (h *adminHandler) read(f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.getOnly(w, r) {
			return
		}
		if !h.loopback || r.Header.Get("Authorization") != "" {
			if !h.authorized(w, r) {
				return
			}
		} else if !httpauth.LoopbackHost(r.Host) {
			h.refuse(w, "non_loopback_host", http.StatusForbidden, "Host %q is not a loopback address (without the admin token, only loopback names are answered)", r.Host)
			return
		}
		f(w, r)
	}
}

// probe guards a health probe: GET (or HEAD) only; no token, any Host
// (see AdminHandler).
func (h *adminHandler) probe(f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.getOnly(w, r) {
			f(w, r)
		}
	}
}

// getOnly refuses any method but GET and HEAD (wrong_method).
func (h *adminHandler) getOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	h.refuse(w, "wrong_method", http.StatusMethodNotAllowed, "%s is read-only: use GET", r.URL.Path)
	return false
}

// profile guards the profiler: the token, always (even on loopback).
// pprof's symbol lookup is a POST; the others are GETs.
func (h *adminHandler) profile(f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
			w.Header().Set("Allow", "GET, HEAD, POST")
			h.refuse(w, "wrong_method", http.StatusMethodNotAllowed, "%s: use GET", r.URL.Path)
			return
		}
		if !h.authorized(w, r) {
			return
		}
		f(w, r)
	}
}

// mutate guards an operation: POST, the token, a JSON body of at most
// maxAdminBody bytes.
func (h *adminHandler) mutate(f func(http.ResponseWriter, []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			h.refuse(w, "wrong_method", http.StatusMethodNotAllowed, "%s changes the node: use POST with a JSON body", r.URL.Path)
			return
		}
		if !h.authorized(w, r) {
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			h.refuse(w, "not_json", http.StatusUnsupportedMediaType, "%s accepts only Content-Type application/json, got %q", r.URL.Path, r.Header.Get("Content-Type"))
			return
		}
		if r.URL.RawQuery != "" {
			h.refuse(w, "query_parameters", http.StatusBadRequest, "%s takes its parameters in the JSON body, not the query", r.URL.Path)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
		if err != nil {
			h.refuse(w, "bad_body", http.StatusRequestEntityTooLarge, "body: %v", err)
			return
		}
		f(w, body)
	}
}

func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// AssassinateRequest names an assassination target by id or by address
// (a member's client or peer address).
type AssassinateRequest struct {
	ID   *wire.ProcID `json:"id,omitempty"`
	Addr string       `json:"addr,omitempty"`
}

// memberByTarget resolves an assassination target.
func (n *Node) memberByTarget(req AssassinateRequest) (wire.ProcID, error) {
	switch {
	case req.ID != nil && req.Addr != "":
		return 0, errors.New("give id or addr, not both")
	case req.ID != nil:
		return *req.ID, nil
	case req.Addr != "":
		for _, m := range n.Members() {
			if m.Addr == req.Addr || n.cfg.Peers[m.ID] == req.Addr {
				return m.ID, nil
			}
		}
		for p, a := range n.cfg.Peers {
			if a == req.Addr {
				return p, nil
			}
		}
		return 0, fmt.Errorf("no member has address %s", req.Addr)
	}
	return 0, errors.New("missing id or addr")
}

// Admin is a running admin endpoint.
type Admin struct {
	srv *http.Server
	ln  net.Listener
	h   *adminHandler
	// stopDash ends the dashboard's sampler, dashDone closes when it has.
	stopDash, dashDone chan struct{}
	stopOnce           sync.Once
}

// ServeAdmin starts the admin endpoint on addr. It refuses to serve on an
// address other machines can reach (anything but loopback) without a
// token.
func ServeAdmin(n *Node, addr string, opt AdminOptions) (*Admin, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node: admin endpoint: %w", err)
	}
	// The address bound, not the one asked for, decides: a name that
	// resolves to a routable address is not loopback.
	ta, ok := ln.Addr().(*net.TCPAddr)
	opt.Loopback = ok && ta.IP.IsLoopback()
	if !opt.Loopback && len(opt.Token) == 0 {
		ln.Close()
		return nil, fmt.Errorf("node: admin endpoint %s (bound %s) is reachable from other machines and has no token: set admin_token_file or use a loopback address", addr, ln.Addr())
	}
	h := newAdminHandler(n, opt)
	a := &Admin{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}, ln: ln, h: h, stopDash: make(chan struct{}), dashDone: make(chan struct{})}
	go a.srv.Serve(ln)
	// The dashboard's history is kept while the endpoint serves, so an
	// operator who opens the page during an incident sees the minutes
	// before it.
	go func() { defer close(a.dashDone); h.dash.run(a.stopDash) }()
	return a, nil
}

// Addr returns the endpoint's address.
func (a *Admin) Addr() net.Addr { return a.ln.Addr() }

// Refused returns the requests the endpoint refused, by reason
// ("missing_token", "wrong_token", "not_json", "wrong_method", ...).
func (a *Admin) Refused() map[string]uint64 { return a.h.Refused() }

// Close stops the endpoint.
func (a *Admin) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	a.stopOnce.Do(func() { close(a.stopDash) })
	<-a.dashDone
	err := a.srv.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// AdminClient calls a node's admin endpoint (the operator commands, the
// demo).
type AdminClient struct {
	// Addr is the endpoint's host:port.
	Addr string
	// Token, if set, is sent with every request.
	Token []byte
	// HTTP is the client to use (nil: http.DefaultClient).
	HTTP *http.Client
}

// Status asks the node for its status.
func (c *AdminClient) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, http.MethodGet, "/status", nil, &st)
	return st, err
}

// Report asks the node for its status with readiness, fsync p99 and send
// queues (weft status).
func (c *AdminClient) Report(ctx context.Context) (Report, error) {
	var rep Report
	err := c.call(ctx, http.MethodGet, "/status", nil, &rep)
	return rep, err
}

// Members asks the node for its gossip view.
func (c *AdminClient) Members(ctx context.Context) ([]Member, error) {
	var ms []Member
	err := c.call(ctx, http.MethodGet, "/members", nil, &ms)
	return ms, err
}

// Post sends an operation ("/leave", "/assassinate") with its JSON body
// and returns the endpoint's answer.
func (c *AdminClient) Post(ctx context.Context, path string, body any) (string, error) {
	var out string
	err := c.call(ctx, http.MethodPost, path, body, &out)
	return out, err
}

// FetchStatus asks the admin endpoint at addr (loopback, no token) for
// the node's status.
func FetchStatus(ctx context.Context, hc *http.Client, addr string) (Status, error) {
	return (&AdminClient{Addr: addr, HTTP: hc}).Status(ctx)
}

// FetchMembers asks the admin endpoint at addr (loopback, no token) for
// the node's gossip view.
func FetchMembers(ctx context.Context, hc *http.Client, addr string) ([]Member, error) {
	return (&AdminClient{Addr: addr, HTTP: hc}).Members(ctx)
}

func (c *AdminClient) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Addr+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if len(c.Token) > 0 {
		req.Header.Set("Authorization", "Bearer "+string(c.Token))
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %s%s: %s: %s", c.Addr, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if s, ok := out.(*string); ok {
		*s = strings.TrimSpace(string(b))
		return nil
	}
	return json.Unmarshal(b, out)
}

// WriteMembers writes a gossip view as a table (weft members): one row per
// member, then a count of the members up.
func WriteMembers(w io.Writer, ms []Member) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tGROUP\tROLE\tBALLOT\tSTATUS\tPHI\tLOAD\tGENERATION\tOFFSET\tSEEDS")
	up := 0
	for _, m := range ms {
		id := strconv.FormatUint(uint64(m.ID), 10)
		if m.Self {
			id += "*"
		}
		role, ballot, phi, gen := m.Role, m.Ballot.String(), fmt.Sprintf("%.2f", m.Phi), strconv.FormatUint(m.Generation, 10)
		if m.Status == MemberUnknown {
			role, ballot, phi, gen = "-", "-", "-", "-"
		}
		if m.Self {
			phi = "-"
		}
		if role == "" {
			role = "-"
		}
		if m.Status == MemberUp {
			up++
		}
		load := m.Load
		if load == "" {
			load = "-"
		}
		offset, seeds := memberAdvice(m)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, m.Addr, m.Group, role, ballot, m.Status, phi, load, gen, offset, seeds)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d members up (* = the node asked)\n", up, len(ms))
	writeMembersAdvice(w, ms)
}
