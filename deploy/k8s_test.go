package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"gopkg.in/yaml.v3"
)

// The fields of the Kubernetes objects the tests read.
type (
	k8sMeta struct {
		Name, Namespace string
		Labels          map[string]string
	}
	k8sObject struct {
		Kind     string
		Metadata k8sMeta
	}
	k8sService struct {
		Metadata k8sMeta
		Spec     struct {
			ClusterIP                string `yaml:"clusterIP"`
			PublishNotReadyAddresses bool   `yaml:"publishNotReadyAddresses"`
			Selector                 map[string]string
			Ports                    []struct{ Port int }
		}
	}
	k8sContainer struct {
		Name, Image string
		Args        []string
		Env         []struct {
			Name      string
			ValueFrom struct {
				FieldRef struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
			} `yaml:"valueFrom"`
		}
		Ports []struct {
			ContainerPort int `yaml:"containerPort"`
		}
		ReadinessProbe struct {
			Exec struct{ Command []string }
		} `yaml:"readinessProbe"`
		VolumeMounts []struct {
			Name      string
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	k8sStatefulSet struct {
		Metadata k8sMeta
		Spec     struct {
			ServiceName         string `yaml:"serviceName"`
			Replicas            int
			PodManagementPolicy string `yaml:"podManagementPolicy"`
			Selector            struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			}
			Template struct {
				Metadata k8sMeta
				Spec     struct {
					Containers []k8sContainer
					Volumes    []struct {
						Name      string
						ConfigMap struct{ Name string } `yaml:"configMap"`
						Secret    struct {
							SecretName string `yaml:"secretName"`
						}
					}
				}
			}
			VolumeClaimTemplates []struct{ Metadata k8sMeta } `yaml:"volumeClaimTemplates"`
		}
	}
	k8sPDB struct {
		Metadata k8sMeta
		Spec     struct {
			MaxUnavailable *int `yaml:"maxUnavailable"`
			MinAvailable   *int `yaml:"minAvailable"`
			Selector       struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			}
		}
	}
	k8sConfigMap struct {
		Metadata k8sMeta
		Data     map[string]string
	}
	kustomization struct {
		Namespace       string
		Resources       []string
		SecretGenerator []struct {
			Name  string
			Files []string
		} `yaml:"secretGenerator"`
	}
)

// k8sObjects reads every document of the kustomization's resources.
func k8sObjects(t *testing.T, k kustomization) map[string][]*yaml.Node {
	t.Helper()
	byKind := map[string][]*yaml.Node{}
	for _, r := range k.Resources {
		dec := yaml.NewDecoder(bytes.NewReader(readFile(t, filepath.Join("k8s", r))))
		for {
			var n yaml.Node
			if err := dec.Decode(&n); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("k8s/%s: %v", r, err)
			}
			var o k8sObject
			if err := n.Decode(&o); err != nil {
				t.Fatalf("k8s/%s: %v", r, err)
			}
			if o.Metadata.Namespace != "" && o.Metadata.Namespace != k.Namespace {
				t.Errorf("k8s/%s: %s %s in namespace %q, the kustomization's is %q", r, o.Kind, o.Metadata.Name, o.Metadata.Namespace, k.Namespace)
			}
			byKind[o.Kind] = append(byKind[o.Kind], &n)
		}
	}
	return byKind
}

func decodeAll[T any](t *testing.T, ns []*yaml.Node) []T {
	t.Helper()
	out := make([]T, len(ns))
	for i, n := range ns {
		if err := n.Decode(&out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// selects reports whether selector selects a pod labelled labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// TestKubernetes reads deploy/k8s as `kubectl apply -k` would: one
// StatefulSet of 3 per group behind a headless Service, a
// PodDisruptionBudget of maxUnavailable 1 on each group's pods, every
// pod's configuration in the ConfigMap at the path its --config names,
// checked by weft config check through the pod's mounts with the Secret
// the documented weft certs command fills; the peers' names are the pods'
// stable names under their Services.
func TestKubernetes(t *testing.T) {
	var k kustomization
	if err := yaml.Unmarshal(readFile(t, "k8s/kustomization.yaml"), &k); err != nil {
		t.Fatal(err)
	}
	objs := k8sObjects(t, k)
	if ns := decodeAll[k8sObject](t, objs["Namespace"]); len(ns) != 1 || ns[0].Metadata.Name != k.Namespace {
		t.Errorf("namespaces %+v, want %s", ns, k.Namespace)
	}
	svcs := map[string]k8sService{}
	for _, s := range decodeAll[k8sService](t, objs["Service"]) {
		svcs[s.Metadata.Name] = s
	}
	sets := decodeAll[k8sStatefulSet](t, objs["StatefulSet"])
	pdbs := decodeAll[k8sPDB](t, objs["PodDisruptionBudget"])
	cms := decodeAll[k8sConfigMap](t, objs["ConfigMap"])
	if len(sets) != groups || len(pdbs) != groups || len(cms) != 1 {
		t.Fatalf("%d StatefulSets, %d PodDisruptionBudgets, %d ConfigMaps: want %d, %d, 1", len(sets), len(pdbs), len(cms), groups, groups)
	}
	cm := cms[0]

	// The Secret: what weft certs writes, as the kustomization's header
	// says, for the nodes the configurations name.
	root := t.TempDir()
	var first map[string]string
	for _, text := range cm.Data {
		first = parseNodes(t, text) // sameLayout below checks they all agree
		break
	}
	var peers []string
	for _, id := range slices.Sorted(maps.Keys(first)) {
		peers = append(peers, id+"="+first[id])
	}
	certsFor(t, root, "--cluster", "weft", "--out", "tls", "--peers", strings.Join(peers, ","))
	if len(k.SecretGenerator) != 1 || k.SecretGenerator[0].Name != "weft-tls" {
		t.Fatalf("secretGenerator %+v, want weft-tls", k.SecretGenerator)
	}
	for _, f := range k.SecretGenerator[0].Files {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("the Secret's file %s: weft certs did not write it: %v", f, err)
		}
	}

	cs := map[string]*checked{}
	podOf := map[int]string{} // node id -> pod
	groupOfPod := map[string]int{}
	usedKeys := map[string]bool{}
	for _, s := range sets {
		name := s.Metadata.Name
		sp := s.Spec
		if sp.Replicas != replicas || sp.PodManagementPolicy != "Parallel" {
			t.Errorf("StatefulSet %s: replicas %d, podManagementPolicy %q; want %d, Parallel", name, sp.Replicas, sp.PodManagementPolicy, replicas)
		}
		podLabels := sp.Template.Metadata.Labels
		if !selects(sp.Selector.MatchLabels, podLabels) {
			t.Errorf("StatefulSet %s: its selector %v does not select its pods %v", name, sp.Selector.MatchLabels, podLabels)
		}
		svc, ok := svcs[sp.ServiceName]
		if !ok || svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses || !selects(svc.Spec.Selector, podLabels) {
			t.Errorf("StatefulSet %s: serviceName %q: want a headless Service (clusterIP None) that publishes not-ready pods and selects them; got %+v", name, sp.ServiceName, svc)
		}
		// Exactly one PDB covers these pods, with maxUnavailable 1, and
		// it covers no other group's.
		var covering []string
		for _, p := range pdbs {
			if selects(p.Spec.Selector.MatchLabels, podLabels) {
				covering = append(covering, p.Metadata.Name)
				if p.Spec.MaxUnavailable == nil || *p.Spec.MaxUnavailable != 1 || p.Spec.MinAvailable != nil {
					t.Errorf("PodDisruptionBudget %s: want maxUnavailable 1 (and no minAvailable)", p.Metadata.Name)
				}
				for _, o := range sets {
					if o.Metadata.Name != name && selects(p.Spec.Selector.MatchLabels, o.Spec.Template.Metadata.Labels) {
						t.Errorf("PodDisruptionBudget %s covers the pods of %s and %s: one budget per group", p.Metadata.Name, name, o.Metadata.Name)
					}
				}
			}
		}
		if len(covering) != 1 {
			t.Errorf("StatefulSet %s: PodDisruptionBudgets %v cover its pods, want exactly 1", name, covering)
		}
		if len(sp.Template.Spec.Containers) != 1 {
			t.Fatalf("StatefulSet %s: %d containers", name, len(sp.Template.Spec.Containers))
		}
		ct := sp.Template.Spec.Containers[0]
		if rp := ct.ReadinessProbe.Exec.Command; !slices.Contains(rp, "--ready") || rp[0] != "/usr/local/bin/weft" {
			t.Errorf("StatefulSet %s: readiness probe %q, want weft status --ready", name, rp)
		}
		var podNameEnv string
		for _, e := range ct.Env {
			if e.ValueFrom.FieldRef.FieldPath == "metadata.name" {
				podNameEnv = e.Name
			}
		}
		// The pod's mounts: the ConfigMap, the Secret, its own claim.
		vols := map[string]string{} // volume name -> kind
		for _, v := range sp.Template.Spec.Volumes {
			switch {
			case v.ConfigMap.Name == cm.Metadata.Name:
				vols[v.Name] = "configmap"
			case v.Secret.SecretName == k.SecretGenerator[0].Name:
				vols[v.Name] = "secret"
			}
		}
		for _, c := range sp.VolumeClaimTemplates {
			vols[c.Metadata.Name] = "claim"
		}
		for ord := range sp.Replicas {
			pod := fmt.Sprintf("%s-%d", name, ord)
			dir := filepath.Join(root, "pods", pod)
			var ms mounts
			for _, vm := range ct.VolumeMounts {
				switch vols[vm.Name] {
				case "configmap":
					cmDir := filepath.Join(dir, "configmap")
					os.MkdirAll(cmDir, 0o755)
					for key, text := range cm.Data {
						if err := os.WriteFile(filepath.Join(cmDir, key), []byte(text), 0o644); err != nil {
							t.Fatal(err)
						}
					}
					ms = append(ms, mount{inside: vm.MountPath, outside: cmDir})
				case "secret":
					ms = append(ms, mount{inside: vm.MountPath, outside: filepath.Join(root, "tls")})
				case "claim":
					ms = append(ms, mount{inside: vm.MountPath, outside: filepath.Join(dir, "claim"), persistent: true})
				default:
					t.Errorf("StatefulSet %s: volume mount %s is of no known volume", name, vm.Name)
				}
			}
			// The container's --config, with $(POD_NAME) expanded as the
			// kubelet does.
			args := slices.Clone(ct.Args)
			for i := range args {
				if podNameEnv != "" {
					args[i] = strings.ReplaceAll(args[i], "$("+podNameEnv+")", pod)
				}
			}
			cfgPath := configFlag(t, args)
			_, out, ok := ms.resolve(cfgPath)
			if !ok {
				t.Fatalf("pod %s: --config %s is on no mount", pod, cfgPath)
			}
			usedKeys[filepath.Base(out)] = true
			text, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("pod %s: --config %s: the ConfigMap has no key %s", pod, cfgPath, filepath.Base(out))
			}
			c := check(t, "k8s "+pod, text, ms)
			cs[pod] = c
			if other, dup := podOf[c.Values.ID]; dup {
				t.Errorf("pods %s and %s both run node %d", other, pod, c.Values.ID)
			}
			podOf[c.Values.ID] = pod
			groupOfPod[pod] = groupOf(c, c.Values.ID)
			if !strings.HasPrefix(c.result("tls_cert"), fmt.Sprintf("node %d's certificate", c.Values.ID)) {
				t.Errorf("pod %s: %q", pod, c.result("tls_cert"))
			}
		}
		// A StatefulSet is a group: its PDB then protects the group's
		// majority.
		var gs []int
		for ord := range sp.Replicas {
			gs = append(gs, groupOfPod[fmt.Sprintf("%s-%d", name, ord)])
		}
		slices.Sort(gs)
		if len(slices.Compact(gs)) != 1 {
			t.Errorf("StatefulSet %s runs members of groups %v: one StatefulSet per group", name, gs)
		}
	}
	for key := range cm.Data {
		if !usedKeys[key] {
			t.Errorf("ConfigMap key %s is no pod's configuration", key)
		}
	}
	if len(cs) != groups*replicas {
		t.Fatalf("%d pods, want %d", len(cs), groups*replicas)
	}
	c := sameLayout(t, cs)
	seedsOnePerGroup(t, c)
	// Every peer address is a pod's stable DNS name under its StatefulSet's
	// headless Service, and that pod runs that node.
	svcOfSet := map[string]string{}
	for _, s := range sets {
		svcOfSet[s.Metadata.Name] = s.Spec.ServiceName
	}
	for id, addr := range c.Values.Nodes {
		host, port := splitAddr(t, addr)
		var n int
		fmt.Sscan(id, &n)
		pod := podOf[n]
		set := pod[:strings.LastIndex(pod, "-")]
		want := fmt.Sprintf("%s.%s.%s.svc.cluster.local", pod, svcOfSet[set], k.Namespace)
		if host != want {
			t.Errorf("nodes.%s = %q: node %d runs in pod %s, whose name is %s", id, addr, n, pod, want)
		}
		if svc := svcs[svcOfSet[set]]; len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != port {
			t.Errorf("nodes.%s = %q: Service %s's ports %+v", id, addr, svcOfSet[set], svc.Spec.Ports)
		}
	}

	// With kubectl at hand, kustomize builds the whole (the Secret from the
	// certificates made above).
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Log("kubectl not found: kubectl kustomize not run")
		return
	}
	if err := os.CopyFS(filepath.Join(root, "k8s"), os.DirFS("k8s")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "tls"), filepath.Join(root, "k8s", "tls")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(root, "k8s")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, out)
	}
	for kind, n := range map[string]int{"Namespace": 1, "ConfigMap": 1, "Secret": 1, "Service": groups, "StatefulSet": groups, "PodDisruptionBudget": groups} {
		if got := strings.Count(string(out), "\nkind: "+kind+"\n"); got != n {
			t.Errorf("kubectl kustomize: %d %s, want %d", got, kind, n)
		}
	}
}

// parseNodes reads [nodes] of a configuration.
func parseNodes(t *testing.T, text string) map[string]string {
	t.Helper()
	var c struct {
		Nodes map[string]string `toml:"nodes"`
	}
	if _, err := toml.Decode(text, &c); err != nil {
		t.Fatal(err)
	}
	return c.Nodes
}

// groupOf returns the group of node id in c's layout, or -1.
func groupOf(c *checked, id int) int {
	for g, ms := range c.Values.Groups {
		if slices.Contains(ms, id) {
			return g
		}
	}
	return -1
}
