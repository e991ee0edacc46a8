package deploy

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/testbin"
)

// unitFile is a systemd unit: section -> key -> values in order (a key
// may repeat).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, text []byte) unitFile {
	t.Helper()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l[1 : len(l)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" {
				t.Fatalf("weft.service:%d: %q is not key=value in a section", n, l)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// one returns the single value of key in [Service].
func (u unitFile) one(t *testing.T, key string) string {
	t.Helper()
	vs := u["Service"][key]
	if len(vs) != 1 {
		t.Errorf("[Service] %s: %q, want one value", key, vs)
		return ""
	}
	return vs[0]
}

// TestSystemdUnit reads weft.service: the agent runs as its own user on
// the configuration ExecStart names, checked first by weft config check,
// with the hardening a network daemon with one state directory allows;
// the sample weft.toml installed there passes weft config check with its
// data_dir in the unit's StateDirectory (everything else is read-only
// under ProtectSystem=strict) and the certificates weft certs makes.
func TestSystemdUnit(t *testing.T) {
	text := readFile(t, "systemd/weft.service")
	u := parseUnit(t, text)
	start := strings.Fields(u.one(t, "ExecStart"))
	if len(start) < 2 || start[0] != "/usr/local/bin/weft" || start[1] != "agent" {
		t.Fatalf("ExecStart %q, want /usr/local/bin/weft agent --config FILE", start)
	}
	cfgPath := configFlag(t, start)
	if pre := u.one(t, "ExecStartPre"); pre != "/usr/local/bin/weft config check "+cfgPath {
		t.Errorf("ExecStartPre %q: want weft config check %s", pre, cfgPath)
	}
	for key, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes", "PrivateDevices": "yes",
		"ProtectKernelTunables": "yes", "ProtectKernelModules": "yes", "ProtectControlGroups": "yes", "RestrictSUIDSGID": "yes",
		"RestrictNamespaces": "yes", "LockPersonality": "yes", "MemoryDenyWriteExecute": "yes", "CapabilityBoundingSet": "",
		"AmbientCapabilities": "", "StateDirectory": "weft", "StateDirectoryMode": "0700", "KillSignal": "SIGTERM", "Restart": "on-failure",
	} {
		if got := u.one(t, key); got != want {
			t.Errorf("[Service] %s=%s, want %s", key, got, want)
		}
	}
	if user := u.one(t, "User"); user == "" || user == "root" || user == "0" {
		t.Errorf("User=%q: the agent must not run as root", user)
	}
	if af := u.one(t, "RestrictAddressFamilies"); !strings.Contains(af, "AF_INET ") || !strings.Contains(af, "AF_INET6") {
		t.Errorf("RestrictAddressFamilies=%s: the agent needs IPv4 and IPv6", af)
	}
	if _, ok := u["Install"]["WantedBy"]; !ok {
		t.Error("no [Install] WantedBy: systemctl enable would do nothing")
	}

	// The machine as the unit sees it: the sample configuration where
	// ExecStart reads it, the certificates weft certs makes from it in
	// /etc/weft/tls, and /var/lib/<StateDirectory> the only writable
	// place.
	root := t.TempDir()
	certsFor(t, root, "--config", filepath.Join(mustAbs(t, "systemd"), "weft.toml"), "--out", "tls")
	state := "/var/lib/" + u.one(t, "StateDirectory")
	ms := mounts{
		{inside: cfgPath, outside: mustAbs(t, "systemd/weft.toml")},
		{inside: filepath.Join(filepath.Dir(cfgPath), "tls"), outside: filepath.Join(root, "tls")},
		{inside: state, outside: filepath.Join(root, "state"), persistent: true},
	}
	c := check(t, "systemd weft.toml", readFile(t, "systemd/weft.toml"), ms)
	if c.result("security") != "mtls" || !strings.HasPrefix(c.result("tls_cert"), "node 0's certificate") {
		t.Errorf("systemd weft.toml: security %q, tls_cert %q", c.result("security"), c.result("tls_cert"))
	}
	seedsOnePerGroup(t, c)

	// With systemd's tools at hand: the unit verifies (no unknown key),
	// and its exposure score is low.
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not found: the unit was not verified by systemd")
		return
	}
	unit := filepath.Join(root, "weft.service")
	// verify needs ExecStart's binary: the one these tests built.
	if err := os.WriteFile(unit, bytes.ReplaceAll(text, []byte("/usr/local/bin/weft"), []byte(testbin.Weft(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(sa, "security", "--offline=yes", unit).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for weft.service: ([0-9.]+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Logf("systemd-analyze security --offline=yes: %v (older systemd?)\n%s", err, out)
		return
	}
	score, _ := strconv.ParseFloat(string(m[1]), 64)
	t.Logf("systemd-analyze security: exposure %.1f", score)
	if score > 2 {
		t.Errorf("systemd-analyze security: exposure %.1f, want at most 2 (OK)", score)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
