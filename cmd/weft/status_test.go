package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// TestStatusVersionOutputProcesses runs one group of three agents as
// processes (agent 0 with --log-format json) and drives them with the
// operator commands as processes: weft multicast -o json, weft status
// (table and -o json) against a live node, weft members with -o json and
// its deprecated --json, weft version -o json; then checks agent 0's log
// is JSON lines.
func TestStatusVersionOutputProcesses(t *testing.T) {
	exe := buildWeft(t)
	dir := t.TempDir()
	addrs, err := freeAddrs(6)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{"0": addrs[0], "1": addrs[1], "2": addrs[2]}
	cfgPaths := make([]string, 3)
	agents := make([]*agentProc, 3)
	for id := range 3 {
		cfg := config.Config{Cluster: "status-test", ID: wire.ProcID(id), DataDir: filepath.Join(dir, fmt.Sprint("n", id)),
			Admin: addrs[3+id], Tick: 10 * time.Millisecond, ElectionTicks: 30, HeartbeatTicks: 1, RetryTicks: 12,
			SessionLease: config.DefaultSessionLease, LogLevel: "info", LogFormat: "text",
			WALSegmentSize: 1 << 20, CompactBytes: 1 << 20, Groups: [][]wire.ProcID{{0, 1, 2}}, Nodes: nodes,
			Gossip: config.Gossip{Enabled: true, Profile: "local", Interval: 20 * time.Millisecond}}
		cfgPaths[id] = filepath.Join(dir, fmt.Sprintf("n%d.toml", id))
		if err := os.WriteFile(cfgPaths[id], []byte(cfg.Format()), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"agent", "--config", cfgPaths[id]}
		if id == 0 {
			args = append(args, "--log-format", "json")
		}
		a := &agentProc{cmd: exec.Command(exe, args...), log: &bytes.Buffer{}, exit: make(chan error, 1)}
		a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
		if err := a.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { a.exit <- a.cmd.Wait() }()
		agents[id] = a
		t.Cleanup(func() { a.stop() })
	}
	weft := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var out, errb bytes.Buffer
		c := exec.CommandContext(ctx, exe, args...)
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		if err != nil {
			err = fmt.Errorf("weft %s: %w: %s", strings.Join(args, " "), err, errb.String())
		}
		return out.String(), err
	}

	out, err := weft("multicast", "--config", cfgPaths[1], "--dest", "0", "-o", "json", "hello")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		ID     string         `json:"id"`
		GTS    wire.Timestamp `json:"gts"`
		Leader wire.ProcID    `json:"leader"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.GTS.IsZero() {
		t.Fatalf("multicast -o json: %v: %q", err, out)
	}

	// Every node delivered it and is ready (followers once they caught up).
	for id := range 3 {
		var rep node.Report
		deadline := time.Now().Add(20 * time.Second)
		for {
			out, err := weft("status", "--admin", addrs[3+id], "-o", "json")
			if err == nil {
				rep = node.Report{}
				err = json.Unmarshal([]byte(out), &rep)
			}
			if err == nil && rep.Readiness.Ready && rep.Stats.Delivered >= 1 && rep.Fsyncs >= 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d: not ready with a delivery: %v\n%s", id, err, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if rep.ID != wire.ProcID(id) || rep.Readiness.Leader != res.Leader || rep.FsyncP99Seconds <= 0 || len(rep.PeerQueues) != 2 {
			t.Errorf("node %d: status -o json: %+v", id, rep)
		}
	}
	out, err = weft("status", "--admin", addrs[3+int(res.Leader)])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"role           LEADER", "ready          yes", fmt.Sprintf("leader         p%d", res.Leader), "fsync p99", "send queue p"} {
		if !strings.Contains(out, want) {
			t.Errorf("weft status lacks %q:\n%s", want, out)
		}
	}
	t.Logf("weft status:\n%s", out)

	// -o json and the deprecated --json print the same view; contradicting
	// them is an error.
	var viaO, viaJSON []node.Member
	for _, c := range []struct {
		flag string
		into *[]node.Member
	}{{"-o=json", &viaO}, {"--json", &viaJSON}} {
		out, err := weft("members", "--admin", addrs[3], c.flag)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), c.into); err != nil || len(*c.into) != 3 {
			t.Errorf("members %s: %v: %q", c.flag, err, out)
		}
	}
	if _, err := weft("members", "--admin", addrs[3], "-o", "table", "--json"); err == nil || !strings.Contains(err.Error(), "give -o only") {
		t.Errorf("members -o table --json: %v", err)
	}
	if _, err := weft("members", "--admin", addrs[3], "-o", "yaml"); err == nil {
		t.Error("members -o yaml succeeded")
	}

	out, err = weft("version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Wire != wire.Version || v.Transport != transport.TransportVersion ||
		!strings.HasPrefix(v.GoVersion, "go") || v.Module != "github.com/weft-dev/weft" {
		t.Errorf("version -o json: %v: %q", err, out)
	}

	// Agent 0 logged JSON lines, the others text.
	for _, a := range agents[:2] {
		if err := a.stop(); err != nil {
			t.Errorf("agent stopped with %v", err)
		}
		a.exit <- nil // for the cleanup
	}
	lines := strings.Split(strings.TrimSpace(agents[0].log.String()), "\n")
	running := false
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("agent 0 (--log-format json) logged a line that is not JSON: %q", l)
		}
		running = running || rec["msg"] == "agent running"
	}
	if !running {
		t.Errorf("agent 0's log has no \"agent running\" record:\n%s", agents[0].log)
	}
	if !strings.Contains(agents[1].log.String(), `msg="agent running"`) {
		t.Errorf("agent 1's log is not text:\n%s", agents[1].log)
	}
}

// TestOutputFlagAliases: the deprecated --format still works on the
// simulator's commands and agrees with -o; a bad -o value is refused.
func TestOutputFlagAliases(t *testing.T) {
	a, err := run(t, "sim", "latency", "--protocols", "skeen", "--messages", "100", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := run(t, "sim", "latency", "--protocols", "skeen", "--messages", "100", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if a != b || !strings.HasPrefix(strings.TrimSpace(a), "[") {
		t.Errorf("--format json and -o json differ:\n%s\n%s", a, b)
	}
	out, err := run(t, "sim", "run", "--messages", "100", "-o", "json")
	var rs runSummary
	if err != nil || json.Unmarshal([]byte(out), &rs) != nil || rs.Multicasts != 100 || rs.Deliveries == 0 || rs.LatencyFirst.N == 0 {
		t.Errorf("sim run -o json: %v: %q", err, out)
	}
	if _, err := run(t, "sim", "latency", "--protocols", "skeen", "-o", "csv"); err == nil {
		t.Error("-o csv accepted")
	}
	if _, err := run(t, "sim", "latency", "--protocols", "skeen", "-o", "table", "--format", "json"); err == nil {
		t.Error("-o table --format json accepted")
	}
}
