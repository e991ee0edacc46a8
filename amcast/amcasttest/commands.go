package amcasttest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// The script commands (see the package documentation for each): the
// topology, the workload, message delivery and loss, ticks, and what the
// scripts print (queued messages, deliveries, status lines).

func (e *Env) cmdTopology(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	protocol, ok := argOne(t, d, "protocol")
	if !ok {
		protocol = e.DefaultProtocol
	}
	sizes, ok := argInts(t, d, "sizes")
	if !ok {
		groups := argInt(t, d, "groups", 1)
		replicas := argInt(t, d, "replicas", 1)
		for range groups {
			sizes = append(sizes, replicas)
		}
	}
	nclients := argInt(t, d, "clients", 1)
	if nclients < 0 {
		d.Fatalf(t, "clients=%d", nclients)
	}
	var groups [][]wire.ProcID
	next := wire.ProcID(0)
	for _, n := range sizes {
		var ms []wire.ProcID
		for range n {
			ms = append(ms, next)
			next++
		}
		groups = append(groups, ms)
	}
	topo, err := amcast.TopologyOf(groups)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	if len(groups) == 0 {
		d.Fatalf(t, "no groups")
	}
	*e = Env{
		NewReplica: e.NewReplica, DefaultProtocol: e.DefaultProtocol, Commands: e.Commands,
		Durability: e.Durability, Unordered: e.Unordered, Protocol: protocol, Topo: topo,
		queues: map[link][]wire.Envelope{}, msgs: map[wire.MsgID]wire.AppMsg{},
		cut: map[link]cutMode{}, batch: d.HasArg("batch"),
	}
	for id := wire.ProcID(0); id < next; id++ {
		m, err := e.NewReplica(protocol, topo, id)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		if m.ID() != id {
			d.Fatalf(t, "replica %d reports id %d", id, m.ID())
		}
		e.Procs = append(e.Procs, m)
		var st amcast.Store
		if e.Durability != nil && e.Durability.NewStore != nil {
			if st, err = e.Durability.NewStore(protocol, topo, id); err != nil {
				d.Fatalf(t, "%v", err)
			}
		}
		e.stores = append(e.stores, st)
	}
	for i := range nclients {
		c, err := amcast.NewClient(topo, next+wire.ProcID(i))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		e.Procs = append(e.Procs, c)
		e.Clients = append(e.Clients, c)
		e.stores = append(e.stores, nil)
	}
	e.down = make([]bool, len(e.Procs))
	e.delivered = make([][]amcast.Delivery, len(e.Procs))
	e.persisted = make([]int, len(e.Procs))
	e.seq = make([]uint64, len(e.Clients))

	fmt.Fprintf(w, "%s: %d group(s), %d replica(s), %d client(s)\n", protocol, len(groups), next, nclients)
	for g, ms := range groups {
		fmt.Fprintf(w, "g%d:", g)
		for _, p := range ms {
			fmt.Fprintf(w, " p%d", p)
		}
		if len(ms) > 1 {
			fmt.Fprintf(w, " leader=p%d quorum=%d", topo.InitialLeader(wire.GroupID(g)), topo.Quorum(wire.GroupID(g)))
		}
		w.WriteByte('\n')
	}
	if nclients > 0 {
		w.WriteString("clients:")
		for _, c := range e.Clients {
			fmt.Fprintf(w, " %s", e.Name(c.ID()))
		}
		w.WriteByte('\n')
	}
}

func (e *Env) client(t *testing.T, d *datadriven.TestData) (int, *amcast.Client) {
	ci := argInt(t, d, "client", 0)
	if ci < 0 || ci >= len(e.Clients) {
		d.Fatalf(t, "client=%d: there are %d clients", ci, len(e.Clients))
	}
	return ci, e.Clients[ci]
}

func (e *Env) cmdMulticast(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	ci, c := e.client(t, d)
	dest, ok := argGroups(t, d, "dest")
	if !ok {
		d.Fatalf(t, "multicast needs dest=")
	}
	payload, _ := argOne(t, d, "payload")
	m := wire.AppMsg{ID: wire.MsgID{Client: c.ID(), Seq: e.seq[ci] + 1}, Dest: dest, Payload: []byte(payload)}
	m.Seal()
	if err := c.Multicast(m); err != nil {
		fmt.Fprintf(w, "error: %v\n", err)
	} else {
		e.seq[ci]++
		e.msgs[nameOf(m.ID)] = wire.AppMsg{ID: m.ID, Dest: slices.Clone(dest), Payload: []byte(payload)}
	}
	e.Drain(t, c.ID(), w, "")
}

func (e *Env) cmdResend(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	_, c := e.client(t, d)
	seq := argInt(t, d, "seq", 0)
	id := wire.MsgID{Client: c.ID(), Seq: uint64(seq)}
	m, ok := e.msgs[id]
	if !ok {
		d.Fatalf(t, "%s did not multicast %s", e.Name(c.ID()), id)
	}
	to, ok := argProcs(t, d, "to")
	if !ok {
		for _, g := range m.Dest {
			to = append(to, e.Topo.InitialLeader(g))
		}
	}
	for _, p := range to {
		env := wire.Envelope{From: c.ID(), To: p, Msg: &wire.Multicast{M: m}}
		w.WriteString(wire.DescribeEnvelope(env))
		w.WriteByte('\n')
		e.Send(t, env)
	}
}

// filter selects queued messages; nil fields match everything.
type filter struct {
	from, to []wire.ProcID
	kinds    []wire.Kind
	ids      []wire.MsgID
	n        int // 0: no limit
}

func (e *Env) parseFilter(t *testing.T, d *datadriven.TestData) filter {
	var f filter
	f.from, _ = argProcs(t, d, "from")
	f.to, _ = argProcs(t, d, "to")
	f.kinds, _ = argKinds(t, d, "kind")
	f.ids, _ = argMsgIDs(t, d, "msg")
	f.n = argInt(t, d, "n", 0)
	if f.n < 0 {
		d.Fatalf(t, "n=%d", f.n)
	}
	return f
}

func (f *filter) match(env wire.Envelope) bool {
	if f.from != nil && !slices.Contains(f.from, env.From) {
		return false
	}
	if f.to != nil && !slices.Contains(f.to, env.To) {
		return false
	}
	if f.kinds != nil && !slices.Contains(f.kinds, env.Msg.Kind()) {
		return false
	}
	if f.ids != nil {
		id, ok := MsgIDOf(env.Msg)
		if !ok || !slices.Contains(f.ids, nameOf(id)) {
			return false
		}
	}
	return true
}

// MsgIDOf returns the application message id a protocol message is about.
func MsgIDOf(m wire.Message) (wire.MsgID, bool) {
	switch m := m.(type) {
	case *wire.Multicast:
		return m.M.ID, true
	case *wire.Propose:
		return m.ID, true
	case *wire.Accept:
		return m.M.ID, true
	case *wire.AcceptAck:
		return m.ID, true
	case *wire.Deliver:
		return m.ID, true
	case *wire.Delivered:
		return m.ID, true
	case *wire.RecAccepted:
		return m.S.M.ID, true
	case *wire.RecDelivered:
		return m.M.ID, true
	}
	return wire.MsgID{}, false
}

// deliverMatching delivers the in-flight messages matching f (see the
// deliver command), printing each, and returns how many it took off the
// queues.
func (e *Env) deliverMatching(t *testing.T, f filter, w *strings.Builder) int {
	t.Helper()
	return e.deliverEach(t, f, w, true, func(r *stepResult) { r.write(w, "  ") })
}

// deliverEach delivers the in-flight messages matching f, handing each
// result to emit; with drain, each recipient's Ready is handled after each
// message (else the caller handles it: pass). Messages on a partitioned link, or to a crashed process,
// are taken off the queue and dropped. Notes about matching messages held
// behind a non-matching head go to notes (if not nil).
func (e *Env) deliverEach(t *testing.T, f filter, notes *strings.Builder, drain bool, emit func(*stepResult)) int {
	t.Helper()
	links := e.links()
	avail := make(map[link]int, len(links))
	for _, l := range links {
		avail[l] = len(e.queues[l])
	}
	count := 0
	for _, l := range links {
		for avail[l] > 0 {
			if f.n > 0 && count >= f.n {
				return count
			}
			q := e.queues[l]
			head := q[0]
			if e.cut[l] == cutHold {
				held := 0
				for _, env := range q[:avail[l]] {
					if f.match(env) {
						held++
					}
				}
				if held > 0 && notes != nil {
					fmt.Fprintf(notes, "(p%d->p%d: %d matching message(s) held: the link is held)\n", l.from, l.to, held)
				}
				break
			}
			if !f.match(head) {
				held := 0
				for _, env := range q[1:avail[l]] {
					if f.match(env) {
						held++
					}
				}
				if held > 0 && notes != nil {
					fmt.Fprintf(notes, "(p%d->p%d: %d matching message(s) held behind %s: links are FIFO)\n", l.from, l.to, held, wire.Describe(head.Msg))
				}
				break
			}
			e.pop(l)
			avail[l]--
			count++
			if e.cut[l] == cutDrop {
				emit(&stepResult{env: head, dropped: fmt.Sprintf("link %s->%s is cut", e.Name(l.from), e.Name(l.to))})
				continue
			}
			emit(e.step(t, head, drain))
		}
	}
	return count
}

// cmdPass is one pass of a node's loop at process to=P: every message
// queued to it that deliver would take (links FIFO, held and cut links as
// there) is stepped, and only then is its Ready handled, once: what the
// pass sent leaves together (as batches with topology's batch).
func (e *Env) cmdPass(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	f := e.parseFilter(t, d)
	if len(f.to) != 1 {
		d.Fatalf(t, "pass needs one to=P")
	}
	to := f.to[0]
	if int(to) < len(e.down) && e.down[to] {
		d.Fatalf(t, "pass: %s is down", e.Name(to))
	}
	if e.deliverEach(t, f, w, false, func(r *stepResult) { r.write(w, "  ") }) == 0 {
		w.WriteString("no messages to deliver\n")
		return
	}
	w.WriteString("then its Ready:\n")
	writeLines(w, "  ", e.drain(t, to))
}

func (e *Env) pop(l link) {
	q := e.queues[l]
	q[0] = wire.Envelope{}
	if len(q) == 1 {
		delete(e.queues, l)
		return
	}
	e.queues[l] = q[1:]
}

func (e *Env) cmdDrop(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	f := e.parseFilter(t, d)
	count := 0
	for _, l := range e.links() {
		var keep []wire.Envelope
		for _, env := range e.queues[l] {
			if (f.n == 0 || count < f.n) && f.match(env) {
				fmt.Fprintf(w, "dropped %s\n", wire.DescribeEnvelope(env))
				count++
				continue
			}
			keep = append(keep, env)
		}
		if len(keep) == 0 {
			delete(e.queues, l)
		} else {
			e.queues[l] = keep
		}
	}
	if count == 0 {
		w.WriteString("no messages to drop\n")
	}
}

func (e *Env) cmdStabilize(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	if e.InFlight() == 0 {
		w.WriteString("no messages in flight\n")
		return
	}
	quiet := d.HasArg("quiet")
	handled := 0
	round := 1
	for ; e.InFlight() > 0; round++ {
		if round > MaxStabilizeRounds {
			d.Fatalf(t, "still %d messages in flight after %d rounds:\n%s", e.InFlight(), MaxStabilizeRounds, w.String())
		}
		if !quiet {
			fmt.Fprintf(w, "round %d\n", round)
			e.deliverMatching(t, filter{}, w)
			continue
		}
		handled += e.deliverEach(t, filter{}, nil, true, func(r *stepResult) {
			for _, l := range r.out {
				if l.deliver {
					fmt.Fprintf(w, "round %d: %s\n", round, l.text)
				}
			}
		})
	}
	if quiet {
		fmt.Fprintf(w, "stable after %d round(s): %d message(s) handled\n", round-1, handled)
	}
}

func (e *Env) cmdInject(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	from, ok1 := argProc(t, d, "from")
	to, ok2 := argProc(t, d, "to")
	kinds, ok3 := argKinds(t, d, "kind")
	id, ok4 := argMsgID(t, d, "msg")
	if !ok1 || !ok2 || !ok3 || !ok4 || len(kinds) != 1 {
		d.Fatalf(t, "inject needs from=, to=, one kind= and msg=")
	}
	// A message multicast earlier is named by its id with the digest the
	// client sealed; dest= or payload= then forge other content under that
	// id (refused: bad_digest), unless "seal" re-seals it, which makes it a
	// new message reusing the id's sequence number (the id-reuse case).
	// A message never multicast is sealed as given.
	known, isKnown := e.msgs[nameOf(id)]
	if isKnown {
		id = known.ID
	}
	appMsg := func() wire.AppMsg {
		m := known
		m.ID = id
		if dest, has := argGroups(t, d, "dest"); has {
			m.Dest = dest
		} else if !isKnown {
			d.Fatalf(t, "message %s was not multicast: give dest=", id)
		}
		if p, has := argOne(t, d, "payload"); has {
			m.Payload = []byte(p)
		}
		if !isKnown || d.HasArg("seal") {
			m.Seal()
		}
		return m
	}
	g := wire.GroupID(argInt(t, d, "g", 0))
	b, _ := argBallot(t, d, "b")
	lts, _ := argTS(t, d, "lts")
	gts, _ := argTS(t, d, "gts")
	var msg wire.Message
	switch kinds[0] {
	case wire.KindMulticast:
		msg = &wire.Multicast{M: appMsg()}
	case wire.KindPropose:
		msg = &wire.Propose{ID: id, G: g, LTS: lts}
	case wire.KindAccept:
		msg = &wire.Accept{M: appMsg(), G: g, B: b, LTS: lts}
	case wire.KindAcceptAck:
		bs, _ := argBallots(t, d, "ballots")
		linf, _ := argTS(t, d, "linf")
		msg = &wire.AcceptAck{ID: id, G: g, Ballots: bs, GTS: gts, Linf: linf}
	case wire.KindDeliver:
		prev, _ := argTS(t, d, "prev")
		dl := &wire.Deliver{ID: id, B: b, LTS: lts, GTS: gts, Prev: prev}
		if d.HasArg("dest") || d.HasArg("payload") {
			m := appMsg() // a catch-up DELIVER carries its message
			dl.M = &m
		}
		msg = dl
	case wire.KindDelivered:
		leader, _ := argProc(t, d, "leader")
		msg = &wire.Delivered{ID: id, G: g, GTS: gts, Leader: leader}
	default:
		d.Fatalf(t, "inject does not build %s messages", kinds[0])
	}
	e.Step(t, wire.Envelope{From: from, To: to, Msg: msg}, w)
}

func (e *Env) cmdQueued(f filter, w *strings.Builder) {
	n := 0
	for _, l := range e.links() {
		note := ""
		switch e.cut[l] {
		case cutDrop:
			note = " (cut)"
		case cutHold:
			note = " (held)"
		}
		for _, env := range e.queues[l] {
			if f.match(env) && (f.n == 0 || n < f.n) {
				w.WriteString(wire.DescribeEnvelope(env))
				w.WriteString(note)
				w.WriteByte('\n')
				n++
			}
		}
	}
	switch {
	case e.InFlight() == 0:
		w.WriteString("no messages in flight\n")
	case n == 0:
		w.WriteString("no matching messages in flight\n")
	}
}

func (e *Env) cmdDeliveries(w *strings.Builder) {
	for id, ds := range e.delivered {
		w.WriteString(e.Name(wire.ProcID(id)))
		w.WriteByte(':')
		if len(ds) == 0 {
			w.WriteString(" -")
		}
		for _, dl := range ds {
			if dl.Install {
				fmt.Fprintf(w, " install@%s", dl.GTS)
				continue
			}
			fmt.Fprintf(w, " %s@%s", dl.M.ID, dl.GTS)
		}
		w.WriteByte('\n')
	}
}

// StatusLine describes process id on one line, with whatever the machine
// exposes among Status(), Ballot(), Clock(), MaxDelivered() and
// Outstanding().
func (e *Env) StatusLine(id wire.ProcID) string {
	m := e.Procs[id]
	parts := []string{e.Name(id) + ":"}
	if m == nil {
		parts = append(parts, "DOWN")
		if st := e.stores[id]; st != nil {
			if x, ok := st.(interface{ Messages() int }); ok {
				parts = append(parts, fmt.Sprintf("stored=%d", x.Messages()))
			}
		}
		parts = append(parts, fmt.Sprintf("delivered=%d persisted=%d", len(e.delivered[id]), e.persisted[id]))
		return strings.Join(parts, " ")
	}
	if s, ok := statusOf(m); ok {
		parts = append(parts, s)
	}
	if x, ok := m.(interface {
		Ballot() (wire.Ballot, wire.Ballot)
	}); ok {
		b, cb := x.Ballot()
		parts = append(parts, "ballot="+b.String(), "cballot="+cb.String())
	}
	if x, ok := m.(interface{ Clock() uint64 }); ok {
		parts = append(parts, fmt.Sprintf("clock=%d", x.Clock()))
	}
	if x, ok := m.(interface{ MaxDelivered() wire.Timestamp }); ok {
		md := "-"
		if ts := x.MaxDelivered(); !ts.IsZero() {
			md = ts.String()
		}
		parts = append(parts, "maxd="+md)
	}
	if x, ok := m.(interface{ Outstanding() int }); ok {
		parts = append(parts, fmt.Sprintf("outstanding=%d", x.Outstanding()))
	}
	x, observable := m.(amcast.Observable)
	if observable {
		parts = append(parts, fmt.Sprintf("retained=%d", x.Retained()))
	}
	if st := e.stores[id]; st != nil {
		if y, ok := st.(interface{ Messages() int }); ok {
			parts = append(parts, fmt.Sprintf("stored=%d", y.Messages()))
		}
	}
	if observable {
		if c := coverageString(x.Coverage()); c != "" {
			parts = append(parts, c)
		}
	}
	if e.Topo.IsReplica(id) {
		parts = append(parts, fmt.Sprintf("delivered=%d persisted=%d", len(e.delivered[id]), e.persisted[id]))
	} else {
		parts = append(parts, fmt.Sprintf("done=%d", len(e.delivered[id])))
	}
	return strings.Join(parts, " ")
}

// statusOf returns the String of m's Status() result, if m has a Status
// method without arguments whose single result is a fmt.Stringer. The
// protocol packages' Status types differ, so this needs reflection rather
// than an interface; amcasttest must not import the protocol packages.
func statusOf(m amcast.Machine) (string, bool) {
	v := reflect.ValueOf(m).MethodByName("Status")
	if !v.IsValid() || v.Type().NumIn() != 0 || v.Type().NumOut() != 1 {
		return "", false
	}
	s, ok := v.Call(nil)[0].Interface().(fmt.Stringer)
	if !ok {
		return "", false
	}
	return s.String(), true
}

func (e *Env) cmdTick(t *testing.T, d *datadriven.TestData, w *strings.Builder) {
	ps, ok := argProcs(t, d, "p")
	if !ok {
		for id := range e.Procs {
			ps = append(ps, wire.ProcID(id))
		}
	}
	for _, id := range ps {
		if int(id) >= len(e.Procs) {
			d.Fatalf(t, "no process %d", id)
		}
	}
	live := ps[:0:0]
	for _, id := range ps {
		if !e.down[id] {
			live = append(live, id)
		} else if ok { // named explicitly
			fmt.Fprintf(w, "%s is down: not ticked\n", e.Name(id))
		}
	}
	n := argInt(t, d, "n", 1)
	for range n {
		for _, id := range live {
			if out := e.tick(t, id); len(out) > 0 {
				fmt.Fprintf(w, "tick %s\n", e.Name(id))
				writeLines(w, "  ", out)
			}
		}
	}
}

// tick ticks live process id once and drains it.
func (e *Env) tick(t *testing.T, id wire.ProcID) []outLine {
	t.Helper()
	e.Procs[id].Tick()
	return e.drain(t, id)
}
