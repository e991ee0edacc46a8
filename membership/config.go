package membership

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/weft-dev/weft/membership/phi"
	"github.com/weft-dev/weft/wire"
)

// Config configures a Node. Start from a profile (Cassandra, LAN, Local),
// then set the identity fields: ID, ClusterName, Seeds, Rand and
// StoredGeneration.
type Config struct {
	// ID is this node's identity; the driver maps ids to transport
	// addresses (and may gossip the address as KeyGossipAddr).
	ID wire.ProcID
	// ClusterName must match the peers' (SYNs with another name are
	// dropped, counted and reported once per sender). 1..255 bytes.
	ClusterName string
	// Seeds are the rendezvous nodes. Use the same short list on every
	// node (2-3 per data centre), not every node. The node's own id is
	// ignored.
	Seeds []wire.ProcID
	// Bootstrap are peers this node knew in its previous life (the driver
	// persists them), contacted before the seeds on restart: while no
	// peer is up, each round sends a SYN to the next of them in turn, and
	// the seeds join in once every one was tried (so a node whose seeds
	// are gone or misconfigured still finds its cluster). They are
	// forgotten once a peer is up. The node's own id is ignored.
	Bootstrap []wire.ProcID
	// Rand is the node's randomness (peer selection). Required; the
	// simulator passes a seeded PCG, a real node any math/rand/v2 source.
	Rand rand.Source
	// StoredGeneration is the generation this node persisted in its
	// previous life (Ready.Generation), 0 on first start. The new
	// generation is max(StoredGeneration+1, now in seconds).
	StoredGeneration uint64

	// Interval is the gossip round: the driver calls Tick this often.
	Interval time.Duration
	// FD configures the phi-accrual failure detector and its guards.
	FD phi.Config
	// QuarantineDelay is how long gossip about an evicted endpoint is
	// ignored (and answered with its final record, so late holders evict
	// it too). It must cover the spread of eviction instants across nodes.
	QuarantineDelay time.Duration
	// LeftExpiry is how long a departed (LEFT or REMOVED) record is kept
	// and gossiped before every node evicts it. It must outlast any
	// partition a node could come back from without the news.
	LeftExpiry time.Duration
	// LeaveAnnounce is how long a leaving node keeps gossiping LEFT before
	// it stops (EventLeaveComplete).
	LeaveAnnounce time.Duration
	// AssassinateCheck is the window during which the target of an
	// Assassinate must show no heartbeat progress.
	AssassinateCheck time.Duration
	// ExchangeTimeout is how long a sent SYN waits for its ACK and a sent
	// ACK for its ACK2; late or unsolicited replies are dropped.
	ExchangeTimeout time.Duration
	// MaxGenerationAhead is the generation guard: a remote generation more
	// than this ahead of the local clock (not of the local generation,
	// CASSANDRA-10969) is ignored, for known and new endpoints alike.
	MaxGenerationAhead time.Duration
	// ClockSkewThreshold is the clock offset to a peer beyond which it is
	// reported (EventClockSkew), and how far ahead of the local clock a
	// new generation may be before it is reported (EventGenerationAhead);
	// see clock.go. 0 disables both and keeps no estimates (simulators
	// whose nodes share one clock).
	ClockSkewThreshold time.Duration

	// ProbePeers are the nodes this node probes directly (Ping/Pong every
	// round, probe.go): the members of its replica group, whose liveness
	// matters most to it. At most MaxProbePeers; the node's own id is
	// ignored. Empty, or ProbeTimeout 0: no direct probing.
	ProbePeers []wire.ProcID
	// ProbeTimeout is how long a probe peer may show no sign of life (no
	// Ping, no Pong, no relayed heartbeat progress) before this node
	// convicts it and publishes the verdict (KeyConvicted). 0 disables
	// probing; verdicts other nodes publish are applied regardless.
	ProbeTimeout time.Duration

	// MaxMessageBytes caps every encoded message; digests and deltas
	// beyond it are paged over later rounds.
	MaxMessageBytes int
	// MaxValueBytes caps one app-state value (SetAppState).
	MaxValueBytes int
	// MaxStateBytes caps the local view; beyond it new endpoints and
	// local app-state growth are refused.
	MaxStateBytes int
	// StateWarnBytes raises EventStateSizeWarning when the local view
	// grows past it.
	StateWarnBytes int
	// MaxPendingAcks caps the ACKs awaiting their ACK2 (and the SYNs
	// awaiting their ACK); SYNs beyond it are dropped and counted.
	MaxPendingAcks int

	// Apps, if set, is the AppTable the node stores app-state lists in;
	// nodes driven from one goroutine (a simulator) share one so that a
	// list held by many nodes is stored once. Nil: the node has its own.
	Apps *AppTable
	// Pool, if set, recycles the lists of the messages the node sends:
	// they are then valid only until Advance, so the driver must encode
	// or copy every message before it. For simulators; nodes driven from
	// one goroutine may share one. Nil: every message is freshly
	// allocated and may be kept.
	Pool *Pool
}

// Cassandra returns Cassandra's constants (the 5.0 line), for comparison
// with published behaviour and for WAN-ish deployments.
func Cassandra() Config {
	return Config{
		// GossipTask runs every 1000 ms.
		Interval: time.Second,
		FD: phi.Config{
			// phi_convict_threshold default.
			Threshold: 8,
			// ArrivalWindow SAMPLE_SIZE.
			WindowSize: 1000,
			// fd_initial_value_ms: 2 x the gossip interval; erring high
			// avoids flapping before the real mean is known.
			InitialInterval: 2 * time.Second,
			// fd_max_interval_ms defaults to the initial value: a long
			// partition must not teach the detector to wait longer.
			MaxInterval: 2 * time.Second,
			// max_local_pause_in_ms.
			MaxLocalPause: 5 * time.Second,
			// doStatusCheck skips when the gossip stage has pending work
			// and processed nothing in the last second.
			BacklogWindow: time.Second,
		},
		// QUARANTINE_DELAY = 2 x RING_DELAY (30 s).
		QuarantineDelay: 60 * time.Second,
		// "aVeryLongTime": LEFT/removed states expire 3 days after they
		// are written, long enough to outlive a weekend partition.
		LeftExpiry: 72 * time.Hour,
		// leaveRing sleeps max(RING_DELAY, 2 x interval) = 30 s announcing.
		LeaveAnnounce: 30 * time.Second,
		// assassinateEndpoint waits RING_DELAY for generation/heartbeat
		// changes (here without blocking the gossip loop).
		AssassinateCheck: 30 * time.Second,
		// Cassandra expires queued internode messages after the verb
		// timeout (10 s); a reply later than that is stale.
		ExchangeTimeout: 10 * time.Second,
		// MAX_GENERATION_DIFFERENCE = 86400 x 365 s.
		MaxGenerationAhead: 365 * 24 * time.Hour,
		// Cassandra has no check; 500 ms is where weft starts to warn (issue
		// #13): NTP keeps LAN hosts within a few ms, so half a second means
		// a host without time sync, and it is still far below the second
		// granularity of generations and departed-record expiries.
		ClockSkewThreshold: 500 * time.Millisecond,
		// Cassandra has no gossip-level cap (128 MiB internode ceiling);
		// 1 MiB still holds the digest list of ~80,000 endpoints, so only
		// oversized app state pages.
		MaxMessageBytes: 1 << 20,
		// A 256-vnode token list is ~5 KiB; 16 KiB leaves room and keeps
		// gossip for small values.
		MaxValueBytes: 16 << 10,
		// memberlist's push-pull limit that bit users was 20 MiB; 10,000
		// nodes with ~1 KiB each need ~10 MiB, so 32 MiB with a warning at
		// 24 MiB.
		MaxStateBytes:  32 << 20,
		StateWarnBytes: 24 << 20,
		// A node takes part in ~2-3 exchanges per round; 64 outstanding
		// ACKs is ~20 s of a seed's load and bounds memory (Scylla #5210).
		MaxPendingAcks: 64,
	}
}

// LAN returns fast rounds and detection for one data centre: every node
// convicts a crashed node within 2 s at 1,000 nodes under 10% message loss
// and 50 ms of delay jitter, with no false convictions (docs/operations.md,
// "Failure detection profiles", has the figures and the command).
//
// Why this design. Relayed heartbeats alone cannot do it: a node learns a
// peer's heartbeat through gossip with a lag of up to ~log N rounds that
// varies from round to round, so phi must wait many mean intervals to
// stay clear of false convictions (at 200 ms rounds the last node
// convicted after ~9 s with 10% loss, with false convictions), and
// lowering the threshold convicts live nodes. So the nodes that care most
// about a node, its replica group, probe it directly (SWIM's direct probe:
// a Ping and its Pong every round) and convict it after ProbeTimeout
// without any sign of life: no Ping, no Pong, and no relayed heartbeat
// progress (gossip's relays are the indirect probe SWIM sends through k
// other members, for free). Three independent channels per round make a
// false verdict under 10% loss about 1e-11 per peer and check. The verdict
// is published as gossip state (KeyConvicted) and every node applies it
// (probe.go), so the cluster learns of the crash in one gossip spread
// (~10 rounds at 1,000 nodes): rounds of 100 ms put ProbeTimeout + spread
// under 2 s. phi stays as the backstop (whole-group crashes, nodes without
// probe peers) with a higher threshold and a wider MaxInterval, so losses
// do not teach it a mean shorter than the real gaps.
func LAN() Config {
	c := Cassandra()
	// memberlist's Local interval; a digest list at 1,000 nodes is ~9 KB,
	// so ~160 KB/s per node of gossip, which a LAN carries easily.
	c.Interval = 100 * time.Millisecond
	// The backstop (whole-group crashes, nodes without probe peers):
	// relayed heartbeats at 1,000 nodes arrive with lags that vary by a
	// second, and at 100 ms rounds Cassandra's 8 (~18.4 mean intervals)
	// convicted live nodes under 10% loss (4 in 2 x 300 rounds); 12
	// (~27.6) did not, and verdicts make the speed.
	c.FD.Threshold = 12
	// 1000 samples at 10 rounds/s is ~1.7 minutes of history.
	c.FD.WindowSize = 1000
	// 4 x interval: a lost exchange or two must still count as an
	// interval, or the mean learns only the short gaps and phi then
	// convicts live nodes at the first long one.
	c.FD.InitialInterval = 400 * time.Millisecond
	c.FD.MaxInterval = 400 * time.Millisecond
	// 10 rounds: a pause that long already looks like silence to the
	// detector.
	c.FD.MaxLocalPause = time.Second
	// Processed nothing for 10 rounds with work queued: we are the
	// problem.
	c.FD.BacklogWindow = time.Second
	// 6 rounds without a Ping, a Pong or relayed progress: each round
	// brings one of them with probability ~0.99 under 10% loss, and the
	// verdict still spreads to 1,000 nodes within the 2 s.
	c.ProbeTimeout = 600 * time.Millisecond
	// Quarantine only has to cover clock skew and gossip spread around an
	// eviction; keep Cassandra's 60 s, it costs nothing.
	c.QuarantineDelay = 60 * time.Second
	// serf's TombstoneTimeout: a day covers an outage within a DC.
	c.LeftExpiry = 24 * time.Hour
	// ~30 rounds: a change reaches 1,000 nodes in ~10, 11 under loss.
	c.LeaveAnnounce = 3 * time.Second
	// 60 rounds: dozens of heartbeat arrivals from a live node.
	c.AssassinateCheck = 6 * time.Second
	// 20 rounds: far above any LAN round trip, jitter included.
	c.ExchangeTimeout = 2 * time.Second
	return c
}

// Local returns settings for clusters on one machine (tests, demos):
// rounds every 100 ms (memberlist Local), short expiries, and 64 KiB
// messages so paging is exercised.
func Local() Config {
	c := LAN()
	c.Interval = 100 * time.Millisecond
	c.FD.InitialInterval = 200 * time.Millisecond
	c.FD.MaxInterval = 200 * time.Millisecond
	// 5 rounds.
	c.FD.MaxLocalPause = 500 * time.Millisecond
	c.FD.BacklogWindow = 500 * time.Millisecond
	// Loopback loses nothing, and tests and demos tune phi alone, with
	// Cassandra's threshold.
	c.ProbeTimeout = 0
	c.FD.Threshold = 8
	// A local cluster restarts nodes quickly; 5 s is ~50 rounds.
	c.QuarantineDelay = 5 * time.Second
	// A minute: test clusters churn, nobody comes back after days.
	c.LeftExpiry = time.Minute
	c.LeaveAnnounce = 1500 * time.Millisecond
	c.AssassinateCheck = 3 * time.Second
	c.ExchangeTimeout = time.Second
	// One loopback UDP datagram.
	c.MaxMessageBytes = 64 << 10
	c.MaxValueBytes = 4 << 10
	c.MaxStateBytes = 8 << 20
	c.StateWarnBytes = 6 << 20
	return c
}

// validate checks c and returns the sorted, de-duplicated seeds without
// the node itself.
func (c *Config) validate() ([]wire.ProcID, error) {
	if err := c.FD.Validate(); err != nil {
		return nil, fmt.Errorf("membership: %w", err)
	}
	switch {
	case c.Rand == nil:
		return nil, errors.New("membership: Config.Rand is required")
	case len(c.ClusterName) == 0 || len(c.ClusterName) > MaxClusterName:
		return nil, fmt.Errorf("membership: cluster name must be 1..%d bytes", MaxClusterName)
	case c.Interval <= 0:
		return nil, errors.New("membership: Interval must be positive")
	case c.QuarantineDelay < 0, c.LeftExpiry <= 0, c.LeaveAnnounce < 0, c.AssassinateCheck <= 0,
		c.ExchangeTimeout <= 0, c.MaxGenerationAhead <= 0, c.ClockSkewThreshold < 0:
		return nil, errors.New("membership: durations must be positive (QuarantineDelay, LeaveAnnounce and ClockSkewThreshold may be 0)")
	case c.MaxValueBytes < 1 || c.MaxValueBytes > MaxValue:
		return nil, fmt.Errorf("membership: MaxValueBytes %d out of range 1..%d", c.MaxValueBytes, MaxValue)
	case c.MaxMessageBytes < 2*c.MaxValueBytes+1024:
		return nil, fmt.Errorf("membership: MaxMessageBytes %d must be at least 2 x MaxValueBytes + 1 KiB", c.MaxMessageBytes)
	case c.MaxStateBytes < 1 || c.StateWarnBytes < 1 || c.StateWarnBytes > c.MaxStateBytes:
		return nil, errors.New("membership: need 0 < StateWarnBytes <= MaxStateBytes")
	case c.MaxPendingAcks < 1:
		return nil, errors.New("membership: MaxPendingAcks must be positive")
	case c.FD.WindowSize > phi.MaxArenaWindow:
		return nil, fmt.Errorf("membership: FD.WindowSize %d exceeds %d", c.FD.WindowSize, phi.MaxArenaWindow)
	case c.ProbeTimeout < 0:
		return nil, errors.New("membership: ProbeTimeout must not be negative")
	case c.ProbeTimeout > 0 && c.ProbeTimeout < 2*c.Interval:
		return nil, fmt.Errorf("membership: ProbeTimeout %v must be at least 2 gossip intervals (%v): one lost probe must not convict", c.ProbeTimeout, 2*c.Interval)
	case len(c.ProbePeers) > MaxProbePeers:
		return nil, fmt.Errorf("membership: %d probe peers, at most %d", len(c.ProbePeers), MaxProbePeers)
	case c.ProbeTimeout > 0 && c.MaxValueBytes < maxVerdictsValue:
		return nil, fmt.Errorf("membership: MaxValueBytes %d cannot hold the verdicts of %d probe peers (%d bytes)", c.MaxValueBytes, MaxProbePeers, maxVerdictsValue)
	}
	var seeds []wire.ProcID
	for _, s := range c.Seeds {
		if s != c.ID {
			seeds = append(seeds, s)
		}
	}
	slices.Sort(seeds)
	return slices.Compact(seeds), nil
}
