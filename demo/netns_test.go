//go:build linux

package demo

// The multi-host test without containers: every agent in its own Linux
// network namespace with its own address on a bridge, as on separate
// machines: it listens on that address (not loopback), its certificate
// is the one `weft certs` makes for that address, its admin endpoint is
// reachable from the other "machines" only with the admin token, and its
// configuration is one an operator would write for that machine and
// checks with `weft config check`. The test process (the clients, the
// status polling, the checks) is the root namespace, which reaches the
// bridge through the bridge's own address like another machine on the
// LAN.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// netnsLAN is a bridge in the root namespace and one namespace per
// machine, each with a veth on the bridge.
type netnsLAN struct {
	t      *testing.T
	ip     string // the ip tool
	prefix string // of every name this test creates: namespaces, links
	subnet string // the /24's first three octets
	bridge string
	ns     []string // the machines' namespaces
	veths  []string // the bridge's ends of the machines' links
}

// newNetnsLAN makes a bridge with the address subnet.1 and n namespaces
// with subnet.10+i, or skips the test where this machine does not allow
// it (not root, no ip tool, no network namespaces). Everything it made is
// removed when the test ends, whatever happened.
func newNetnsLAN(t *testing.T, n int) *netnsLAN {
	t.Helper()
	ipTool, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("netns test: no ip tool (iproute2) on PATH")
	}
	if os.Geteuid() != 0 {
		t.Skip("netns test: needs root to create network namespaces and a bridge (ip netns add, ip link add); run it as root (CI does)")
	}
	// Names unique to this process: tests of other checkouts may run at
	// the same time. Link names are at most 15 bytes: "wft" + 5 digits +
	// "v" + index.
	id := os.Getpid() % 100000
	l := &netnsLAN{t: t, ip: ipTool, prefix: fmt.Sprintf("wft%05d", id)}
	l.bridge = l.prefix + "br"
	// A /24 in 10.231/16 no route of this machine covers.
	for k := range 250 {
		s := fmt.Sprintf("10.231.%d", (id+k)%250+1)
		out, err := exec.Command(ipTool, "-4", "route", "show", "to", "match", s+".10").Output()
		if err == nil && !strings.Contains(string(out), s+".") && !strings.HasPrefix(strings.TrimSpace(string(out)), "10.") {
			l.subnet = s
			break
		}
	}
	if l.subnet == "" {
		t.Fatal("netns test: no free /24 in 10.231.0.0/16")
	}
	t.Cleanup(l.teardown)
	// The first step tells whether the kernel lets us: a container without
	// CAP_SYS_ADMIN, or a kernel without network namespaces, refuses it.
	first := l.prefix + "-n0"
	if out, err := exec.Command(ipTool, "netns", "add", first).CombinedOutput(); err != nil {
		t.Skipf("netns test: this machine does not allow network namespaces (ip netns add: %v: %s)", err, bytes.TrimSpace(out))
	}
	l.ns = append(l.ns, first)
	l.run("link", "add", l.bridge, "type", "bridge")
	l.run("addr", "add", l.subnet+".1/24", "dev", l.bridge)
	l.run("link", "set", l.bridge, "up")
	for i := range n {
		ns := fmt.Sprintf("%s-n%d", l.prefix, i)
		if i > 0 {
			l.run("netns", "add", ns)
			l.ns = append(l.ns, ns)
		}
		veth := fmt.Sprintf("%sv%d", l.prefix, i)
		l.run("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
		l.veths = append(l.veths, veth)
		l.run("link", "set", veth, "master", l.bridge, "up")
		l.run("-n", ns, "addr", "add", l.addr(i)+"/24", "dev", "eth0")
		l.run("-n", ns, "link", "set", "eth0", "up")
		l.run("-n", ns, "link", "set", "lo", "up")
	}
	return l
}

// addr is machine i's address.
func (l *netnsLAN) addr(i int) string { return fmt.Sprintf("%s.%d", l.subnet, 10+i) }

// run runs the ip tool; a failure fails the test (the first step already
// showed that the machine allows it).
func (l *netnsLAN) run(args ...string) {
	l.t.Helper()
	if out, err := exec.Command(l.ip, args...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
}

// exec is the command prefix that runs a program on machine i.
func (l *netnsLAN) exec(i int) []string { return []string{l.ip, "netns", "exec", l.ns[i]} }

// teardown removes the links (deleting one end of a veth pair deletes
// both, at once: a namespace's devices go only when the kernel gets to
// it), the namespaces and the bridge. It runs after the agents were
// stopped (cleanups run last-registered first).
func (l *netnsLAN) teardown() {
	del := func(args ...string) {
		if out, err := exec.Command(l.ip, args...).CombinedOutput(); err != nil {
			l.t.Errorf("teardown: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	for _, v := range l.veths {
		del("link", "del", v)
	}
	for _, ns := range l.ns {
		del("netns", "del", ns)
	}
	if out, _ := exec.Command(l.ip, "link", "show", l.bridge).CombinedOutput(); !bytes.Contains(out, []byte("does not exist")) {
		del("link", "del", l.bridge)
	}
	out, _ := exec.Command(l.ip, "-o", "link", "show").Output()
	nss, _ := exec.Command(l.ip, "netns", "list").Output()
	if bytes.Contains(out, []byte(l.prefix)) || bytes.Contains(nss, []byte(l.prefix)) {
		l.t.Errorf("teardown left links or namespaces named %s*:\n%s\n%s", l.prefix, out, nss)
	}
}

// bearer adds the admin token to every request (the agents' admin
// endpoints are on their machines' addresses: reads need the token).
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestNetnsCluster runs 3 groups x 3 replicas, each agent on its own
// "machine" (network namespace) with mutual TLS, a closed-loop workload
// from the root namespace, and the demo's checks on every delivery.
func TestNetnsCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test: skipped with -short")
	}
	const groups, replicas = 3, 3
	// One machine per node, and a spare one a member moves to.
	lan := newNetnsLAN(t, groups*replicas+1)
	exe := weftBinary(t)
	dir, err := os.MkdirTemp("", "weft-netns-")
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Exe: exe, Workload: WorkloadMulticast, Duration: 3 * time.Second, Groups: groups, Replicas: replicas, Clients: 4, KillGroup: -1,
		Dir: dir, Out: logWriter{t}, TLS: true}
	if err := opt.defaults(); err != nil {
		t.Fatal(err)
	}

	// The admin token every machine's operator commands (and our polling)
	// present: the admin endpoints are on the machines' addresses.
	var raw [32]byte
	rand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	tokenPath := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokenPath, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, t0: time.Now()}
	c.r = &run{opt: opt, dir: dir, hc: &http.Client{Timeout: 500 * time.Millisecond, Transport: bearer{token}},
		statuses: map[wire.ProcID]node.Status{}, replies: map[string]wire.Timestamp{}, killGroup: -1}
	if c.r.topo, err = amcast.NewTopology(groups, replicas); err != nil {
		t.Fatal(err)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	t.Cleanup(c.cleanup)

	// Every machine's configuration: its own address, the others', TLS
	// files named as an operator would install them.
	n := groups * replicas
	nodes := map[string]string{}
	for p := range n {
		nodes[strconv.Itoa(p)] = lan.addr(p) + ":7100"
	}
	var gs [][]wire.ProcID
	for g := range groups {
		gs = append(gs, slices.Clone(c.r.topo.Groups[g]))
	}
	tlsDir := filepath.Join(dir, "tls")
	cfgs := make([]config.Config, n)
	for p := range n {
		a := &agent{id: wire.ProcID(p), group: p / replicas, dir: filepath.Join(dir, fmt.Sprintf("node%d", p)),
			admin: lan.addr(p) + ":7200", wrap: lan.exec(p),
			cfgPath: filepath.Join(dir, fmt.Sprintf("node%d.toml", p)), logPath: filepath.Join(dir, fmt.Sprintf("node%d.log", p)),
			dlogPath: filepath.Join(dir, fmt.Sprintf("node%d-deliveries.jsonl", p))}
		cfg := config.Config{Cluster: "weft-demo", ID: a.id, DataDir: a.dir, Admin: a.admin, AdminTokenFile: tokenPath,
			TLSCert: filepath.Join(tlsDir, fmt.Sprintf("node-%d.crt", p)), TLSKey: filepath.Join(tlsDir, fmt.Sprintf("node-%d.key", p)),
			TLSCA: filepath.Join(tlsDir, "ca.crt"), Groups: gs, Nodes: nodes,
			Tick: opt.Tick, ElectionTicks: opt.ElectionTicks, HeartbeatTicks: config.DefaultHeartbeatTicks, RetryTicks: config.DefaultRetryTicks,
			SessionLease: config.DefaultSessionLease, LogLevel: "info", WALSegmentSize: 4 << 20, CompactBytes: 256 << 10,
			// The demo's fast gossip: a LAN of namespaces is as quick as
			// loopback.
			Gossip:      config.Gossip{Enabled: true, Profile: "local", Interval: opt.GossipInterval},
			DeliveryLog: a.dlogPath, DeliveryLogFiles: config.MaxDeliveryLogFiles, BootstrapProbe: config.DefaultBootstrapProbe}
		if err := os.WriteFile(a.cfgPath, []byte(cfg.Format()), 0o644); err != nil {
			t.Fatal(err)
		}
		cfgs[p] = cfg
		c.r.agents = append(c.r.agents, a)
	}
	// The operator's commands: the certificates for the machines'
	// addresses, then each machine checks its own file, on the machine.
	weft := func(machine int, args ...string) string {
		t.Helper()
		argv := slices.Concat(lan.exec(machine), []string{exe}, args)
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
		}
		return string(out)
	}
	weft(0, "certs", "--config", c.r.agents[0].cfgPath, "--out", tlsDir)
	for _, a := range c.r.agents {
		out := weft(int(a.id), "config", "check", a.cfgPath)
		if want := fmt.Sprintf("node %d's certificate", a.id); !strings.Contains(out, want) || !strings.Contains(out, "mtls") {
			t.Fatalf("config check of node %d: no %q / mtls:\n%s", a.id, want, out)
		}
	}
	if c.r.tls, err = transport.LoadTLS(filepath.Join(tlsDir, "client.crt"), filepath.Join(tlsDir, "client.key"), filepath.Join(tlsDir, "ca.crt"), ""); err != nil {
		t.Fatal(err)
	}
	cert := certIPs(t, filepath.Join(tlsDir, "node-4.crt"), filepath.Join(tlsDir, "node-4.key"))
	if !strings.Contains(cert, lan.addr(4)) {
		t.Errorf("node 4's certificate names %s, not its machine's address %s", cert, lan.addr(4))
	}

	c.launch()
	// The agents listen on their machines' addresses, and the client in
	// the root namespace reached them there.
	for p, st := range c.r.snapshot() {
		if want := lan.addr(int(p)) + ":7100"; st.Addr != want {
			t.Errorf("p%d listens on %s, want %s", p, st.Addr, want)
		}
	}
	c.load(opt.Duration, 50)

	// Replacing a machine whose disk survived, with a new address
	// (docs/deploy.md): p4 stops, its data directory is copied to the
	// spare machine, every configuration names p4's new address, the
	// member starts there (it reaches its peers; they reach it only once
	// they restarted: each peer dials the address its own file names) and
	// the others restart one at a time, each back in its group and caught
	// up before the next.
	// Clients name the nodes' addresses too (the Go client dials the
	// addresses it was given): the workload pauses, and a client with the
	// new layout takes over after the move.
	const moved, spare = 4, groups * replicas
	c.pause()
	a := c.agent(moved)
	c.terminate(moved)
	newDir := a.dir + "-moved"
	if out, err := exec.Command("cp", "-a", a.dir, newDir).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
	for p := range cfgs {
		cfgs[p].Nodes[strconv.Itoa(moved)] = lan.addr(spare) + ":7100" // one map, shared by all
	}
	a.dir, a.admin, a.wrap = newDir, lan.addr(spare)+":7200", lan.exec(spare)
	cfgs[moved].DataDir, cfgs[moved].Admin = a.dir, a.admin
	for p, cfg := range cfgs {
		if err := os.WriteFile(c.r.agents[p].cfgPath, []byte(cfg.Format()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out := weft(spare, "config", "check", a.cfgPath); !strings.Contains(out, fmt.Sprintf(`holds the state of member %d of cluster "weft-demo"`, moved)) {
		t.Errorf("config check on the new machine does not see p%d's state:\n%s", moved, out)
	}
	c.restart(moved)
	for _, o := range c.r.agents {
		if o.id == moved {
			continue
		}
		c.terminate(o.id)
		c.restart(o.id)
		c.waitRejoin(o.id)
	}
	// The moved member hears its group only now that every member of it
	// restarted with its new address.
	c.waitRejoin(moved)
	c.connect()
	c.waitDelivering(a.group, c.members(a.group))
	c.load(time.Second, 50)
	if st := c.r.snapshot()[moved]; st.Addr != lan.addr(spare)+":7100" {
		t.Errorf("p%d listens on %s after the move, want %s:7100", moved, st.Addr, lan.addr(spare))
	}
	// The health check containers use, run on a machine against its own
	// admin endpoint with the token from its configuration.
	out := weft(spare, "status", "--config", a.cfgPath, "--ready")
	if !strings.Contains(out, "ready") {
		t.Errorf("weft status --ready on p%d's new machine:\n%s", moved, out)
	}
	c.finish()
}

// certIPs returns the IP SANs of a certificate whose key is beside it.
func certIPs(t *testing.T, crt, key string) string {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(pair.Leaf.IPAddresses)
}
