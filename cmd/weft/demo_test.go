package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/wire"
)

// execCmd runs one command built by f (not necessarily registered in the
// root) with args.
func execCmd(f func() *cobra.Command, args ...string) (string, error) {
	c := f()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	c.SilenceUsage, c.SilenceErrors = true, true
	err := c.Execute()
	return out.String(), err
}

func TestAgentRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ text, want string }{
		{"colour = \"red\"\n" + config.Sample, "colour: unknown key"},
		{strings.Replace(config.Sample, "election_ticks = 30", "election_ticks = 1", 1), "election_ticks: must be at least 2"},
	} {
		path := filepath.Join(dir, "bad.toml")
		if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := execCmd(agentCmd, "--config", path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("agent with a bad config: %v, want an error with %q and the file name", err, tc.want)
		}
	}
	if _, err := execCmd(agentCmd); err == nil {
		t.Error("agent without --config succeeded")
	}
}

func TestMulticastBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"x"},                                    // no --dest
		{"--dest", "0", "x"},                     // no cluster layout
		{"--dest", "0", "--peers", "0=a:1", "x"}, // no --groups
		{"--dest", "0", "--config", "c.toml", "--peers", "0=a:1", "x"},
		{"--dest", "5", "--peers", "0=127.0.0.1:1", "--groups", "0", "x"},
		{"--dest", "0", "--peers", "zero=127.0.0.1:1", "--groups", "0", "x"},
		{"--dest", "0", "--peers", "0=127.0.0.1:1", "--groups", "0;0", "x"},
		{"--dest", "0", "--peers", "0=127.0.0.1:1", "--groups", "0"}, // no payload
	} {
		if out, err := execCmd(multicastCmd, args...); err == nil {
			t.Errorf("multicast %q succeeded: %s", args, out)
		}
	}
}

// buildWeft builds this command into a temporary directory.
func buildWeft(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process test: skipped with -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	exe := filepath.Join(t.TempDir(), "weft")
	out, err := exec.Command(goTool, "build", "-o", exe, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// TestAgentsAndMulticastProcesses runs three agents and `weft multicast` as
// separate processes.
func TestAgentsAndMulticastProcesses(t *testing.T) {
	exe := buildWeft(t)
	dir := t.TempDir()
	ports, err := freeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{"0": ports[0], "1": ports[1], "2": ports[2]}
	var cfgPath string
	for id := range 3 {
		cfg := config.Config{Cluster: "proc-test", ID: wire.ProcID(id), DataDir: filepath.Join(dir, fmt.Sprint("n", id)),
			Tick: 10 * time.Millisecond, ElectionTicks: 30, HeartbeatTicks: 1, RetryTicks: 12, SessionLease: config.DefaultSessionLease, LogLevel: "info",
			WALSegmentSize: 1 << 20, CompactBytes: 1 << 20,
			Groups: [][]wire.ProcID{{0}, {1}, {2}}, Nodes: nodes}
		cfgPath = filepath.Join(dir, fmt.Sprintf("n%d.toml", id))
		if err := os.WriteFile(cfgPath, []byte(cfg.Format()), 0o644); err != nil {
			t.Fatal(err)
		}
		a := startAgent(t, exe, cfgPath)
		t.Cleanup(func() {
			if err := a.stop(); err != nil {
				t.Errorf("agent %d: %v\n%s", id, err, a.log.String())
			}
		})
	}
	re := regexp.MustCompile(`message \d+\.1@[0-9a-f]+ delivered: gts \d+\.g\d \(group 0, leader 0\)`)
	for i, dest := range []string{"0", "0,2", "0,1,2"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, exe, "multicast", "--config", cfgPath, "--dest", dest, fmt.Sprint("hello ", i)).CombinedOutput()
		cancel()
		if err != nil || !re.Match(out) {
			t.Fatalf("multicast --dest %s: %v\n%s", dest, err, out)
		}
		t.Logf("multicast --dest %s: %s", dest, bytes.TrimSpace(out))
	}
}

// agentProc is a `weft agent` process.
type agentProc struct {
	cmd  *exec.Cmd
	log  *bytes.Buffer // read it only after the process exited
	exit chan error    // receives Wait's result once
}

// startAgent starts `exe agent --config path`.
func startAgent(t *testing.T, exe, path string) *agentProc {
	t.Helper()
	a := &agentProc{cmd: exec.Command(exe, "agent", "--config", path), log: &bytes.Buffer{}, exit: make(chan error, 1)}
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.exit <- a.cmd.Wait() }()
	return a
}

// stop sends SIGINT and waits up to 10s for the agent to exit (then kills
// it); it returns the exit error, or an error if it had to kill it. It
// returns nil for an agent that already exited and was waited for.
func (a *agentProc) stop() error {
	a.cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-a.exit:
		return err
	case <-time.After(10 * time.Second):
		a.cmd.Process.Kill()
		return errors.New("did not stop on SIGINT")
	}
}

func freeAddrs(n int) ([]string, error) {
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// TestDemoProcesses runs a short `weft demo`: weft-kv on separate agent
// processes, the bank and the single-key workers, a shard's leader
// SIGKILLed and restarted; the summary must state work done and every
// check passed.
func TestDemoProcesses(t *testing.T) {
	exe := buildWeft(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, exe, "demo", "--duration", "6s", "--clients", "8", "--dir", filepath.Join(t.TempDir(), "cluster"))
	out, err := cmd.CombinedOutput()
	t.Logf("weft demo took %v", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("weft demo: %v\n%s", err, out)
	}
	i := bytes.LastIndex(out, []byte("== summary: weft-kv"))
	if i < 0 {
		t.Fatalf("no weft-kv summary:\n%s", out)
	}
	summary := string(out[i:])
	for _, want := range []string{"failover ", "elected after", "writes resumed after", "rejoined after",
		"total balance constant: PASS", "linearizable: PASS (porcupine: Ok", "check       PASS", "0 violations"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	// Work was done: transfers committed, full-balance reads checked,
	// single-key operations recorded.
	for _, re := range []string{`txns +([0-9,]+) committed/s`, `([0-9,]+) transfers between shards committed`, `([0-9,]+) full-balance reads`,
		`total balance constant: PASS \(([0-9,]+) full-balance reads`, `linearizable: PASS \(.*; ([0-9,]+) single-key operations`} {
		m := regexp.MustCompile(re).FindStringSubmatch(summary)
		if m == nil {
			t.Errorf("the summary lacks %s:\n%s", re, summary)
			continue
		}
		if n, err := strconv.Atoi(strings.ReplaceAll(m[1], ",", "")); err != nil || n == 0 {
			t.Errorf("%s: %q, want a count above 0", re, m[1])
		}
	}
	t.Logf("summary:\n%s", summary)
}

// TestDemoMulticastProcesses: `weft demo --workload multicast` is the raw
// multicast demo, every reply checked.
func TestDemoMulticastProcesses(t *testing.T) {
	exe := buildWeft(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "demo", "--workload", "multicast", "--duration", "4s", "--clients", "4", "--kill-group", "-1").CombinedOutput()
	if err != nil {
		t.Fatalf("weft demo --workload multicast: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`throughput  [0-9,]+ multicasts/s \([1-9][0-9,]* delivered`).Match(out) || !bytes.Contains(out, []byte("client replies: 0 violations")) {
		t.Errorf("no multicast summary with deliveries and passing checks:\n%s", out)
	}
}
