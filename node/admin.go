package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// AdminHandler serves the node's status:
//
//	GET /status   Status as JSON
func AdminHandler(n *Node) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(n.Status())
	})
	return mux
}

// Admin is a running status endpoint.
type Admin struct {
	srv *http.Server
	ln  net.Listener
}

// ServeAdmin starts the status endpoint on addr.
func ServeAdmin(n *Node, addr string) (*Admin, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node: admin endpoint: %w", err)
	}
	a := &Admin{srv: &http.Server{Handler: AdminHandler(n), ReadHeaderTimeout: 5 * time.Second}, ln: ln}
	go a.srv.Serve(ln)
	return a, nil
}

// Addr returns the endpoint's address.
func (a *Admin) Addr() net.Addr { return a.ln.Addr() }

// Close stops the endpoint.
func (a *Admin) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := a.srv.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// FetchStatus asks the status endpoint at addr for the node's status.
func FetchStatus(ctx context.Context, hc *http.Client, addr string) (Status, error) {
	var st Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("node: status from %s: %s", addr, resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}
