package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/node"
)

func statusCmd() *cobra.Command {
	var af adminFlags
	var format string
	var ready bool
	c := &cobra.Command{
		Use:   "status (--admin ADDR | --config FILE) [-o table|json] [--ready]",
		Short: "Show one node: role, ballot, readiness and lag, retained state, fsync p99, queue depths",
		Long: `Ask one node's admin endpoint for its status and print it: role and ballot,
the leader it knows and whether it is ready (GET /readyz: a member of a
group with a known leader, caught up; otherwise the reason), how far it
lags its leader's deliveries, the protocol state it retains in memory, its
deliveries, the WAL's group commits and their p99 since start, and the
depths of its queues: the peer and client inboxes and the send queue to
each peer. -o json prints the endpoint's whole report (GET /status).

--ready prints the status and then exits non-zero unless the node is ready:
a health check for containers and service managers whose admin endpoint
stays on loopback (Docker HEALTHCHECK, a Kubernetes exec probe; see
docs/deploy.md).`,
		Example: `  weft status --admin 127.0.0.1:7200
  weft status --config node0.toml -o json
  weft status --admin 127.0.0.1:7200 --ready`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rd node.Readiness
			get := func(c *node.AdminClient, ctx context.Context) (node.Report, error) {
				r, err := c.Report(ctx)
				rd = r.Readiness
				return r, err
			}
			if err := adminGet(cmd, &af, format, get, writeStatus); err != nil {
				return err
			}
			if ready && !rd.Ready {
				return fmt.Errorf("not ready: %s (%s)", rd.Reason, rd.Detail)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&ready, "ready", false, "exit non-zero unless the node is ready (a health check)")
	af.register(c)
	addOutput(c, &format, "")
	return c
}

// writeStatus prints a node's report as a two-column table.
func writeStatus(w io.Writer, r node.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, f string, args ...any) { fmt.Fprintf(tw, "%s\t"+f+"\n", append([]any{k}, args...)...) }
	row("node", "p%d of group %d (%s), pid %d, incarnation %d", r.ID, r.Group, r.Protocol, r.Pid, r.Incarnation)
	row("role", "%s", r.Role)
	ballot := r.Ballot.String()
	if r.CBallot != r.Ballot {
		ballot += " (state of " + r.CBallot.String() + ")"
	}
	row("ballot", "%s", ballot)
	rd := r.Readiness
	leader := "unknown"
	if rd.LeaderKnown {
		leader = fmt.Sprintf("p%d", rd.Leader)
	}
	row("leader", "%s", leader)
	if rd.Ready {
		row("ready", "yes")
	} else {
		row("ready", "no: %s (%s)", rd.Reason, rd.Detail)
	}
	row("lag", "%s (grace %s)", seconds(rd.LagSeconds), seconds(rd.GraceSeconds))
	row("retained", "%d entries", r.Retained)
	row("delivered", "%d (max gts %v)", r.Stats.Delivered, r.MaxDelivered)
	row("wal", "records [%d, %d], %d group commits, fsync p99 %s", r.WALFirst, r.WALLast, r.Fsyncs, seconds(r.FsyncP99Seconds))
	s := r.Stats
	row("peer inbox", "%d messages, %s (peak %s)", s.InboxQueued, bytesIEC(s.InboxBytes), bytesIEC(s.InboxPeakBytes))
	row("client inbox", "%d messages, %s (peak %s); shed %d full, %d over share", s.ClientQueued, bytesIEC(s.ClientInboxBytes),
		bytesIEC(s.ClientInboxPeakBytes), s.ClientShed, s.ClientShedShare)
	for _, p := range slices.Sorted(maps.Keys(r.PeerQueues)) {
		q := r.PeerQueues[p]
		conn := "connected"
		if !q.Connected {
			conn = "DISCONNECTED"
		}
		row(fmt.Sprintf("send queue p%d", p), "%d messages, %s (peak %s), %s", q.Messages, bytesIEC(q.Bytes), bytesIEC(q.PeakBytes), conn)
	}
	if !r.LeaderSince.IsZero() {
		row("leading since", "%s", r.LeaderSince.Format(time.RFC3339))
	}
	tw.Flush()
}

func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Microsecond).String()
}

func bytesIEC(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return strings.TrimSpace(fmt.Sprintf("%d B", b))
}
