package kv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server limits of the HTTP API (ListenHTTP): a slow or idle client
// cannot hold a connection, nor a large header memory.
const (
	HTTPReadHeaderTimeout = 5 * time.Second
	// HTTPReadTimeout covers the header and the body (at most MaxCASBody).
	HTTPReadTimeout = 30 * time.Second
	HTTPIdleTimeout = 2 * time.Minute
	// HTTPMaxHeaderBytes leaves room for the longest key percent-encoded
	// (3 x MaxKeyBytes) in the request line, and a token.
	HTTPMaxHeaderBytes = 16 << 10
)

// HTTPServer is the HTTP/JSON API serving on a listener.
type HTTPServer struct {
	srv *http.Server
	ln  net.Listener
	h   *HTTPHandler
}

// ListenHTTP serves the HTTP/JSON API (HTTPHandler) over c on addr. It
// refuses an address other machines can reach (anything but loopback)
// without opt.Token, so the store is never open on the network by
// accident: the address bound decides, not its name.
func ListenHTTP(addr string, c *Client, opt HTTPOptions) (*HTTPServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kv: http api: %w", err)
	}
	ta, ok := ln.Addr().(*net.TCPAddr)
	if !(ok && ta.IP.IsLoopback()) && len(opt.Token) == 0 {
		ln.Close()
		return nil, fmt.Errorf("kv: http api %s (bound %s) is reachable from other machines and has no token: set kv.token_file or use a loopback address", addr, ln.Addr())
	}
	return serveHTTP(ln, NewHTTPHandler(c, opt)), nil
}

func serveHTTP(ln net.Listener, h *HTTPHandler) *HTTPServer {
	s := &HTTPServer{ln: ln, h: h, srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: HTTPReadHeaderTimeout,
		ReadTimeout:       HTTPReadTimeout,
		// The write deadline runs from the end of the header: the body,
		// the request's own deadline, then the answer.
		WriteTimeout:   HTTPReadTimeout + h.timeout + 5*time.Second,
		IdleTimeout:    HTTPIdleTimeout,
		MaxHeaderBytes: HTTPMaxHeaderBytes,
	}}
	go s.srv.Serve(ln)
	return s
}

// Addr returns the address the API serves on.
func (s *HTTPServer) Addr() net.Addr { return s.ln.Addr() }

// Handler returns the API's handler (its Failures).
func (s *HTTPServer) Handler() *HTTPHandler { return s.h }

// Close stops the API: requests in progress get up to a second to finish.
func (s *HTTPServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	return err
}
