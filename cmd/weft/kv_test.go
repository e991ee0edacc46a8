package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/kvhttp"
	"github.com/weft-dev/weft/wire"
)

// TestKVProcesses runs three `weft agent` processes with service = "kv"
// (3 shards of 1 replica) and drives them with `weft kv`: put, get, cas
// (success, failure, --absent), del, the exit statuses; then SIGKILLs the
// agent of one key's shard after its log was compacted (so its state comes
// back from the state machine's snapshot plus the log) and reads the keys
// back. Agent 0 also serves the HTTP API ([kv] http, with a token): what
// one way writes, the other reads.
func TestKVProcesses(t *testing.T) {
	exe := buildWeft(t)
	dir := t.TempDir()
	ports, err := freeAddrs(4)
	if err != nil {
		t.Fatal(err)
	}
	const token = "0123456789abcdef0123456789abcdef"
	tokenFile := filepath.Join(dir, "kv.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{"0": ports[0], "1": ports[1], "2": ports[2]}
	paths := make([]string, 3)
	agents := make([]*agentProc, 3)
	for id := range 3 {
		cfg := config.Config{Cluster: "kv-test", ID: wire.ProcID(id), DataDir: filepath.Join(dir, fmt.Sprint("n", id)),
			Tick: 10 * time.Millisecond, ElectionTicks: 30, HeartbeatTicks: 1, RetryTicks: 12, SessionLease: config.DefaultSessionLease, LogLevel: "info",
			WALSegmentSize: 1 << 20, CompactBytes: 4096, Service: config.ServiceKV,
			Groups: [][]wire.ProcID{{0}, {1}, {2}}, Nodes: nodes}
		if id == 0 {
			cfg.KV = config.KV{HTTP: ports[3], TokenFile: tokenFile}
		}
		paths[id] = filepath.Join(dir, fmt.Sprintf("n%d.toml", id))
		if err := os.WriteFile(paths[id], []byte(cfg.Format()), 0o644); err != nil {
			t.Fatal(err)
		}
		agents[id] = startAgent(t, exe, paths[id])
	}
	t.Cleanup(func() {
		for id, a := range agents {
			if err := a.stop(); err != nil {
				t.Errorf("agent %d: %v\n%s", id, err, a.log.String())
			}
		}
	})
	kvRun := func(wantOK bool, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		out, err := exec.CommandContext(ctx, exe, append([]string{"kv", args[0], "--config", paths[0]}, args[1:]...)...).CombinedOutput()
		t.Logf("weft kv %.20q: %v", args, time.Since(start).Round(time.Millisecond))
		if (err == nil) != wantOK {
			t.Fatalf("weft kv %q: err %v, want success %v\n%s", args, err, wantOK, out)
		}
		return strings.TrimSpace(string(out))
	}
	expect := func(got, want string) {
		t.Helper()
		if !strings.Contains(got, want) {
			t.Fatalf("output %q, want it to contain %q", got, want)
		}
	}
	expect(kvRun(false, "get", "color"), `"color": not found`)
	expect(kvRun(true, "put", "color", "blue"), "OK")
	expect(kvRun(true, "get", "color"), "blue")
	expect(kvRun(true, "cas", "color", "blue", "green"), "OK")
	expect(kvRun(false, "cas", "color", "blue", "red"), `compare-and-set failed: "color" is "green"`)
	expect(kvRun(true, "cas", "--absent", "fresh", "1"), "OK")
	expect(kvRun(false, "cas", "--absent", "fresh", "2"), `"fresh" is "1"`)
	expect(kvRun(true, "del", "fresh"), "deleted")
	expect(kvRun(false, "del", "fresh"), "not found")
	expect(kvRun(false, "put", strings.Repeat("k", kv.MaxKeyBytes+1), "v"), "key too large")

	api := "http://" + ports[3] + kvhttp.Prefix
	expect(kvRun(true, "get", "--consistency", "ordered", "color"), "green")
	expect(kvHTTPCall(t, "GET", api+"color", token, ""), `200 {"key":"color","found":true,"value":"green","value_base64":"Z3JlZW4=","consistency":"linearizable","index":"`)
	expect(kvHTTPCall(t, "GET", api+"color?consistency=ordered", token, ""), `200 {"key":"color","found":true,"value":"green","value_base64":"Z3JlZW4=","consistency":"ordered","index":"`)
	expect(kvHTTPCall(t, "GET", api+"color", "", ""), `401 {"error":"this API needs its token`)
	expect(kvHTTPCall(t, "PUT", api+"via%20http", token, "hello"), `200 {"key":"via http","ok":true}`)
	expect(kvRun(true, "get", "via http"), "hello")
	expect(kvHTTPCall(t, "DELETE", api+"via%20http", token, ""), `200`)
	expect(kvRun(false, "get", "via http"), "not found")

	// Transactions across shards, from the CLI and over HTTP.
	alice, bob := "alice", "bob0"
	for i := 0; kv.Shard(bob, 3) == kv.Shard(alice, 3); i++ {
		bob = fmt.Sprint("bob", i)
	}
	expect(kvRun(true, "txn", "put "+alice+" 20", "del "+bob), "committed at")
	expect(kvRun(true, "txn", "if "+alice+" >= 15", "add "+alice+" -15", "add "+bob+" 15", "read "+alice, "read "+bob),
		alice+" = 20\n"+bob+" (absent)\ncommitted at")
	expect(kvRun(false, "txn", "if "+alice+" >= 6", "add "+alice+" -6", "add "+bob+" 6"), `transaction aborted at`)
	expect(kvRun(false, "txn", "if "+alice+" >= 6", "add "+alice+" -6", "add "+bob+" 6"), `"if `+alice+` >= 6" does not hold`)
	expect(kvRun(false, "txn", "swap "+alice), "is not if, read, put, del or add")
	txnAPI := "http://" + ports[3] + kvhttp.TxnPath
	expect(kvHTTPCall(t, "POST", txnAPI, token, `{"if":[{"key":"`+bob+`","at_least":15}],"then":[{"key":"`+bob+`","add":-15},{"key":"`+alice+`","add":15}],"reads":["`+alice+`"]}`),
		`200 {"committed":true,"gts":"`)
	expect(kvHTTPCall(t, "POST", txnAPI, token, `{"reads":["`+alice+`","`+bob+`"]}`), `"reads":[{"key":"`+alice+`","found":true,"value":"20"`)
	expect(kvHTTPCall(t, "POST", txnAPI, token, `{"if":[{"key":"`+bob+`","at_least":1}],"then":[{"key":"`+alice+`","delete":true}]}`),
		`409 {"committed":false,"gts":"`)
	expect(kvHTTPCall(t, "POST", txnAPI, token, `{"if":[{"key":"a","absent":true,"present":true}]}`), `400 {"error":"if[0]: give exactly one`)
	expect(kvHTTPCall(t, "POST", txnAPI, token, `{}`), `400 {"error":"kv: empty transaction","class":"txn_empty"}`)

	// Fill color's shard past a few compactions, then SIGKILL its agent.
	g := kv.Shard("color", 3)
	var keys []string
	for i := 0; len(keys) < 4; i++ {
		if k := fmt.Sprint("big", i); kv.Shard(k, 3) == g {
			keys = append(keys, k)
			expect(kvRun(true, "put", k, strings.Repeat(k, 1000)), "OK")
		}
	}
	a := agents[g]
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.exit
	if snap := filepath.Join(dir, fmt.Sprint("n", g), "rsm.snapshot"); !fileExists(snap) {
		t.Fatalf("no state machine snapshot at %s after the compactions\n%s", snap, a.log.String())
	}
	agents[g] = startAgent(t, exe, paths[g])
	expect(kvRun(true, "get", "color"), "green")
	for _, k := range keys {
		if got := kvRun(true, "get", k); got != strings.Repeat(k, 1000) {
			t.Fatalf("%s after the restart: %d bytes starting %q", k, len(got), got[:min(len(got), 8)])
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// kvHTTPCall sends one request to an agent's kv HTTP API, waiting up to
// 20 s for the API to listen, and returns "STATUS BODY".
func kvHTTPCall(t *testing.T, method, url, token, body string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if method == "POST" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if errors.Is(err, syscall.ECONNREFUSED) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond) // the agent is starting
			continue
		}
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
}
