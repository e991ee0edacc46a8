package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// composeSpec is what the tests read of docker-compose.yml (yaml.v3
// applies the file's merge keys, <<: *weft).
type composeSpec struct {
	Name     string
	Services map[string]struct {
		Image    string
		Build    struct{ Context, Dockerfile string }
		Hostname string
		Profiles []string
		Volumes  []string
		Command  []string
		// StopGracePeriod: time for the clean stop SIGTERM starts.
		StopGracePeriod string `yaml:"stop_grace_period"`
	}
	Volumes map[string]any
}

// TestDockerfile: a multi-stage build of a static binary, run as a
// non-root user with its data on a volume and a health check that is the
// node's readiness.
func TestDockerfile(t *testing.T) {
	text := string(readFile(t, "Dockerfile"))
	for _, want := range []string{
		"AS build", "CGO_ENABLED=0", "COPY --from=build", // multi-stage, static
		"USER 65532:65532", `VOLUME ["/var/lib/weft"]`, "--chown=65532:65532 /out/var/lib/weft /var/lib/weft",
		`"status", "--admin", "127.0.0.1:7200", "--ready"`, "STOPSIGNAL SIGTERM",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if n := strings.Count(text, "\nFROM "); n != 2 {
		t.Errorf("Dockerfile has %d stages, want 2 (build, runtime)", n)
	}
	cmd := dockerCmd(t)
	if len(cmd) < 2 || cmd[0] != "/usr/local/bin/weft" || cmd[1] != "agent" || configFlag(t, cmd) != "/etc/weft/weft.toml" {
		t.Errorf("the image runs %q, want /usr/local/bin/weft agent --config /etc/weft/weft.toml", cmd)
	}
	// The build context filter never ships keys.
	if ign := string(readFile(t, "Dockerfile.dockerignore")); !strings.Contains(ign, "**/*.key") {
		t.Error("Dockerfile.dockerignore does not exclude *.key")
	}
}

// TestCompose reads docker-compose.yml as Compose would: 9 agents, one
// per node of 3 groups x 3 replicas, each with its own configuration,
// certificate and named volume; the certificates the documented weft
// certs command makes; every agent's configuration checked by weft config
// check through its mounts; peers and seeds named by the services that run
// them.
func TestCompose(t *testing.T) {
	var cf composeSpec
	if err := yaml.Unmarshal(readFile(t, "docker-compose.yml"), &cf); err != nil {
		t.Fatal(err)
	}
	// The operator's deploy/: the rendered configurations, and the
	// certificates made as the compose file's header says.
	root := t.TempDir()
	if err := os.CopyFS(filepath.Join(root, "compose"), os.DirFS("compose")); err != nil {
		t.Fatal(err)
	}
	certsFor(t, root, "--config", "compose/weft-g0-0.toml", "--out", "compose/tls")
	configPath := configFlag(t, dockerCmd(t))

	cs := map[string]*checked{}
	svcOf := map[int]string{} // node id -> service
	volumeUsers := map[string][]string{}
	for name, s := range cf.Services {
		if s.Image != "weft:dev" || s.Build.Dockerfile != "deploy/Dockerfile" {
			t.Errorf("service %s: image %q build %+v, want weft:dev from deploy/Dockerfile", name, s.Image, s.Build)
		}
		if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
			t.Errorf("service %s: build: %v", name, err)
		}
		if slices.Contains(s.Profiles, "tools") {
			continue // the client, checked below
		}
		if s.Hostname != name || s.StopGracePeriod == "" || len(s.Command) > 0 {
			t.Errorf("service %s: hostname %q, stop_grace_period %q, command %q: want its own name, a grace period, the image's command", name, s.Hostname, s.StopGracePeriod, s.Command)
		}
		var ms mounts
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			src, dst := parts[0], parts[1]
			if strings.HasPrefix(src, "./") {
				ms = append(ms, mount{inside: dst, outside: filepath.Join(root, src)})
				continue
			}
			if _, ok := cf.Volumes[src]; !ok {
				t.Errorf("service %s: volume %s is not declared", name, src)
			}
			volumeUsers[src] = append(volumeUsers[src], name)
			ms = append(ms, mount{inside: dst, outside: filepath.Join(root, "volumes", src), persistent: true})
		}
		_, cfgFile, ok := ms.resolve(configPath)
		if !ok {
			t.Errorf("service %s: nothing mounted at %s, the image's --config", name, configPath)
			continue
		}
		c := check(t, "compose "+name, readFile(t, cfgFile), ms)
		cs[name] = c
		if other, dup := svcOf[c.Values.ID]; dup {
			t.Errorf("services %s and %s both run node %d", other, name, c.Values.ID)
		}
		svcOf[c.Values.ID] = name
		if !strings.HasPrefix(c.result("tls_cert"), fmt.Sprintf("node %d's certificate", c.Values.ID)) || c.result("security") != "mtls" {
			t.Errorf("service %s: TLS: %q, security %q", name, c.result("tls_cert"), c.result("security"))
		}
	}
	if len(cs) != groups*replicas {
		t.Fatalf("%d agent services, want %d", len(cs), groups*replicas)
	}
	for v, users := range volumeUsers {
		if len(users) != 1 {
			t.Errorf("volume %s is shared by %v: each member needs its own state", v, users)
		}
	}
	c := sameLayout(t, cs)
	if len(c.Values.Groups) != groups {
		t.Errorf("groups %v, want %d", c.Values.Groups, groups)
	}
	for _, ms := range c.Values.Groups {
		if len(ms) != replicas {
			t.Errorf("group %v: want %d replicas", ms, replicas)
		}
	}
	seedsOnePerGroup(t, c)
	// Every peer address names the service that runs that node, on the
	// port it listens on.
	for id, addr := range c.Values.Nodes {
		host, port := splitAddr(t, addr)
		var n int
		fmt.Sscan(id, &n)
		if svcOf[n] != host {
			t.Errorf("nodes.%s = %q: service %q runs node %d", id, addr, svcOf[n], n)
			continue
		}
		if _, lport := splitAddr(t, cs[host].Values.Listen); lport != port {
			t.Errorf("nodes.%s = %q: %s listens on %s", id, addr, host, cs[host].Values.Listen)
		}
	}

	// With Compose at hand, it validates the file against its schema (the
	// certificates the file mounts now exist).
	if out, err := composeConfig(root); err != nil {
		t.Errorf("%v\n%s", err, out)
	} else if out != nil {
		t.Log("compose config: valid")
	}

	// The client service: the cluster's layout and the client certificate
	// that weft certs wrote.
	cli, ok := cf.Services["cli"]
	if !ok {
		t.Fatal("no cli service")
	}
	for _, v := range cli.Volumes {
		src := strings.Split(v, ":")[0]
		if _, err := os.Stat(filepath.Join(root, src)); err != nil {
			t.Errorf("cli mounts %s: %v", src, err)
		}
	}
}

// composeConfig runs `docker compose config -q` (or docker-compose's) on a
// copy of docker-compose.yml in root/deploy-copy beside root's compose/;
// nil, nil without Compose.
func composeConfig(root string) ([]byte, error) {
	var argv []string
	if docker, err := exec.LookPath("docker"); err == nil && exec.Command(docker, "compose", "version").Run() == nil {
		argv = []string{docker, "compose"}
	} else if dc, err := exec.LookPath("docker-compose"); err == nil {
		argv = []string{dc}
	} else {
		return nil, nil
	}
	b, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, "docker-compose.yml"), b, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], append(argv[1:], "-f", filepath.Join(root, "docker-compose.yml"), "config", "-q")...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s config -q: %v", strings.Join(argv, " "), err)
	}
	return []byte{}, nil
}
