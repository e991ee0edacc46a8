package demo

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineWatcher collects the demo's printouts and signals the lines that
// match a pattern.
type lineWatcher struct {
	t       *testing.T
	mu      sync.Mutex
	pattern *regexp.Regexp
	matches chan []string
}

func (w *lineWatcher) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		w.t.Log(line)
		if m := w.pattern.FindStringSubmatch(line); m != nil {
			select {
			case w.matches <- m:
			default:
			}
		}
	}
	return len(b), nil
}

// TestDemoDashboardHold runs the demo (real agent processes) with --hold:
// it prints one agent's dashboard URL, the page and its data answer during
// the workload and while the cluster is held after it, and ending the
// hold stops the agents and runs the checks, which pass.
func TestDemoDashboardHold(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: skipped with -short")
	}
	exe := weftBinary(t)
	w := &lineWatcher{t: t, pattern: regexp.MustCompile(`^(dashboard   |holding the cluster up .*dashboard )(http://\S+/dashboard/)`), matches: make(chan []string, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		sum *Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := Run(ctx, Options{Exe: exe, Workload: WorkloadMulticast, Groups: 2, Replicas: 3, Clients: 4, Duration: 3 * time.Second, KillGroup: -1, Hold: true, Out: w})
		done <- result{sum, err}
	}()
	data := func(url string) (members int, delivered uint64) {
		t.Helper()
		resp, err := http.Get(url + "data")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d struct {
			Members []struct{ Status string }
			Self    struct {
				Stats struct{ Delivered uint64 }
			}
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%sdata: %s", url, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
			t.Fatal(err)
		}
		for _, m := range d.Members {
			if m.Status == "UP" {
				members++
			}
		}
		return members, d.Self.Stats.Delivered
	}
	next := func(what string) []string {
		t.Helper()
		select {
		case m := <-w.matches:
			return m
		case r := <-done:
			t.Fatalf("the demo ended before %s: %v", what, r.err)
		case <-time.After(60 * time.Second):
			t.Fatalf("no %s within 60s", what)
		}
		return nil
	}
	url := next("dashboard URL")[2]
	page, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%s: %s %s", url, page.Status, page.Header.Get("Content-Type"))
	}
	held := next("hold line")
	if held[2] != url {
		t.Errorf("the hold line names %s, the start %s", held[2], url)
	}
	// Held: the workload is over, the agents still serve the dashboard.
	up, delivered := data(url)
	if up != 6 || delivered == 0 {
		t.Errorf("held cluster: %d members UP (want 6), %d delivered at the dashboard's agent", up, delivered)
	}
	time.Sleep(300 * time.Millisecond)
	if up2, d2 := data(url); up2 != 6 || d2 != delivered {
		t.Errorf("held cluster moved: %d up, %d delivered (was %d)", up2, d2, delivered)
	}
	cancel()
	r := <-done
	if r.err != nil || r.sum == nil || !r.sum.Report.OK() {
		t.Fatalf("after the hold: %v", r.err)
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("the dashboard still answers after the demo ended")
	}
}
