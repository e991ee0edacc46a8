package check

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Termination selects which termination property Check enforces.
type Termination int

const (
	// TermNone checks no termination (nor agreement).
	TermNone Termination = iota
	// TermAll: every replica of every destination group delivers every
	// multicast message (failure-free runs), except processes excused by
	// Options.Exclude.
	TermAll
	// TermQuorum: at least Replicas/2+1 replicas of every destination group
	// deliver every multicast message.
	TermQuorum
)

func (t Termination) String() string {
	switch t {
	case TermNone:
		return "none"
	case TermAll:
		return "all"
	case TermQuorum:
		return "quorum"
	}
	return "Termination(" + strconv.Itoa(int(t)) + ")"
}

// Options tunes Check.
type Options struct {
	// Termination selects the termination property. Agreement is checked
	// whenever it is not TermNone.
	Termination Termination
	// MaxViolations caps Report.Violations (Report.Total still counts all).
	// 0 means 20; a negative value means no cap.
	MaxViolations int
	// Exclude reports processes excused from TermAll (for example replicas
	// that crashed for good). nil excuses none. It does not affect
	// TermQuorum or agreement.
	Exclude func(proc int) bool
}

// Violation kinds.
const (
	KindValidity    = "validity"
	KindIntegrity   = "integrity"
	KindOrder       = "order"
	KindGTS         = "gts"
	KindTermination = "termination"
	KindAgreement   = "agreement"
)

var kinds = [...]string{KindValidity, KindIntegrity, KindOrder, KindGTS, KindTermination, KindAgreement}

// Violation is one property violation found in a history.
type Violation struct {
	Kind   string // one of the Kind* constants
	Detail string
}

func (v Violation) String() string { return v.Kind + ": " + v.Detail }

// Report is the result of Check.
type Report struct {
	// Violations holds the first violations found, at most
	// Options.MaxViolations of them.
	Violations []Violation
	// Total counts all violations, including those not kept.
	Total int
	// Multicasts and Deliveries count the multicast and deliver events.
	Multicasts, Deliveries int
	// Installs counts the install events (state transfers, install.go).
	Installs int

	counts [len(kinds)]int
}

// OK reports whether no violation was found.
func (r *Report) OK() bool { return r.Total == 0 }

// Count returns the number of violations of the given kind, including those
// beyond MaxViolations.
func (r *Report) Count(kind string) int {
	for i, k := range kinds {
		if k == kind {
			return r.counts[i]
		}
	}
	n := 0
	for _, v := range r.Violations {
		if v.Kind == kind {
			n++
		}
	}
	return n
}

// Error summarises the report: the counts by kind and the first violations.
func (r *Report) Error() string {
	var sb strings.Builder
	if r.OK() {
		fmt.Fprintf(&sb, "check: ok (%d multicasts, %d deliveries)", r.Multicasts, r.Deliveries)
		return sb.String()
	}
	fmt.Fprintf(&sb, "check: %d violation(s) in %d multicasts, %d deliveries (", r.Total, r.Multicasts, r.Deliveries)
	first := true
	for i, k := range kinds {
		if r.counts[i] == 0 {
			continue
		}
		if !first {
			sb.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&sb, "%s: %d", k, r.counts[i])
	}
	if first { // a Report built by hand
		fmt.Fprintf(&sb, "%d listed", len(r.Violations))
	}
	sb.WriteString(")")
	const show = 10
	for i, v := range r.Violations {
		if i == show {
			fmt.Fprintf(&sb, "\n  ... %d more", r.Total-show)
			break
		}
		sb.WriteString("\n  ")
		sb.WriteString(v.String())
	}
	return sb.String()
}

// Check checks h against the atomic multicast properties and returns a
// report of the violations found. It never panics on a malformed history:
// malformed input is reported as violations.
//
// Checks (all linear in the size of the history, except the search for the
// shortest cycle, which is bounded):
//
//   - validity: every deliver is of a multicast id, at a valid replica of
//     the group it states, that group is a destination, it is not before the
//     multicast (T), its Digest matches the multicast's (when both are
//     nonzero), and the process is not crashed. Malformed multicasts
//     (duplicate id, bad destination list) and unknown events are validity
//     violations too.
//   - integrity: no process delivers an id twice (crashes included).
//   - order: (a) within each group, every member's delivery sequence is a
//     prefix of the longest one, S_g; (b) the graph of sequence edges
//     S_g[i]→S_g[i+1] and gap edges last(S_g)→m′ (m′ addressed to g but not
//     in S_g) is acyclic. A cycle is reported as "a <g0 b <g1 a", naming the
//     group that ordered each edge ("<g1(gap)" for a gap edge).
//   - gts (deliveries with a nonzero GTS): one GTS per id, distinct ids have
//     distinct GTSs, and each process delivers in strictly increasing GTS
//     order.
//   - termination per opt.Termination, and agreement (when it is not
//     TermNone): a message delivered anywhere is delivered by a quorum of
//     every destination group. Both are reported per message; a message
//     short of a quorum somewhere can violate both.
//
// Deliveries that fail the identity part of validity (unknown id or process,
// wrong group, group not a destination) and duplicate deliveries are reported
// once and then left out of the other checks, so one fault gives one kind of
// violation where possible.
func Check(h *History, opt Options) *Report {
	if h == nil {
		h = &History{}
	}
	c := &checker{h: h, opt: opt, rep: &Report{}}
	c.max = opt.MaxViolations
	if c.max == 0 {
		c.max = 20
	}
	c.run()
	return c.rep
}

type checker struct {
	h   *History
	opt Options
	rep *Report
	max int

	G, R, N, Q int

	ids      map[string]int32
	name     []string  // per message
	optional []bool    // per message: Event.Optional
	dest     [][]int   // per message: sanitized destination groups
	mT       []int64   // per message: multicast time
	mDig     []uint64  // per message: multicast digest
	slot     []int32   // per message: index of its first (message, dest group) slot; len M+1
	cnt      []int32   // per slot: valid deliveries
	ever     []bool    // per slot: delivered by some incarnation (wipes do not clear it)
	bits     []uint64  // per slot*R + replica: delivered
	seq      [][]int32 // per process: delivery sequence (valid, first deliveries)

	mGTS     []GTS   // per message: first GTS seen
	mGTSProc []int32 // per message: process that delivered with mGTS
	gtsBad   []bool  // per message: GTS disagreement reported

	installs []install  // state transfers, resolved by splice (install.go)
	inc      []int      // per process: incarnation (wipes so far)
	arch     []archived // sequences of wiped incarnations
}

func (c *checker) want() bool { return c.max < 0 || len(c.rep.Violations) < c.max }

func (c *checker) add(kind string, detail string) {
	c.count(kind)
	if c.want() {
		c.rep.Violations = append(c.rep.Violations, Violation{Kind: kind, Detail: detail})
	}
}

// addf is add with formatting done only when the violation is kept.
func (c *checker) addf(kind string, format string, args ...any) {
	keep := c.want()
	c.count(kind)
	if keep {
		c.rep.Violations = append(c.rep.Violations, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
}

func (c *checker) count(kind string) {
	c.rep.Total++
	for i, k := range kinds {
		if k == kind {
			c.rep.counts[i]++
			return
		}
	}
}

func (c *checker) run() {
	cfg := c.h.Config
	if cfg.Groups < 1 || cfg.Replicas < 1 || cfg.Groups > maxProcs || cfg.Replicas > maxProcs || cfg.Groups*cfg.Replicas > maxProcs {
		for _, ev := range c.h.Events {
			switch ev.Ev {
			case EvMulticast:
				c.rep.Multicasts++
			case EvDeliver:
				c.rep.Deliveries++
			}
		}
		c.addf(KindValidity, "invalid config: groups=%d replicas=%d", cfg.Groups, cfg.Replicas)
		return
	}
	c.G, c.R = cfg.Groups, cfg.Replicas
	c.N, c.Q = c.G*c.R, cfg.Quorum()

	c.multicasts()
	c.events()
	c.splice()
	c.distinctGTS()
	c.prefixes()
	c.graph()
	c.termination()
}

// multicasts indexes the multicast events (pass 1).
func (c *checker) multicasts() {
	evs := c.h.Events
	nm := 0
	for i := range evs {
		if evs[i].Ev == EvMulticast {
			nm++
		}
	}
	c.ids = make(map[string]int32, nm)
	c.name = make([]string, 0, nm)
	c.dest = make([][]int, 0, nm)
	c.mT = make([]int64, 0, nm)
	c.mDig = make([]uint64, 0, nm)
	c.slot = make([]int32, 0, nm+1)
	total := int32(0)
	perProc := make([]int32, c.N) // deliveries per process, to size c.seq
	for i := range evs {
		ev := &evs[i]
		if ev.Ev != EvMulticast {
			if ev.Ev == EvDeliver && ev.Proc >= 0 && ev.Proc < c.N {
				perProc[ev.Proc]++
			}
			continue
		}
		c.rep.Multicasts++
		if m, dup := c.ids[ev.ID]; dup {
			c.addf(KindValidity, "message %s multicast twice (t=%d, first at t=%d)", ev.ID, ev.T, c.mT[m])
			continue
		}
		dest := ev.Dest
		if !validDest(dest, c.G) {
			c.addf(KindValidity, "message %s multicast with invalid dest %v (want non-empty, sorted, distinct, in [0,%d))", ev.ID, dest, c.G)
			dest = sanitizeDest(dest, c.G)
		}
		m := int32(len(c.name))
		c.ids[ev.ID] = m
		c.name = append(c.name, ev.ID)
		c.optional = append(c.optional, ev.Optional)
		c.dest = append(c.dest, dest)
		c.mT = append(c.mT, ev.T)
		c.mDig = append(c.mDig, ev.Digest)
		c.slot = append(c.slot, total)
		total += int32(len(dest))
	}
	c.slot = append(c.slot, total)
	M := len(c.name)
	c.cnt = make([]int32, total)
	c.ever = make([]bool, total)
	c.bits = make([]uint64, (int(total)*c.R+63)/64)
	c.mGTS = make([]GTS, M)
	c.mGTSProc = make([]int32, M)
	c.gtsBad = make([]bool, M)
	c.seq = make([][]int32, c.N)
	for p, n := range perProc {
		c.seq[p] = make([]int32, 0, n)
	}
}

func validDest(d []int, G int) bool {
	if len(d) == 0 {
		return false
	}
	for i, g := range d {
		if g < 0 || g >= G || (i > 0 && d[i-1] >= g) {
			return false
		}
	}
	return true
}

func sanitizeDest(d []int, G int) []int {
	out := make([]int, 0, len(d))
	for _, g := range d {
		if g >= 0 && g < G {
			out = append(out, g)
		}
	}
	sort.Ints(out)
	k := 0
	for i, g := range out {
		if i == 0 || out[k-1] != g {
			out[k] = g
			k++
		}
	}
	return out[:k]
}

// destIndex returns the position of g in dest(m), or -1.
func (c *checker) destIndex(m int32, g int) int {
	for i, x := range c.dest[m] {
		if x == g {
			return i
		}
		if x > g {
			break
		}
	}
	return -1
}

// events checks validity, integrity and per-process GTS order, and builds
// the per-process sequences (pass 2).
func (c *checker) events() {
	crashed := make([]bool, c.N)
	lastGTS := make([]GTS, c.N)
	lastMsg := make([]int32, c.N)
	c.inc = make([]int, c.N)
	evs := c.h.Events
	for i := range evs {
		ev := &evs[i]
		switch ev.Ev {
		case EvMulticast:
		case EvCrash, EvRestart:
			if ev.Proc < 0 || ev.Proc >= c.N {
				c.addf(KindValidity, "%s of unknown process %d at t=%d", ev.Ev, ev.Proc, ev.T)
				continue
			}
			crashed[ev.Proc] = ev.Ev == EvCrash
		case EvDeliver:
			c.rep.Deliveries++
			c.deliver(ev, crashed, lastGTS, lastMsg)
		case EvInstall:
			c.recordInstall(ev, crashed, lastGTS)
		case EvWipe:
			c.wipe(ev, lastGTS)
		default:
			c.addf(KindValidity, "event %d: unknown ev %q", i, ev.Ev)
		}
	}
}

func (c *checker) deliver(ev *Event, crashed []bool, lastGTS []GTS, lastMsg []int32) {
	p := ev.Proc
	if p < 0 || p >= c.N {
		c.addf(KindValidity, "%s delivered at unknown process %d (t=%d)", ev.ID, p, ev.T)
		return
	}
	g := p / c.R
	if ev.Group != g {
		c.addf(KindValidity, "%s delivered at proc %d stated as group %d, but proc %d is in group %d (t=%d)", ev.ID, p, ev.Group, p, g, ev.T)
		return
	}
	m, ok := c.ids[ev.ID]
	if !ok {
		c.addf(KindValidity, "proc %d (g%d) delivered %s, which was never multicast (t=%d)", p, g, ev.ID, ev.T)
		return
	}
	di := c.destIndex(m, g)
	if di < 0 {
		c.addf(KindValidity, "proc %d delivered %s in group %d, not in its dest %v (t=%d)", p, ev.ID, g, c.dest[m], ev.T)
		return
	}
	if crashed[p] {
		c.addf(KindValidity, "proc %d delivered %s while crashed (t=%d)", p, ev.ID, ev.T)
	}
	if ev.T < c.mT[m] {
		c.addf(KindValidity, "proc %d delivered %s at t=%d, before its multicast at t=%d", p, ev.ID, ev.T, c.mT[m])
	}
	if ev.Digest != 0 && c.mDig[m] != 0 && ev.Digest != c.mDig[m] {
		c.addf(KindValidity, "proc %d delivered %s with payload digest %016x, multicast had %016x (t=%d)", p, ev.ID, ev.Digest, c.mDig[m], ev.T)
	}
	s := int(c.slot[m]) + di
	bit := s*c.R + (p - g*c.R)
	if c.bits[bit>>6]&(1<<(bit&63)) != 0 {
		c.addf(KindIntegrity, "proc %d delivered %s more than once (again at t=%d)", p, ev.ID, ev.T)
		return
	}
	c.bits[bit>>6] |= 1 << (bit & 63)
	c.cnt[s]++
	c.ever[s] = true
	c.seq[p] = append(c.seq[p], m)

	if ev.GTS.IsZero() {
		return
	}
	switch first := c.mGTS[m]; {
	case first.IsZero():
		c.mGTS[m] = ev.GTS
		c.mGTSProc[m] = int32(p)
	case first != ev.GTS && !c.gtsBad[m]:
		c.gtsBad[m] = true
		c.addf(KindGTS, "%s delivered with gts %v at proc %d but %v at proc %d", ev.ID, first, c.mGTSProc[m], ev.GTS, p)
	}
	if last := lastGTS[p]; !last.IsZero() && !last.Less(ev.GTS) {
		c.addf(KindGTS, "proc %d delivered %s with gts %v after %s with gts %v (not increasing)", p, ev.ID, ev.GTS, c.name[lastMsg[p]], last)
	}
	lastGTS[p] = ev.GTS
	lastMsg[p] = m
}

// distinctGTS checks that distinct messages carry distinct GTSs.
func (c *checker) distinctGTS() {
	owner := make(map[GTS]int32)
	for m, ts := range c.mGTS {
		if ts.IsZero() {
			continue
		}
		if o, dup := owner[ts]; dup {
			c.addf(KindGTS, "%s and %s both delivered with gts %v", c.name[o], c.name[m], ts)
			continue
		}
		owner[ts] = int32(m)
	}
}

// longest returns the member of g with the longest sequence (lowest id on
// ties).
func (c *checker) longest(g int) int {
	best := g * c.R
	for p := g*c.R + 1; p < (g+1)*c.R; p++ {
		if len(c.seq[p]) > len(c.seq[best]) {
			best = p
		}
	}
	return best
}

// prefixes checks that every member's sequence is a prefix of its group's
// longest sequence.
func (c *checker) prefixes() {
	for g := 0; g < c.G; g++ {
		L := c.longest(g)
		S := c.seq[L]
		for p := g * c.R; p < (g+1)*c.R; p++ {
			if p == L {
				continue
			}
			c.prefixOf(g, p, c.seq[p], L, S)
		}
	}
	for _, a := range c.arch {
		g := a.proc / c.R
		L := c.longest(g)
		c.prefixOf(g, a.proc, a.seq, L, c.seq[L])
	}
}

// prefixOf checks that process p's sequence seq is a prefix of S, the
// sequence of process L of group g.
func (c *checker) prefixOf(g, p int, seq []int32, L int, S []int32) {
	for i, m := range seq {
		if i >= len(S) {
			return // a wiped incarnation that got further: compatible so far
		}
		if S[i] != m {
			c.addf(KindOrder, "group %d: proc %d delivered %s as its delivery #%d, but proc %d delivered %s there (not a prefix)", g, p, c.name[m], i+1, L, c.name[S[i]])
			return
		}
	}
}

// termination checks Options.Termination and agreement.
func (c *checker) termination() {
	if c.opt.Termination == TermNone {
		return
	}
	var excluded []bool
	if c.opt.Termination == TermAll && c.opt.Exclude != nil {
		excluded = make([]bool, c.N)
		for p := range excluded {
			excluded[p] = c.opt.Exclude(p)
		}
	}
	has := func(s, i int) bool {
		bit := s*c.R + i
		return c.bits[bit>>6]&(1<<(bit&63)) != 0
	}
	// lacking reports whether slot s (group g) fails the termination
	// property, and appends a description to *desc if desc is not nil.
	lacking := func(s, g int, desc *[]string) bool {
		switch c.opt.Termination {
		case TermAll:
			bad := false
			var procs []string
			for i := 0; i < c.R; i++ {
				p := g*c.R + i
				if has(s, i) || (excluded != nil && excluded[p]) {
					continue
				}
				bad = true
				if desc == nil {
					break
				}
				procs = append(procs, strconv.Itoa(p))
			}
			if bad && desc != nil {
				*desc = append(*desc, "g"+strconv.Itoa(g)+" procs "+strings.Join(procs, ","))
			}
			return bad
		case TermQuorum:
			return c.underQuorum(s, g, desc)
		}
		return false
	}
	var desc []string
	for m := range c.name {
		base := int(c.slot[m])
		anywhere := false
		for di := range c.dest[m] {
			if c.cnt[base+di] > 0 {
				anywhere = true
				break
			}
		}
		for di, g := range c.dest[m] {
			if c.optional[m] && !anywhere {
				break // never delivered: allowed for an optional message
			}
			if !lacking(base+di, g, nil) {
				continue
			}
			if !c.want() {
				c.count(KindTermination)
				break
			}
			desc = desc[:0]
			for dj, h := range c.dest[m] {
				lacking(base+dj, h, &desc)
			}
			c.addf(KindTermination, "%s (dest %v) not delivered by %s: %s", c.name[m], c.dest[m], c.opt.Termination, strings.Join(desc, "; "))
			break
		}
		if !anywhere {
			continue
		}
		for di, g := range c.dest[m] {
			if !c.underQuorum(base+di, g, nil) {
				continue
			}
			if !c.want() {
				c.count(KindAgreement)
				break
			}
			desc = desc[:0]
			for dj, h := range c.dest[m] {
				c.underQuorum(base+dj, h, &desc)
			}
			c.addf(KindAgreement, "%s (dest %v) was delivered, but not by a quorum (%d of %d) of: %s", c.name[m], c.dest[m], c.Q, c.R, strings.Join(desc, "; "))
			break
		}
	}
}

// underQuorum reports whether fewer than a quorum of group g delivered the
// message of slot s, describing the shortfall in *desc if desc is not nil.
func (c *checker) underQuorum(s, g int, desc *[]string) bool {
	n := int(c.cnt[s])
	if n >= c.Q {
		return false
	}
	if desc != nil {
		*desc = append(*desc, "g"+strconv.Itoa(g)+" delivered by "+strconv.Itoa(n))
	}
	return true
}
