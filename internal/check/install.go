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

// install is one install event, held until every delivery was seen.
type install struct {
	proc int
	at   int // length of the process's sequence when it installed
	gts  GTS
	t    int64
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
	c.installs = append(c.installs, install{proc: p, at: len(c.seq[p]), gts: ev.GTS, t: ev.T})
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
			if c.cnt[int(c.slot[m])+di] > 0 {
				order[g] = append(order[g], int32(m))
			}
		}
	}
	for g := range order {
		o := order[g]
		sort.Slice(o, func(i, j int) bool { return c.mGTS[o[i]].Less(c.mGTS[o[j]]) })
	}
	byProc := make([][]install, c.N)
	for _, in := range c.installs {
		byProc[in.proc] = append(byProc[in.proc], in)
	}
	for p, ins := range byProc {
		if len(ins) == 0 {
			continue
		}
		g := p / c.R
		o := order[g]
		old := c.seq[p]
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
				c.mark(m, g, p)
				seq = append(seq, m)
			}
		}
		c.seq[p] = append(seq, old[from:]...)
	}
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
