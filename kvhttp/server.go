package kvhttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/weft-dev/weft/kv"
)

// Server limits of the HTTP API (Listen): a slow or idle client
// cannot hold a connection, nor a large header memory.
const (
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout covers the header and the body (at most MaxCASBody).
	ReadTimeout = 30 * time.Second
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes leaves room for the longest key percent-encoded
	// (3 x kv.MaxKeyBytes) in the request line, and a token.
	MaxHeaderBytes = 16 << 10
)

// Server is the HTTP/JSON API serving on a listener.
type Server struct {
	srv *http.Server
	ln  net.Listener
	h   *Handler
}

// Listen serves the HTTP/JSON API (Handler) over c on addr. It
// refuses an address other machines can reach (anything but loopback)
// without opt.Token, so the store is never open on the network by
// accident: the address bound decides, not its name.
func Listen(addr string, c *kv.Client, opt Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kvhttp: %w", err)
	}
	ta, ok := ln.Addr().(*net.TCPAddr)
	if !(ok && ta.IP.IsLoopback()) && len(opt.Token) == 0 {
		ln.Close()
		return nil, fmt.Errorf("kvhttp: %s (bound %s) is reachable from other machines and has no token: set kv.token_file or use a loopback address", addr, ln.Addr())
	}
	return serve(ln, NewHandler(c, opt)), nil
}

func serve(ln net.Listener, h *Handler) *Server {
	s := &Server{ln: ln, h: h, srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		// The write deadline runs from the end of the header: the body,
		// the request's own deadline, then the answer.
		WriteTimeout:   ReadTimeout + h.timeout + 5*time.Second,
		IdleTimeout:    IdleTimeout,
		MaxHeaderBytes: MaxHeaderBytes,
		// The server's own complaints (a malformed request line, a
		// panicking handler) go to the agent's log, in its format.
		ErrorLog: slog.NewLogLogger(h.log.Handler(), slog.LevelWarn),
	}}
	go s.srv.Serve(ln)
	return s
}

// Addr returns the address the API serves on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Handler returns the API's handler (its Failures).
func (s *Server) Handler() *Handler { return s.h }

// Close stops the API: requests in progress get up to a second to finish.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	return err
}
