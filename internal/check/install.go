package check

import "sort"

// State transfer (wbcast's SNAPSHOT; amcast.Delivery.Install): an
// "install" event says that process Proc's delivered prefix jumped to GTS,
// the gts of the last message of a prefix of its group's order. The
// process delivered none of the messages between its last delivery and
// that point itself; the checker splices them into its sequence, taken
// from the group's order as every member's deliveries show it (all
// delivered messages of the group in gts order), and counts them as
// delivered there. Then the usual checks apply: the spliced sequence must
// be a prefix of the group's longest one (order), and the messages count
// for termination and agreement.
//
// An install whose point is no delivered message's gts in its group, or
// below the process's own last delivery, is a validity violation: the
// protocol claimed a prefix no member delivered.

// A "wipe" event says that process Proc lost its durable state (its disk):
// what it delivered is forgotten with it, and it starts a new incarnation
// that delivers (or installs) the group's order again from the start. Its
// old sequence is kept for the order checks; its deliveries no longer count
// for termination and agreement.

// install is one install event, held until every delivery was seen.
type install struct {
	proc int
	inc  int // the process's incarnation (wipes before it)
	at   int // length of the process's sequence when it installed
	gts  GTS
	t    int64
}

// archived is the sequence of a wiped incarnation.
type archived struct {
	proc, inc int
	seq       []int32
}

// wipe starts process p's next incarnation.
func (c *checker) wipe(ev *Event, lastGTS []GTS) {
	p := ev.Proc
	if p < 0 || p >= c.N {
		c.addf(KindValidity, "wipe of unknown process %d at t=%d", p, ev.T)
		return
	}
	g := p / c.R
	for _, m := range c.seq[p] {
		c.unmark(m, g, p)
	}
	c.arch = append(c.arch, archived{proc: p, inc: c.inc[p], seq: c.seq[p]})
	c.seq[p] = nil
	lastGTS[p] = GTS{}
	c.inc[p]++
}

func (c *checker) recordInstall(ev *Event, crashed []bool, lastGTS []GTS) {
	p := ev.Proc
	if p < 0 || p >= c.N || ev.Group != p/c.R {
		c.addf(KindValidity, "install at proc %d stated as group %d (t=%d)", p, ev.Group, ev.T)
		return
	}
	if crashed[p] {
		c.addf(KindValidity, "proc %d installed a snapshot while crashed (t=%d)", p, ev.T)
	}
	if last := lastGTS[p]; !last.IsZero() && !last.Less(ev.GTS) {
		c.addf(KindGTS, "proc %d installed a snapshot at gts %v after delivering gts %v (not increasing)", p, ev.GTS, last)
	}
	lastGTS[p] = ev.GTS
	c.installs = append(c.installs, install{proc: p, inc: c.inc[p], at: len(c.seq[p]), gts: ev.GTS, t: ev.T})
	c.rep.Installs++
}

// splice resolves the installs (after events, before prefixes).
func (c *checker) splice() {
	if len(c.installs) == 0 {
		return
	}
	// Each group's order: its delivered messages by gts.
	order := make([][]int32, c.G)
	for m := range c.name {
		if c.mGTS[m].IsZero() {
			continue
		}
		for di, g := range c.dest[m] {
			if c.ever[int(c.slot[m])+di] {
				order[g] = append(order[g], int32(m))
			}
		}
	}
	for g := range order {
		o := order[g]
		sort.Slice(o, func(i, j int) bool { return c.mGTS[o[i]].Less(c.mGTS[o[j]]) })
	}
	type key struct{ proc, inc int }
	byInc := map[key][]install{}
	for _, in := range c.installs {
		k := key{in.proc, in.inc}
		byInc[k] = append(byInc[k], in)
	}
	for i := range c.arch {
		a := &c.arch[i]
		if ins := byInc[key{a.proc, a.inc}]; len(ins) > 0 {
			a.seq = c.spliceSeq(a.proc, a.seq, ins, order[a.proc/c.R], false)
		}
	}
	for p := range c.seq {
		if ins := byInc[key{p, c.inc[p]}]; len(ins) > 0 {
			c.seq[p] = c.spliceSeq(p, c.seq[p], ins, order[p/c.R], true)
		}
	}
}

// spliceSeq returns old with the installs ins resolved against the group's
// order o; mark counts the spliced messages as delivered at p (the current
// incarnation's).
func (c *checker) spliceSeq(p int, old []int32, ins []install, o []int32, mark bool) []int32 {
	g := p / c.R
	var seq []int32
	from := 0
	for _, in := range ins {
		seq = append(seq, old[from:in.at]...)
		from = in.at
		j := sort.Search(len(o), func(i int) bool { return !c.mGTS[o[i]].Less(in.gts) })
		if j == len(o) || c.mGTS[o[j]] != in.gts {
			c.addf(KindValidity, "proc %d (g%d) installed a snapshot at gts %v, the gts of no message its group delivered (t=%d)", p, g, in.gts, in.t)
			continue
		}
		if len(seq) > j+1 {
			continue // below its own deliveries: reported as gts order
		}
		for _, m := range o[len(seq) : j+1] {
			if mark {
				c.mark(m, g, p)
			}
			seq = append(seq, m)
		}
	}
	return append(seq, old[from:]...)
}

// mark counts message m as delivered at process p of group g (spliced).
func (c *checker) mark(m int32, g, p int) {
	di := c.destIndex(m, g)
	if di < 0 {
		return
	}
	s := int(c.slot[m]) + di
	bit := s*c.R + (p - g*c.R)
	if c.bits[bit>>6]&(1<<(bit&63)) == 0 {
		c.bits[bit>>6] |= 1 << (bit & 63)
		c.cnt[s]++
	}
}

// unmark forgets that process p of group g delivered m (a wipe).
func (c *checker) unmark(m int32, g, p int) {
	di := c.destIndex(m, g)
	if di < 0 {
		return
	}
	s := int(c.slot[m]) + di
	bit := s*c.R + (p - g*c.R)
	if c.bits[bit>>6]&(1<<(bit&63)) != 0 {
		c.bits[bit>>6] &^= 1 << (bit & 63)
		c.cnt[s]--
	}
}
