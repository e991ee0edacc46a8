// Package config reads a weft agent's TOML configuration.
//
// A file names the cluster, this node, where it listens and keeps its data,
// the protocol, the group layout with every node's address, and the
// protocol timing:
//
//	cluster = "weft"               # cluster name (default "weft"), 1..255 bytes
//	protocol = "wbcast"            # wbcast (default), ftskeen, fastcast or skeen (1 member per group)
//	id = 0                         # this node's id (required for an agent)
//	data_dir = "/var/lib/weft/n0"  # WAL and node state (required for an agent)
//	listen = "0.0.0.0:7100"        # default: this node's address in [nodes]
//	client_addr = "10.0.0.1:7100"  # address clients use (default: this node's address in [nodes])
//	admin = "127.0.0.1:7200"       # HTTP admin endpoint (default: none; loopback unless admin_token_file)
//	admin_token_file = "/etc/weft/admin.token"  # bearer token, mode 0600 (default: none)
//	delivery_log = "/var/log/weft/d.jsonl"  # deliveries log, rotated (default: off)
//	cluster_key_file = "/etc/weft/key"  # shared secret every node and client proves (default: none)
//	tls_cert = "/etc/weft/node0.crt"  # mutual TLS: this node's certificate, key and the node CA
//	tls_key = "/etc/weft/node0.key"   #   (all three or none; `weft certs` makes development ones)
//	tls_ca = "/etc/weft/ca.crt"
//	tls_client_ca = "/etc/weft/client-ca.crt"  # CA of client certificates (default: tls_ca)
//	insecure = false               # allow a non-loopback listen with neither TLS nor a cluster key
//	tick = "10ms"                  # protocol tick (default 10ms; 1ms..10s)
//	election_ticks = 30            # silence before a leader is replaced (default 30; >= 2)
//	heartbeat_ticks = 1            # ticks between heartbeats (default 1; < election_ticks)
//	retry_ticks = 12               # re-multicast of a stuck message (default 12; >= 1)
//	session_lease = "1m"           # how long client-session ids are remembered (default 1m; >= 100 ticks)
//	wal_segment_size = 67108864    # WAL segment size in bytes (default 64 MiB; 4 KiB..1 GiB)
//	compact_bytes = 8388608        # compact the WAL after this many bytes (default 8 MiB; 0: never)
//	unsafe_no_fsync = false        # UNSAFE, benchmarks only: skip the WAL's fsync (default false)
//	service = "kv"                 # replicated service the node runs: "none" (default) or "kv" (weft-kv)
//	log_level = "info"             # debug, info, warn or error (default info)
//	log_format = "text"            # text (logfmt) or json, one object a line (default text)
//	initial_state = "new"          # an empty data_dir: "new" member, or "existing" (refused; see --rejoin)
//	bootstrap_probe = "1s"         # how long an empty data_dir asks peers whether they saw this member (0: no probe)
//	groups = [[0, 1, 2], [3, 4, 5]]  # group g's members; the first is the initial leader (required)
//
//	[nodes]                        # every node's address, by id (required)
//	0 = "10.0.0.1:7100"
//	...
//
//	[gossip]                       # gossip membership (optional table)
//	enabled = true                 # default true
//	profile = "lan"                # local, lan or cassandra (default lan)
//	interval = "200ms"             # gossip round (default: the profile's; 5ms..1m)
//	phi_threshold = 8              # conviction threshold (default: the profile's; (0, 100])
//	seeds = [0, 3]                 # default: the first member of every group
//	clock_skew_threshold = "500ms" # warn beyond this clock offset to a peer (1ms..1h)
//
//	[limits]                       # byte budgets and admission control (optional table)
//	inbox_bytes = 67108864         # other nodes' messages waiting for the loop (default 64 MiB)
//	peer_queue_bytes = 8388608     # send queue to each other node (default 8 MiB)
//	client_inbox_bytes = 8388608   # clients' MULTICASTs waiting (default 8 MiB); beyond: OVERLOADED
//	client_inbox_messages = 1024   # the same in messages (default 1024)
//	client_share = 64              # most messages one client may have waiting (default 64)
//	client_queue_bytes = 262144    # replies waiting for each client (default 256 KiB)
//	max_conns = 1024               # inbound connections handshaking or of clients (default 1024)
//	max_conns_per_host = 256       # the same from one IP address (default 256)
//	handshake_timeout = "5s"       # default 5s
//	idle_timeout = "1m"            # an accepted connection silent this long is closed (default 1m)
//
//	[kv]                           # weft-kv's HTTP/JSON API (optional table; service = "kv")
//	http = "127.0.0.1:7480"        # listen address (default: none; loopback unless token_file)
//	token_file = "/etc/weft/kv.token"  # bearer token, mode 0600 (default: none)
//	timeout = "5s"                 # each request's deadline (default 5s; 10ms..10m)
//	max_requests = 64              # requests served at once; more get 503 (default 64)
//	tls_cert = "/etc/weft/client.crt"  # with tls_ca: the API client's certificate and key
//	tls_key = "/etc/weft/client.key"
//
// (sample.toml, also available as Sample, is a complete commented file.)
//
// Keys are checked strictly: an unknown key, a value of the wrong type,
// and an impossible value are errors that name the key. A key that is
// absent takes its default; a key that is present must hold a valid value
// (election_ticks = 0 is an error, not "the default").
package config

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// Defaults for absent keys.
const (
	DefaultCluster        = "weft"
	DefaultProtocol       = "wbcast"
	DefaultTick           = 10 * time.Millisecond
	DefaultElectionTicks  = 30
	DefaultHeartbeatTicks = 1
	DefaultRetryTicks     = 12
	DefaultSessionLease   = time.Minute
	DefaultLogLevel       = "info"
	DefaultLogFormat      = "text"
	DefaultWALSegmentSize = 64 << 20
	DefaultCompactBytes   = 8 << 20
)

// Limits on values.
const (
	MinTick          = time.Millisecond
	MaxTick          = 10 * time.Second
	MaxClusterName   = 255
	MinElectionTicks = 2
	MinWALSegment    = 4 << 10
	MaxWALSegment    = 1 << 30
)

// Services lists the values of the "service" key, the default first.
// The values of the agent key "gc" (Config.GC).
const (
	GCQuorum = "quorum" // collect what a quorum of each group delivered
	GCAll    = "all"    // collect what every member delivered
)

// CollectAfterAll reports whether WbCast waits for every member before it
// collects (gc = "all").
func (c *Config) CollectAfterAll() bool { return c.GC == GCAll }

var Services = []string{ServiceNone, ServiceKV}

// Service names.
const (
	ServiceNone = "none"
	ServiceKV   = "kv"
)

// Protocols lists the values of the "protocol" key, the default first
// (node.Protocols: the protocols a node runs).
var Protocols = []string{"wbcast", "ftskeen", "fastcast", "skeen"}

// Sample is a complete, commented configuration file with every default.
//
//go:embed sample.toml
var Sample string

// Config is an agent's configuration. Load fills absent keys with the
// defaults documented on each field.
type Config struct {
	// Cluster is the cluster name; every node and client of a cluster must
	// use the same one. Key "cluster"; default "weft"; 1 to 255 bytes.
	Cluster string `toml:"cluster"`
	// Protocol is the atomic multicast protocol every node of the cluster
	// runs: "wbcast", "ftskeen", "fastcast" or "skeen" (Skeen is not fault
	// tolerant: every group must have exactly 1 member, and a Skeen node
	// does not restart from an earlier run's data_dir). Key "protocol";
	// default "wbcast".
	Protocol string `toml:"protocol"`
	// ID is this node's id, one of the ids in Groups. Key "id"; required
	// for an agent.
	ID wire.ProcID `toml:"id"`
	// DataDir holds the node's WAL and its other state. Key "data_dir";
	// required for an agent.
	DataDir string `toml:"data_dir"`
	// Listen is the TCP address the node listens on, for nodes and clients
	// alike. Key "listen"; default: this node's address in Nodes.
	Listen string `toml:"listen"`
	// ClientAddr is the address clients should use to reach this node
	// (published later through gossip). Key "client_addr"; default: this
	// node's address in Nodes.
	ClientAddr string `toml:"client_addr"`
	// Admin is the address of the HTTP admin endpoint (GET /status and
	// /members; POST /leave and /assassinate with AdminTokenFile's token).
	// It must be a loopback address unless AdminTokenFile is set, and
	// differ from Listen and ClientAddr. Key "admin"; default "" (no
	// endpoint).
	Admin string `toml:"admin"`
	// ClusterKeyFile names a file holding the cluster's shared secret (16
	// to 1024 bytes, surrounding white space ignored; for example 32 random
	// bytes in hex). Every node and client of the cluster must use the
	// same key: connections prove they hold it, and processes without it
	// are refused. A relative path is relative to the working directory.
	// Key "cluster_key_file"; default "" (no key).
	ClusterKeyFile string `toml:"cluster_key_file"`
	key            []byte // read from ClusterKeyFile by validate
	// TLSCert and TLSKey name this node's certificate chain and private key
	// (PEM), and TLSCA the node CA bundle (PEM) that every node's
	// certificate chains to: with them every connection is mutual TLS
	// 1.3, a node's certificate carries the URI SAN
	// weft://<cluster>/node/<id> and the transport binds each peer's id to
	// its certificate (see transport/tls.go; `weft certs` makes development
	// certificates). All three or none. Keys "tls_cert", "tls_key",
	// "tls_ca"; default "" (no TLS).
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	TLSCA   string `toml:"tls_ca"`
	// TLSClientCA names the CA bundle client certificates chain to; without
	// it clients' certificates come from TLSCA and carry the URI SAN
	// weft://<cluster>/client[/<id>]. A certificate from the client CA is
	// never accepted as a node's. Key "tls_client_ca"; default "".
	TLSClientCA string         `toml:"tls_client_ca"`
	tls         *transport.TLS // loaded by validate (agents)
	// Insecure lets an agent listen on a non-loopback address with
	// neither TLS nor a cluster key (anyone who can reach it can join as a
	// node). Key "insecure"; default false.
	Insecure bool `toml:"insecure"`
	// Tick is the protocol's tick. Key "tick" (a duration string such as
	// "10ms"); default 10ms; between 1ms and 10s.
	Tick time.Duration `toml:"tick"`
	// ElectionTicks: a group member silent this many ticks is suspected and
	// its successor starts a ballot. Key "election_ticks"; default 30
	// (300 ms at the default tick); at least 2.
	ElectionTicks int `toml:"election_ticks"`
	// HeartbeatTicks: ticks between heartbeats to the group. Key
	// "heartbeat_ticks"; default 1; at least 1 and below ElectionTicks.
	HeartbeatTicks int `toml:"heartbeat_ticks"`
	// RetryTicks: a message known but not delivered after this many ticks
	// without progress is re-multicast. Key "retry_ticks"; default 12; at
	// least 1.
	RetryTicks int `toml:"retry_ticks"`
	// SessionLease is how long a replica remembers a collected message id
	// past its client's floor, and an idle client session (wbcast; see
	// docs/sessions.md): duplicate suppression is exact while no copy of
	// a message arrives later than this after it was collected. Key
	// "session_lease" (a duration); default 1m; at least 100 ticks.
	SessionLease time.Duration `toml:"session_lease"`
	// LogLevel is "debug", "info", "warn" or "error". Key "log_level";
	// default "info".
	LogLevel string `toml:"log_level"`
	// LogFormat is "text" (key=value lines) or "json" (one JSON object a
	// line, for log collectors). Key "log_format"; default "text"; the
	// agent's --log-format overrides it.
	LogFormat string `toml:"log_format"`
	// WALSegmentSize is the size in bytes of the WAL's segment files
	// (preallocated). Key "wal_segment_size"; default 64 MiB; 4 KiB to
	// 1 GiB.
	WALSegmentSize int64 `toml:"wal_segment_size"`
	// CompactBytes: the WAL is compacted (a snapshot of the node's state,
	// older segments deleted) after this many bytes of records. Key
	// "compact_bytes"; default 8 MiB; 0 disables compaction.
	CompactBytes int64 `toml:"compact_bytes"`
	// UnsafeNoFsync makes the WAL skip the fdatasync of appended records
	// (wal.Options.UnsafeNoSync): a power loss or kernel crash can then
	// lose promises and acks this node already sent, which can break the
	// global order and lose acknowledged messages. For benchmarks that
	// compare with implementations keeping nothing on disk, like etcd's
	// --unsafe-no-fsync. The agent logs a warning at start. Key
	// "unsafe_no_fsync"; default false.
	UnsafeNoFsync bool `toml:"unsafe_no_fsync"`
	// GC is how a WbCast group garbage-collects a delivered message:
	// "quorum" (the default) once a quorum of its members delivered it, so
	// a member down for good does not pin memory and members the floor
	// passes catch up by state transfer; "all" once every member did, as
	// WbCast's paper does (memory grows while one is down). With "quorum"
	// a group must not lose the disks of f+1 members counting those still
	// catching up (docs/disk-loss.md). Every member of a group must agree;
	// other protocols refuse the key. Key "gc"; default "quorum".
	GC string `toml:"gc"`
	// Service is the replicated service the node runs on the order
	// (docs/rsm.md): "none" (only the deliveries log and clients' gts) or
	// "kv" (weft-kv: every group is a shard of a key-value store). Every
	// node of a cluster must run the same service. Key "service"; default
	// "none".
	Service string `toml:"service"`
	// Groups lists each group's member ids; group g is Groups[g] and its
	// first member is the initial leader. Key "groups"; required; at most
	// 64 members per group; an id appears once.
	Groups [][]wire.ProcID `toml:"groups"`
	// Nodes maps every node id (a decimal string, as TOML keys are) to its
	// host:port address. Table "[nodes]"; required; exactly the ids in
	// Groups.
	Nodes map[string]string `toml:"nodes"`
	// Gossip is the [gossip] table (see Gossip).
	Gossip Gossip `toml:"gossip"`
	// Limits is the [limits] table (see Limits).
	Limits Limits `toml:"limits"`
	// KV is the [kv] table: weft-kv's HTTP/JSON API (see KV).
	KV KV `toml:"kv"`

	// The admin endpoint's token and the deliveries log (config/admin.go).

	// AdminTokenFile names a file holding the admin endpoint's bearer
	// token (16 to 1024 bytes, surrounding white space ignored); the file
	// must not be readable by group or others (mode 0600 or stricter).
	// Mutating endpoints (/leave, /assassinate) need it always; every
	// endpoint needs it when admin is not a loopback address, and such an
	// admin address without a token is an error. The operator commands
	// (weft members, leave, assassinate) read the same key. Key
	// "admin_token_file"; default "" (no token: read-only, loopback only).
	AdminTokenFile string `toml:"admin_token_file"`
	adminToken     []byte // read from AdminTokenFile by validate
	// DeliveryLog is the path of the deliveries log, a JSON-lines history
	// of this node's deliveries for debugging and for the demo's checks
	// (see docs/operations.md). Key "delivery_log"; default "" (off).
	DeliveryLog string `toml:"delivery_log"`
	// DeliveryLogMaxBytes: the deliveries log is rotated when its file
	// would grow past this many bytes. Key "delivery_log_max_bytes";
	// default 64 MiB; 4 KiB to 1 GiB.
	DeliveryLogMaxBytes int64 `toml:"delivery_log_max_bytes"`
	// DeliveryLogFiles is how many files of the deliveries log are kept,
	// the current one included (the oldest is deleted at a rotation). Key
	// "delivery_log_files"; default 4; 1 to 1000.
	DeliveryLogFiles int `toml:"delivery_log_files"`

	// Data directory and member identity (docs/operations.md).

	// InitialState says what an empty data_dir means: "new" (a new member
	// of a new cluster, unless a peer's gossip has seen this member run:
	// the bootstrap probe) or "existing" (the cluster runs: an empty
	// data_dir is a lost one and the agent refuses to start, unless run
	// with --rejoin). A data_dir that holds state is used whatever this
	// says. Key "initial_state"; default "new".
	InitialState string `toml:"initial_state"`
	// BootstrapProbe is how long an agent with an empty data_dir asks its
	// peers whether they have seen it before it starts as a new member. Key
	// "bootstrap_probe" (a duration); default 1s; 0 (no probe) or 10ms to 1m.
	BootstrapProbe time.Duration `toml:"bootstrap_probe"`
}

// FieldError is a configuration error about one key.
type FieldError struct {
	File  string // the file, if known
	Line  int    // the line, where the TOML decoder gives it (syntax and type errors); 0 if not known
	Field string // the key, e.g. "election_ticks" or "nodes.3"; "" for a syntax error before any key
	Msg   string
}

func (e *FieldError) Error() string {
	where := "config"
	switch {
	case e.File != "" && e.Line > 0:
		where = fmt.Sprintf("config %s:%d", e.File, e.Line)
	case e.File != "":
		where = "config " + e.File
	case e.Line > 0:
		where = fmt.Sprintf("config: line %d", e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", where, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", where, e.Field, e.Msg)
}

// Kind selects what Parse requires.
type Kind int

const (
	// Agent requires everything an agent needs (id, data_dir).
	Agent Kind = iota
	// Cluster requires only the cluster layout (cluster, groups, nodes), for
	// clients.
	Cluster
)

// Load reads and validates an agent's configuration file.
func Load(path string) (*Config, error) { return load(path, Agent) }

// LoadCluster reads a configuration file for a client: only the cluster
// name, groups and nodes must be valid; agent keys may be absent.
func LoadCluster(path string) (*Config, error) { return load(path, Cluster) }

func load(path string, kind Kind) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(string(data), kind)
	var fe *FieldError
	if errors.As(err, &fe) {
		fe.File = path
	} else if err != nil {
		err = fmt.Errorf("config %s: %w", path, err)
	}
	return c, err
}

// Parse parses and validates a configuration.
func Parse(text string, kind Kind) (*Config, error) {
	var c Config
	md, err := toml.Decode(text, &c)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &FieldError{Line: pe.Position.Line, Field: pe.LastKey, Msg: pe.Message}
		}
		// Type mismatches come as plain errors: `toml: line N (last key
		// "k"): message` (the line only where the decoder knows it).
		if m := lastKeyRE.FindStringSubmatch(err.Error()); m != nil {
			line, _ := strconv.Atoi(m[1])
			return nil, &FieldError{Line: line, Field: m[2], Msg: m[3]}
		}
		return nil, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, &FieldError{Field: keys[0], Msg: "unknown key" + others(keys[1:])}
	}
	if err := c.setDefaults(md, kind); err != nil {
		return nil, err
	}
	if err := c.validate(kind); err != nil {
		return nil, err
	}
	return &c, nil
}

var lastKeyRE = regexp.MustCompile(`^toml: (?:line (\d+) )?\(last key "([^"]*)"\): (.*)$`)

func others(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return fmt.Sprintf(" (also unknown: %s)", strings.Join(keys, ", "))
}

func (c *Config) setDefaults(md toml.MetaData, kind Kind) error {
	str := func(v *string, key, def string) {
		if !md.IsDefined(key) {
			*v = def
		}
	}
	str(&c.Cluster, "cluster", DefaultCluster)
	str(&c.Protocol, "protocol", DefaultProtocol)
	str(&c.LogLevel, "log_level", DefaultLogLevel)
	str(&c.Service, "service", ServiceNone)
	if c.LogFormat == "" { // absent, or written empty by Format from a Config literal
		c.LogFormat = DefaultLogFormat
	}
	c.setGossipDefaults(md)
	c.setLimitsDefaults(md)
	c.setAdminDefaults(md)
	c.setKVDefaults(md)
	if !md.IsDefined("wal_segment_size") {
		c.WALSegmentSize = DefaultWALSegmentSize
	}
	if !md.IsDefined("compact_bytes") {
		c.CompactBytes = DefaultCompactBytes
	}
	if !md.IsDefined("tick") {
		c.Tick = DefaultTick
	}
	if !md.IsDefined("session_lease") {
		c.SessionLease = DefaultSessionLease
	}
	c.setDataDirDefaults(md)
	for _, f := range []struct {
		v   *int
		key string
		def int
	}{{&c.ElectionTicks, "election_ticks", DefaultElectionTicks}, {&c.HeartbeatTicks, "heartbeat_ticks", DefaultHeartbeatTicks},
		{&c.RetryTicks, "retry_ticks", DefaultRetryTicks}} {
		if !md.IsDefined(f.key) {
			*f.v = f.def
		}
	}
	if kind == Agent {
		for _, key := range []string{"id", "data_dir", "groups", "nodes"} {
			if !md.IsDefined(key) {
				return &FieldError{Field: key, Msg: "missing (required)"}
			}
		}
	} else {
		for _, key := range []string{"groups", "nodes"} {
			if !md.IsDefined(key) {
				return &FieldError{Field: key, Msg: "missing (required)"}
			}
		}
	}
	if kind == Agent {
		addr := c.Nodes[strconv.FormatUint(uint64(c.ID), 10)]
		str(&c.Listen, "listen", addr)
		str(&c.ClientAddr, "client_addr", addr)
	}
	return nil
}

func checkAddr(field, addr string, needPort bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return &FieldError{Field: field, Msg: fmt.Sprintf("%q is not a host:port address", addr)}
	}
	_ = host
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || (needPort && p == 0) {
		return &FieldError{Field: field, Msg: fmt.Sprintf("%q has an invalid port", addr)}
	}
	return nil
}

func (c *Config) validate(kind Kind) error {
	if n := len(c.Cluster); n == 0 || n > MaxClusterName {
		return &FieldError{Field: "cluster", Msg: fmt.Sprintf("must be 1 to %d bytes, got %d", MaxClusterName, n)}
	}
	if !slices.Contains(Protocols, c.Protocol) {
		return &FieldError{Field: "protocol", Msg: fmt.Sprintf("must be one of %s, got %q", strings.Join(Protocols, ", "), c.Protocol)}
	}
	if c.Tick < MinTick || c.Tick > MaxTick {
		return &FieldError{Field: "tick", Msg: fmt.Sprintf("must be between %v and %v, got %v", MinTick, MaxTick, c.Tick)}
	}
	if c.ElectionTicks < MinElectionTicks {
		return &FieldError{Field: "election_ticks", Msg: fmt.Sprintf("must be at least %d, got %d", MinElectionTicks, c.ElectionTicks)}
	}
	if c.HeartbeatTicks < 1 || c.HeartbeatTicks >= c.ElectionTicks {
		return &FieldError{Field: "heartbeat_ticks", Msg: fmt.Sprintf("must be at least 1 and below election_ticks (%d), got %d", c.ElectionTicks, c.HeartbeatTicks)}
	}
	if c.RetryTicks < 1 {
		return &FieldError{Field: "retry_ticks", Msg: fmt.Sprintf("must be at least 1, got %d", c.RetryTicks)}
	}
	if c.SessionLease < 100*c.Tick {
		return &FieldError{Field: "session_lease", Msg: fmt.Sprintf("must be at least 100 ticks (%v), got %v", 100*c.Tick, c.SessionLease)}
	}
	if c.WALSegmentSize < MinWALSegment || c.WALSegmentSize > MaxWALSegment {
		return &FieldError{Field: "wal_segment_size", Msg: fmt.Sprintf("must be between %d and %d bytes, got %d", MinWALSegment, MaxWALSegment, c.WALSegmentSize)}
	}
	if c.CompactBytes < 0 {
		return &FieldError{Field: "compact_bytes", Msg: fmt.Sprintf("must be 0 (no compaction) or positive, got %d", c.CompactBytes)}
	}
	switch {
	case c.GC != "" && c.GC != GCQuorum && c.GC != GCAll:
		return &FieldError{Field: "gc", Msg: fmt.Sprintf("must be %q or %q, got %q", GCQuorum, GCAll, c.GC)}
	case c.GC != "" && c.Protocol != "" && c.Protocol != "wbcast":
		return &FieldError{Field: "gc", Msg: fmt.Sprintf("only WbCast collects by a floor; protocol is %q", c.Protocol)}
	}
	if !slices.Contains(Services, c.Service) {
		return &FieldError{Field: "service", Msg: fmt.Sprintf("must be one of %s, got %q", strings.Join(Services, ", "), c.Service)}
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		return &FieldError{Field: "log_level", Msg: err.Error()}
	}
	if err := CheckLogFormat(c.LogFormat); err != nil {
		return &FieldError{Field: "log_format", Msg: err.Error()}
	}
	if err := c.validateDataDir(); err != nil {
		return err
	}
	if len(c.Groups) == 0 {
		return &FieldError{Field: "groups", Msg: "no groups"}
	}
	seen := map[wire.ProcID]int{}
	for g, ms := range c.Groups {
		field := fmt.Sprintf("groups[%d]", g)
		if len(ms) == 0 {
			return &FieldError{Field: field, Msg: "group has no members"}
		}
		if len(ms) > amcast.MaxGroupSize {
			return &FieldError{Field: field, Msg: fmt.Sprintf("%d members, at most %d", len(ms), amcast.MaxGroupSize)}
		}
		if c.Protocol == "skeen" && len(ms) != 1 {
			return &FieldError{Field: "protocol", Msg: fmt.Sprintf("skeen is not fault tolerant and needs exactly 1 member per group; %s has %d", field, len(ms))}
		}
		for _, p := range ms {
			if h, dup := seen[p]; dup {
				return &FieldError{Field: field, Msg: fmt.Sprintf("node %d is already in groups[%d]", p, h)}
			}
			seen[p] = g
			if _, ok := c.Nodes[strconv.FormatUint(uint64(p), 10)]; !ok {
				return &FieldError{Field: field, Msg: fmt.Sprintf("node %d has no address in [nodes]", p)}
			}
		}
	}
	keys := make([]string, 0, len(c.Nodes))
	for k := range c.Nodes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		field := "nodes." + k
		id, err := strconv.ParseUint(k, 10, 32)
		if err != nil || strconv.FormatUint(id, 10) != k {
			return &FieldError{Field: field, Msg: "node ids must be decimal numbers below 2^32 without leading zeros"}
		}
		if _, ok := seen[wire.ProcID(id)]; !ok {
			return &FieldError{Field: field, Msg: fmt.Sprintf("node %d is in no group", id)}
		}
		if err := checkAddr(field, c.Nodes[k], true); err != nil {
			return err
		}
	}
	if err := c.validateGossip(seen); err != nil {
		return err
	}
	if err := c.validateLimits(); err != nil {
		return err
	}
	if err := c.validateKey(); err != nil {
		return err
	}
	if err := c.validateTLS(kind); err != nil {
		return err
	}
	if kind == Cluster {
		return nil
	}
	if _, ok := seen[c.ID]; !ok {
		return &FieldError{Field: "id", Msg: fmt.Sprintf("node %d is in no group", c.ID)}
	}
	if c.DataDir == "" {
		return &FieldError{Field: "data_dir", Msg: "must not be empty"}
	}
	if err := checkAddr("listen", c.Listen, false); err != nil {
		return err
	}
	if err := checkAddr("client_addr", c.ClientAddr, true); err != nil {
		return err
	}
	if c.Admin != "" {
		if err := checkAddr("admin", c.Admin, false); err != nil {
			return err
		}
	}
	if err := c.validateAdmin(); err != nil {
		return err
	}
	if err := c.validateKV(); err != nil {
		return err
	}
	return c.validateSecurity()
}

// ParseLevel parses a log level name.
func ParseLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("must be debug, info, warn or error, got %q", s)
}

// Log formats (log_format, --log-format).
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// CheckLogFormat checks a log format name.
func CheckLogFormat(s string) error {
	if s != LogFormatText && s != LogFormatJSON {
		return fmt.Errorf("must be text or json, got %q", s)
	}
	return nil
}

// NewLogger returns a logger writing to w at level in format (text or
// json; checked by CheckLogFormat).
func NewLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case LogFormatText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case LogFormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format: %w", CheckLogFormat(format))
}

// Topology returns the group layout.
func (c *Config) Topology() (*amcast.Topology, error) {
	gs := make([][]wire.ProcID, len(c.Groups))
	for g, ms := range c.Groups {
		gs[g] = slices.Clone(ms)
	}
	return amcast.TopologyOf(gs)
}

// Peers returns every node's address by id.
func (c *Config) Peers() map[wire.ProcID]string {
	out := make(map[wire.ProcID]string, len(c.Nodes))
	for k, addr := range c.Nodes {
		id, _ := strconv.ParseUint(k, 10, 32) // validated
		out[wire.ProcID(id)] = addr
	}
	return out
}

// Format renders c as a TOML file that Parse reads back as c.
func (c *Config) Format() string {
	var sb strings.Builder
	q := strconv.Quote
	fmt.Fprintf(&sb, "cluster = %s\n", q(c.Cluster))
	if c.Protocol != "" {
		fmt.Fprintf(&sb, "protocol = %s\n", q(c.Protocol))
	}
	fmt.Fprintf(&sb, "id = %d\n", c.ID)
	fmt.Fprintf(&sb, "data_dir = %s\n", q(c.DataDir))
	if c.Listen != "" {
		fmt.Fprintf(&sb, "listen = %s\n", q(c.Listen))
	}
	if c.ClientAddr != "" {
		fmt.Fprintf(&sb, "client_addr = %s\n", q(c.ClientAddr))
	}
	if c.Admin != "" {
		fmt.Fprintf(&sb, "admin = %s\n", q(c.Admin))
	}
	if c.ClusterKeyFile != "" {
		fmt.Fprintf(&sb, "cluster_key_file = %s\n", q(c.ClusterKeyFile))
	}
	fmt.Fprintf(&sb, "tick = %s\n", q(c.Tick.String()))
	fmt.Fprintf(&sb, "election_ticks = %d\n", c.ElectionTicks)
	fmt.Fprintf(&sb, "heartbeat_ticks = %d\n", c.HeartbeatTicks)
	fmt.Fprintf(&sb, "retry_ticks = %d\n", c.RetryTicks)
	fmt.Fprintf(&sb, "session_lease = %s\n", q(c.SessionLease.String()))
	fmt.Fprintf(&sb, "wal_segment_size = %d\n", c.WALSegmentSize)
	fmt.Fprintf(&sb, "compact_bytes = %d\n", c.CompactBytes)
	if c.UnsafeNoFsync {
		sb.WriteString("unsafe_no_fsync = true\n")
	}
	if c.GC != "" {
		fmt.Fprintf(&sb, "gc = %s\n", q(c.GC))
	}
	if c.Service != "" {
		fmt.Fprintf(&sb, "service = %s\n", q(c.Service))
	}
	fmt.Fprintf(&sb, "log_level = %s\n", q(c.LogLevel))
	fmt.Fprintf(&sb, "log_format = %s\n", q(c.LogFormat))
	c.formatAdmin(&sb)
	c.formatTLS(&sb)
	c.formatDataDir(&sb)
	sb.WriteString("groups = [")
	for g, ms := range c.Groups {
		if g > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("[")
		for i, p := range ms {
			if i > 0 {
				sb.WriteString(", ")
			}
			fmt.Fprintf(&sb, "%d", p)
		}
		sb.WriteString("]")
	}
	sb.WriteString("]\n\n[nodes]\n")
	keys := make([]uint64, 0, len(c.Nodes))
	for k := range c.Nodes {
		id, _ := strconv.ParseUint(k, 10, 32)
		keys = append(keys, id)
	}
	slices.Sort(keys)
	for _, id := range keys {
		fmt.Fprintf(&sb, "%d = %s\n", id, q(c.Nodes[strconv.FormatUint(id, 10)]))
	}
	c.formatGossip(&sb)
	c.formatLimits(&sb)
	c.formatKV(&sb)
	return sb.String()
}
