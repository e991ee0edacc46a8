package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Limits defaults (the node's and the transport's own defaults; a test in
// package node keeps them equal) and bounds.
const (
	DefaultInboxBytes          = 64 << 20
	DefaultPeerQueueBytes      = 8 << 20
	DefaultClientInboxBytes    = 8 << 20
	DefaultClientInboxMessages = 1024
	DefaultClientShare         = 64
	DefaultClientQueueBytes    = 256 << 10
	DefaultMaxConns            = 1024
	DefaultMaxConnsPerHost     = 256
	DefaultHandshakeTimeout    = 5 * time.Second
	DefaultIdleTimeout         = time.Minute
	// The service's bounds (node.ReadLimits, rsm.Config; a test in package
	// node keeps them equal).
	DefaultReadsPending   = 4096
	DefaultReadsPerClient = 256
	DefaultReadBytes      = 64 << 20
	DefaultHeldBytes      = 64 << 20
	// MinBudget is the smallest byte budget; MaxBudget the largest.
	MinBudget = 64 << 10
	MaxBudget = 1 << 40
	// MinIdleTimeout is three of the pings every weft process sends on an
	// idle connection (every 5 s), so a live client is never cut.
	MinIdleTimeout      = 15 * time.Second
	MinHandshakeTimeout = 100 * time.Millisecond
	MaxTimeout          = time.Hour
)

// Limits is the [limits] table: byte budgets and admission control
// (docs/operations.md, "Limits and admission control"). Zero fields, in a
// Config built in Go, mean the node's defaults.
type Limits struct {
	// InboxBytes bounds the encoded bytes of protocol messages from other
	// nodes waiting for the node's loop; when it is full, the readers of
	// those connections wait (back-pressure). Key "limits.inbox_bytes";
	// default 64 MiB.
	InboxBytes int64 `toml:"inbox_bytes"`
	// PeerQueueBytes bounds the bytes waiting to be sent to each other
	// node; beyond it messages are dropped and counted (queue_bytes), and
	// the protocols retransmit. Key "limits.peer_queue_bytes"; default
	// 8 MiB.
	PeerQueueBytes int64 `toml:"peer_queue_bytes"`
	// ClientInboxBytes and ClientInboxMessages bound clients' MULTICASTs
	// waiting for the loop; ClientShare is the most messages one client
	// may hold there. A MULTICAST that does not fit is shed and answered
	// OVERLOADED. Keys "limits.client_inbox_bytes" (default 8 MiB),
	// "limits.client_inbox_messages" (default 1024) and
	// "limits.client_share" (default 64; at most client_inbox_messages).
	ClientInboxBytes    int64 `toml:"client_inbox_bytes"`
	ClientInboxMessages int   `toml:"client_inbox_messages"`
	ClientShare         int   `toml:"client_share"`
	// ClientQueueBytes bounds the replies waiting to be sent to each
	// connected client. Key "limits.client_queue_bytes"; default 256 KiB.
	ClientQueueBytes int64 `toml:"client_queue_bytes"`
	// MaxConns and MaxConnsPerHost cap the inbound connections that are
	// handshaking or belong to clients, in all and per remote IP address;
	// more are refused (too_many_connections). Keys "limits.max_conns"
	// (default 1024) and "limits.max_conns_per_host" (default 256; at
	// most max_conns).
	MaxConns        int `toml:"max_conns"`
	MaxConnsPerHost int `toml:"max_conns_per_host"`
	// HandshakeTimeout bounds a connection's handshake, both ways. Key
	// "limits.handshake_timeout"; default 5s; 100ms to 1h.
	HandshakeTimeout time.Duration `toml:"handshake_timeout"`
	// IdleTimeout closes an accepted connection that carries nothing (no
	// message, no ping) for this long. Key "limits.idle_timeout"; default
	// 1m; 15s to 1h.
	IdleTimeout time.Duration `toml:"idle_timeout"`
	// ReadsPending, ReadsPerClient and ReadBytes bound the reads (without
	// a multicast: docs/reads.md) a node holds, in all, of one client, and
	// their queries' bytes; past them a read is answered OVERLOADED. Keys
	// "limits.reads_pending" (default 4096), "limits.reads_per_client"
	// (default 256; at most reads_pending) and "limits.read_bytes"
	// (default 64 MiB).
	ReadsPending   int   `toml:"reads_pending"`
	ReadsPerClient int   `toml:"reads_per_client"`
	ReadBytes      int64 `toml:"read_bytes"`
	// HeldBytes bounds the deliveries the service holds while it waits
	// for other groups' votes (a cross-shard transaction: docs/rsm.md);
	// past it the node refuses new client MULTICASTs with OVERLOADED until
	// they drain. Key "limits.held_bytes"; default 64 MiB.
	HeldBytes int64 `toml:"held_bytes"`
}

func (c *Config) setLimitsDefaults(md toml.MetaData) {
	l := &c.Limits
	for _, f := range []struct {
		v   *int64
		key string
		def int64
	}{{&l.InboxBytes, "inbox_bytes", DefaultInboxBytes}, {&l.PeerQueueBytes, "peer_queue_bytes", DefaultPeerQueueBytes},
		{&l.ClientInboxBytes, "client_inbox_bytes", DefaultClientInboxBytes}, {&l.ClientQueueBytes, "client_queue_bytes", DefaultClientQueueBytes},
		{&l.ReadBytes, "read_bytes", DefaultReadBytes}, {&l.HeldBytes, "held_bytes", DefaultHeldBytes}} {
		if !md.IsDefined("limits", f.key) {
			*f.v = f.def
		}
	}
	for _, f := range []struct {
		v   *int
		key string
		def int
	}{{&l.ClientInboxMessages, "client_inbox_messages", DefaultClientInboxMessages}, {&l.ClientShare, "client_share", DefaultClientShare},
		{&l.MaxConns, "max_conns", DefaultMaxConns}, {&l.MaxConnsPerHost, "max_conns_per_host", DefaultMaxConnsPerHost},
		{&l.ReadsPending, "reads_pending", DefaultReadsPending}, {&l.ReadsPerClient, "reads_per_client", DefaultReadsPerClient}} {
		if !md.IsDefined("limits", f.key) {
			*f.v = f.def
		}
	}
	if !md.IsDefined("limits", "handshake_timeout") {
		l.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if !md.IsDefined("limits", "idle_timeout") {
		l.IdleTimeout = DefaultIdleTimeout
	}
}

func (c *Config) validateLimits() error {
	l := &c.Limits
	if *l == (Limits{}) {
		return nil // a Config built in Go: the node's defaults
	}
	for _, f := range []struct {
		v   int64
		key string
	}{{l.InboxBytes, "inbox_bytes"}, {l.PeerQueueBytes, "peer_queue_bytes"}, {l.ClientInboxBytes, "client_inbox_bytes"}, {l.ClientQueueBytes, "client_queue_bytes"},
		{l.ReadBytes, "read_bytes"}, {l.HeldBytes, "held_bytes"}} {
		if f.v < MinBudget || f.v > MaxBudget {
			return &FieldError{Field: "limits." + f.key, Msg: fmt.Sprintf("must be between %d (64 KiB) and %d bytes, got %d", MinBudget, int64(MaxBudget), f.v)}
		}
	}
	switch {
	case l.ClientInboxMessages < 1:
		return &FieldError{Field: "limits.client_inbox_messages", Msg: fmt.Sprintf("must be at least 1, got %d", l.ClientInboxMessages)}
	case l.ClientShare < 1 || l.ClientShare > l.ClientInboxMessages:
		return &FieldError{Field: "limits.client_share", Msg: fmt.Sprintf("must be between 1 and client_inbox_messages (%d), got %d", l.ClientInboxMessages, l.ClientShare)}
	case l.MaxConns < 1:
		return &FieldError{Field: "limits.max_conns", Msg: fmt.Sprintf("must be at least 1, got %d", l.MaxConns)}
	case l.MaxConnsPerHost < 1 || l.MaxConnsPerHost > l.MaxConns:
		return &FieldError{Field: "limits.max_conns_per_host", Msg: fmt.Sprintf("must be between 1 and max_conns (%d), got %d", l.MaxConns, l.MaxConnsPerHost)}
	case l.HandshakeTimeout < MinHandshakeTimeout || l.HandshakeTimeout > MaxTimeout:
		return &FieldError{Field: "limits.handshake_timeout", Msg: fmt.Sprintf("must be between %v and %v, got %v", MinHandshakeTimeout, MaxTimeout, l.HandshakeTimeout)}
	case l.ReadsPending < 1:
		return &FieldError{Field: "limits.reads_pending", Msg: fmt.Sprintf("must be at least 1, got %d", l.ReadsPending)}
	case l.ReadsPerClient < 1 || l.ReadsPerClient > l.ReadsPending:
		return &FieldError{Field: "limits.reads_per_client", Msg: fmt.Sprintf("must be between 1 and reads_pending (%d), got %d", l.ReadsPending, l.ReadsPerClient)}
	case l.IdleTimeout < MinIdleTimeout || l.IdleTimeout > MaxTimeout:
		return &FieldError{Field: "limits.idle_timeout", Msg: fmt.Sprintf("must be between %v (three 5 s pings) and %v, got %v", MinIdleTimeout, MaxTimeout, l.IdleTimeout)}
	}
	return nil
}

func (c *Config) formatLimits(sb *strings.Builder) {
	l := &c.Limits
	if *l == (Limits{}) {
		return
	}
	fmt.Fprintf(sb, "\n[limits]\ninbox_bytes = %d\npeer_queue_bytes = %d\nclient_inbox_bytes = %d\nclient_inbox_messages = %d\n",
		l.InboxBytes, l.PeerQueueBytes, l.ClientInboxBytes, l.ClientInboxMessages)
	fmt.Fprintf(sb, "client_share = %d\nclient_queue_bytes = %d\nmax_conns = %d\nmax_conns_per_host = %d\n",
		l.ClientShare, l.ClientQueueBytes, l.MaxConns, l.MaxConnsPerHost)
	fmt.Fprintf(sb, "handshake_timeout = %q\nidle_timeout = %q\n", l.HandshakeTimeout.String(), l.IdleTimeout.String())
	fmt.Fprintf(sb, "reads_pending = %d\nreads_per_client = %d\nread_bytes = %d\nheld_bytes = %d\n", l.ReadsPending, l.ReadsPerClient, l.ReadBytes, l.HeldBytes)
}
