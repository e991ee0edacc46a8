package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/storage/wal"
)

func agentCmd() *cobra.Command {
	var path string
	var rejoin bool
	var logFormat, cpuProfile string
	c := &cobra.Command{
		Use:   "agent --config FILE [--rejoin] [--log-format text|json]",
		Short: "Run one weft node until SIGINT or SIGTERM",
		Long: `Run one weft node (a replica of the configured protocol: WbCast by default,
or the FT-Skeen, FastCast or Skeen baselines) as configured in a TOML file;
see config/sample.toml for every key and its default. The node recovers from
its write-ahead log in data_dir if there is one. It stops cleanly on SIGINT
or SIGTERM, and exits non-zero if its storage fails. A leader that gets the
signal first hands its leadership to the next live member of its group (no
election timeout, no failed multicast; a second signal stops at once);
weft leave also announces the departure in gossip (docs/operations.md,
"Leaving").

data_dir is locked (data_dir/LOCK) while the agent runs, and records the
cluster, the member id and an incarnation (data_dir/IDENTITY): the agent
refuses a data_dir another agent holds, or that belongs to another cluster
or member, and refuses to start an existing member on an empty data_dir (a
lost disk, or a wrong path; see initial_state and bootstrap_probe in
config/sample.toml). --rejoin starts a member whose data_dir was lost:
WbCast brings it back as a non-voting amnesiac that never acks, leads or
delivers until it has rejoined its group and installed a snapshot of the
group's state (docs/disk-loss.md); the other protocols refuse it.

Logs go to stderr as text (key=value) lines, or with --log-format json (or
log_format = "json") as one JSON object a line. The admin endpoint (admin)
serves /metrics (Prometheus), /healthz, /readyz and, with the admin token,
/debug/pprof (docs/operations.md, "Metrics and health"). With service = "kv",
[kv] http serves weft-kv's HTTP/JSON API (docs/kv-http.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("log-format") {
				if err := config.CheckLogFormat(logFormat); err != nil {
					return fmt.Errorf("--log-format: %w", err)
				}
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			return runAgent(cmd.Context(), path, rejoin, logFormat)
		},
	}
	c.Flags().StringVar(&path, "config", "", "agent configuration file (TOML)")
	c.Flags().BoolVar(&rejoin, "rejoin", false, "this member lost its data_dir: start it inert (wbcast only; docs/disk-loss.md)")
	c.Flags().StringVar(&logFormat, "log-format", "", "log format: text|json (default: the configuration's log_format, text)")
	c.Flags().StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the whole run to this file (go tool pprof; weft bench --cpu-profile)")
	c.MarkFlagRequired("config")
	return c
}

// startCPUProfile profiles the process until the returned function runs.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func runAgent(ctx context.Context, path string, rejoin bool, logFormat string) error {
	procs := setAgentProcs(os.Getenv("GOMAXPROCS"))
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	if logFormat == "" {
		logFormat = cfg.LogFormat
	}
	level, _ := config.ParseLevel(cfg.LogLevel) // validated
	logger, err := config.NewLogger(os.Stderr, logFormat, level)
	if err != nil {
		return err
	}
	topo, err := cfg.Topology()
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	compact := cfg.CompactBytes
	if compact == 0 {
		compact = -1 // node: negative disables
	}
	sm, err := serviceOf(cfg, topo)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	left := make(chan struct{}) // closed by OnLeft (weft leave)
	var leftOnce sync.Once
	n, err := node.New(node.Config{
		StateMachine:    sm,
		Cluster:         cfg.Cluster,
		ClusterKey:      cfg.ClusterKey(),
		TLS:             cfg.TLS(),
		ID:              cfg.ID,
		Topology:        topo,
		Protocol:        cfg.Protocol,
		Peers:           cfg.Peers(),
		Listen:          cfg.Listen,
		DataDir:         cfg.DataDir,
		InitialState:    cfg.InitialState,
		BootstrapProbe:  cfg.BootstrapProbe,
		Rejoin:          rejoin,
		Tick:            cfg.Tick,
		ElectionTicks:   cfg.ElectionTicks,
		HeartbeatTicks:  cfg.HeartbeatTicks,
		RetryTicks:      cfg.RetryTicks,
		SessionTicks:    int(cfg.SessionLease / cfg.Tick),
		CollectAfterAll: cfg.CollectAfterAll(),
		// RawSync: the loop waits for its sync anyway, and with one P
		// (agentProcs) a raw fdatasync spares the hand-off of the P to
		// another thread and back around each one (docs/durability.md).
		WAL:          wal.Options{SegmentSize: cfg.WALSegmentSize, UnsafeNoSync: cfg.UnsafeNoFsync, RawSync: true},
		CompactBytes: compact,
		Logger:       logger,
		Gossip:       cfg.Membership(),
		ClientAddr:   cfg.ClientAddr,
		OnLeft: func() {
			logger.Info("left the cluster: stopping")
			leftOnce.Do(func() { close(left) })
		},

		// The deliveries log: off unless delivery_log is set.
		DeliveryLog:         cfg.DeliveryLog,
		DeliveryLogMaxBytes: cfg.DeliveryLogMaxBytes,
		DeliveryLogFiles:    cfg.DeliveryLogFiles,

		// [limits]: byte budgets and admission control.
		InboxBytes:       cfg.Limits.InboxBytes,
		PeerQueueBytes:   int(cfg.Limits.PeerQueueBytes),
		ClientInboxBytes: cfg.Limits.ClientInboxBytes,
		ClientInboxSize:  cfg.Limits.ClientInboxMessages,
		ClientShare:      cfg.Limits.ClientShare,
		ClientQueueBytes: int(cfg.Limits.ClientQueueBytes),
		MaxConns:         cfg.Limits.MaxConns,
		MaxConnsPerHost:  cfg.Limits.MaxConnsPerHost,
		HandshakeTimeout: cfg.Limits.HandshakeTimeout,
		IdleTimeout:      cfg.Limits.IdleTimeout,
		Reads:            node.ReadLimits{MaxPending: cfg.Limits.ReadsPending, MaxPerClient: cfg.Limits.ReadsPerClient, MaxBytes: cfg.Limits.ReadBytes},
		RSM:              rsm.Config{MaxPendingBytes: cfg.Limits.HeldBytes},
	})
	if err != nil {
		return err
	}
	attrs := []any{"id", uint32(cfg.ID), "protocol", cfg.Protocol, "service", cfg.Service, "listen", n.Addr().String(), "data_dir", cfg.DataDir, "pid", os.Getpid(),
		"security", cfg.Security(), "gomaxprocs", procs}
	if cfg.Admin != "" {
		a, err := node.ServeAdmin(n, cfg.Admin, node.AdminOptions{Token: cfg.AdminToken(), Logger: logger})
		if err != nil {
			n.Close()
			return err
		}
		defer a.Close()
		attrs = append(attrs, "admin", a.Addr().String())
	}
	var api *kvHTTP
	if cfg.KV.HTTP != "" {
		if api, err = serveKVHTTP(cfg, logger); err != nil {
			n.Close()
			return err
		}
		attrs = append(attrs, "kv_http", api.srv.Addr().String())
	}
	st := n.Status()
	attrs = append(attrs, "role", st.Role, "ballot", st.Ballot.String(), "incarnation", st.Incarnation)
	if st.Amnesiac {
		attrs = append(attrs, "amnesiac", true)
	}
	logger.Info("agent running", attrs...)
	if cfg.UnsafeNoFsync {
		logger.Warn("unsafe_no_fsync = true: the WAL is not fsynced; a power loss or kernel crash can lose acknowledged messages and break the order (benchmarks only)")
	}
	if cfg.Security() == "none" && !config.IsLoopback(cfg.Listen) {
		logger.Warn("insecure = true: listening off loopback with neither TLS nor a cluster key; anyone who can reach this port can join as a node", "listen", cfg.Listen)
	}
	select {
	case <-ctx.Done():
		// The default action again: a second signal stops at once.
		stop()
		logger.Info("stopping")
		handOverOnStop(n, logger, 2*time.Duration(cfg.ElectionTicks)*cfg.Tick)
	case <-left:
	case <-n.Done():
	}
	// The API first: its requests end while the node can still answer.
	if api != nil {
		if err := api.Close(); err != nil {
			logger.Warn("kv http api: stopping", "err", err)
		}
	}
	if err := n.Close(); err != nil {
		return fmt.Errorf("node %d: %w", cfg.ID, err)
	}
	return nil
}

// handOverOnStop hands a leader's leadership over before the agent stops
// (node.HandOver): its group elects without waiting for the failure
// detector, and the multicasts in flight go on at the new leader. A node
// that does not lead returns at once. It waits at most bound (two election
// timeouts, at least 500ms): a hand-over takes milliseconds, and when a
// whole cluster stops at once its members cannot take over (they are
// stopping too), so the wait would only delay the stop.
func handOverOnStop(n *node.Node, logger *slog.Logger, bound time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), max(bound, 500*time.Millisecond))
	defer cancel()
	d, err := n.HandOver(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		logger.Warn("stopping before the hand-over completed (no member took over in time)")
	case err != nil:
		logger.Warn("hand-over on stop", "err", err)
	case d.HandedOver:
		logger.Info("handed leadership over", "to", uint32(d.Leader), "took", d.Took)
	case d.Led:
		logger.Warn("stopping without handing leadership over", "reason", d.Err)
	}
}
