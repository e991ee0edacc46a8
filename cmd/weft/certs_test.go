package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/kvhttp"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// tlsKeys is the config text naming node id's files written by weft certs
// in dir.
func tlsKeys(dir string, id int, clientCA bool) string {
	s := fmt.Sprintf("tls_cert = %q\ntls_key = %q\ntls_ca = %q\n", filepath.Join(dir, fmt.Sprintf("node-%d.crt", id)),
		filepath.Join(dir, fmt.Sprintf("node-%d.key", id)), filepath.Join(dir, "ca.crt"))
	if clientCA {
		s += fmt.Sprintf("tls_client_ca = %q\n", filepath.Join(dir, "client-ca.crt"))
	}
	return s
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: not PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCertsWritesAndReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	args := []string{"certs", "--peers", "0=127.0.0.1:7100,1=127.0.0.1:7101,2=node2.example:7102", "--cluster", "c", "--out", dir}
	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Log(out)
	for _, f := range []string{"ca", "node-0", "node-1", "node-2", "client"} {
		for ext, mode := range map[string]os.FileMode{".crt": 0o644, ".key": 0o600} {
			p := filepath.Join(dir, f+ext)
			st, err := os.Stat(p)
			if err != nil || st.Mode().Perm() != mode {
				t.Errorf("%s: %v, mode %v, want %v", p, err, st.Mode().Perm(), mode)
			}
			if !strings.Contains(out, p) {
				t.Errorf("output does not list %s", p)
			}
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v", st.Mode().Perm())
	}
	// Each node's files make a valid agent configuration for that node
	// (identity and chain checked), and not for another.
	layout := "cluster = \"c\"\ndata_dir = \"/tmp/x\"\ngroups = [[0, 1, 2]]\n[nodes]\n0 = \"127.0.0.1:7100\"\n1 = \"127.0.0.1:7101\"\n2 = \"127.0.0.1:7102\"\n"
	for id := range 3 {
		if c, err := config.Parse(fmt.Sprintf("id = %d\n", id)+tlsKeys(dir, id, false)+layout, config.Agent); err != nil || c.TLS() == nil {
			t.Errorf("node %d: %v", id, err)
		}
	}
	if _, err := config.Parse("id = 0\n"+tlsKeys(dir, 1, false)+layout, config.Agent); err == nil || !strings.Contains(err.Error(), "node 1's certificate, but this is node 0") {
		t.Errorf("node 1's files for node 0: %v", err)
	}
	if n2 := readCert(t, filepath.Join(dir, "node-2.crt")); len(n2.DNSNames) != 1 || n2.DNSNames[0] != "node2.example" {
		t.Errorf("node 2's DNS SANs %v", n2.DNSNames)
	}
	cl := readCert(t, filepath.Join(dir, "client.crt"))
	if id, found, err := transport.CertIdentity(cl, "c"); err != nil || !found || id != transport.AnyClientIdentity() {
		t.Errorf("client identity %s %v %v", id, found, err)
	}

	// Again: the node files exist; with --force they are rewritten by the
	// same CA, which is never overwritten.
	ca := readCert(t, filepath.Join(dir, "ca.crt"))
	if out, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second run: %v\n%s", err, out)
	}
	out, err = run(t, append(args, "--force", "--client-id", "4242")...)
	if err != nil || !strings.Contains(out, "(kept)") {
		t.Fatalf("--force: %v\n%s", err, out)
	}
	if again := readCert(t, filepath.Join(dir, "ca.crt")); !again.Equal(ca) {
		t.Error("the CA changed")
	}
	if _, err := config.Parse("id = 1\n"+tlsKeys(dir, 1, false)+layout, config.Agent); err != nil {
		t.Errorf("node 1 after --force: %v", err)
	}
	cl = readCert(t, filepath.Join(dir, "client.crt"))
	if id, _, _ := transport.CertIdentity(cl, "c"); id != (transport.Identity{Role: transport.RoleClient, ID: 4242}) {
		t.Errorf("client identity %s, want client 4242", id)
	}

	// A client CA: the client certificate chains to it, not to ca.crt.
	dir2 := filepath.Join(t.TempDir(), "tls")
	if out, err := run(t, "certs", "--peers", "0=127.0.0.1:7100", "--out", dir2, "--client-ca"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	nodeCAs, _ := transport.LoadCAs(filepath.Join(dir2, "ca.crt"))
	clientCAs, _ := transport.LoadCAs(filepath.Join(dir2, "client-ca.crt"))
	cl = readCert(t, filepath.Join(dir2, "client.crt"))
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if _, err := cl.Verify(x509.VerifyOptions{Roots: clientCAs, KeyUsages: usage}); err != nil {
		t.Errorf("client certificate against the client CA: %v", err)
	}
	if _, err := cl.Verify(x509.VerifyOptions{Roots: nodeCAs, KeyUsages: usage}); err == nil {
		t.Error("client certificate verifies against the node CA")
	}

	for _, bad := range [][]string{
		{"certs", "--out", dir},
		{"certs", "--peers", "0=127.0.0.1:1"},
		{"certs", "--peers", "0=127.0.0.1:1", "--out", dir, "--days", "0"},
		{"certs", "--peers", "0=127.0.0.1:1", "--out", dir, "--client-id", "0"},
	} {
		if _, err := run(t, bad...); err == nil {
			t.Errorf("%q succeeded", bad)
		}
	}
}

// TestAgentsOverMutualTLS runs three `weft agent` processes with
// certificates from `weft certs` and `weft multicast` with the client
// certificate; a multicast without one is refused with a clear error.
// The agents run weft-kv, and the last serves its HTTP API, whose client
// uses the client certificate (kv.tls_cert).
func TestAgentsOverMutualTLS(t *testing.T) {
	exe := buildWeft(t)
	dir := t.TempDir()
	ports, err := freeAddrs(4)
	if err != nil {
		t.Fatal(err)
	}
	tlsDir := filepath.Join(dir, "tls")
	peers := fmt.Sprintf("0=%s,1=%s,2=%s", ports[0], ports[1], ports[2])
	if out, err := run(t, "certs", "--peers", peers, "--cluster", "tls-test", "--out", tlsDir, "--client-ca"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	nodes := map[string]string{"0": ports[0], "1": ports[1], "2": ports[2]}
	var cfgPath string
	for id := range 3 {
		cfg := config.Config{Cluster: "tls-test", ID: wire.ProcID(id), DataDir: filepath.Join(dir, fmt.Sprint("n", id)),
			Tick: 10 * time.Millisecond, ElectionTicks: 30, HeartbeatTicks: 1, RetryTicks: 12, SessionLease: config.DefaultSessionLease, LogLevel: "info",
			WALSegmentSize: 1 << 20, CompactBytes: 1 << 20, Groups: [][]wire.ProcID{{0}, {1}, {2}}, Nodes: nodes,
			TLSCert: filepath.Join(tlsDir, fmt.Sprintf("node-%d.crt", id)), TLSKey: filepath.Join(tlsDir, fmt.Sprintf("node-%d.key", id)),
			TLSCA: filepath.Join(tlsDir, "ca.crt"), TLSClientCA: filepath.Join(tlsDir, "client-ca.crt"), Service: config.ServiceKV}
		if id == 2 {
			cfg.KV = config.KV{HTTP: ports[3], TLSCert: filepath.Join(tlsDir, "client.crt"), TLSKey: filepath.Join(tlsDir, "client.key")}
		}
		cfgPath = filepath.Join(dir, fmt.Sprintf("n%d.toml", id))
		if err := os.WriteFile(cfgPath, []byte(cfg.Format()), 0o644); err != nil {
			t.Fatal(err)
		}
		a := startAgent(t, exe, cfgPath)
		t.Cleanup(func() {
			if err := a.stop(); err != nil {
				t.Errorf("agent %d: %v\n%s", id, err, a.log.String())
			}
			if !strings.Contains(a.log.String(), "security=mtls") {
				t.Errorf("agent %d does not say it runs mTLS:\n%s", id, a.log.String())
			}
		})
	}
	multicast := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, exe, append([]string{"multicast", "--config", cfgPath}, args...)...).CombinedOutput()
		return string(bytes.TrimSpace(out)), err
	}
	client := []string{"--tls-cert", filepath.Join(tlsDir, "client.crt"), "--tls-key", filepath.Join(tlsDir, "client.key")}
	// Any destination group may answer first (the nodes run a service);
	// group g's leader is node g.
	re := regexp.MustCompile(`message \d+\.1@[0-9a-f]+ delivered: gts \d+\.g\d \(group (\d), leader (\d)\)`)
	for i, dest := range []string{"0", "0,1,2"} {
		out, err := multicast(append(client, "--dest", dest, fmt.Sprint("hello ", i))...)
		if m := re.FindStringSubmatch(out); err != nil || m == nil || m[1] != m[2] {
			t.Fatalf("multicast --dest %s over mTLS: %v\n%s", dest, err, out)
		}
		t.Logf("multicast --dest %s: %s", dest, out)
	}
	if out, err := multicast("--dest", "0", "x"); err == nil || !strings.Contains(out, "the cluster uses TLS") {
		t.Errorf("multicast without a client certificate: %v\n%s", err, out)
	}
	// Node 0's certificate is not a client's.
	node0 := []string{"--tls-cert", filepath.Join(tlsDir, "node-0.crt"), "--tls-key", filepath.Join(tlsDir, "node-0.key")}
	if out, err := multicast(append(node0, "--dest", "0", "x")...); err == nil || !strings.Contains(out, "a client cannot use node 0's TLS certificate") {
		t.Errorf("multicast with a node's certificate: %v\n%s", err, out)
	}
	api := "http://" + ports[3] + kvhttp.Prefix
	if out := kvHTTPCall(t, "PUT", api+"color", "", "blue"); !strings.HasPrefix(out, "200 ") {
		t.Errorf("PUT through the HTTP API over mTLS: %s", out)
	}
	if out := kvHTTPCall(t, "GET", api+"color", "", ""); !strings.Contains(out, `"value":"blue"`) {
		t.Errorf("GET through the HTTP API over mTLS: %s", out)
	}
	// Without --config (no layout file at hand) and without TLS: refused
	// by the nodes, with a hint.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "multicast", "--peers", peers, "--groups", "0;1;2", "--cluster", "tls-test",
		"--timeout", "1s", "--dest", "0", "x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "tls_failed") || !strings.Contains(string(out), "TLS on one side only") {
		t.Errorf("plain multicast: %v\n%s", err, out)
	}
}

// TestAgentRefusesToRunOpen: an agent listening off loopback with neither
// TLS nor a cluster key does not start, and says what to do.
func TestAgentRefusesToRunOpen(t *testing.T) {
	dir := t.TempDir()
	cfg := "id = 0\ndata_dir = " + fmt.Sprintf("%q", filepath.Join(dir, "n0")) + "\nlisten = \"0.0.0.0:0\"\ngroups = [[0]]\n[nodes]\n0 = \"127.0.0.1:7100\"\n"
	path := filepath.Join(dir, "open.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := execCmd(agentCmd, "--config", path)
	for _, want := range []string{"not a loopback address", "tls_cert, tls_key, tls_ca", "cluster_key_file", "insecure = true"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("agent listening on 0.0.0.0 with no security: %v, want it to mention %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "n0")); err == nil {
		t.Error("the refused agent created its data directory")
	}
}
