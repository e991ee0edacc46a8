package main

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/wire"
)

func configCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Work with configuration files (check)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(configCheckCmd())
	return c
}

func configCheckCmd() *cobra.Command {
	var format string
	var client bool
	c := &cobra.Command{
		Use:   "check FILE [-o table|json] [--client]",
		Short: "Validate a configuration file as the agent would and print its effective values",
		Long: `Load FILE with the agent's own code (package config) and print every key's
effective value, defaults applied, or exit non-zero with the agent's error:
a syntax error or a value of the wrong type names the file and line
(FILE:LINE: key: message), an unknown key or an impossible value names the
key.

Loading already does what the agent does with files the configuration
names: cluster_key_file, admin_token_file and kv.token_file are read
(length; the token files' mode), and with TLS the certificate, key and CA
files are loaded,
the certificate must carry this node's identity (weft://<cluster>/node/<id>)
and verify against tls_ca now (not expired). config check adds what the
agent finds out only as it starts, where that is cheap and leaves nothing behind:

  data_dir   exists and is a directory files can be created in (a probe
             file is created and removed), or can be created (its nearest
             existing ancestor is such a directory); if it holds an
             IDENTITY, it is this member's (cluster, id, protocol) and its
             write-ahead log is there; with initial_state = "existing" it
             is not empty: the refusals the agent would stop with (without
             --rejoin). A member's directory that holds state while
             initial_state is still "new" gets a hint to set "existing".

Not checked: whether the ports are free, whether the peers' names resolve
and answer (in a container network or Kubernetes they resolve only inside
it), the bootstrap probe, delivery_log's directory.

The data_dir checks run as the user running config check: run it as the
agent's user (the systemd unit's ExecStartPre does).

--client checks a client's file (weft multicast/kv --config): only cluster,
groups and nodes are required; the TLS files and data_dir are not looked at
(a client has its own certificate and no data).`,
		Example: `  weft config check /etc/weft/weft.toml
  weft config check node0.toml -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := checkConfig(args[0], client)
			if err != nil {
				return err
			}
			return emit(cmd.OutOrStdout(), format, rep, writeConfigReport)
		},
	}
	c.Flags().BoolVar(&client, "client", false, "check a client's file: only cluster, groups and nodes")
	addOutput(c, &format, "")
	return c
}

// configReport is what config check prints.
type configReport struct {
	File string `json:"file"`
	Kind string `json:"kind"` // "agent" or "client"
	// Checks are the checks beyond parsing, each with its result.
	Checks []configCheck `json:"checks"`
	// Values are the effective values, in the file's structure and the
	// Config's field order.
	Values table `json:"values"`
}

type configCheck struct {
	What   string `json:"what"`
	Result string `json:"result"`
}

func checkConfig(path string, client bool) (*configReport, error) {
	load, kind := config.Load, "agent"
	if client {
		load, kind = config.LoadCluster, "client"
	}
	cfg, err := load(path)
	if err != nil {
		return nil, err
	}
	rep := &configReport{File: path, Kind: kind, Values: effectiveValues(cfg)}
	add := func(what, res string) { rep.Checks = append(rep.Checks, configCheck{what, res}) }
	topo, err := cfg.Topology()
	if err != nil {
		return nil, fmt.Errorf("config %s: groups: %w", path, err)
	}
	add("layout", fmt.Sprintf("%d groups, %d nodes, protocol %s", len(cfg.Groups), topo.NumReplicas(), cfg.Protocol))
	if client {
		return rep, nil
	}
	g, _ := topo.GroupOf(cfg.ID) // validated: the id is in a group
	add("node", fmt.Sprintf("%d, group %d, listens on %s, clients use %s", cfg.ID, g, cfg.Listen, cfg.ClientAddr))
	add("security", cfg.Security())
	if t := cfg.TLS(); t != nil {
		leaf := t.Certificate.Leaf
		if leaf == nil {
			if leaf, err = x509.ParseCertificate(t.Certificate.Certificate[0]); err != nil { // loaded and verified by Load
				return nil, err
			}
		}
		add("tls_cert", fmt.Sprintf("node %d's certificate, verifies against %s, valid until %s", cfg.ID, cfg.TLSCA, leaf.NotAfter.UTC().Format(time.RFC3339)))
	}
	dd, err := node.InspectDataDir(cfg.DataDir, cfg.Cluster, cfg.ID, cfg.Protocol, cfg.InitialState)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	add("data_dir", dd)
	return rep, nil
}

// entry is one key of a table: a scalar, a list, or a table.
type entry struct {
	Key string
	Val any
}

// table is a TOML table whose JSON keeps the keys' order.
type table []entry

func (t table) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range t {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.Key)
		v, err := json.Marshal(e.Val)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// effectiveValues renders every key of cfg by walking Config's toml tags,
// so that a key added to the config package shows up here without a
// change. Durations print as the file writes them ("10ms"). Keys whose
// zero value stands for a default computed elsewhere are filled in: the
// gossip profile's interval and threshold, the default seeds.
func effectiveValues(cfg *config.Config) table {
	t := tomlTable(reflect.ValueOf(*cfg))
	if mc := cfg.Membership(); mc != nil {
		g, _ := t.get("gossip").(table)
		g = g.with("interval", mc.Interval.String()).with("phi_threshold", mc.FD.Threshold)
		if len(cfg.Gossip.Seeds) == 0 {
			// The node's default (node/gossip.go): the first member of
			// every group.
			seeds := make([]wire.ProcID, len(cfg.Groups))
			for i, ms := range cfg.Groups {
				seeds[i] = ms[0]
			}
			g = g.with("seeds", seeds)
		}
		t = t.with("gossip", g)
	}
	return t
}

func tomlTable(v reflect.Value) table {
	var t table
	typ := v.Type()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		t = append(t, entry{name, tomlValue(v.Field(i))})
	}
	return t
}

func tomlValue(v reflect.Value) any {
	switch x := v.Interface().(type) {
	case time.Duration:
		return x.String()
	case map[string]string: // [nodes]: ids in numeric order
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			ia, _ := strconv.ParseUint(a, 10, 64)
			ib, _ := strconv.ParseUint(b, 10, 64)
			return int(ia) - int(ib)
		})
		t := make(table, len(keys))
		for i, k := range keys {
			t[i] = entry{k, x[k]}
		}
		return t
	}
	if v.Kind() == reflect.Struct {
		return tomlTable(v)
	}
	return v.Interface()
}

// get returns the value of key, or nil.
func (t table) get(key string) any {
	for _, e := range t {
		if e.Key == key {
			return e.Val
		}
	}
	return nil
}

// with returns t with key set to val (replaced in place, or appended).
func (t table) with(key string, val any) table {
	for i := range t {
		if t[i].Key == key {
			t[i].Val = val
			return t
		}
	}
	return append(t, entry{key, val})
}

// writeConfigReport prints the checks, then one row per key (tables
// flattened: gossip.interval, nodes.3), values as TOML writes them.
func writeConfigReport(w io.Writer, r *configReport) {
	fmt.Fprintf(w, "%s: valid (%s configuration)\n", r.File, r.Kind)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "  %s\t%s\n", c.What, c.Result)
	}
	tw.Flush()
	fmt.Fprintln(w, "\neffective values (defaults applied):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var rows func(prefix string, t table)
	rows = func(prefix string, t table) {
		for _, e := range t {
			switch v := e.Val.(type) {
			case table:
				rows(prefix+e.Key+".", v)
			default:
				b, _ := json.Marshal(v) // TOML's spelling of strings, numbers, booleans and arrays
				fmt.Fprintf(tw, "  %s%s\t%s\n", prefix, e.Key, b)
			}
		}
	}
	rows("", r.Values)
	tw.Flush()
}
