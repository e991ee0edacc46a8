package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/node"
)

// adminFlags selects the node an operator command talks to: its admin
// endpoint directly, or the one named in its agent configuration.
type adminFlags struct {
	admin, path string
	timeout     time.Duration
}

func (a *adminFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&a.admin, "admin", "", "the node's admin endpoint (host:port)")
	c.Flags().StringVar(&a.path, "config", "", "the node's agent configuration (its admin key is used)")
	c.Flags().DurationVar(&a.timeout, "timeout", 5*time.Second, "request timeout")
}

func (a *adminFlags) addr() (string, error) {
	switch {
	case a.admin != "" && a.path != "":
		return "", errors.New("give --admin or --config, not both")
	case a.admin != "":
		return a.admin, nil
	case a.path != "":
		cfg, err := config.Load(a.path)
		if err != nil {
			return "", err
		}
		if cfg.Admin == "" {
			return "", fmt.Errorf("%s: no admin endpoint configured (key admin)", a.path)
		}
		return cfg.Admin, nil
	}
	return "", errors.New("which node? give --admin host:port or --config FILE")
}

// post sends an operation to the node's admin endpoint and prints its
// answer.
func (a *adminFlags) post(cmd *cobra.Command, path string) error {
	addr, err := a.addr()
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx(cmd.Context())
	defer cancel()
	out, err := node.PostAdmin(ctx, http.DefaultClient, addr, path)
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), out)
	return nil
}

func (a *adminFlags) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, a.timeout)
}

func membersCmd() *cobra.Command {
	var af adminFlags
	var asJSON bool
	c := &cobra.Command{
		Use:   "members (--admin ADDR | --config FILE)",
		Short: "Show the cluster as one node's gossip sees it (like nodetool status)",
		Long: `Print one row per member of the cluster as the node's gossip view has it:
id, client address, group, role and ballot (gossiped soft state), status
and the failure detector's phi for that member.

Status is UP (heartbeats progressing), DOWN (convicted by the phi-accrual
detector), JOINING (known, not judged yet), LEFT (departed with weft
leave), REMOVED (weft assassinate) or UNKNOWN (configured, never heard
of). Roles and ballots are what each member last published; a DOWN
member's may be stale.`,
		Example: `  weft members --admin 127.0.0.1:7200
  weft members --config node0.toml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, err := af.addr()
			if err != nil {
				return err
			}
			ctx, cancel := af.ctx(cmd.Context())
			defer cancel()
			ms, err := node.FetchMembers(ctx, http.DefaultClient, addr)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), ms)
			}
			node.WriteMembers(cmd.OutOrStdout(), ms)
			return nil
		},
	}
	af.register(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func leaveCmd() *cobra.Command {
	var af adminFlags
	c := &cobra.Command{
		Use:   "leave (--admin ADDR | --config FILE)",
		Short: "Make a node leave the cluster gracefully",
		Long: `Ask a node to leave: it announces STATUS=LEFT in gossip for the profile's
announce time, then its agent stops. Its peers mark it down at once (if it
led its group, the next member takes over without waiting for the failure
detector), and evict its record after the profile's LEFT expiry.

Group composition does not change: the node still counts as a replica of
its group, now a failed one. Restart its agent to bring it back.`,
		Example: `  weft leave --admin 127.0.0.1:7204`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return af.post(cmd, "/leave")
		},
	}
	af.register(c)
	return c
}

func assassinateCmd() *cobra.Command {
	var af adminFlags
	c := &cobra.Command{
		Use:   "assassinate (--admin ADDR | --config FILE) TARGET",
		Short: "Remove a dead node's record from gossip for good",
		Long: `Ask a live node to assassinate TARGET, a member's address (host:port, as
weft members shows it) or its id. The operator's last resort for a node
that is gone and will not leave: the node watches TARGET for the
profile's assassinate window; if its heartbeat moves, the operation is
refused (the node's log says so); otherwise it publishes REMOVED for
TARGET, which replaces every copy of its record. A later restart of
TARGET comes back with a new generation.`,
		Example: `  weft assassinate --admin 127.0.0.1:7200 127.0.0.1:7104`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if _, _, err := net.SplitHostPort(args[0]); err == nil {
				q.Set("addr", args[0])
			} else if _, err := strconv.ParseUint(args[0], 10, 32); err == nil {
				q.Set("id", args[0])
			} else {
				return fmt.Errorf("TARGET %q: want a member's host:port address or its id", args[0])
			}
			return af.post(cmd, "/assassinate?"+q.Encode())
		},
	}
	af.register(c)
	return c
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
