package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weft-dev/weft/wire"
)

// AdminHandler serves the node's status and gossip operations:
//
//	GET  /status                 Status as JSON
//	GET  /members                the gossip view ([]Member) as JSON
//	POST /leave                  announce this node's departure (Leave)
//	POST /assassinate?id=N       remove member N from gossip (Assassinate);
//	POST /assassinate?addr=A     the same, naming the member by its address
//
// Errors are plain text with a 4xx/5xx status.
func AdminHandler(n *Node) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(n.Status())
	})
	mux.HandleFunc("GET /members", func(w http.ResponseWriter, r *http.Request) {
		if n.cfg.Gossip == nil {
			http.Error(w, errNoGossip.Error(), http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(n.Members())
	})
	mux.HandleFunc("POST /leave", func(w http.ResponseWriter, r *http.Request) {
		if err := n.Leave(); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		fmt.Fprintln(w, "leaving: departure announced in gossip")
	})
	mux.HandleFunc("POST /assassinate", func(w http.ResponseWriter, r *http.Request) {
		target, err := n.memberByQuery(r.URL.Query().Get("id"), r.URL.Query().Get("addr"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := n.Assassinate(target); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		fmt.Fprintf(w, "assassinating p%d: watching it for heartbeat progress before removing it\n", target)
	})
	return mux
}

// memberByQuery resolves an assassination target given by id or address
// (a member's client or peer address).
func (n *Node) memberByQuery(id, addr string) (wire.ProcID, error) {
	switch {
	case id != "" && addr != "":
		return 0, errors.New("give id or addr, not both")
	case id != "":
		v, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("id %q: not a node id", id)
		}
		return wire.ProcID(v), nil
	case addr != "":
		for _, m := range n.Members() {
			if m.Addr == addr || n.cfg.Peers[m.ID] == addr {
				return m.ID, nil
			}
		}
		for p, a := range n.cfg.Peers {
			if a == addr {
				return p, nil
			}
		}
		return 0, fmt.Errorf("no member has address %s", addr)
	}
	return 0, errors.New("missing id or addr")
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

// FetchMembers asks the admin endpoint at addr for the node's gossip view.
func FetchMembers(ctx context.Context, hc *http.Client, addr string) ([]Member, error) {
	var ms []Member
	err := adminCall(ctx, hc, http.MethodGet, addr, "/members", &ms)
	return ms, err
}

// PostAdmin sends an operation (a path with its query, e.g. "/leave") to
// the admin endpoint at addr and returns the endpoint's answer.
func PostAdmin(ctx context.Context, hc *http.Client, addr, path string) (string, error) {
	var out string
	err := adminCall(ctx, hc, http.MethodPost, addr, path, &out)
	return out, err
}

func adminCall(ctx context.Context, hc *http.Client, method, addr, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("node %s%s: %s: %s", addr, path, resp.Status, strings.TrimSpace(string(body)))
	}
	if s, ok := out.(*string); ok {
		*s = strings.TrimSpace(string(body))
		return nil
	}
	return json.Unmarshal(body, out)
}

// WriteMembers writes a gossip view as a table (weft members): one row per
// member, then a count of the members up.
func WriteMembers(w io.Writer, ms []Member) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tADDRESS\tGROUP\tROLE\tBALLOT\tSTATUS\tPHI\tLOAD\tGENERATION")
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", id, m.Addr, m.Group, role, ballot, m.Status, phi, load, gen)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d members up (* = the node asked)\n", up, len(ms))
}
