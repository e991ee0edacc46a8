package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/wire"
)

func TestMembersBadFlags(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		args []string
	}{
		{"members", nil},
		{"members", []string{"--admin", "a:1", "--config", "x.toml"}},
		{"leave", nil},
		{"assassinate", []string{"--admin", "127.0.0.1:1"}},
		{"assassinate", []string{"--admin", "127.0.0.1:1", "not-an-address"}},
	} {
		if out, err := run(t, append([]string{c.cmd}, c.args...)...); err == nil {
			t.Errorf("%s %q succeeded: %s", c.cmd, c.args, out)
		}
	}
}

// TestAgentRefusesUnsafeAdmin: an agent does not start with an admin
// endpoint other machines can reach and no token, with an admin endpoint
// on its own port, or with a token file others can read.
func TestAgentRefusesUnsafeAdmin(t *testing.T) {
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose.token")
	if err := os.WriteFile(loose, []byte("0123456789abcdef0123456789abcdef"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(loose, 0o644)
	sample := strings.Replace(config.Sample, `data_dir = "/var/lib/weft/node0"`, "data_dir = "+strconv.Quote(filepath.Join(dir, "data")), 1)
	for _, tc := range []struct{ old, new, want string }{
		{`admin = "127.0.0.1:7200"`, `admin = "0.0.0.0:7200"`, "not a loopback address: an admin endpoint reachable from other machines needs admin_token_file"},
		{`admin = "127.0.0.1:7200"`, `admin = "127.0.0.1:7100"`, "node's listen address"},
		{`# admin_token_file = "/etc/weft/admin.token"`, "admin_token_file = " + strconv.Quote(loose), "must not be accessible by group or others"},
	} {
		path := filepath.Join(dir, "bad.toml")
		text := strings.Replace(sample, tc.old, tc.new, 1)
		if text == sample {
			t.Fatalf("the sample has no %q", tc.old)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := execCmd(agentCmd, "--config", path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("agent with %s: %v, want an error with %q", tc.new, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Error("a refused agent created its data directory")
	}
	if _, err := execCmd(leaveCmd, "--admin", "127.0.0.1:1", "--token-file", loose); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("leave with a loose token file: %v", err)
	}
}

// TestMembersLeaveAssassinateProcesses runs one group of three agents with
// gossip and drives it with `weft members`, `weft assassinate` and `weft
// leave` as separate processes: all UP with the leader's role; a SIGKILLed
// agent goes DOWN, then REMOVED once assassinated; an agent told to leave
// announces LEFT and its process exits cleanly.
func TestMembersLeaveAssassinateProcesses(t *testing.T) {
	exe := buildWeft(t)
	dir := t.TempDir()
	addrs, err := freeAddrs(6)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{"0": addrs[0], "1": addrs[1], "2": addrs[2]}
	agents := make([]*agentProc, 3)
	tokenPath := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokenPath, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPaths := make([]string, 3)
	for id := range 3 {
		cfg := config.Config{Cluster: "members-test", ID: wire.ProcID(id), DataDir: filepath.Join(dir, fmt.Sprint("n", id)),
			Admin: addrs[3+id], AdminTokenFile: tokenPath, Tick: 10 * time.Millisecond, ElectionTicks: 30, HeartbeatTicks: 1, RetryTicks: 12, SessionLease: config.DefaultSessionLease, LogLevel: "info",
			WALSegmentSize: 1 << 20, CompactBytes: 1 << 20, Groups: [][]wire.ProcID{{0, 1, 2}}, Nodes: nodes,
			Gossip: config.Gossip{Enabled: true, Profile: "local", Interval: 20 * time.Millisecond}}
		path := filepath.Join(dir, fmt.Sprintf("n%d.toml", id))
		cfgPaths[id] = path
		if err := os.WriteFile(path, []byte(cfg.Format()), 0o644); err != nil {
			t.Fatal(err)
		}
		a := startAgent(t, exe, path)
		agents[id] = a
		t.Cleanup(func() { a.stop() })
	}
	members := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, _ := exec.CommandContext(ctx, exe, "members", "--admin", addrs[3]).CombinedOutput()
		return string(out)
	}
	row := func(out string, id int) string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && strings.TrimSuffix(f[0], "*") == fmt.Sprint(id) {
				return l
			}
		}
		return ""
	}
	wait := func(what string, cond func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			out := members()
			if cond(out) {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; last `weft members`:\n%s", what, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	out := wait("three members up with p0 leading", func(out string) bool {
		return strings.Contains(out, "3 of 3 members up") && regexp.MustCompile(`leader\s+0\.p0\s+UP`).MatchString(row(out, 0))
	})
	t.Logf("weft members:\n%s", out)

	agents[2].cmd.Process.Kill()
	wait("p2 DOWN", func(out string) bool { return strings.Contains(row(out, 2), " DOWN ") })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Without the token the node refuses.
	res, err := exec.CommandContext(ctx, exe, "assassinate", "--admin", addrs[3], addrs[2]).CombinedOutput()
	if err == nil || !strings.Contains(string(res), "missing_token") {
		t.Fatalf("assassinate without the token: %v\n%s", err, res)
	}
	res, err = exec.CommandContext(ctx, exe, "assassinate", "--config", cfgPaths[0], addrs[2]).CombinedOutput()
	if err != nil {
		t.Fatalf("assassinate: %v\n%s", err, res)
	}
	wait("p2 REMOVED", func(out string) bool { return strings.Contains(row(out, 2), " REMOVED ") })

	res, err = exec.CommandContext(ctx, exe, "leave", "--admin", addrs[4], "--token-file", tokenPath).CombinedOutput()
	if err != nil {
		t.Fatalf("leave: %v\n%s", err, res)
	}
	out = wait("p1 LEFT", func(out string) bool { return strings.Contains(row(out, 1), " LEFT ") })
	t.Logf("weft members:\n%s", out)
	select {
	case err := <-agents[1].exit:
		if err != nil {
			t.Fatalf("agent 1 exited with %v after leaving:\n%s", err, agents[1].log)
		}
		agents[1].exit <- nil // for the cleanup
	case <-time.After(15 * time.Second):
		t.Fatal("agent 1 still running 15s after leaving")
	}
}
