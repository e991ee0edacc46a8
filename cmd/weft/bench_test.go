package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/wire"
)

// runJSON runs exe with args, fails the test if it fails (with its
// stderr), decodes its standard output into v and returns the output
// and its stderr.
func runJSON(t *testing.T, exe string, v any, args ...string) (out []byte, stderr string) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("weft %s: %v\n%s", strings.Join(args[:min(2, len(args))], " "), err, errb.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out, errb.String()
}

// TestBenchLadder runs a tiny ladder of `weft bench` (WbCast, 1 replica
// per group, 1 and 4 clients in 2 client processes, a 1s window) as
// processes and checks its JSON rows and that its plot is XML with both
// curves (p50, p99) of the configuration. It asserts what was measured,
// never how fast.
func TestBenchLadder(t *testing.T) {
	exe := buildWeft(t)
	plot := filepath.Join(t.TempDir(), "curve.svg")
	var rows []map[string]any
	out, stderr := runJSON(t, exe, &rows, "bench", "--protocols", "wbcast", "--replicas", "1", "--groups-per-msg", "2", "--dest", "home",
		"--clients", "1,4", "--client-procs", "2", "--warmup", "200ms", "--window", "1s", "--interval", "500ms", "--format", "json", "--plot", plot)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2 (one per rung):\n%s", len(rows), out)
	}
	for i, r := range rows {
		for _, k := range []string{"protocol", "durability", "dest", "groups_per_msg", "clients", "client_procs", "shared_clients", "client_conns", "window_s", "completed", "errors",
			"throughput_per_s", "p50_ms", "p99_ms", "p999_ms", "server_cores", "client_cores", "server_cpu_us_per_msg", "client_cpu_us_per_msg",
			"total_cpu_us_per_msg", "server_rw_syscalls_per_msg", "server_ctx_switches_per_msg"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %d lacks %q", i, k)
			}
		}
		want := map[string]any{"protocol": "wbcast", "durability": "fsync", "dest": "home", "groups_per_msg": 2.0,
			"clients": []float64{1, 4}[i], "client_procs": []float64{1, 2}[i], "window_s": 1.0,
			"shared_clients": 0.0, "client_conns": []float64{1, 4}[i]} // a client per worker
		for k, v := range want {
			if r[k] != v {
				t.Errorf("row %d: %s = %v, want %v", i, k, r[k], v)
			}
		}
		n, _ := r["completed"].(float64)
		if n < 1 || r["throughput_per_s"] != n/1.0 {
			t.Errorf("row %d: %v completed, throughput %v: want some messages, throughput = completed / window", i, n, r["throughput_per_s"])
		}
		p50, p99 := r["p50_ms"].(float64), r["p99_ms"].(float64)
		if p50 <= 0 || p99 < p50 {
			t.Errorf("row %d: p50 %vms, p99 %vms", i, p50, p99)
		}
		if cpu, _ := r["server_cpu_us_per_msg"].(float64); cpu <= 0 {
			t.Errorf("row %d: the agents used no CPU: %v", i, r)
		}
		// The timeline: two slices of 500ms whose completions add up to
		// the window's (the histograms and the latency list count the
		// same messages), each with the agents' memory.
		tl, _ := r["timeline"].([]any)
		if len(tl) != 2 {
			t.Errorf("row %d: timeline %v, want 2 intervals", i, r["timeline"])
			continue
		}
		sum := 0.0
		for k, iv := range tl {
			m := iv.(map[string]any)
			sum += m["completed"].(float64)
			if m["start_s"] != []float64{0, 0.5}[k] || m["throughput_per_s"] != m["completed"].(float64)/0.5 || m["agent_rss_max_mib"].(float64) <= 0 ||
				m["agent_rss_sum_mib"].(float64) < m["agent_rss_max_mib"].(float64) {
				t.Errorf("row %d interval %d: %v", i, k, m)
			}
		}
		if sum != n {
			t.Errorf("row %d: the intervals count %v multicasts, the window %v", i, sum, n)
		}
	}
	// The plot: XML, with a p50 and a p99 curve of the configuration,
	// each with a point per rung.
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	curves := map[string]int{} // "series/stat" -> points
	var cur string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the plot is not XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "g":
				cur = ""
				var series, stat string
				for _, a := range se.Attr {
					switch a.Name.Local {
					case "data-series":
						series = a.Value
					case "data-stat":
						stat = a.Value
					}
				}
				if series != "" {
					cur = series + "/" + stat
					curves[cur] = 0
				}
			case "circle":
				if cur != "" {
					curves[cur]++
				}
			}
		}
	}
	want := map[string]int{"wbcast 2g fsync/p50": 2, "wbcast 2g fsync/p99": 2}
	if len(curves) != len(want) {
		t.Errorf("curves %v, want %v", curves, want)
	}
	for k, v := range want {
		if curves[k] != v {
			t.Errorf("curve %s has %d points, want %d (curves %v)", k, curves[k], v, curves)
		}
	}
	if !strings.Contains(stderr, "== bench: wbcast") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
}

// TestBenchSharedClients runs `weft bench --shared-clients 2` (WbCast, 1
// replica per group, 1 and 5 workers in 2 client processes, 2 groups per
// message, a 1s window): the workers of each process share 2 clients,
// and each rung completes multicasts without an error and reports the
// clients in use (1 worker: 1; 3 + 2 workers: 2 + 2). Never how fast.
func TestBenchSharedClients(t *testing.T) {
	exe := buildWeft(t)
	var rows []map[string]any
	out, _ := runJSON(t, exe, &rows, "bench", "--protocols", "wbcast", "--replicas", "1", "--groups-per-msg", "2", "--clients", "1,5",
		"--client-procs", "2", "--shared-clients", "2", "--warmup", "200ms", "--window", "1s", "-o", "json")
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2 (one per rung):\n%s", len(rows), out)
	}
	for i, r := range rows {
		want := map[string]any{"clients": []float64{1, 5}[i], "client_procs": []float64{1, 2}[i], "shared_clients": 2.0,
			"client_conns": []float64{1, 4}[i], "groups_per_msg": 2.0, "errors": 0.0}
		for k, v := range want {
			if r[k] != v {
				t.Errorf("row %d: %s = %v, want %v", i, k, r[k], v)
			}
		}
		if n, _ := r["completed"].(float64); n < 1 || r["p50_ms"].(float64) <= 0 {
			t.Errorf("row %d: %v completed, p50 %vms: want some multicasts", i, n, r["p50_ms"])
		}
	}
}

// TestBenchClientConns: the clients a rung uses in all, one per worker
// or shared by each process's workers (at most one per worker).
func TestBenchClientConns(t *testing.T) {
	for _, tc := range []struct{ clients, procs, shared, want int }{
		{90, 2, 0, 90}, {90, 2, 1, 2}, {90, 2, 3, 6}, {5, 2, 2, 4}, {5, 2, 3, 5}, {1, 1, 4, 1}, {7, 3, 1, 3},
	} {
		if got := clientConns(tc.clients, tc.procs, tc.shared); got != tc.want {
			t.Errorf("%d workers over %d processes, --shared-clients %d: %d clients, want %d", tc.clients, tc.procs, tc.shared, got, tc.want)
		}
	}
	if got := fmt.Sprint(procWorkers(7, 3)); got != "[3 2 2]" {
		t.Errorf("7 workers over 3 processes: %s", got)
	}
}

// TestBenchInFlight: a shared client keeps every worker it carries in
// flight, and the agents' client_share is the most any client of the run
// carries (at least the default), so that no rung waits for a slot inside
// its clients or is shed for its share.
func TestBenchInFlight(t *testing.T) {
	for _, tc := range []struct{ workers, clients, want int }{
		{90, 1, 90}, {90, 2, 45}, {91, 2, 46}, {1, 1, 1}, {5, 5, 1}, {0, 1, 1},
	} {
		if got := benchInFlight(tc.workers, tc.clients); got != tc.want {
			t.Errorf("%d workers over %d clients: MaxInFlight %d, want %d", tc.workers, tc.clients, got, tc.want)
		}
	}
	def := config.DefaultClientShare
	for _, tc := range []struct {
		ladder        []int
		procs, shared int
		want          int
	}{
		{[]int{1, 32, 90, 180}, 2, 1, 90},  // the README's shared ladder: 90 workers a client at 180
		{[]int{1, 32, 90, 180}, 2, 0, def}, // a client per worker
		{[]int{1, 32, 90, 180}, 2, 2, def}, // 45 a client
		{[]int{1, 301}, 2, 1, 151},         // 151 and 150 workers in the two processes
		{[]int{500, 20}, 1, 1, 500},        // the largest rung, wherever it is in the ladder
	} {
		o := &benchOptions{clients: tc.ladder, clientProcs: tc.procs, sharedClients: tc.shared}
		if got := o.clientShare(); got != tc.want {
			t.Errorf("ladder %v over %d processes, --shared-clients %d: client_share %d, want %d", tc.ladder, tc.procs, tc.shared, got, tc.want)
		}
	}
}

// TestBenchBadFlags: every bad value is refused before anything starts,
// with an error naming the flag.
func TestBenchBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--protocols", "paxos"}, "--protocols"},
		{[]string{"--durability", "tmpfs"}, "--durability"},
		{[]string{"--clients", "0"}, "--clients"},
		{[]string{"--groups-per-msg", "4"}, "--groups-per-msg"},
		{[]string{"--dest", "random"}, "--dest"},
		{[]string{"--window", "10ms"}, "--window"},
		{[]string{"--client-procs", "0"}, "--client-procs"},
		{[]string{"--shared-clients", "-1"}, "--shared-clients"},
		{[]string{"--clients", "1,2001"}, "--clients"},
		{[]string{"--payload", "1048577"}, "--payload"},
		{[]string{"--replicas", "8"}, "--replicas"},
		{[]string{"--window", "1s", "--interval", "300ms"}, "--interval"},
		{[]string{"--interval", "10ms"}, "--interval"},
	} {
		_, err := execCmd(benchCmd, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
}

// TestBenchDest: uniform draws k distinct groups; home is the worker's
// home group plus neighbours rotating over the other groups.
func TestBenchDest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[wire.GroupID]int{}
	for n := range 300 {
		d := benchDest("uniform", 2, 3, 0, n, rng)
		if len(d) != 2 || d[0] >= d[1] {
			t.Fatalf("uniform, 2 of 3 groups: %v", d)
		}
		for _, g := range d {
			seen[g]++
		}
	}
	if len(seen) != 3 {
		t.Errorf("uniform destinations over 300 messages: %v, want every group", seen)
	}
	var got []string
	for n := range 4 {
		got = append(got, fmt.Sprint(benchDest("home", 2, 3, 1, n, rng)))
	}
	if want := "[[1 2] [0 1] [1 2] [0 1]]"; fmt.Sprint(got) != want {
		t.Errorf("home 1, 2 groups per message: %v, want %s", got, want)
	}
	if d := benchDest("home", 1, 3, 2, 5, rng); fmt.Sprint(d) != "[2]" {
		t.Errorf("home 2, 1 group per message: %v", d)
	}
	if d := benchDest("home", 3, 3, 0, 7, rng); fmt.Sprint(d) != "[0 1 2]" {
		t.Errorf("home 0, 3 groups per message: %v", d)
	}
}

// TestCountsSince: the agents' counters over the window count only agents
// that answered at both ends (an agent missing at the start would
// otherwise add its whole history) and whose counters did not go back (a
// restarted agent).
func TestCountsSince(t *testing.T) {
	miss := agentCounts{-1, -1, -1, -1, -1, -1, -1}
	r0 := []agentCounts{{10, 3, 2, 0, 1, 1, 4}, miss, {5, 1, 1, 0, 0, 0, 0}, {7, 4, 4, 1, 0, 0, 1}, {9, 9, 9, 0, 0, 0, 0}, {3, 3, 3, 0, 2, 1, 0}, {1, 1, 1, 0, 0, 0, 5}}
	r1 := []agentCounts{{25, 8, 6, 2, 2, 1, 6}, {1000, 50, 50, 9, 3, 3, 9}, miss, {7, 4, 4, 1, 1, 1, 2}, {20, 2, 20, 0, 0, 0, 0}, {4, 4, 4, 0, 1, 1, 0}, {2, 2, 2, 0, 0, 0, 4}}
	if got, want := countsSince(r0, r1), (agentCounts{15, 5, 4, 2, 2, 1, 3}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestBenchLeaderChanges: a row whose window saw a ballot or a leader
// change is named under the table; a row without is not.
func TestBenchLeaderChanges(t *testing.T) {
	rows := []benchRow{
		{Protocol: "wbcast", Durability: "nofsync", GroupsPerMsg: 2, Clients: 90, benchCPU: benchCPU{ServerBallots: 1, ServerLeaderChanges: 1}},
		{Protocol: "wbcast", Durability: "nofsync", GroupsPerMsg: 2, Clients: 180},
		{Protocol: "wbcast", Durability: "fsync", GroupsPerMsg: 1, Clients: 32, benchCPU: benchCPU{ServerLoopStalls: 3}},
	}
	var b bytes.Buffer
	writeBenchTable(&b, rows, benchOptions{dest: "uniform", payload: 64})
	out := b.String()
	if !strings.Contains(out, "! wbcast nofsync, 2 group(s)/msg, 90 clients: 1 leader change(s), 1 ballot(s) started") {
		t.Errorf("the row with a leader change is not named:\n%s", out)
	}
	if strings.Contains(out, "180 clients: ") {
		t.Errorf("a row without one is named:\n%s", out)
	}
	if !strings.Contains(out, "~ wbcast fsync, 1 group(s)/msg, 32 clients: 3 loop stall(s)") || strings.Count(out, "loop stall") != 1 {
		t.Errorf("the row with loop stalls is not named, or another is:\n%s", out)
	}
}

// TestBenchRetire checks what a stopped cluster leaves behind: in the
// run's temporary directory nothing (its unwritten pages must not be
// written back in the next cluster's windows), in a directory the user
// keeps (--dir) every file, synced.
func TestBenchRetire(t *testing.T) {
	for _, keep := range []bool{false, true} {
		root := t.TempDir()
		dir := filepath.Join(root, "wbcast-nofsync")
		for _, f := range []string{"node0.log", "node0/wal/000001.log", "node0/snap/a"} {
			p := filepath.Join(dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		o := &benchOptions{}
		if keep {
			o.dir = root
		}
		e := &benchEnv{root: root, o: o}
		if err := e.retire(&benchCluster{dir: dir}); err != nil {
			t.Fatalf("keep=%v: %v", keep, err)
		}
		_, err := os.Stat(dir)
		switch {
		case !keep && !errors.Is(err, fs.ErrNotExist):
			t.Errorf("a temporary run's stopped cluster left %s (stat: %v)", dir, err)
		case keep:
			if b, err := os.ReadFile(filepath.Join(dir, "node0/wal/000001.log")); err != nil || string(b) != "node0/wal/000001.log" {
				t.Errorf("a kept cluster's file: %q, %v", b, err)
			}
		}
	}
	if n, err := syncTree(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Errorf("syncTree of a missing directory: %d files, no error", n)
	}
}
