package node

// Gossip membership in the node: one membership.Node (the pure gossip
// core) driven from the node's loop goroutine, its messages carried as
// wire.Gossip frames on the protocol's connections.
//
// What gossip does here:
//
//   - Liveness. gossipDetector is the protocol core's failure detector:
//     a member is suspected when gossip's phi-accrual detector convicts
//     it and nothing came from it directly for a quarter of
//     Config.ElectionTicks (at least 2 ticks), or when no protocol
//     message came from it directly for ElectionTicks. A conviction
//     alone is not enough: a loaded member's gossip heartbeats wait
//     behind its protocol work (and the receiver's), and phi convicts
//     it while its protocol messages keep arriving. A failure-free
//     weft bench at 2 groups and 32-180 shared clients saw 28
//     convictions in 2.5 minutes and leaders replaced in the middle of
//     its rows (docs/batching.md); a message stepped a moment ago is
//     better evidence than a relayed heartbeat. Gossip's verdict adapts
//     to the observed heartbeat intervals and, with fast rounds, is the
//     first to see a crash (the demo: ~0.4 s with 20 ms rounds, against
//     a 600 ms direct timeout). The direct timeout is needed too: gossip relays
//     heartbeats, so a leader cut off from its followers alone (a partial
//     partition, found by demo's TestFaultPartitionLeader) stays UP in
//     everyone's gossip while the group cannot make progress; only the
//     silence of the direct link reveals it (and makes the cut-off leader
//     step down for lack of a quorum).
//   - Soft state. Each node publishes its group, role, ballot and client
//     address (membership.KeyGroup, KeyRole, KeyBallot, KeyClientAddr) and
//     STATUS=NORMAL; any node answers a client's VIEW_REQUEST from its
//     view, so a client finds every group's leader through any node.
//   - Departures. Leave announces LEFT and stops gossip (the agent then
//     exits); Assassinate removes a dead member's record for good.
//
// Gossip never decides anything the protocol relies on for safety: group
// composition is fixed by the configuration, and a wrong verdict only
// costs an unneeded ballot (or a late one).

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/storage/vfs"
	"github.com/weft-dev/weft/wire"
)

// genFile is the file, in DataDir, holding the last gossip generation.
const genFile = "gossip-generation"

// Member is one row of a node's membership view (weft members).
type Member struct {
	ID         wire.ProcID  `json:"id"`
	Self       bool         `json:"self"`
	Addr       string       `json:"addr"`
	Group      wire.GroupID `json:"group"`
	Role       string       `json:"role"`
	Ballot     wire.Ballot  `json:"ballot"`
	Status     string       `json:"status"` // UP, DOWN, JOINING, LEFT, REMOVED, UNKNOWN
	Phi        float64      `json:"phi"`
	Generation uint64       `json:"generation"`
	Heartbeat  uint64       `json:"heartbeat"`
	// Load is the member's delivery rate (deliveries per second over its
	// last second), Release its weft build.
	Load    string `json:"load"`
	Release string `json:"release"`
	// SeedDigest is the member's published seed-list digest
	// (membership.SeedDigest); SeedMismatch flags a list that differs
	// from the majority's among the live members (every list when none
	// has a majority). See gossip_advice.go.
	SeedDigest   string `json:"seed_digest,omitempty"`
	SeedMismatch bool   `json:"seed_mismatch,omitempty"`
	// ClockOffsetSeconds is the member's clock minus this node's, as
	// gossip estimates it (nil: not measured yet), within
	// ±ClockDelaySeconds/2; ClockSkewed: beyond gossip's threshold.
	ClockOffsetSeconds *float64 `json:"clock_offset_seconds,omitempty"`
	ClockDelaySeconds  float64  `json:"clock_delay_seconds,omitempty"`
	ClockSkewed        bool     `json:"clock_skewed,omitempty"`
}

// Member statuses.
const (
	MemberUp      = "UP"
	MemberDown    = "DOWN"
	MemberJoining = "JOINING" // in the view, not judged yet
	MemberLeft    = membership.StatusLeft
	MemberRemoved = membership.StatusRemoved
	MemberUnknown = "UNKNOWN" // configured, never heard of
)

// verdict is gossip's judgement of a member.
type verdict int8

const (
	unjudged verdict = iota
	judgedUp
	judgedDown // convicted by phi: counts once the direct link is quiet too
	judgedGone // departed (LEFT) or removed: counts at once
)

// down reports whether v says the member is down, for the view.
func (v verdict) down() bool { return v == judgedDown || v == judgedGone }

// gossipDetector is the protocol core's failure detector (see the top of
// this file): gossip conviction or direct silence. It is called from the
// node's loop only.
type gossipDetector struct {
	// leaving: this node announced its departure; it suspects nobody, so
	// it never starts a ballot on its way out.
	leaving bool
	verdict map[wire.ProcID]verdict
	// quiet is how long the direct link must have been silent, in ticks,
	// for gossip's conviction to count (see the top of this file).
	quiet uint64
	// The direct link: silence for the timeout suspects a member (its
	// Heard is this detector's).
	*amcast.TimeoutDetector
}

func newGossipDetector(timeoutTicks int) *gossipDetector {
	return &gossipDetector{verdict: map[wire.ProcID]verdict{}, quiet: uint64(max(2, timeoutTicks/4)),
		TimeoutDetector: amcast.NewTimeoutDetector(uint64(timeoutTicks))}
}

// Suspected implements the protocols' Detector.
func (d *gossipDetector) Suspected(p wire.ProcID, now uint64) bool {
	if d.leaving {
		return false
	}
	switch v := d.verdict[p]; {
	case v == judgedGone || d.TimeoutDetector.Suspected(p, now):
		return true
	case v == judgedDown:
		return d.TimeoutDetector.SilentFor(p, now, d.quiet)
	}
	return false
}

// gossiper drives the membership core for a Node.
type gossiper struct {
	n       *Node
	g       *membership.Node
	det     *gossipDetector
	genPath string
	ticker  *time.Ticker
	left    bool // Leave completed: gossip stopped
	leaving bool // LEAVING published (leave.go)
	// What this node last published.
	role   string
	ballot wire.Ballot
	// Load: deliveries counted at the last publication, and when.
	loadAt        time.Time
	loadDelivered uint64
	stats         membership.Stats // as of the last round
	adv           adviser          // gossip_advice.go
	// skew shifts this gossiper's wall clock (Config.gossipClockSkew).
	skew time.Duration
}

// now is the wall time gossip runs on: stamps, generations, expiries.
func (gs *gossiper) now() time.Time { return time.Now().Add(gs.skew) }

// openGossip creates the membership core: it reads the stored generation
// and validates the configuration. The node's transport is not up yet.
func (n *Node) openGossip() error {
	cfg := n.cfg.Gossip
	if cfg == nil {
		return nil
	}
	mc := *cfg
	mc.ID = n.cfg.ID
	mc.ClusterName = n.cfg.Cluster
	if mc.ClusterName == "" {
		mc.ClusterName = "weft"
	}
	if len(mc.Seeds) == 0 {
		for g := range n.cfg.Topology.Groups {
			mc.Seeds = append(mc.Seeds, n.cfg.Topology.Members(wire.GroupID(g))[0])
		}
	}
	if g, ok := n.cfg.Topology.GroupOf(n.cfg.ID); ok && mc.ProbeTimeout > 0 && len(mc.ProbePeers) == 0 {
		// The lan profile probes directly between the members of a group,
		// which care most about each other's liveness
		// (membership/probe.go); groups are small, the cap is a guard.
		for _, p := range n.cfg.Topology.Members(g) {
			if p != n.cfg.ID && len(mc.ProbePeers) < membership.MaxProbePeers {
				mc.ProbePeers = append(mc.ProbePeers, p)
			}
		}
	}
	now := time.Now()
	mc.Rand = rand.NewPCG(uint64(now.UnixNano()), uint64(n.cfg.ID))
	// The verdicts are kept even when Config.Detector replaces gossip's
	// detector in the core: the view reports them.
	det := n.det
	if det == nil {
		det = newGossipDetector(n.cfg.ElectionTicks)
	}
	gs := &gossiper{n: n, genPath: filepath.Join(n.cfg.DataDir, genFile), det: det}
	stored, err := readGeneration(n.cfg.FS, gs.genPath)
	if err != nil {
		return err
	}
	mc.StoredGeneration = stored
	mc.Bootstrap = gs.openAdvice(mc.Seeds)
	gs.skew = n.cfg.gossipClockSkew
	if gs.g, err = membership.NewNode(mc, gs.now().UnixNano()); err != nil {
		return fmt.Errorf("node: gossip: %w", err)
	}
	group, _ := n.cfg.Topology.GroupOf(n.cfg.ID)
	for _, kv := range []struct {
		k membership.Key
		v string
	}{
		{membership.KeyStatus, membership.StatusNormal},
		{membership.KeyGroup, strconv.Itoa(int(group))},
		{membership.KeyReleaseVersion, release()},
		{membership.KeySeedDigest, gs.adv.digest},
	} {
		if err := gs.g.SetAppState(kv.k, kv.v); err != nil {
			return fmt.Errorf("node: gossip: %s: %w", kv.k, err)
		}
	}
	n.gossip = gs
	return nil
}

// start publishes the client address and starts the gossip rounds (after
// the transport is up: the address defaults to the one it listens on).
func (gs *gossiper) start() error {
	addr := gs.n.cfg.ClientAddr
	if addr == "" {
		addr = gs.n.tr.Addr().String()
	}
	if err := gs.g.SetAppState(membership.KeyClientAddr, addr); err != nil {
		return fmt.Errorf("node: gossip: %s: %w", membership.KeyClientAddr, err)
	}
	gs.ticker = time.NewTicker(gs.n.cfg.Gossip.Interval)
	return nil
}

func (gs *gossiper) tickC() <-chan time.Time {
	if gs == nil || gs.ticker == nil || gs.left {
		return nil
	}
	return gs.ticker.C
}

func (gs *gossiper) stop() {
	if gs != nil && gs.ticker != nil {
		gs.ticker.Stop()
	}
}

// tick runs one gossip round.
func (gs *gossiper) tick() error {
	now := gs.now()
	gs.g.SetBacklog(len(gs.n.inbox.ch))
	gs.publishLoad(now)
	gs.g.Tick(now.UnixNano())
	if err := gs.flush(); err != nil {
		return err
	}
	gs.stats = gs.g.Stats()
	gs.advise(now)
	return nil
}

// publishLoad publishes the delivery rate, once a second.
func (gs *gossiper) publishLoad(now time.Time) {
	if gs.left || now.Sub(gs.loadAt) < time.Second {
		return
	}
	delivered := gs.n.stats.Delivered
	if !gs.loadAt.IsZero() {
		rate := float64(delivered-gs.loadDelivered) / now.Sub(gs.loadAt).Seconds()
		gs.g.SetAppState(membership.KeyLoad, strconv.FormatFloat(rate, 'f', 0, 64)+"/s")
	}
	gs.loadAt, gs.loadDelivered = now, delivered
}

// step feeds one gossip frame.
func (gs *gossiper) step(from wire.ProcID, m *wire.Gossip) error {
	msg, err := membership.Decode(m.Data)
	if err != nil {
		gs.n.met.gossipRejected(rejectReason(err, "bad_frame"))
		gs.n.log.Debug("gossip: refused a frame", "from", uint32(from), "err", err)
		return nil
	}
	now := gs.now().UnixNano()
	if err := gs.g.Step(now, from, msg); err != nil {
		gs.n.met.gossipRejected(rejectReason(err, "bad_message"))
		gs.n.log.Debug("gossip: refused a message", "from", uint32(from), "msg", membership.Describe(msg), "err", err)
	} else if _, ok := msg.(*membership.Ack); ok {
		gs.n.met.ackReceived(from, now, gs.n.cfg.Gossip.ExchangeTimeout)
	}
	return gs.flush()
}

// flush handles the core's Ready: persist the generation, send, handle
// events.
func (gs *gossiper) flush() error {
	if !gs.g.HasReady() {
		return nil
	}
	rd := gs.g.Ready()
	if rd.Generation != 0 {
		if err := writeGeneration(gs.n.cfg.FS, gs.genPath, rd.Generation); err != nil {
			return err
		}
	}
	now := gs.now().UnixNano()
	for _, env := range rd.Messages {
		if _, ok := env.Msg.(*membership.Syn); ok {
			gs.n.met.synSent(env.To, now)
		}
		if err := gs.n.tr.Send(env.To, &wire.Gossip{Data: membership.Append(nil, env.Msg)}); err != nil {
			gs.n.stats.SendErrors++
		}
	}
	for _, e := range rd.Events {
		gs.n.met.gossipEvent(e)
		gs.event(e)
	}
	gs.g.Advance()
	return nil
}

func (gs *gossiper) event(e membership.Event) {
	log := gs.n.log
	switch e.Kind {
	case membership.EventAlive:
		gs.det.verdict[e.Node] = judgedUp
		log.Info("gossip: member up", "member", uint32(e.Node))
	case membership.EventDead:
		gs.det.verdict[e.Node] = judgedDown
		log.Warn("gossip: member convicted (phi)", "member", uint32(e.Node))
	case membership.EventLeft:
		gs.det.verdict[e.Node] = judgedGone
		log.Info("gossip: member departed", "member", uint32(e.Node), "status", e.Value)
	case membership.EventRestarted:
		log.Info("gossip: member restarted", "member", uint32(e.Node), "generation", e.Generation)
	case membership.EventRemoved:
		if e.Node == gs.n.cfg.ID {
			log.Error("gossip: this node was assassinated; restart it to rejoin", "generation", e.Generation)
		} else {
			gs.det.verdict[e.Node] = judgedGone
			log.Info("gossip: member removed", "member", uint32(e.Node))
		}
	case membership.EventLeaveComplete:
		gs.left = true
		log.Info("gossip: departure announced; gossip stopped")
		if gs.n.cfg.OnLeft != nil {
			gs.n.cfg.OnLeft()
		}
	case membership.EventAssassinated, membership.EventAssassinateRefused:
		log.Warn("gossip: "+e.Kind.String(), "member", uint32(e.Node), "reason", e.Value)
	case membership.EventClusterMismatch, membership.EventGenerationRejected, membership.EventStateSizeWarning, membership.EventStateLimit:
		log.Warn("gossip: " + e.String())
		gs.adviseEvent(e)
	case membership.EventClockSkew, membership.EventClockSkewCleared, membership.EventGenerationAhead:
		gs.adviseEvent(e)
	case membership.EventJoin, membership.EventChanged:
		log.Debug("gossip: " + e.String())
	}
}

// publish updates this node's role and ballot in gossip when they changed.
func (gs *gossiper) publish(role string, ballot wire.Ballot) {
	if gs == nil {
		return
	}
	if role != gs.role && !gs.left {
		if err := gs.g.SetAppState(membership.KeyRole, role); err == nil {
			gs.role = role
		}
	}
	if ballot != gs.ballot && !gs.left {
		if err := gs.g.SetAppState(membership.KeyBallot, ballot.String()); err == nil {
			gs.ballot = ballot
		}
	}
}

// members builds the membership view: every member gossip knows, plus
// configured replicas it never heard of.
func (gs *gossiper) members() []Member {
	now := gs.now().UnixNano()
	var out []Member
	seen := map[wire.ProcID]bool{}
	for _, m := range gs.g.Members() {
		seen[m.Node] = true
		r := Member{ID: m.Node, Self: m.Node == gs.n.cfg.ID, Generation: m.Generation, Heartbeat: m.Heartbeat,
			Phi: gs.g.Phi(m.Node, now)}
		for _, a := range gs.g.AppStates(m.Node) {
			switch a.Key {
			case membership.KeyClientAddr:
				r.Addr = a.Value
			case membership.KeyGroup:
				if g, err := strconv.ParseUint(a.Value, 10, 32); err == nil {
					r.Group = wire.GroupID(g)
				}
			case membership.KeyRole:
				r.Role = a.Value
			case membership.KeyLoad:
				r.Load = a.Value
			case membership.KeyReleaseVersion:
				r.Release = a.Value
			case membership.KeyBallot:
				r.Ballot, _ = ParseBallot(a.Value)
			case membership.KeyStatus:
				if head, _, _ := strings.Cut(a.Value, ","); head == membership.StatusLeft || head == membership.StatusRemoved {
					r.Status = head
				}
			case membership.KeySeedDigest:
				r.SeedDigest = a.Value
			}
		}
		gs.adviseMember(&r)
		switch {
		case r.Status != "":
		case m.Alive:
			r.Status = MemberUp
		case gs.det.verdict[m.Node].down():
			r.Status = MemberDown
		default:
			r.Status = MemberJoining
		}
		out = append(out, r)
	}
	topo := gs.n.cfg.Topology
	for g := range topo.Groups {
		for _, p := range topo.Members(wire.GroupID(g)) {
			if !seen[p] {
				out = append(out, Member{ID: p, Addr: gs.n.cfg.Peers[p], Group: wire.GroupID(g), Status: MemberUnknown})
			}
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// view answers a client's VIEW_REQUEST.
func (gs *gossiper) view() *wire.View {
	v := &wire.View{}
	for _, m := range gs.members() {
		if m.Status == MemberUnknown || m.Status == MemberLeft || m.Status == MemberRemoved {
			continue
		}
		v.Entries = append(v.Entries, wire.ViewEntry{ID: m.ID, Group: m.Group, Ballot: m.Ballot,
			Leader: m.Role == RoleLeader, Alive: m.Status == MemberUp, Addr: m.Addr})
	}
	return v
}

// RoleLeader is the role a group's leader publishes.
const RoleLeader = "leader"

// ParseBallot parses a ballot as written by wire.Ballot.String ("3.p1").
func ParseBallot(s string) (wire.Ballot, error) {
	n, p, ok := strings.Cut(s, ".p")
	if !ok {
		return wire.Ballot{}, fmt.Errorf("ballot %q: want N.pP", s)
	}
	nn, err1 := strconv.ParseUint(n, 10, 32)
	pp, err2 := strconv.ParseUint(p, 10, 32)
	if err1 != nil || err2 != nil {
		return wire.Ballot{}, fmt.Errorf("ballot %q: want N.pP", s)
	}
	return wire.Ballot{N: uint32(nn), P: wire.ProcID(pp)}, nil
}

// readGeneration reads the stored gossip generation (0 if there is none).
func readGeneration(fsys vfs.FS, path string) (uint64, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("node: gossip generation: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64))
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("node: gossip generation: %w", err)
	}
	g, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("node: gossip generation file %s: %w", path, err)
	}
	return g, nil
}

// writeGeneration stores the gossip generation durably (writeFileAtomic).
func writeGeneration(fsys vfs.FS, path string, gen uint64) error {
	return writeFileAtomic(fsys, path, []byte(strconv.FormatUint(gen, 10)+"\n"))
}

// roleName is the role published in gossip: RoleLeader for a group's
// leader, else the core's status in lower case ("follower",
// "recovering").
func roleName(status string, leader bool) string {
	if leader {
		return RoleLeader
	}
	return strings.ToLower(status)
}

// Members returns the node's gossip view, built on the node's loop when
// asked (nil without gossip or after the node stopped).
func (n *Node) Members() []Member {
	var ms []Member
	n.control(func() error {
		if n.gossip != nil {
			ms = n.gossip.members()
		}
		return nil
	})
	return ms
}

// errNoGossip is returned by Leave and Assassinate without Config.Gossip.
var errNoGossip = errors.New("node: gossip is not enabled")

// Assassinate removes member target from gossip for good (the operator's
// last resort for a member that is gone and will not leave): after
// watching it for the profile's AssassinateCheck without heartbeat
// progress, the node publishes REMOVED for it. It is refused (an event in
// the log) if the target shows progress. The returned error only covers
// starting the operation.
func (n *Node) Assassinate(target wire.ProcID) error {
	return n.control(func() error {
		if n.gossip == nil {
			return errNoGossip
		}
		return n.gossip.g.Assassinate(n.gossip.now().UnixNano(), target)
	})
}

// control runs f on the node's loop and returns its error.
func (n *Node) control(f func() error) error {
	res := make(chan error, 1)
	select {
	case n.ctl <- func() { res <- f() }:
		return <-res
	case <-n.done:
		return errClosed
	}
}

// release names this build for gossip (KeyReleaseVersion): the main
// module's version, or "devel".
func release() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return "weft " + v
}
