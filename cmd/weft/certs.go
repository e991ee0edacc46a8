package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

func certsCmd() *cobra.Command {
	var (
		path, peers, cluster, out string
		days                      int
		clientCA, force           bool
		clientID                  uint32
	)
	c := &cobra.Command{
		Use:   "certs --out DIR (--config FILE | --peers ID=ADDR,...)",
		Short: "Create development TLS certificates: a CA, one certificate per node, a client certificate",
		Long: `DEVELOPMENT TOOLING. Create an ECDSA P-256 certificate authority and, signed
by it, one certificate per node of the cluster (the URI SAN
weft://<cluster>/node/<id>, plus the host of the node's address as an IP or
DNS SAN) and a client certificate (weft://<cluster>/client: any client id,
or --client-id), in DIR. Keys are written with mode 0600. An existing CA in
DIR (ca.crt, ca.key) is reused, so nodes added later join the same CA;
other existing files are left alone unless --force.

With --client-ca, clients get a CA of their own (client-ca.crt, for the
nodes' tls_client_ca): a certificate it signs can never be a node's.

The CA key signs node identities: keep it off the nodes, and use your own
PKI (with the same URI SANs) in production. See docs/operations.md,
"Transport security".`,
		Example: `  weft certs --config node0.toml --out tls
  weft certs --peers 0=10.0.0.1:7100,1=10.0.0.2:7100 --cluster prod --out tls --client-ca`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nodes := map[wire.ProcID]string{}
			switch {
			case path != "" && peers != "":
				return errors.New("--config excludes --peers")
			case path != "":
				cfg, err := config.LoadCluster(path)
				if err != nil {
					return err
				}
				nodes = cfg.Peers()
				if !cmd.Flags().Changed("cluster") {
					cluster = cfg.Cluster
				}
			case peers != "":
				var err error
				if nodes, err = parsePeerList(peers); err != nil {
					return err
				}
			default:
				return errors.New("need --config FILE or --peers ID=ADDR,...")
			}
			if out == "" {
				return errors.New("--out DIR is required")
			}
			if days < 1 {
				return fmt.Errorf("--days %d: want at least 1", days)
			}
			var cid *wire.ProcID
			if cmd.Flags().Changed("client-id") {
				id := wire.ProcID(clientID)
				if _, isNode := nodes[id]; isNode {
					return fmt.Errorf("--client-id %d is a node's id", id)
				}
				cid = &id
			}
			return writeCerts(cmd.OutOrStdout(), certsPlan{dir: out, cluster: cluster, nodes: nodes, clientCA: clientCA,
				clientID: cid, force: force, validity: time.Duration(days) * 24 * time.Hour})
		},
	}
	f := c.Flags()
	f.StringVar(&path, "config", "", "configuration file with the cluster's nodes (cluster, nodes)")
	f.StringVar(&peers, "peers", "", "node addresses: ID=HOST:PORT,...")
	f.StringVar(&cluster, "cluster", config.DefaultCluster, "cluster name (default: the file's)")
	f.StringVar(&out, "out", "", "directory to write into (created, mode 0700)")
	f.IntVar(&days, "days", 365, "validity of the node and client certificates, in days (the CA gets 10 years)")
	f.BoolVar(&clientCA, "client-ca", false, "give clients a CA of their own (client-ca.crt, for tls_client_ca)")
	f.Uint32Var(&clientID, "client-id", 0, "bind the client certificate to this client id (default: any id)")
	f.BoolVar(&force, "force", false, "overwrite existing node and client files")
	return c
}

type certsPlan struct {
	dir, cluster string
	nodes        map[wire.ProcID]string
	clientCA     bool
	clientID     *wire.ProcID
	force        bool
	validity     time.Duration
}

// certWriter writes PEM files and remembers what it wrote, for the
// listing.
type certWriter struct {
	dir   string
	force bool
	rows  [][2]string // file, what
}

func (w *certWriter) write(name string, data []byte, mode fs.FileMode, what string) error {
	p := filepath.Join(w.dir, name)
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if w.force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(p, flags, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists (--force overwrites node and client files)", p)
	}
	if err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil { // an existing file keeps its mode otherwise
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	w.rows = append(w.rows, [2]string{p, what})
	return nil
}

// issue writes name.crt and name.key for spec.
func (w *certWriter) issue(ca *transport.DevCA, name string, spec transport.CertSpec, what string) error {
	is, err := ca.Issue(spec)
	if err != nil {
		return err
	}
	if err := w.write(name+".crt", is.CertPEM, 0o644, what); err != nil {
		return err
	}
	return w.write(name+".key", is.KeyPEM, 0o600, "its key")
}

// loadOrNewCA reuses name.crt and name.key in the directory, or creates
// them.
func (w *certWriter) loadOrNewCA(name, cn string, now time.Time) (*transport.DevCA, error) {
	crt, key := filepath.Join(w.dir, name+".crt"), filepath.Join(w.dir, name+".key")
	cb, cerr := os.ReadFile(crt)
	kb, kerr := os.ReadFile(key)
	switch {
	case cerr == nil && kerr == nil:
		ca, err := transport.LoadDevCA(cb, kb)
		if err != nil {
			return nil, fmt.Errorf("existing CA %s: %w", crt, err)
		}
		w.rows = append(w.rows, [2]string{crt, "(kept) " + cn})
		return ca, nil
	case !errors.Is(cerr, fs.ErrNotExist) || !errors.Is(kerr, fs.ErrNotExist):
		return nil, fmt.Errorf("%s and %s: want both or neither (%v; %v)", crt, key, cerr, kerr)
	}
	ca, err := transport.NewDevCA(cn, now.Add(-time.Hour), now.AddDate(10, 0, 0))
	if err != nil {
		return nil, err
	}
	f := w.force
	w.force = false // never overwrite a CA
	defer func() { w.force = f }()
	if err := w.write(name+".crt", ca.CertPEM, 0o644, cn); err != nil {
		return nil, err
	}
	return ca, w.write(name+".key", ca.KeyPEM, 0o600, "its key: signs identities, keep it off the nodes")
}

func writeCerts(out io.Writer, p certsPlan) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	w := &certWriter{dir: p.dir, force: p.force}
	now := time.Now()
	nodeCA, err := w.loadOrNewCA("ca", fmt.Sprintf("weft development node CA (%s)", p.cluster), now)
	if err != nil {
		return err
	}
	clientCA := nodeCA
	if p.clientCA {
		if clientCA, err = w.loadOrNewCA("client-ca", fmt.Sprintf("weft development client CA (%s)", p.cluster), now); err != nil {
			return err
		}
	}
	notBefore, notAfter := now.Add(-time.Hour), now.Add(p.validity)
	ids := make([]wire.ProcID, 0, len(p.nodes))
	for id := range p.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		var hosts []string
		if h, _, err := net.SplitHostPort(p.nodes[id]); err == nil && h != "" && h != "0.0.0.0" && h != "::" {
			hosts = append(hosts, h)
		}
		spec := transport.CertSpec{Cluster: p.cluster, Identity: transport.NodeIdentity(id), Hosts: hosts, NotBefore: notBefore, NotAfter: notAfter}
		what := fmt.Sprintf("node %d: %s %s", id, transport.NodeURI(p.cluster, id), strings.Join(hosts, " "))
		if err := w.issue(nodeCA, fmt.Sprintf("node-%d", id), spec, what); err != nil {
			return err
		}
	}
	cid := transport.AnyClientIdentity()
	if p.clientID != nil {
		cid = transport.Identity{Role: transport.RoleClient, ID: *p.clientID}
	}
	what := fmt.Sprintf("client: %s", transport.ClientURI(p.cluster, cid.ID, cid.AnyClient))
	if err := w.issue(clientCA, "client", transport.CertSpec{Cluster: p.cluster, Identity: cid, NotBefore: notBefore, NotAfter: notAfter}, what); err != nil {
		return err
	}

	fmt.Fprintf(out, "weft certs: development certificates for cluster %q, valid until %s\n", p.cluster, notAfter.UTC().Format(time.DateOnly))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, r := range w.rows {
		fmt.Fprintf(tw, "  %s\t%s\n", r[0], r[1])
	}
	tw.Flush()
	dir := p.dir
	fmt.Fprintf(out, "node N's config:  tls_cert = %q  tls_key = %q  tls_ca = %q",
		filepath.Join(dir, "node-N.crt"), filepath.Join(dir, "node-N.key"), filepath.Join(dir, "ca.crt"))
	if p.clientCA {
		fmt.Fprintf(out, "  tls_client_ca = %q", filepath.Join(dir, "client-ca.crt"))
	}
	fmt.Fprintf(out, "\nclients:          weft multicast --tls-cert %s --tls-key %s --tls-ca %s ...\n",
		filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.crt"))
	return nil
}
