package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/wire"
)

// Gossip defaults and limits.
const (
	DefaultGossipProfile = "lan"
	MinGossipInterval    = 5 * time.Millisecond
	MaxGossipInterval    = time.Minute
	MaxPhiThreshold      = 100
	// DefaultClockSkewThreshold is gossip.clock_skew_threshold's default
	// (membership.Cassandra's), and the bounds below its range.
	DefaultClockSkewThreshold = 500 * time.Millisecond
	MinClockSkewThreshold     = time.Millisecond
	MaxClockSkewThreshold     = time.Hour
)

// Gossip is the [gossip] table: gossip membership in the agent, whose
// phi-accrual failure detector drives leader failover and whose soft state
// (group, role, ballot, client address) lets clients find leaders through
// any node.
type Gossip struct {
	// Enabled runs gossip in the agent. Key "gossip.enabled"; default
	// true. Without gossip, failures are detected by the protocol's tick
	// timeout (election_ticks), `weft members` has nothing to show and
	// clients find leaders by trial.
	Enabled bool `toml:"enabled"`
	// Profile is the base of every gossip constant: "local" (100 ms
	// rounds, short expiries; tests and demos on one machine), "lan"
	// (100 ms rounds, direct probes within each group: every node
	// convicts a crash within ~2 s) or "cassandra" (Cassandra's own: 1 s
	// rounds, ~20 s). Key "gossip.profile"; default "lan".
	Profile string `toml:"profile"`
	// Interval overrides the profile's gossip round; the failure
	// detector's initial and maximum mean interval and the lan probe
	// timeout keep the profile's ratio to the round (2 x Interval; 4 x
	// and 6 x for lan), its local-pause and backlog guards become 5 x
	// Interval, and the exchange timeout 10 x Interval. Conviction takes
	// about 18 x the observed heartbeat interval at phi_threshold 8. Key
	// "gossip.interval" (a duration); default: the profile's; 5ms to 1m.
	Interval time.Duration `toml:"interval"`
	// PhiThreshold is the phi above which a member is convicted. Key
	// "gossip.phi_threshold"; default: the profile's (8); above 0, at
	// most 100.
	PhiThreshold float64 `toml:"phi_threshold"`
	// Seeds are the ids gossip contacts when it knows no live member. Key
	// "gossip.seeds"; default: the first member of every group.
	Seeds []wire.ProcID `toml:"seeds"`
	// ClockSkewThreshold is the clock offset to a peer, as gossip
	// estimates it from its exchanges, beyond which the node warns (log,
	// weft_gossip_clock_offset_seconds, dashboard, weft members); a
	// peer's generation this far ahead of the local clock is reported too.
	// Key "gossip.clock_skew_threshold" (a duration); default 500ms; 1ms
	// to 1h.
	ClockSkewThreshold time.Duration `toml:"clock_skew_threshold"`
}

func (c *Config) setGossipDefaults(md toml.MetaData) {
	g := &c.Gossip
	if !md.IsDefined("gossip", "enabled") {
		g.Enabled = true
	}
	if !md.IsDefined("gossip", "profile") {
		g.Profile = DefaultGossipProfile
	}
	if !md.IsDefined("gossip", "clock_skew_threshold") {
		g.ClockSkewThreshold = DefaultClockSkewThreshold
	}
}

func (c *Config) validateGossip(seen map[wire.ProcID]int) error {
	g := &c.Gossip
	if !g.Enabled && g.Profile == "" {
		return nil // a Config built in Go with no gossip
	}
	if _, err := gossipProfile(g.Profile); err != nil {
		return &FieldError{Field: "gossip.profile", Msg: err.Error()}
	}
	if g.Interval != 0 && (g.Interval < MinGossipInterval || g.Interval > MaxGossipInterval) {
		return &FieldError{Field: "gossip.interval", Msg: fmt.Sprintf("must be between %v and %v, got %v", MinGossipInterval, MaxGossipInterval, g.Interval)}
	}
	if g.PhiThreshold < 0 || g.PhiThreshold > MaxPhiThreshold {
		return &FieldError{Field: "gossip.phi_threshold", Msg: fmt.Sprintf("must be above 0 and at most %d, got %v", MaxPhiThreshold, g.PhiThreshold)}
	}
	if t := g.ClockSkewThreshold; t != 0 && (t < MinClockSkewThreshold || t > MaxClockSkewThreshold) {
		return &FieldError{Field: "gossip.clock_skew_threshold", Msg: fmt.Sprintf("must be between %v and %v, got %v", MinClockSkewThreshold, MaxClockSkewThreshold, t)}
	}
	for _, s := range g.Seeds {
		if _, ok := seen[s]; !ok {
			return &FieldError{Field: "gossip.seeds", Msg: fmt.Sprintf("node %d is in no group", s)}
		}
	}
	return nil
}

func gossipProfile(name string) (membership.Config, error) {
	switch name {
	case "local":
		return membership.Local(), nil
	case "lan":
		return membership.LAN(), nil
	case "cassandra":
		return membership.Cassandra(), nil
	}
	return membership.Config{}, fmt.Errorf("must be local, lan or cassandra, got %q", name)
}

// Membership returns the gossip configuration for node.Config.Gossip, or
// nil when gossip is disabled. The node fills the identity fields.
func (c *Config) Membership() *membership.Config {
	g := &c.Gossip
	if !g.Enabled {
		return nil
	}
	mc, _ := gossipProfile(g.Profile) // validated
	if g.Interval != 0 {
		// The detector's windows keep the profile's ratio to the round
		// (2 rounds; 4 and a 6-round probe timeout for lan).
		p := mc.Interval
		mc.Interval = g.Interval
		mc.FD.InitialInterval = mc.FD.InitialInterval / p * g.Interval
		mc.FD.MaxInterval = mc.FD.MaxInterval / p * g.Interval
		mc.ProbeTimeout = mc.ProbeTimeout / p * g.Interval
		mc.FD.MaxLocalPause = 5 * g.Interval
		mc.FD.BacklogWindow = 5 * g.Interval
		mc.ExchangeTimeout = 10 * g.Interval
	}
	if g.PhiThreshold != 0 {
		mc.FD.Threshold = g.PhiThreshold
	}
	if g.ClockSkewThreshold != 0 {
		mc.ClockSkewThreshold = g.ClockSkewThreshold
	}
	mc.Seeds = append([]wire.ProcID(nil), g.Seeds...)
	return &mc
}

func (c *Config) formatGossip(sb *strings.Builder) {
	g := &c.Gossip
	fmt.Fprintf(sb, "\n[gossip]\nenabled = %t\n", g.Enabled)
	if g.Profile != "" {
		fmt.Fprintf(sb, "profile = %s\n", strconv.Quote(g.Profile))
	}
	if g.Interval != 0 {
		fmt.Fprintf(sb, "interval = %s\n", strconv.Quote(g.Interval.String()))
	}
	if g.PhiThreshold != 0 {
		fmt.Fprintf(sb, "phi_threshold = %s\n", strconv.FormatFloat(g.PhiThreshold, 'g', -1, 64))
	}
	if g.ClockSkewThreshold != 0 {
		fmt.Fprintf(sb, "clock_skew_threshold = %s\n", strconv.Quote(g.ClockSkewThreshold.String()))
	}
	if len(g.Seeds) > 0 {
		sb.WriteString("seeds = [")
		for i, s := range g.Seeds {
			if i > 0 {
				sb.WriteString(", ")
			}
			fmt.Fprintf(sb, "%d", s)
		}
		sb.WriteString("]\n")
	}
}
