package deploy

// The deployment files that are the same thing nine or three times (the
// compose file's services and their configurations, the ConfigMap's
// configurations, the per-group StatefulSets) are rendered from the
// templates below, so that they cannot drift apart. TestRenderedUpToDate
// fails when a committed file differs from its rendering;
//
//	go test ./deploy -run TestRenderedUpToDate -update
//
// rewrites them. The other tests of this package check the files on disk
// as an operator would use them, not these templates.

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"text/template"
)

var update = flag.Bool("update", false, "rewrite the rendered deployment files")

// The layout every artefact deploys: 3 groups x 3 replicas, node id
// g*replicas + r.
const (
	groups   = 3
	replicas = 3
	// port is the nodes' and clients' port everywhere.
	port = 7100
	// namespace is the Kubernetes namespace.
	namespace = "weft"
)

// member is one node of the layout.
type member struct {
	ID, Group, Ordinal int
	Name               string // compose service, Kubernetes pod: weft-g<group>-<ordinal>
	Addr               string // host:port its peers and clients use
}

// layout returns every member, with addresses as addr names them.
func layout(addr func(group, ordinal int) string) []member {
	var ms []member
	for g := range groups {
		for r := range replicas {
			ms = append(ms, member{ID: g*replicas + r, Group: g, Ordinal: r, Name: podName(g, r), Addr: addr(g, r)})
		}
	}
	return ms
}

func podName(g, r int) string { return fmt.Sprintf("weft-g%d-%d", g, r) }

// composeAddr: compose's network resolves service names.
func composeAddr(g, r int) string { return fmt.Sprintf("%s:%d", podName(g, r), port) }

// k8sAddr: a StatefulSet pod's stable name under its headless Service,
// fully qualified so that clients in other namespaces resolve it too.
func k8sAddr(g, r int) string {
	return fmt.Sprintf("%s.weft-g%d.%s.svc.cluster.local:%d", podName(g, r), g, namespace, port)
}

// nodeConfig is a node's weft.toml. TLSCert and TLSKey differ: compose
// mounts each container's own pair as node.crt/node.key; the Kubernetes
// Secret holds every pair under its weft certs name.
const nodeConfig = `# {{.M.Name}}: node {{.M.ID}}, group {{.M.Group}} ({{.Where}}).
# Rendered by deploy/render_test.go; edit the template there and run
#     go test ./deploy -run TestRenderedUpToDate -update
# Check: weft config check FILE. Every key and its default: config/sample.toml.
cluster = "weft"
id = {{.M.ID}}
# On the volume mounted at /var/lib/weft: the member's promises and
# identity; never start this member on an empty one after it ran
# (docs/disk-loss.md).
data_dir = "/var/lib/weft/data"
listen = "0.0.0.0:{{.Port}}"
# Loopback only: the health check (weft status --ready) asks it in the
# container, and nothing outside can reach it.
admin = "127.0.0.1:7200"
tls_cert = "{{.TLSCert}}"
tls_key = "{{.TLSKey}}"
tls_ca = "/etc/weft/tls/ca.crt"
# "new" for the cluster's first start; then "existing", so that an empty
# data_dir (a lost volume) is refused, never taken for a new member
# (docs/deploy.md, "Replacing a machine").
initial_state = "new"
groups = [{{range $g, $ms := .Groups}}{{if $g}}, {{end}}[{{range $i, $m := $ms}}{{if $i}}, {{end}}{{$m.ID}}{{end}}]{{end}}]

[nodes]
{{range .All}}{{.ID}} = "{{.Addr}}"
{{end}}
[gossip]
profile = "lan"
# One seed per group, the same list everywhere.
seeds = [{{range $g, $ms := .Groups}}{{if $g}}, {{end}}{{(index $ms 0).ID}}{{end}}]
`

const composeTemplate = `# weft in Docker Compose: 3 groups x 3 replicas, one container per node,
# mutual TLS. Rendered by deploy/render_test.go (edit the template there).
# From deploy/, once (docs/deploy.md):
#
#     weft certs --config compose/weft-g0-0.toml --out compose/tls
#     sudo chown 65532:65532 compose/tls/node-*.key compose/tls/client.key
#
# then
#
#     docker compose up -d --build
#     docker compose ps                      # healthy = ready (weft status --ready)
#     docker compose run --rm cli multicast --config /etc/weft/weft.toml \
#         --tls-cert /etc/weft/tls/client.crt --tls-key /etc/weft/tls/client.key --dest 0,1 hello
#     docker compose exec weft-g0-0 weft status --admin 127.0.0.1:7200
#
# (No top-level name: docker-compose 1.x, Debian 12's, refuses it; the
# project is named after this directory, or -p NAME.)

x-weft: &weft
  image: weft:dev
  build:
    context: ..
    dockerfile: deploy/Dockerfile
  restart: unless-stopped
  # SIGTERM stops the agent cleanly; give it time before SIGKILL.
  stop_grace_period: 30s
  networks: [weft]

services:
{{- range .All}}
  {{.Name}}:
    <<: *weft
    hostname: {{.Name}}
    volumes:
      - ./compose/{{.Name}}.toml:/etc/weft/weft.toml:ro
      - ./compose/tls/ca.crt:/etc/weft/tls/ca.crt:ro
      - ./compose/tls/node-{{.ID}}.crt:/etc/weft/tls/node.crt:ro
      - ./compose/tls/node-{{.ID}}.key:/etc/weft/tls/node.key:ro
      - {{.Name}}:/var/lib/weft
{{- end}}

  # A client in the cluster's network: docker compose run --rm cli ARGS
  # runs weft ARGS with the cluster's layout and the client certificate.
  cli:
    <<: *weft
    profiles: [tools]
    restart: "no"
    healthcheck:
      disable: true
    entrypoint: ["/usr/local/bin/weft"]
    command: ["version"]
    volumes:
      - ./compose/{{(index .All 0).Name}}.toml:/etc/weft/weft.toml:ro
      - ./compose/tls/ca.crt:/etc/weft/tls/ca.crt:ro
      - ./compose/tls/client.crt:/etc/weft/tls/client.crt:ro
      - ./compose/tls/client.key:/etc/weft/tls/client.key:ro

volumes:
{{- range .All}}
  {{.Name}}: {}
{{- end}}

networks:
  weft: {}
`

const configMapFile = `# Every node's weft.toml; pod weft-g<g>-<r> reads
# /etc/weft/config/weft-g<g>-<r>.toml. Rendered by deploy/render_test.go
# (edit the template there).
apiVersion: v1
kind: ConfigMap
metadata:
  name: weft-config
  namespace: {{.Namespace}}
  labels:
    app.kubernetes.io/name: weft
data:
{{- range .Configs}}
  {{.Name}}.toml: |
{{.Text}}
{{- end}}
`

const groupFile = `{{define "meta"}}metadata:
  name: weft-g{{.G}}
  namespace: {{.Namespace}}
  labels: &labels
    app.kubernetes.io/name: weft
    weft.dev/group: "{{.G}}"{{end -}}
# Group {{.G}} of weft: a headless Service (stable pod names, published
# before the pods are ready: members must reach each other to become
# ready), a StatefulSet of {{.Replicas}} (each pod its own volume, so its
# own member state), and a PodDisruptionBudget that lets voluntary
# disruptions (drains, upgrades) take at most 1 member at a time: the
# group keeps its majority. Rendered by deploy/render_test.go (edit the
# template there). (YAML anchors do not cross documents: each defines its
# labels.)
apiVersion: v1
kind: Service
{{template "meta" .}}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: *labels
  ports:
    - name: weft
      port: {{.Port}}
---
apiVersion: apps/v1
kind: StatefulSet
{{template "meta" .}}
spec:
  serviceName: weft-g{{.G}}
  replicas: {{.Replicas}}
  # All members at once: with OrderedReady pod 1 would wait for pod 0 to
  # be ready, and pod 0 cannot be ready without a majority of its group.
  podManagementPolicy: Parallel
  updateStrategy:
    type: RollingUpdate
  selector:
    matchLabels: *labels
  template:
    metadata:
      labels: *labels
    spec:
      terminationGracePeriodSeconds: 30
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        # The volume and the Secret's files readable by the agent's group.
        fsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      affinity:
        podAntiAffinity:
          # Members of one group on different machines where possible.
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels: *labels
      containers:
        - name: weft
          image: weft:dev
          args: ["agent", "--config", "/etc/weft/config/$(POD_NAME).toml"]
          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
          ports:
            - name: weft
              containerPort: {{.Port}}
          # Ready = a member of a group with a known leader, caught up
          # (the admin endpoint stays on loopback: an exec probe).
          readinessProbe:
            exec:
              command: ["/usr/local/bin/weft", "status", "--admin", "127.0.0.1:7200", "--ready", "--timeout", "4s"]
            periodSeconds: 5
            timeoutSeconds: 5
          livenessProbe:
            tcpSocket:
              port: weft
            initialDelaySeconds: 10
            periodSeconds: 10
            failureThreshold: 6
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
          resources:
            requests:
              cpu: 250m
              memory: 256Mi
            limits:
              memory: 1Gi
          volumeMounts:
            - name: config
              mountPath: /etc/weft/config
              readOnly: true
            - name: tls
              mountPath: /etc/weft/tls
              readOnly: true
            - name: data
              mountPath: /var/lib/weft
      volumes:
        - name: config
          configMap:
            name: weft-config
        - name: tls
          secret:
            secretName: weft-tls
            defaultMode: 0440
  volumeClaimTemplates:
    - metadata:
        name: data
      spec:
        accessModes: ["ReadWriteOnce"]
        resources:
          requests:
            storage: 10Gi
---
apiVersion: policy/v1
kind: PodDisruptionBudget
{{template "meta" .}}
spec:
  maxUnavailable: 1
  selector:
    matchLabels: *labels
`

func execTemplate(name, text string, data any) []byte {
	var b bytes.Buffer
	template.Must(template.New(name).Parse(text)).Execute(&b, data)
	return b.Bytes()
}

// byGroup splits members into their groups.
func byGroup(ms []member) [][]member {
	out := make([][]member, groups)
	for _, m := range ms {
		out[m.Group] = append(out[m.Group], m)
	}
	return out
}

// renderNode renders m's configuration.
func renderNode(m member, all []member, where, cert, key string) []byte {
	return execTemplate("node", nodeConfig, map[string]any{"M": m, "All": all, "Groups": byGroup(all), "Where": where,
		"Port": port, "TLSCert": cert, "TLSKey": key})
}

// render returns every rendered file, by path relative to deploy/.
func render() map[string][]byte {
	files := map[string][]byte{}
	cms := layout(composeAddr)
	for _, m := range cms {
		files[filepath.Join("compose", m.Name+".toml")] = renderNode(m, cms, "docker-compose.yml", "/etc/weft/tls/node.crt", "/etc/weft/tls/node.key")
	}
	files["docker-compose.yml"] = execTemplate("compose", composeTemplate, map[string]any{"All": cms})

	kms := layout(k8sAddr)
	type cfg struct {
		Name, Text string
	}
	var cfgs []cfg
	for _, m := range kms {
		text := renderNode(m, kms, "Kubernetes, k8s/weft-g"+fmt.Sprint(m.Group)+".yaml",
			fmt.Sprintf("/etc/weft/tls/node-%d.crt", m.ID), fmt.Sprintf("/etc/weft/tls/node-%d.key", m.ID))
		cfgs = append(cfgs, cfg{m.Name, string(indent(text, "    "))})
	}
	files[filepath.Join("k8s", "configmap.yaml")] = execTemplate("configmap", configMapFile, map[string]any{"Namespace": namespace, "Configs": cfgs})
	for g := range groups {
		files[filepath.Join("k8s", fmt.Sprintf("weft-g%d.yaml", g))] = execTemplate("group", groupFile,
			map[string]any{"G": g, "Replicas": replicas, "Namespace": namespace, "Port": port})
	}
	return files
}

// indent prefixes every non-empty line of text and drops the final
// newline (the template adds its own).
func indent(text []byte, prefix string) []byte {
	lines := bytes.Split(bytes.TrimRight(text, "\n"), []byte("\n"))
	for i, l := range lines {
		if len(l) > 0 {
			lines[i] = append([]byte(prefix), l...)
		}
	}
	return bytes.Join(lines, []byte("\n"))
}

// TestRenderedUpToDate: the committed files are their templates'
// rendering (-update rewrites them).
func TestRenderedUpToDate(t *testing.T) {
	for path, want := range render() {
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v (go test ./deploy -run TestRenderedUpToDate -update writes it)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/%s differs from its template in render_test.go: edit the template, then go test ./deploy -run TestRenderedUpToDate -update", path)
		}
	}
}
