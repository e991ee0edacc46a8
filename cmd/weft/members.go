package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/wire"
)

// adminFlags selects the node an operator command talks to (its admin
// endpoint directly, or the one named in its agent configuration) and the
// admin token to send (--token-file, or the configuration's
// admin_token_file).
type adminFlags struct {
	admin, path, tokenFile string
	timeout                time.Duration
}

func (a *adminFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&a.admin, "admin", "", "the node's admin endpoint (host:port)")
	c.Flags().StringVar(&a.path, "config", "", "the node's agent configuration (its admin and admin_token_file keys are used)")
	c.Flags().StringVar(&a.tokenFile, "token-file", "", "file holding the admin token (mode 0600; default: the configuration's admin_token_file)")
	c.Flags().DurationVar(&a.timeout, "timeout", 5*time.Second, "request timeout")
}

// client returns a client of the selected node's admin endpoint.
func (a *adminFlags) client() (*node.AdminClient, error) {
	c := &node.AdminClient{HTTP: http.DefaultClient}
	switch {
	case a.admin != "" && a.path != "":
		return nil, errors.New("give --admin or --config, not both")
	case a.admin != "":
		c.Addr = a.admin
	case a.path != "":
		cfg, err := config.Load(a.path)
		if err != nil {
			return nil, err
		}
		if cfg.Admin == "" {
			return nil, fmt.Errorf("%s: no admin endpoint configured (key admin)", a.path)
		}
		c.Addr, c.Token = cfg.Admin, cfg.AdminToken()
	default:
		return nil, errors.New("which node? give --admin host:port or --config FILE")
	}
	if a.tokenFile != "" {
		tok, err := config.ReadAdminToken(a.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		c.Token = tok
	}
	return c, nil
}

// post sends an operation to the node's admin endpoint and prints its
// answer.
func (a *adminFlags) post(cmd *cobra.Command, path string, body any) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx(cmd.Context())
	defer cancel()
	out, err := c.Post(ctx, path, body)
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
	var format string
	c := &cobra.Command{
		Use:   "members (--admin ADDR | --config FILE) [-o table|json]",
		Short: "Show the cluster as one node's gossip sees it (like nodetool status)",
		Long: `Print one row per member of the cluster as the node's gossip view has it:
id, client address, group, role and ballot (gossiped soft state), status
and the failure detector's phi for that member.

Status is UP (heartbeats progressing), DOWN (convicted by the phi-accrual
detector), JOINING (known, not judged yet), LEFT (departed with weft
leave), REMOVED (weft assassinate) or UNKNOWN (configured, never heard
of). Roles and ballots are what each member last published; a DOWN
member's may be stale.

OFFSET is the member's clock minus the node's, estimated from gossip's
exchanges (NTP-style); "!" marks one beyond gossip.clock_skew_threshold.
SEEDS is "ok" when the member's seed list (its gossiped digest) is the
majority's among the live members, "DIFFERS!" with the digest when not.
The table ends with a line for each of these warnings; -o json has them
as clock_offset_seconds, clock_skewed, seed_digest and seed_mismatch.`,
		Example: `  weft members --admin 127.0.0.1:7200
  weft members --config node0.toml
  weft members --admin 10.0.0.1:7200 --token-file admin.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return adminGet(cmd, &af, format, (*node.AdminClient).Members, node.WriteMembers)
		},
	}
	af.register(c)
	addOutput(c, &format, "json")
	return c
}

func leaveCmd() *cobra.Command {
	var af adminFlags
	c := &cobra.Command{
		Use:   "leave (--admin ADDR | --config FILE)",
		Short: "Make a node leave the cluster gracefully",
		Long: `Ask a node to leave, in three steps: it announces STATUS=LEAVING in gossip;
if it leads its group, it hands its leadership to the next live member (a
leadership-transfer step: no failure detector, no election timeout, and the
multicasts that reach it meanwhile are forwarded to the new leader, so none
fails) and waits until the group has a new leader; then it announces
STATUS=LEFT for the profile's announce time and its agent stops. Its peers
mark it departed at once and evict its record after the profile's LEFT
expiry. The command prints the hand-over's outcome and how long it took.

Group composition does not change: the node still counts as a replica of
its group, now a failed one. Restart its agent to bring it back.

The node must have an admin token (admin_token_file); this command sends it
(--token-file, or the admin_token_file of --config).`,
		Example: `  weft leave --config node4.toml
  weft leave --admin 127.0.0.1:7204 --token-file admin.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return af.post(cmd, "/leave", struct{}{})
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
TARGET comes back with a new generation.

The node must have an admin token (admin_token_file); this command sends it
(--token-file, or the admin_token_file of --config).`,
		Example: `  weft assassinate --config node0.toml 127.0.0.1:7104
  weft assassinate --admin 127.0.0.1:7200 --token-file admin.token 4`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req node.AssassinateRequest
			if _, _, err := net.SplitHostPort(args[0]); err == nil {
				req.Addr = args[0]
			} else if id, err := strconv.ParseUint(args[0], 10, 32); err == nil {
				p := wire.ProcID(id)
				req.ID = &p
			} else {
				return fmt.Errorf("TARGET %q: want a member's host:port address or its id", args[0])
			}
			return af.post(cmd, "/assassinate", req)
		},
	}
	af.register(c)
	return c
}

// adminGet reads one report from the selected node's admin endpoint with
// get and prints it: as JSON with -o json, else with write.
func adminGet[T any](cmd *cobra.Command, a *adminFlags, format string,
	get func(*node.AdminClient, context.Context) (T, error), write func(io.Writer, T)) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx, cancel := a.ctx(cmd.Context())
	defer cancel()
	v, err := get(c, ctx)
	if err != nil {
		return err
	}
	return emit(cmd.OutOrStdout(), format, v, write)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
