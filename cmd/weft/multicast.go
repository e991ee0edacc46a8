package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

func multicastCmd() *cobra.Command {
	var (
		cf      clientFlags
		dest    string
		format  string
		timeout time.Duration
	)
	c := &cobra.Command{
		Use:   "multicast --dest G[,G...] (--config FILE | --peers ID=ADDR,... --groups IDS;IDS...) PAYLOAD",
		Short: "Multicast one message and print its global timestamp",
		Long: `Multicast PAYLOAD to the destination groups and print the message's global
timestamp once a destination group delivered it. The cluster layout comes
from an agent's configuration file (--config; only cluster, groups and
nodes are used) or from flags: --peers lists node addresses, --groups the
members of each group (groups separated by ';', ids by ',').

The client picks a random id; it retries (same id) until --timeout.`,
		Example: `  weft multicast --config node0.toml --dest 0,2 hello
  weft multicast --peers 0=127.0.0.1:7100,1=127.0.0.1:7101 --groups '0;1' --dest 1 hello`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ccfg, err := cf.config(cmd)
			if err != nil {
				return err
			}
			ds, err := parseGroupList(dest, ccfg.Topology.NumGroups())
			if err != nil {
				return err
			}
			cl, err := client.New(ccfg)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := cl.Multicast(ctx, ds, []byte(args[0]))
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					return fmt.Errorf("no reply within %v (the message may still be delivered)%s", timeout, dialTrouble(cl.TransportStats()))
				}
				return err
			}
			if format == outJSON {
				return printJSON(cmd.OutOrStdout(), struct {
					ID      string         `json:"id"`
					GTS     wire.Timestamp `json:"gts"`
					Group   wire.GroupID   `json:"group"`
					Leader  wire.ProcID    `json:"leader"`
					Latency float64        `json:"latency_seconds"`
				}{res.ID.String(), res.GTS, res.Group, res.Leader, res.Latency.Seconds()})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "message %s delivered: gts %s (group %d, leader %d) in %v\n",
				res.ID, res.GTS, res.Group, res.Leader, res.Latency.Round(10*time.Microsecond))
			return nil
		},
	}
	cf.register(c.Flags())
	c.Flags().StringVar(&dest, "dest", "", "destination groups, e.g. 0,2 (required)")
	c.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "give up after this long")
	addOutput(c, &format, "")
	c.MarkFlagRequired("dest")
	return c
}

// parseGroupList parses "0,2" into sorted group ids below groups.
func parseGroupList(s string, groups int) ([]wire.GroupID, error) {
	var out []wire.GroupID
	for f := range strings.SplitSeq(s, ",") {
		g, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil || int(g) >= groups {
			return nil, fmt.Errorf("--dest %q: want group ids in [0,%d) separated by commas", s, groups)
		}
		out = append(out, wire.GroupID(g))
	}
	return out, nil
}

// parsePeerList parses "0=host:port,1=host:port".
func parsePeerList(s string) (map[wire.ProcID]string, error) {
	out := map[wire.ProcID]string{}
	for f := range strings.SplitSeq(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(f), "=")
		n, err := strconv.ParseUint(id, 10, 32)
		if !ok || err != nil || addr == "" {
			return nil, fmt.Errorf("--peers %q: want ID=HOST:PORT,...", s)
		}
		out[wire.ProcID(n)] = addr
	}
	return out, nil
}

// parseGroupLayout parses "0,1,2;3,4,5".
func parseGroupLayout(s string) (*amcast.Topology, error) {
	var gs [][]wire.ProcID
	for g := range strings.SplitSeq(s, ";") {
		var ms []wire.ProcID
		for f := range strings.SplitSeq(g, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("--groups %q: want ids separated by ',' and groups by ';'", s)
			}
			ms = append(ms, wire.ProcID(n))
		}
		gs = append(gs, ms)
	}
	return amcast.TopologyOf(gs)
}

// dialTrouble says why connections to the nodes failed, if they did: "" or
// "; connecting to the nodes failed: auth_failed x3, ...".
func dialTrouble(st transport.Stats) string {
	if len(st.DialFailures) == 0 {
		return ""
	}
	var parts []string
	for r, n := range st.DialFailures {
		parts = append(parts, fmt.Sprintf("%s x%d", r, n))
	}
	slices.Sort(parts)
	hint := ""
	switch {
	case st.DialFailures[transport.ReasonAuth] > 0:
		hint = " (the nodes and this client must use the same cluster key: cluster_key_file, --cluster-key-file)"
	case st.DialFailures[transport.ReasonTLS] > 0:
		hint = " (TLS on one side only: the nodes' tls_cert, this client's --tls-cert, --tls-key, --tls-ca)"
	case st.DialFailures[transport.ReasonCertificate]+st.DialFailures[transport.ReasonIdentity] > 0:
		hint = " (a certificate was refused: the refusing node's log says why)"
	}
	return "; connecting to the nodes failed: " + strings.Join(parts, ", ") + hint
}
