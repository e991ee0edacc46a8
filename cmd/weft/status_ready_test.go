package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weft-dev/weft/node"
)

// TestStatusReady: weft status --ready, the containers' health check,
// exits non-zero with the node's reason exactly when the node's report
// says it is not ready (a stand-in endpoint serves both reports).
func TestStatusReady(t *testing.T) {
	var rep node.Report
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(rep)
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	rep.Readiness = node.Readiness{Ready: true, Role: "LEADER", LeaderKnown: true}
	if out, err := execCmd(statusCmd, "--admin", addr, "--ready"); err != nil || !strings.Contains(out, "ready") {
		t.Errorf("ready node: %v\n%s", err, out)
	}
	rep.Readiness = node.Readiness{Ready: false, Reason: "no_leader", Detail: "no leader known", Role: "FOLLOWER"}
	if _, err := execCmd(statusCmd, "--admin", addr, "--ready"); err == nil || !strings.Contains(err.Error(), "not ready: no_leader (no leader known)") {
		t.Errorf("node without a leader: %v, want not ready: no_leader", err)
	}
	// Without --ready, status only reports.
	if out, err := execCmd(statusCmd, "--admin", addr); err != nil || !strings.Contains(out, "no: no_leader") {
		t.Errorf("status without --ready: %v\n%s", err, out)
	}
}
