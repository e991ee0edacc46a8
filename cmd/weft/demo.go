package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/demo"
)

func demoCmd() *cobra.Command {
	var opt demo.Options
	c := &cobra.Command{
		Use:   "demo",
		Short: "Run weft-kv on a local cluster, kill a leader under load, check the bank's total, linearizability and every delivery",
		Long: `Start a local weft cluster (groups x replicas agent processes on loopback,
data in a temporary directory) running weft-kv (service = "kv", a shard
per group), run its workload with a progress line: a bank of accounts
spread over the shards, with transfers between accounts on different
shards (cross-shard transactions) and concurrent full-balance reads, and
single-key put/get/cas workers on a few hot keys. Kill the leader of one
shard with SIGKILL at 30% of the run and restart it at 60% (it recovers
from its WAL and rejoins). Then check that every full-balance read, and a
final one, saw the initial total, that the single-key history is
linearizable (porcupine), and every recorded delivery with the project's
checkers (validity, integrity, order, gts, quorum termination,
agreement), and print a summary as the last lines. Exits non-zero if any
check fails. --workload multicast runs raw multicast clients instead (to
1 or 2 random groups, every reply checked), on agents without a service.
It prints the URL of one agent's live dashboard (served by its admin
endpoint); --hold keeps the cluster up after the workload until Ctrl-C.
Nothing to set up: the agents are this binary, re-executed as 'weft agent'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opt.Out = cmd.OutOrStdout()
			if err := config.CheckLogFormat(opt.LogFormat); err != nil {
				return fmt.Errorf("--log-format: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, err := demo.Run(ctx, opt)
			if errors.Is(err, context.Canceled) {
				return errors.New("demo: interrupted")
			}
			if errors.Is(err, demo.ErrCheckFailed) {
				return errors.New("demo: a check failed (see above)")
			}
			return err
		},
	}
	f := c.Flags()
	f.DurationVar(&opt.Duration, "duration", 20*time.Second, "length of the workload (at least 3s)")
	f.IntVar(&opt.Groups, "groups", 3, "number of groups")
	f.IntVar(&opt.Replicas, "replicas", 3, "replicas per group")
	f.StringVar(&opt.Workload, "workload", demo.WorkloadKV, "what the clients do: kv (weft-kv: bank transfers and full-balance reads, single-key operations) or multicast (raw multicasts)")
	f.IntVar(&opt.Clients, "clients", 16, "concurrent closed-loop clients (kv: the bank's transfer workers)")
	f.IntVar(&opt.Accounts, "accounts", 30, "kv: the bank's accounts, spread over the shards")
	f.IntVar(&opt.KVWorkers, "kv-workers", 4, "kv: workers doing single-key operations on the hot keys")
	f.IntVar(&opt.Payload, "payload", 64, "multicast: message size in bytes")
	f.IntVar(&opt.KillGroup, "kill-group", 0, "group whose leader is killed and restarted (-1: none)")
	f.StringVar(&opt.Stop, "stop", demo.StopKill, "how that leader is stopped: kill (SIGKILL: a crash, detected by gossip) or term (SIGTERM: a planned stop, the leader hands over first)")
	f.StringVar(&opt.Dir, "dir", "", "working directory (default: a temporary directory, removed at the end)")
	f.BoolVar(&opt.Keep, "keep", false, "keep the working directory")
	f.StringVar(&opt.HistoryFile, "history", "", "also write the checked history to this file (JSON lines)")
	f.Uint64Var(&opt.Seed, "seed", 0, "workload seed (default: from the clock)")
	f.StringVar(&opt.LogFormat, "log-format", "text", "the agents' log format (their logs are in the working directory): text|json")
	f.BoolVar(&opt.Hold, "hold", false, "keep the cluster (and its dashboard) up after the workload until Ctrl-C, then check")
	f.BoolVar(&opt.TLS, "tls", false, "connect everything over mutual TLS with development certificates (default: a cluster key)")
	return c
}
