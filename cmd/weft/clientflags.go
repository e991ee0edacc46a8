package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/transport"
)

// clientFlags are the flags of the commands that act as a client of a
// cluster (multicast, kv): the cluster layout from an agent's
// configuration file (--config; only cluster, groups, nodes, the cluster
// key and tls_ca are used) or from --peers and --groups, and the client's
// credentials.
type clientFlags struct {
	path, peers, groups, cluster string
	keyFile                      string
	tlsCert, tlsKey, tlsCA       string
}

// register defines the flags on fs.
func (f *clientFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.path, "config", "", "configuration file with the cluster layout")
	fs.StringVar(&f.peers, "peers", "", "node addresses: ID=HOST:PORT,...")
	fs.StringVar(&f.groups, "groups", "", "group members: IDS;IDS;... (e.g. '0,1,2;3,4,5')")
	fs.StringVar(&f.cluster, "cluster", config.DefaultCluster, "cluster name (default: the file's)")
	fs.StringVar(&f.keyFile, "cluster-key-file", "", "with --peers: the cluster key file (with --config: the file's cluster_key_file)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "client certificate (PEM) for clusters that use mutual TLS")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the client certificate's key (PEM)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "CA bundle the nodes' certificates chain to (default with --config: the file's tls_ca)")
}

// config builds the client configuration the flags describe.
func (f *clientFlags) config(cmd *cobra.Command) (client.Config, error) {
	ccfg := client.Config{Cluster: f.cluster}
	fileCA := "" // the config file's tls_ca
	switch {
	case f.path != "" && (f.peers != "" || f.groups != "" || f.keyFile != ""):
		return client.Config{}, errors.New("--config excludes --peers, --groups and --cluster-key-file")
	case f.path != "":
		cfg, err := config.LoadCluster(f.path)
		if err != nil {
			return client.Config{}, err
		}
		if ccfg, err = clusterClientConfig(cfg); err != nil {
			return client.Config{}, err
		}
		fileCA = cfg.TLSCA
		if fileCA != "" && f.tlsCert == "" {
			return client.Config{}, fmt.Errorf("the cluster uses TLS (tls_ca in %s): pass a client certificate with --tls-cert and --tls-key (weft certs writes client.crt and client.key)", f.path)
		}
		if cmd.Flags().Changed("cluster") {
			ccfg.Cluster = f.cluster
		}
	case f.peers != "" && f.groups != "":
		var err error
		if f.keyFile != "" {
			if ccfg.ClusterKey, err = config.ReadClusterKey(f.keyFile); err != nil {
				return client.Config{}, fmt.Errorf("--cluster-key-file: %w", err)
			}
		}
		if ccfg.Nodes, err = parsePeerList(f.peers); err != nil {
			return client.Config{}, err
		}
		if ccfg.Topology, err = parseGroupLayout(f.groups); err != nil {
			return client.Config{}, err
		}
	default:
		return client.Config{}, errors.New("need --config FILE, or --peers and --groups")
	}
	if f.tlsCert != "" || f.tlsKey != "" || f.tlsCA != "" {
		if f.tlsCA == "" {
			f.tlsCA = fileCA
		}
		if f.tlsCert == "" || f.tlsKey == "" || f.tlsCA == "" {
			return client.Config{}, errors.New("--tls-cert, --tls-key and --tls-ca (or the config file's tls_ca) go together")
		}
		var err error
		if ccfg.TLS, err = transport.LoadTLS(f.tlsCert, f.tlsKey, f.tlsCA, ""); err != nil {
			return client.Config{}, fmt.Errorf("TLS: %w", err)
		}
	}
	return ccfg, nil
}

// clusterClientConfig returns the configuration of a client of cfg's
// cluster: its name, layout, addresses and cluster key (not TLS: a
// client's certificate is not a node's).
func clusterClientConfig(cfg *config.Config) (client.Config, error) {
	topo, err := cfg.Topology()
	if err != nil {
		return client.Config{}, err
	}
	return client.Config{Cluster: cfg.Cluster, Topology: topo, Nodes: cfg.Peers(), ClusterKey: cfg.ClusterKey()}, nil
}
