package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/weft-dev/weft/config"
)

// writeFile writes text to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkFile is config.Sample's layout with a data_dir in dir and extra
// keys first.
func checkFile(dir, extra string) string {
	return extra + strings.Replace(config.Sample, `data_dir = "/var/lib/weft/node0"`, fmt.Sprintf("data_dir = %q", filepath.Join(dir, "data")), 1)
}

// TestConfigCheckPrintsEveryKey: the effective values name every key the
// sample file (which spells out every key) sets, with the defaults a
// minimal file leaves out filled in, in the table and in JSON.
func TestConfigCheckPrintsEveryKey(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "n.toml", checkFile(dir, ""))
	out, err := execCmd(configCmd, "check", path, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Kind   string
		Checks []configCheck
		Values map[string]any
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var sample map[string]any
	if _, err := toml.Decode(config.Sample, &sample); err != nil {
		t.Fatal(err)
	}
	var missing []string
	var walk func(prefix string, want, got map[string]any)
	walk = func(prefix string, want, got map[string]any) {
		for k, v := range want {
			g, ok := got[k]
			switch {
			case !ok:
				missing = append(missing, prefix+k)
			case k == "nodes":
			default:
				if w, isTable := v.(map[string]any); isTable {
					gt, _ := g.(map[string]any)
					walk(prefix+k+".", w, gt)
				}
			}
		}
	}
	walk("", sample, rep.Values)
	if len(missing) > 0 {
		t.Errorf("config check -o json lacks keys of the sample: %v\n%s", missing, out)
	}
	if rep.Kind != "agent" || len(rep.Checks) == 0 {
		t.Errorf("report: %+v", rep)
	}

	// A minimal file: the defaults, and the gossip profile's own values.
	path = writeFile(t, dir, "min.toml", fmt.Sprintf("id = 4\ndata_dir = %q\ngroups = [[0, 1, 2], [3, 4, 5]]\n[nodes]\n", filepath.Join(dir, "d4"))+
		"0 = \"127.0.0.1:7000\"\n1 = \"127.0.0.1:7001\"\n2 = \"127.0.0.1:7002\"\n3 = \"127.0.0.1:7003\"\n4 = \"127.0.0.1:7004\"\n5 = \"127.0.0.1:7005\"\n")
	out, err = execCmd(configCmd, "check", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{path + ": valid (agent configuration)", "node 4, group 1, listens on 127.0.0.1:7004",
		"election_ticks 30", `tick "10ms"`, `gossip.interval "100ms"`, "gossip.seeds [0,3]",
		`nodes.5 "127.0.0.1:7005"`, `data_dir "` + filepath.Join(dir, "d4"), "absent: the agent creates it under " + dir} {
		if !strings.Contains(squash(out), want) {
			t.Errorf("config check output lacks %q:\n%s", want, out)
		}
	}
}

// squash collapses runs of blanks, so that tests need not know the
// table's column widths.
func squash(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

// TestConfigCheckRejects: every kind of bad file exits non-zero with an
// error naming the file (and the line, for syntax and type errors), and
// --client accepts a client's file an agent would refuse.
func TestConfigCheckRejects(t *testing.T) {
	dir := t.TempDir()
	good := checkFile(dir, "")
	lineOf := func(text, prefix string) int {
		for i, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, prefix) {
				return i + 1
			}
		}
		t.Fatalf("no line %q", prefix)
		return 0
	}
	for _, tc := range []struct{ name, text, want string }{
		{"syntax", strings.Replace(good, "retry_ticks = 12", "retry_ticks = = 12", 1), fmt.Sprintf(":%d: retry_ticks: ", lineOf(good, "retry_ticks"))},
		{"type", strings.Replace(good, `log_level = "info"`, "log_level = 3", 1), fmt.Sprintf(":%d: log_level: ", lineOf(good, "log_level"))},
		{"unknown key", "colour = \"red\"\n" + good, "colour: unknown key"},
		{"value", strings.Replace(good, "election_ticks = 30", "election_ticks = 1", 1), "election_ticks: must be at least 2"},
		{"key file", "cluster_key_file = " + fmt.Sprintf("%q", filepath.Join(dir, "nokey")) + "\n" + good, "cluster_key_file: open"},
		{"no id", strings.Replace(good, "id = 0\n", "", 1), "id: missing"},
	} {
		path := writeFile(t, dir, tc.name+".toml", tc.text)
		out, err := execCmd(configCmd, "check", path)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v (output %q), want an error with %s and %q", tc.name, err, out, path, tc.want)
		}
	}
	client := writeFile(t, dir, "client.toml", strings.Replace(good, "id = 0\n", "", 1))
	if out, err := execCmd(configCmd, "check", "--client", client); err != nil || !strings.Contains(out, "valid (client configuration)") {
		t.Errorf("--client: %v\n%s", err, out)
	}
	if _, err := execCmd(configCmd, "check"); err == nil {
		t.Error("config check without a file succeeded")
	}

	// data_dir: the agent could not use it (InspectDataDir's verdicts
	// are tested in package node).
	file := writeFile(t, dir, "a-file", "x")
	path := writeFile(t, dir, "n0.toml", strings.Replace(good, filepath.Join(dir, "data"), file, 1))
	if _, err := execCmd(configCmd, "check", path); err == nil || !strings.Contains(err.Error(), "data_dir "+file+" is not a directory") || !strings.Contains(err.Error(), path) {
		t.Errorf("a file as data_dir: %v", err)
	}
}

// TestConfigCheckTLS: with TLS the certificate is loaded and checked as
// the agent's; the report says whose it is and until when.
func TestConfigCheckTLS(t *testing.T) {
	dir := t.TempDir()
	tlsDir := filepath.Join(dir, "tls")
	base := writeFile(t, dir, "base.toml", checkFile(dir, ""))
	if _, err := execCmd(certsCmd, "--config", base, "--out", tlsDir); err != nil {
		t.Fatal(err)
	}
	keys := func(id int) string {
		return fmt.Sprintf("tls_cert = %q\ntls_key = %q\ntls_ca = %q\n", filepath.Join(tlsDir, fmt.Sprintf("node-%d.crt", id)),
			filepath.Join(tlsDir, fmt.Sprintf("node-%d.key", id)), filepath.Join(tlsDir, "ca.crt"))
	}
	out, err := execCmd(configCmd, "check", writeFile(t, dir, "tls.toml", checkFile(dir, keys(0))))
	if err != nil || !strings.Contains(squash(out), "security mtls") || !strings.Contains(out, "node 0's certificate, verifies against "+filepath.Join(tlsDir, "ca.crt")) {
		t.Errorf("TLS: %v\n%s", err, out)
	}
	if _, err := execCmd(configCmd, "check", writeFile(t, dir, "wrong.toml", checkFile(dir, keys(1)))); err == nil || !strings.Contains(err.Error(), "is node 1's certificate, but this is node 0") {
		t.Errorf("node 1's certificate for node 0: %v", err)
	}
}
