package membership

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/weft-dev/weft/wire"
)

// Direct probing and published verdicts.
//
// Relayed heartbeats reach a node with a lag that varies by several rounds,
// so phi must wait many mean intervals before it may convict (config.go,
// LAN). The members of a replica group care most about each other's
// liveness, and they can afford to look directly: each round a node sends
// a Ping to each of its probe peers (Config.ProbePeers), which answer with
// a Pong; both carry the sender's generation and heartbeat. A probe peer
// that shows no sign of life for Config.ProbeTimeout (no Ping from it, no
// Pong, no relayed heartbeat progress: gossip's relays are SWIM's indirect
// probe, at no extra cost) is convicted, and the verdict is published in
// the node's own record as KeyConvicted: "node:generation:heartbeat" for
// each convicted peer, the newest life sign seen of it.
//
// Every node applies the verdicts it holds, its own included: an endpoint
// whose generation matches a verdict and whose heartbeat is at most
// verdictSlack above the verdict's is convicted at the next status check,
// and relayed progress up to that heartbeat does not revive it. A live
// node wrongly judged produces newer heartbeats, which are above the
// verdict and revive it wherever they arrive, and its probers withdraw the
// verdict at its next Ping or Pong. A restarted node has a new generation,
// to which no old verdict applies.
//
// Bounds: at most MaxProbePeers probes, verdict values of at most
// MaxProbePeers entries (longer ones are cut and counted), and a verdict
// table of at most maxVerdicts entries rebuilt only when a KeyConvicted
// value or the set of endpoints changed.

// MaxProbePeers bounds Config.ProbePeers and the entries read from one
// KeyConvicted value.
const MaxProbePeers = 16

// maxVerdictsValue is the longest KeyConvicted value a node publishes:
// MaxProbePeers entries of a 10-digit node, two 20-digit numbers and their
// separators.
const maxVerdictsValue = MaxProbePeers*(10+1+20+1+20) + MaxProbePeers - 1

// maxVerdicts bounds the verdict table (24 bytes an entry).
const maxVerdicts = 4096

// verdictSlack is how many versions an endpoint's heartbeat may be above a
// verdict's and still be condemned by it: the target's last heartbeats
// before the crash may have reached other nodes by gossip after its last
// Ping to the prober was lost. A live node is above it within two rounds.
const verdictSlack = 2

// probe is the state of one probe peer.
type probe struct {
	id        wire.ProcID
	gen, hb   uint64 // newest life sign: generation, heartbeat
	last      int64  // when the last life sign arrived
	convicted bool   // published in KeyConvicted
}

// verdict is one published conviction: target showed no sign of life to
// its prober after (gen, hb).
type verdict struct {
	target  wire.ProcID
	gen, hb uint64
}

// initProbes sets up Config.ProbePeers (without self, sorted, unique) at
// now, the start of each one's silence clock.
func (n *Node) initProbes(now int64) {
	if n.cfg.ProbeTimeout <= 0 {
		return
	}
	for _, id := range n.cfg.ProbePeers {
		if id != n.id {
			n.probes = append(n.probes, probe{id: id, last: now})
		}
	}
	slices.SortFunc(n.probes, func(a, b probe) int { return cmp.Compare(a.id, b.id) })
	n.probes = slices.CompactFunc(n.probes, func(a, b probe) bool { return a.id == b.id })
}

// findProbe returns the probe of id, or nil.
func (n *Node) findProbe(id wire.ProcID) *probe {
	i, ok := slices.BinarySearchFunc(n.probes, id, func(p probe, id wire.ProcID) int { return cmp.Compare(p.id, id) })
	if !ok {
		return nil
	}
	return &n.probes[i]
}

// sign records a life sign of p, received at now, and reports whether
// the published verdicts change (a conviction withdrawn or its heartbeat
// raised). A direct sign (a Ping or a Pong) dates from now. A relayed one
// (gossip brought a newer heartbeat) is as old as its trip through the
// cluster, up to a second at 1,000 nodes: counting it from now would make
// a crash's last heartbeats, still spreading, postpone the verdict. A node
// beats once a round, so a heartbeat d above the newest seen dates from
// about d rounds after it (later if app-state changes took versions too,
// which errs towards life).
func (p *probe) sign(now int64, gen, hb uint64, direct bool, ivl, timeout int64) bool {
	was := *p
	switch {
	case direct:
		if gen > p.gen || gen == p.gen && hb > p.hb {
			p.gen, p.hb = gen, hb
		}
		p.last = max(p.last, now)
	case gen > p.gen:
		p.gen, p.hb, p.last = gen, hb, max(p.last, now) // a new life
	case gen == p.gen && hb > p.hb:
		at := now
		if el := now - p.last; el > 0 {
			if d := hb - p.hb; d < uint64(el/ivl) {
				at = p.last + int64(d)*ivl
			}
		}
		p.hb, p.last = hb, max(p.last, at)
	default:
		return false
	}
	if p.convicted && now-p.last <= timeout {
		p.convicted = false
	}
	return was.convicted && (!p.convicted || p.hb != was.hb || p.gen != was.gen)
}

// probeRound runs in Tick before the status check: it takes relayed
// progress as life signs (dated as sign explains), sends the round's
// Pings, convicts the probe peers silent for ProbeTimeout (if the guards
// allow: after a local pause the silence is ours) and republishes the
// verdicts if they changed.
func (n *Node) probeRound(now int64, allow bool) {
	if len(n.probes) == 0 || n.leaving {
		return
	}
	self := n.self()
	ping := &Ping{Sent: max(now, 0), Generation: n.gen, Heartbeat: self.hb}
	size := Size(ping)
	changed := false
	for k := range n.probes {
		p := &n.probes[k]
		i := n.find(p.id)
		if i < 0 || n.eps[i].departed() {
			// Nothing to judge until it is known (again); a departure
			// is no crash.
			changed = changed || p.convicted
			p.convicted, p.last = false, now
			continue
		}
		e := &n.eps[i]
		if e.gen < p.gen {
			// A Ping from its next life came before gossip did: the
			// record is stale, not the node.
		} else if p.sign(now, e.gen, e.hb, false, int64(n.cfg.Interval), int64(n.cfg.ProbeTimeout)) {
			changed = true
		}
		n.send(p.id, ping, size)
		n.stats.PingSent++
		if allow && !p.convicted && now-p.last > int64(n.cfg.ProbeTimeout) {
			p.convicted = true
			changed = true
			n.stats.ProbeConvictions++
		}
	}
	if changed {
		n.publishVerdicts()
	}
}

// onPing answers a Ping from a known endpoint or a probe peer (whose
// record may not have reached this node yet, at start) with a Pong and
// takes it as a life sign of a probe peer.
func (n *Node) onPing(now int64, from wire.ProcID, m *Ping) {
	n.stats.PingRecv++
	if n.find(from) < 0 && n.findProbe(from) == nil {
		n.stats.UnknownPings++
		return
	}
	pong := &Pong{Echo: m.Sent, Generation: n.gen, Heartbeat: n.self().hb}
	n.send(from, pong, Size(pong))
	n.probeSign(now, from, m.Generation, m.Heartbeat)
}

// onPong takes a Pong answering one of this node's recent Pings (its echo
// within ProbeTimeout) as a life sign.
func (n *Node) onPong(now int64, from wire.ProcID, m *Pong) {
	n.stats.PongRecv++
	if m.Echo <= 0 || m.Echo > now || now-m.Echo > int64(n.cfg.ProbeTimeout) {
		n.stats.StaleReplies++
		return
	}
	n.probeSign(now, from, m.Generation, m.Heartbeat)
}

func (n *Node) probeSign(now int64, from wire.ProcID, gen, hb uint64) {
	p := n.findProbe(from)
	if p == nil || n.leaving {
		return
	}
	if i := n.find(from); i >= 0 && gen < n.eps[i].gen {
		n.stats.StaleReplies++ // from an earlier life, delayed
		return
	}
	if p.sign(now, gen, hb, true, int64(n.cfg.Interval), int64(n.cfg.ProbeTimeout)) {
		n.publishVerdicts()
	}
}

// publishVerdicts writes the convicted probe peers to KeyConvicted (empty
// when none; nothing if the key was never set).
func (n *Node) publishVerdicts() {
	var b strings.Builder
	for _, p := range n.probes {
		if !p.convicted {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(p.id), 10))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(p.gen, 10))
		b.WriteByte(':')
		b.WriteString(strconv.FormatUint(p.hb, 10))
	}
	v := b.String()
	if cur, ok := n.AppState(n.id, KeyConvicted); ok && cur.Value == v || !ok && v == "" {
		return
	}
	n.setLocal(n.self(), KeyConvicted, v)
	n.verdictsDirty = true
}

// parseVerdicts appends the entries of a KeyConvicted value to vs: at most
// MaxProbePeers, each "node:generation:heartbeat" in decimal. Malformed
// entries are skipped and counted (the value is remote input).
func (n *Node) parseVerdicts(vs []verdict, value string) []verdict {
	for k := 0; value != "" && k < MaxProbePeers; k++ {
		var entry string
		entry, value, _ = strings.Cut(value, ",")
		f := strings.SplitN(entry, ":", 3)
		if len(f) != 3 {
			n.stats.BadVerdicts++
			continue
		}
		id, err1 := strconv.ParseUint(f[0], 10, 32)
		gen, err2 := strconv.ParseUint(f[1], 10, 64)
		hb, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			n.stats.BadVerdicts++
			continue
		}
		if wire.ProcID(id) != n.id { // no node believes it is dead
			vs = append(vs, verdict{wire.ProcID(id), gen, hb})
		}
	}
	if value != "" {
		n.stats.BadVerdicts++ // more entries than any prober publishes
	}
	return vs
}

// rebuildVerdicts collects the verdicts of every non-departed endpoint,
// self included, keeping per target the newest (generation, heartbeat),
// at most maxVerdicts entries.
func (n *Node) rebuildVerdicts() {
	n.verdictsDirty = false
	vs := n.verdicts[:0]
	for i := range n.eps {
		e := &n.eps[i]
		if e.departed() {
			continue
		}
		app := n.appsOf(e)
		j, ok := slices.BinarySearchFunc(app, KeyConvicted, func(a AppState, k Key) int { return int(a.Key) - int(k) })
		if !ok || app[j].Value == "" {
			continue
		}
		vs = n.parseVerdicts(vs, app[j].Value)
		if len(vs) > maxVerdicts {
			n.stats.DroppedVerdicts += uint64(len(vs) - maxVerdicts)
			vs = vs[:maxVerdicts]
		}
	}
	slices.SortFunc(vs, func(a, b verdict) int {
		if c := cmp.Compare(a.target, b.target); c != 0 {
			return c
		}
		if a.gen != b.gen {
			return cmp.Compare(b.gen, a.gen) // newest first
		}
		return cmp.Compare(b.hb, a.hb)
	})
	n.verdicts = slices.CompactFunc(vs, func(a, b verdict) bool { return a.target == b.target })
}

// condemned reports whether a verdict covers e's current life and
// heartbeat.
func (n *Node) condemned(e *endpoint) bool {
	if n.verdictsDirty {
		n.rebuildVerdicts()
	}
	if len(n.verdicts) == 0 {
		return false
	}
	i, ok := slices.BinarySearchFunc(n.verdicts, e.id, func(v verdict, id wire.ProcID) int { return cmp.Compare(v.target, id) })
	if !ok {
		return false
	}
	v := &n.verdicts[i]
	return v.gen == e.gen && (e.hb <= v.hb || e.hb-v.hb <= verdictSlack)
}

// Verdict is a published conviction a node applies (Node.Verdicts):
// Target showed no sign of life to one of its probers after Heartbeat of
// Generation.
type Verdict struct {
	Target     wire.ProcID
	Generation uint64
	Heartbeat  uint64
}

// Verdicts returns the verdicts this node applies, sorted by target.
func (n *Node) Verdicts() []Verdict {
	if n.verdictsDirty {
		n.rebuildVerdicts()
	}
	out := make([]Verdict, len(n.verdicts))
	for i, v := range n.verdicts {
		out[i] = Verdict{Target: v.target, Generation: v.gen, Heartbeat: v.hb}
	}
	return out
}
