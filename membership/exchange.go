package membership

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/weft-dev/weft/wire"
)

// Step feeds one message received from from at now. It returns an error
// for a message the node refuses as malformed (unsorted lists, invalid
// app states), from itself, or after the node stopped; the node's view is
// then unchanged. Protocol-level drops (wrong cluster, quarantined or
// future generations, stale replies, caps) are not errors: they are
// counted in Stats and reported as events where the spec asks for it.
func (n *Node) Step(now int64, from wire.ProcID, m Message) error {
	if n.stopped {
		return ErrStopped
	}
	if from == n.id {
		return fmt.Errorf("%w: message from self", ErrBadMessage)
	}
	switch m := m.(type) {
	case *Syn:
		if m == nil {
			break
		}
		if err := validDigests(m.Digests); err != nil {
			return err
		}
		if m.Sent < 0 {
			return fmt.Errorf("%w: %w: SYN sent at %d", ErrBadMessage, ErrBadTime, m.Sent)
		}
		n.lastStep = now
		n.stats.SynRecv++
		n.onSyn(now, from, m)
		return nil
	case *Ack:
		if m == nil {
			break
		}
		if err := validDigests(m.Requests); err != nil {
			return err
		}
		if err := validStates(m.States); err != nil {
			return err
		}
		if err := m.Times.check(); err != "" {
			return fmt.Errorf("%w: %w: ACK %s", ErrBadMessage, ErrBadTime, err)
		}
		n.lastStep = now
		n.stats.AckRecv++
		n.expirePending(now)
		n.onAck(now, from, m)
		return nil
	case *Ack2:
		if m == nil {
			break
		}
		if err := validStates(m.States); err != nil {
			return err
		}
		if err := m.Times.check(); err != "" {
			return fmt.Errorf("%w: %w: ACK2 %s", ErrBadMessage, ErrBadTime, err)
		}
		n.lastStep = now
		n.stats.Ack2Recv++
		n.expirePending(now)
		at, ok := takePending(&n.pendAck, from, m.Echo)
		if !ok {
			n.stats.StaleReplies++
			return nil
		}
		n.apply(now, m.States)
		n.clockSample(now, from, at, m.Times)
		return nil
	case *Ping:
		if m != nil {
			n.lastStep = now
			n.onPing(now, from, m)
			return nil
		}
	case *Pong:
		if m != nil {
			n.lastStep = now
			n.onPong(now, from, m)
			return nil
		}
	}
	return fmt.Errorf("%w: %T", ErrBadMessage, m)
}

func validDigests(ds []Digest) error {
	for i := 1; i < len(ds); i++ {
		if ds[i].Node <= ds[i-1].Node {
			return fmt.Errorf("%w: digests not strictly increasing by node at %d", ErrBadMessage, i)
		}
	}
	return nil
}

func validStates(ss []EndpointState) error {
	for i := range ss {
		s := &ss[i]
		if i > 0 && s.Node <= ss[i-1].Node {
			return fmt.Errorf("%w: states not strictly increasing by node at %d", ErrBadMessage, i)
		}
		if s.Heartbeat != 0 && s.Heartbeat <= s.Base {
			return fmt.Errorf("%w: state of %d: heartbeat not above base", ErrBadMessage, s.Node)
		}
		if len(s.States) > MaxItems {
			return fmt.Errorf("%w: state of %d: %d items", ErrBadMessage, s.Node, len(s.States))
		}
		for j := range s.States {
			a := &s.States[j]
			switch {
			case a.Key == KeyInvalid || j > 0 && a.Key <= s.States[j-1].Key:
				return fmt.Errorf("%w: state of %d: keys not strictly increasing from 1", ErrBadMessage, s.Node)
			case a.Version <= s.Base:
				return fmt.Errorf("%w: state of %d: item version not above base", ErrBadMessage, s.Node)
			case len(a.Value) > MaxValue:
				return fmt.Errorf("%w: state of %d: value of %d bytes", ErrBadMessage, s.Node, len(a.Value))
			}
		}
	}
	return nil
}

// seek returns the first index k >= i with eps[k].id >= id. Lists are
// merged in id order, and cluster ids are often dense (0..N-1), so it
// first tries the index that id's distance from eps[i] suggests, then a
// short scan, then a binary search.
func (n *Node) seek(i int, id wire.ProcID) int {
	if i >= len(n.eps) || n.eps[i].id >= id {
		return i
	}
	return n.seekFar(i, id)
}

func (n *Node) seekFar(i int, id wire.ProcID) int {
	eps := n.eps
	if d := uint64(id - eps[i].id); d < uint64(len(eps)-i) {
		if g := i + int(d); eps[g].id == id {
			return g
		}
	}
	for k := i + 1; k < len(eps) && k <= i+4; k++ {
		if eps[k].id >= id {
			return k
		}
	}
	return i + sort.Search(len(eps)-i, func(k int) bool { return eps[i+k].id >= id })
}

// budget tracks the bytes left in a message being built.
type budget struct {
	left  int  // bytes still allowed for entries
	used  int  // bytes of the entries added
	head  int  // bytes of the reply's stamps
	paged bool // something did not fit
}

// replyBudget is the budget of an ACK or ACK2 stamped with t: the cap
// minus the header, the stamps and two list counts.
func (n *Node) replyBudget(t Times) budget {
	h := sizeTimes(t)
	return budget{left: n.cfg.MaxMessageBytes - 2 - h - 2*binary.MaxVarintLen32, head: h}
}

func (b *budget) request(reqs []Digest, d Digest) []Digest {
	if s := sizeDigest(d); s <= b.left {
		b.left -= s
		b.used += s
		return append(reqs, d)
	}
	b.paged = true
	return reqs
}

// addDelta appends the part of e newer than base to states, within b.
func (n *Node) addDelta(b *budget, states []EndpointState, e *endpoint, base uint64) []EndpointState {
	if e.hb > base && n.apps.maxVer(e.app) <= base {
		// The common case, a heartbeat-only delta (delta's first case).
		size := uvarintLen(uint64(e.id)) + uvarintLen(e.gen) + uvarintLen(base) + uvarintLen(e.hb) + 1
		if size <= b.left {
			b.left -= size
			b.used += size
			return append(states, EndpointState{Node: e.id, Generation: e.gen, Base: base, Heartbeat: e.hb})
		}
	}
	s, size, paged, ok := n.delta(e, base, b.left)
	b.paged = b.paged || paged || !ok
	if !ok {
		return states
	}
	b.left -= size
	b.used += size
	return append(states, s)
}

// size is the encoded size of a reply with these lists.
func (b *budget) size(reqs, states int, ack bool) int {
	n := 2 + b.head + uvarintLen(uint64(states)) + b.used
	if ack {
		n += uvarintLen(uint64(reqs))
	}
	return n
}

// digests builds the round's digest list: one per known endpoint, sorted,
// or the next contiguous page of it if the whole list exceeds
// MaxMessageBytes. It returns the list, the SYN's encoded size and, from
// the same pass, the number of live and unreachable peers (departed
// endpoints and self excluded).
func (n *Node) digests(now int64) (ds []Digest, synSize, live, unr int) {
	cl := len(n.cfg.ClusterName)
	head := 2 + uvarintLen(uint64(max(now, 0))) + uvarintLen(uint64(cl)) + cl
	left := n.cfg.MaxMessageBytes - head - binary.MaxVarintLen32
	start := 0
	if n.cursor != 0 {
		start = sort.Search(len(n.eps), func(i int) bool { return n.eps[i].id >= n.cursor })
	}
	n.cursor = 0
	ds = n.digestList(len(n.eps) - start)
	size := 0
	full := false
	for i := range n.eps {
		e := &n.eps[i]
		if e.flags&fDeparted == 0 && e.id != n.id {
			if e.flags&fAlive != 0 {
				live++
			} else {
				unr++
			}
		}
		if i < start || full {
			continue
		}
		d := Digest{Node: e.id, Generation: e.gen, Version: n.maxVer(e)}
		s := sizeDigest(d)
		if size+s > left {
			n.cursor = e.id
			n.stats.PagedMessages++
			full = true
			continue
		}
		ds = append(ds, d)
		size += s
	}
	return ds, head + uvarintLen(uint64(len(ds))) + size, live, unr
}

// onSyn answers a SYN (the seed's examine): for each digest, send what the
// initiator lacks, request what this node lacks. If the digests do not
// mention this node, its own full record goes along (a weft addition: a
// node always introduces itself, so a newcomer learns its seed in the
// first exchange instead of waiting to be picked).
func (n *Node) onSyn(now int64, from wire.ProcID, m *Syn) {
	if m.Cluster != n.cfg.ClusterName {
		n.stats.ClusterMismatches++
		n.reportOnce(Event{Kind: EventClusterMismatch, Node: from, Value: m.Cluster})
		return
	}
	n.expirePending(now)
	if len(n.pendAck) >= n.cfg.MaxPendingAcks {
		n.stats.DroppedSyns++
		return
	}
	times := replyTimes(now, m.Sent)
	b := n.replyBudget(times)
	var nreq, nst int
	if n.pool != nil {
		// Pooled lists are reused: size them for the worst case rather
		// than pay a counting pass over every digest.
		nreq, nst = len(m.Digests), len(m.Digests)+1
	} else {
		nreq, nst = n.examineCounts(m.Digests)
	}
	var reqs []Digest
	var states []EndpointState
	if nreq > 0 {
		reqs = n.digestList(nreq)
	}
	if nst > 0 {
		states = n.stateList(nst)
	}
	i := 0
	self := n.find(n.id)
	introduced := false
	for _, d := range m.Digests {
		next := n.seek(i, d.Node)
		if !introduced && self >= i && self < next {
			// The initiator does not know us: introduce ourselves.
			states = n.addDelta(&b, states, &n.eps[self], 0)
			introduced = true
		}
		i = next
		if i < len(n.eps) && n.eps[i].id == d.Node {
			e := &n.eps[i]
			i++ // lists are strictly increasing: never needed again
			mv := n.maxVer(e)
			introduced = introduced || e.id == n.id
			if e.id == n.id && (d.Generation > e.gen || d.Generation == e.gen && d.Version > mv) {
				// Only this node writes its record: a newer copy is a
				// spoof (Assassinate) or a bug. Never request it.
				if d.Generation > e.gen {
					n.noteSuperseded(d.Generation)
				}
				continue
			}
			switch {
			case d.Generation > e.gen:
				if !n.tooFarAhead(now, d.Node, d.Generation) {
					reqs = b.request(reqs, Digest{Node: e.id, Generation: e.gen, Version: mv})
				}
			case d.Generation < e.gen:
				states = n.addDelta(&b, states, e, 0)
			case d.Version > mv:
				reqs = b.request(reqs, Digest{Node: e.id, Generation: e.gen, Version: mv})
			case d.Version < mv:
				states = n.addDelta(&b, states, e, d.Version)
			}
			continue
		}
		if t := n.quarantined(d.Node); t != nil {
			// Ignore it, and hand the final record to a holder of an
			// older copy so it evicts the endpoint too.
			n.stats.QuarantineDrops++
			switch {
			case d.Generation < t.ep.gen:
				states = n.addDelta(&b, states, &t.ep, 0)
			case d.Generation == t.ep.gen && d.Version < n.maxVer(&t.ep):
				states = n.addDelta(&b, states, &t.ep, d.Version)
			}
			continue
		}
		if !n.tooFarAhead(now, d.Node, d.Generation) {
			reqs = b.request(reqs, Digest{Node: d.Node})
		}
	}
	if !introduced { // this node sorts after every digest: append keeps the order
		states = n.addDelta(&b, states, n.self(), 0)
	}
	ack := &Ack{Times: times, Requests: reqs, States: states}
	if b.paged {
		n.stats.PagedMessages++
	}
	n.send(from, ack, b.size(len(reqs), len(states), true))
	n.stats.AckSent++
	if len(reqs) > 0 {
		n.pendAck = append(n.pendAck, pending{from, now})
	}
}

// examineCounts is a capacity hint for onSyn: how many requests and states
// (one more for the self-introduction) the digests will produce at most.
func (n *Node) examineCounts(ds []Digest) (reqs, states int) {
	i := 0
	for _, d := range ds {
		i = n.seek(i, d.Node)
		if i == len(n.eps) || n.eps[i].id != d.Node {
			reqs++ // unknown (or quarantined: a state instead)
			continue
		}
		e := &n.eps[i]
		i++
		mv := n.maxVer(e)
		switch {
		case d.Generation > e.gen || d.Generation == e.gen && d.Version > mv:
			reqs++
		case d.Generation < e.gen || d.Version < mv:
			states++
		}
	}
	return reqs, states + 1
}

// onAck applies an ACK's states and answers its requests with an ACK2.
func (n *Node) onAck(now int64, from wire.ProcID, m *Ack) {
	at, ok := takePending(&n.pendSyn, from, m.Echo)
	if !ok {
		n.stats.StaleReplies++
		return
	}
	n.apply(now, m.States)
	n.clockSample(now, from, at, m.Times)
	if len(m.Requests) == 0 {
		return
	}
	times := replyTimes(now, m.Sent)
	b := n.replyBudget(times)
	states := n.stateList(len(m.Requests))
	i := 0
	for _, r := range m.Requests {
		i = n.seek(i, r.Node)
		if i == len(n.eps) || n.eps[i].id != r.Node {
			continue
		}
		e := &n.eps[i]
		i++
		switch {
		case e.gen > r.Generation:
			states = n.addDelta(&b, states, e, 0)
		case e.gen == r.Generation && n.maxVer(e) > r.Version:
			states = n.addDelta(&b, states, e, r.Version)
		}
	}
	// Sent even when empty: it closes the peer's pending exchange.
	ack2 := &Ack2{Times: times, States: states}
	if b.paged {
		n.stats.PagedMessages++
	}
	n.send(from, ack2, b.size(0, len(states), false))
	n.stats.Ack2Sent++
}

// delta returns the part of e newer than base and its encoded size, within
// limit bytes. If the whole delta does not fit, it returns the longest
// version prefix (base, w] that does, with paged set; ok is false if not
// even one item fits.
func (n *Node) delta(e *endpoint, base uint64, limit int) (s EndpointState, size int, paged, ok bool) {
	hb := e.hb
	if hb <= base {
		hb = 0
	}
	if n.apps.maxVer(e.app) <= base {
		// The common case: only the heartbeat is newer.
		size = sizeStateHead(e.id, e.gen, base, hb, 0)
		if size <= limit {
			return EndpointState{Node: e.id, Generation: e.gen, Base: base, Heartbeat: hb}, size, false, true
		}
	}
	app := n.appsOf(e)
	cnt, itemBytes := 0, 0
	for k := range app {
		if a := &app[k]; a.Version > base {
			cnt++
			itemBytes += sizeItem(a)
		}
	}
	size = sizeStateHead(e.id, e.gen, base, hb, cnt) + itemBytes
	if size <= limit {
		s = EndpointState{Node: e.id, Generation: e.gen, Base: base, Heartbeat: hb}
		switch {
		case cnt == len(app):
			s.States = app // immutable: share it
		case cnt > 0:
			s.States = make([]AppState, 0, cnt)
			for k := range app {
				if app[k].Version > base {
					s.States = append(s.States, app[k])
				}
			}
		}
		return s, size, false, true
	}
	// Page: the items above base in version order, the heartbeat as an
	// item without bytes of its own.
	type item struct {
		ver  uint64
		size int
	}
	items := make([]item, 0, cnt+1)
	if hb != 0 {
		items = append(items, item{hb, 0})
	}
	for k := range app {
		if a := &app[k]; a.Version > base {
			items = append(items, item{a.Version, sizeItem(a)})
		}
	}
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.ver, b.ver) })
	head := sizeStateHead(e.id, e.gen, base, hb, cnt) // upper bound for any prefix
	w, sum := uint64(0), 0
	for _, it := range items {
		if head+sum+it.size > limit {
			break
		}
		sum += it.size
		w = it.ver
	}
	if w == 0 {
		return EndpointState{}, 0, true, false
	}
	s = EndpointState{Node: e.id, Generation: e.gen, Base: base}
	if hb != 0 && hb <= w {
		s.Heartbeat = hb
	}
	for k := range app {
		if a := &app[k]; a.Version > base && a.Version <= w {
			s.States = append(s.States, *a)
		}
	}
	return s, sizeState(&s), true, true
}

func (n *Node) noteSuperseded(gen uint64) {
	if !n.superseded {
		n.superseded = true
		n.emit(Event{Kind: EventRemoved, Node: n.id, Generation: gen})
	}
}

// tooFarAhead is the generation guard: gen more than MaxGenerationAhead
// beyond the local clock (CASSANDRA-10969: not the local generation).
func (n *Node) tooFarAhead(now int64, node wire.ProcID, gen uint64) bool {
	if gen <= unixSeconds(now)+uint64(n.cfg.MaxGenerationAhead/time.Second) {
		return false
	}
	n.stats.GenerationRejected++
	n.reportOnce(Event{Kind: EventGenerationRejected, Node: node, Generation: gen})
	return true
}

// apply merges received states into the local view (applyStateLocally).
func (n *Node) apply(now int64, states []EndpointState) {
	var added []endpoint
	if n.pool != nil {
		added = n.pool.added[:0] // scratch shared by the pool's nodes
	}
	i := 0
	for k := range states {
		s := &states[k]
		if s.Node == n.id {
			if s.Generation > n.gen {
				n.noteSuperseded(s.Generation)
			}
			continue
		}
		i = n.seek(i, s.Node)
		if i < len(n.eps) && n.eps[i].id == s.Node {
			n.applyKnown(now, i, s)
			i++
			continue
		}
		if e, ok := n.newEndpoint(now, s); ok {
			added = append(added, e)
		}
	}
	if len(added) > 0 {
		n.insert(now, added)
	}
	if n.pool != nil && cap(added) <= maxPooledAdded {
		n.pool.added = added[:0]
	}
	n.checkWarn()
}

// status returns the departed status of app, with its eviction time (a
// missing expiry counts from now).
func (n *Node) status(now int64, app []AppState) (departed bool, expire int64) {
	i, ok := slices.BinarySearchFunc(app, KeyStatus, func(a AppState, k Key) int { return int(a.Key) - int(k) })
	if !ok {
		return false, 0
	}
	departed, expire = departedStatus(app[i].Value)
	if departed && expire == 0 {
		expire = now + int64(n.cfg.LeftExpiry)
	}
	return departed, expire
}

// newEndpoint builds the record of an endpoint seen for the first time.
func (n *Node) newEndpoint(now int64, s *EndpointState) (endpoint, bool) {
	if n.quarantined(s.Node) != nil {
		n.stats.QuarantineDrops++
		return endpoint{}, false
	}
	if n.tooFarAhead(now, s.Node, s.Generation) {
		return endpoint{}, false
	}
	if s.Base != 0 {
		n.stats.GapDrops++
		return endpoint{}, false
	}
	departed, exp := n.status(now, s.States)
	if departed && exp <= now {
		n.stats.ExpiredDrops++
		return endpoint{}, false
	}
	cost := endpointCost + appCost(s.States)
	if n.stateBytes+cost > n.cfg.MaxStateBytes {
		n.stats.RefusedEndpoints++
		n.reportOnce(Event{Kind: EventStateLimit, Node: s.Node, Bytes: n.stateBytes})
		return endpoint{}, false
	}
	n.stateBytes += cost
	// insert files the first arrival: the baseline; the next progress
	// marks it up (Preload marks it up at once).
	e := endpoint{id: s.Node, gen: s.Generation, hb: s.Heartbeat, app: n.apps.intern(s.States)}
	n.emit(Event{Kind: EventJoin, Node: e.id})
	if !n.preload {
		n.checkGeneration(now, e.id, e.gen)
	}
	if departed {
		e.flags |= fDeparted
		n.setExpire(e.id, exp)
		n.emit(Event{Kind: EventLeft, Node: e.id, Value: statusValue(s.States)})
	} else if n.preload {
		e.flags |= fAlive
	}
	return e, true
}

func statusValue(app []AppState) string {
	if i, ok := slices.BinarySearchFunc(app, KeyStatus, func(a AppState, k Key) int { return int(a.Key) - int(k) }); ok {
		return app[i].Value
	}
	return ""
}

// applyKnown merges s into the known record eps[i].
func (n *Node) applyKnown(now int64, i int, s *EndpointState) {
	e := &n.eps[i]
	if s.Generation < e.gen {
		return
	}
	if s.Generation > e.gen {
		if n.tooFarAhead(now, s.Node, s.Generation) {
			return
		}
		if s.Base != 0 {
			n.stats.GapDrops++
			return
		}
		// A new life: replace the record wholesale.
		wasAlive := e.alive()
		r := n.apps.intern(s.States)
		n.stateBytes += n.apps.cost(r) - n.apps.cost(e.app)
		n.apps.release(e.app)
		e.gen, e.hb, e.app = s.Generation, s.Heartbeat, r
		e.flags = 0
		n.fds.Clear(i)
		n.fds.Report(i, now)
		n.stats.Restarts++
		n.dropClock(e.id)
		n.checkGeneration(now, e.id, e.gen)
		if departed, exp := n.status(now, s.States); departed {
			e.flags |= fDeparted
			n.setExpire(e.id, exp)
			n.emit(Event{Kind: EventLeft, Node: e.id, Value: statusValue(s.States)})
			return
		}
		n.dropExpire(e.id)
		n.emit(Event{Kind: EventRestarted, Node: e.id, Generation: e.gen})
		e.flags |= fAlive
		if !wasAlive {
			n.emit(Event{Kind: EventAlive, Node: e.id})
		}
		return
	}
	if s.Base > n.maxVer(e) {
		n.stats.GapDrops++ // we lack (maxVer, Base]; the next exchange asks for it
		return
	}
	progressed := s.Heartbeat > e.hb
	if progressed {
		e.hb = s.Heartbeat
		n.fds.Report(i, now)
	}
	if n.mergeApp(e, s.States) {
		if departed, exp := n.status(now, n.appsOf(e)); departed && !e.departed() {
			e.flags = e.flags&^fAlive | fDeparted
			n.setExpire(e.id, exp)
			n.emit(Event{Kind: EventLeft, Node: e.id, Value: statusValue(n.appsOf(e))})
		}
	}
	// Progress a published verdict covers is the target's last gossip
	// still spreading, not a new life sign (probe.go).
	if progressed && !e.alive() && !e.departed() && !n.condemned(e) {
		e.flags |= fAlive
		if e.flags&fConvicted != 0 {
			n.stats.Revivals++
		}
		n.emit(Event{Kind: EventAlive, Node: e.id})
	}
}

// mergeApp applies the items of in newer than e's, replacing e's list
// (copy on write) and emitting EventChanged in key order. It reports
// whether anything changed.
func (n *Node) mergeApp(e *endpoint, in []AppState) bool {
	if len(in) == 0 {
		return false
	}
	old := n.appsOf(e)
	newer := 0
	j := 0
	for k := range in {
		for j < len(old) && old[j].Key < in[k].Key {
			j++
		}
		if j == len(old) || old[j].Key != in[k].Key || in[k].Version > old[j].Version {
			newer++
		}
	}
	if newer == 0 {
		return false
	}
	// If every received item is new or newer and they cover every key
	// held, the result is the received list (immutable): share it.
	shared := newer == len(in) && coversKeys(in, old)
	out := in
	if !shared {
		out = make([]AppState, 0, len(old)+newer)
	}
	j = 0
	for k := range in {
		a := &in[k]
		for j < len(old) && old[j].Key < a.Key {
			if !shared {
				out = append(out, old[j])
			}
			j++
		}
		if j < len(old) && old[j].Key == a.Key {
			if a.Version <= old[j].Version {
				if !shared {
					out = append(out, old[j])
				}
				j++
				continue
			}
			n.stateBytes -= len(old[j].Value)
			n.stateBytes += len(a.Value)
			j++
		} else {
			n.stateBytes += itemCost + len(a.Value)
		}
		if !shared {
			out = append(out, *a)
		}
		n.emit(Event{Kind: EventChanged, Node: e.id, Key: a.Key, Value: a.Value})
	}
	if !shared {
		out = append(out, old[j:]...)
	}
	r := n.apps.intern(out)
	n.apps.release(e.app)
	e.app = r
	return true
}

// coversKeys reports whether every key of old is in in (both sorted).
func coversKeys(in, old []AppState) bool {
	j := 0
	for k := range old {
		for j < len(in) && in[j].Key < old[k].Key {
			j++
		}
		if j == len(in) || in[j].Key != old[k].Key {
			return false
		}
	}
	return true
}

// insert merges sorted new records into eps, filing each one's first
// arrival at now.
func (n *Node) insert(now int64, add []endpoint) {
	old := len(n.eps)
	n.eps = slices.Grow(n.eps, len(add))[:old+len(add)]
	n.fds.Resize(len(n.eps))
	i, j := old-1, len(add)-1
	for k := len(n.eps) - 1; j >= 0; k-- {
		if i >= 0 && n.eps[i].id > add[j].id {
			n.eps[k] = n.eps[i]
			n.fds.Move(k, i)
			i--
		} else {
			n.eps[k] = add[j]
			n.fds.Clear(k)
			n.fds.Report(k, now)
			j--
		}
	}
}
