package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/weft-dev/weft/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// runWeft runs the weft binary in dir and returns its standard output; an
// error carries its standard error.
func runWeft(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(testbin.Weft(t), args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("weft %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// mount makes a path inside a container (or a unit's view of the
// machine) a path on this machine.
type mount struct {
	inside, outside string
	// persistent: a volume that outlives the container (a named volume,
	// a PersistentVolumeClaim, a StateDirectory), where data_dir must be.
	persistent bool
}

type mounts []mount

// resolve maps an inside path through the longest mount that covers it.
func (ms mounts) resolve(p string) (mount, string, bool) {
	best := -1
	for i, m := range ms {
		if (p == m.inside || strings.HasPrefix(p, strings.TrimSuffix(m.inside, "/")+"/")) && (best < 0 || len(m.inside) > len(ms[best].inside)) {
			best = i
		}
	}
	if best < 0 {
		return mount{}, "", false
	}
	m := ms[best]
	return m, filepath.Join(m.outside, strings.TrimPrefix(p, m.inside)), true
}

// pathKeys are the configuration keys that name files or directories.
var pathKeys = []string{"data_dir", "tls_cert", "tls_key", "tls_ca", "tls_client_ca", "cluster_key_file", "admin_token_file", "delivery_log"}

// checked is a configuration as `weft config check -o json` printed it.
type checked struct {
	Kind   string `json:"kind"`
	Checks []struct {
		What, Result string
	} `json:"checks"`
	Values struct {
		Cluster string            `json:"cluster"`
		ID      int               `json:"id"`
		Listen  string            `json:"listen"`
		Groups  [][]int           `json:"groups"`
		Nodes   map[string]string `json:"nodes"`
		Gossip  struct {
			Seeds []int `json:"seeds"`
		} `json:"gossip"`
	} `json:"values"`
}

// check writes the configuration text an agent would read, with every
// path key moved through ms to where its mount puts it on this machine,
// and runs `weft config check -o json` on it. A path no mount covers is
// an error (the agent would not find it, or would lose it with the
// container); so is a data_dir on no persistent volume.
func check(t *testing.T, name string, text []byte, ms mounts) *checked {
	t.Helper()
	var kv map[string]any
	if _, err := toml.Decode(string(text), &kv); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, k := range pathKeys {
		p, ok := kv[k].(string)
		if !ok || p == "" {
			continue
		}
		m, out, ok := ms.resolve(p)
		switch {
		case !ok:
			t.Errorf("%s: %s = %q is on no mount: the agent would not find it (or would lose it with the container)", name, k, p)
			continue
		case k == "data_dir" && !m.persistent:
			t.Errorf("%s: data_dir %q is on %s, not on a persistent volume: the member's state would be lost with the container", name, p, m.inside)
		}
		kv[k] = out
	}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(kv); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), strings.NewReplacer("/", "_", " ", "_").Replace(name)+".toml")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runWeft(t, "", "config", "check", "-o", "json", path)
	if err != nil {
		t.Fatalf("%s: %v\nthe file as checked:\n%s", name, err, b.String())
	}
	var c checked
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	return &c
}

// result returns the result of the named check.
func (c *checked) result(what string) string {
	for _, ch := range c.Checks {
		if ch.What == what {
			return ch.Result
		}
	}
	return ""
}

// sameLayout checks that every configuration describes the same cluster:
// name, groups, node addresses and seeds. Returns the first.
func sameLayout(t *testing.T, cs map[string]*checked) *checked {
	t.Helper()
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range cs {
			if !yield(n) {
				return
			}
		}
	})
	first := cs[names[0]]
	key := func(c *checked) string {
		v := c.Values
		return fmt.Sprintf("%s %v %v %v", v.Cluster, v.Groups, v.Nodes, v.Gossip.Seeds)
	}
	for _, n := range names[1:] {
		if key(cs[n]) != key(first) {
			t.Errorf("%s and %s describe different clusters:\n%s\n%s", names[0], n, key(first), key(cs[n]))
		}
	}
	return first
}

// seedsOnePerGroup checks the seed list: ids of the layout, one in each
// group (a seed list the same everywhere and small, the gossip advice).
func seedsOnePerGroup(t *testing.T, c *checked) {
	t.Helper()
	seen := map[int]bool{}
	for _, s := range c.Values.Gossip.Seeds {
		g := -1
		for i, ms := range c.Values.Groups {
			if slices.Contains(ms, s) {
				g = i
			}
		}
		if g < 0 || seen[g] {
			t.Errorf("seeds %v: %d is in no group or a second seed of its group", c.Values.Gossip.Seeds, s)
		}
		seen[g] = true
	}
	if len(seen) != len(c.Values.Groups) {
		t.Errorf("seeds %v: not one per group of %v", c.Values.Gossip.Seeds, c.Values.Groups)
	}
}

// splitAddr splits a node address into host and port.
func splitAddr(t *testing.T, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return h, n
}

// certsFor runs the documented `weft certs` in dir and returns the
// directory it wrote.
func certsFor(t *testing.T, dir string, args ...string) {
	t.Helper()
	if _, err := runWeft(t, dir, append([]string{"certs"}, args...)...); err != nil {
		t.Fatal(err)
	}
}

// readFile reads a file of deploy/.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dockerCmd returns the Dockerfile's ENTRYPOINT followed by its CMD (exec
// form), the command a container of the image runs.
func dockerCmd(t *testing.T) []string {
	t.Helper()
	var entry, cmd []string
	for _, l := range strings.Split(string(readFile(t, "Dockerfile")), "\n") {
		for _, kw := range []struct {
			name string
			into *[]string
		}{{"ENTRYPOINT ", &entry}, {"CMD ", &cmd}} {
			if strings.HasPrefix(l, kw.name) {
				if err := json.Unmarshal([]byte(strings.TrimPrefix(l, kw.name)), kw.into); err != nil {
					t.Fatalf("Dockerfile %s: not the exec form: %v", l, err)
				}
			}
		}
	}
	return append(entry, cmd...)
}

// configFlag returns the value of --config in args.
func configFlag(t *testing.T, args []string) string {
	t.Helper()
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			return args[i+1]
		}
	}
	t.Fatalf("no --config in %q", args)
	return ""
}
