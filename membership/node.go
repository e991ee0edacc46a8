package membership

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/weft-dev/weft/membership/phi"
	"github.com/weft-dev/weft/wire"
)

// Errors returned by Node methods.
var (
	ErrBadMessage         = errors.New("membership: bad message")
	ErrStopped            = errors.New("membership: node stopped")
	ErrLeaving            = errors.New("membership: node is leaving")
	ErrInvalidKey         = errors.New("membership: invalid key")
	ErrValueTooLarge      = errors.New("membership: value larger than MaxValueBytes")
	ErrReservedStatus     = errors.New("membership: LEFT and REMOVED statuses are written only by Leave and Assassinate")
	ErrTooManyKeys        = errors.New("membership: too many app-state keys")
	ErrStateLimit         = errors.New("membership: local state would exceed MaxStateBytes")
	ErrUnknownNode        = errors.New("membership: unknown endpoint (not in local gossip state)")
	ErrAssassinateSelf    = errors.New("membership: cannot assassinate self")
	ErrAlreadyDeparted    = errors.New("membership: endpoint already left or removed")
	ErrAssassinatePending = errors.New("membership: assassination of this endpoint already in progress")
)

// EventKind is the type of an Event.
type EventKind uint8

// Event kinds.
const (
	// EventJoin: an endpoint appeared in the local view (not yet judged
	// up).
	EventJoin EventKind = iota + 1
	// EventAlive: an endpoint showed heartbeat progress and is up.
	EventAlive
	// EventDead: the failure detector convicted an endpoint.
	EventDead
	// EventChanged: an endpoint's app state Key changed to Value.
	EventChanged
	// EventLeft: an endpoint departed; Value is its status (LEFT or
	// REMOVED with expiry). It is down from now on and evicted at expiry.
	EventLeft
	// EventRemoved: an endpoint's record was evicted (expired departure);
	// gossip about it is quarantined. With Node equal to the local id: a
	// newer generation of this node's own record is circulating (it was
	// assassinated); restart it to rejoin.
	EventRemoved
	// EventRestarted: an endpoint came back with a newer Generation; its
	// record was replaced wholesale (re-read all its app states).
	EventRestarted
	// EventLeaveComplete: this node finished announcing its departure
	// and stopped; the driver may shut it down.
	EventLeaveComplete
	// EventAssassinated: an Assassinate completed; Node's record is now
	// REMOVED.
	EventAssassinated
	// EventAssassinateRefused: an Assassinate was abandoned; Value says
	// why (the target showed heartbeat progress: it is alive).
	EventAssassinateRefused
	// EventClusterMismatch: a SYN from Node named cluster Value; it was
	// dropped. Reported once per sender, counted always.
	EventClusterMismatch
	// EventGenerationRejected: gossip about Node carried Generation,
	// more than MaxGenerationAhead beyond the local clock; ignored.
	// Reported once per endpoint, counted always.
	EventGenerationRejected
	// EventStateSizeWarning: the local view grew past StateWarnBytes
	// (Bytes). Re-armed when it falls below 90% of that.
	EventStateSizeWarning
	// EventStateLimit: a new endpoint (Node) was refused because the
	// local view is at MaxStateBytes. Reported once per endpoint.
	EventStateLimit
)

var eventNames = [...]string{
	EventJoin: "join", EventAlive: "alive", EventDead: "dead", EventChanged: "changed",
	EventLeft: "left", EventRemoved: "removed", EventRestarted: "restarted",
	EventLeaveComplete: "leave-complete", EventAssassinated: "assassinated",
	EventAssassinateRefused: "assassinate-refused", EventClusterMismatch: "cluster-mismatch",
	EventGenerationRejected: "generation-rejected", EventStateSizeWarning: "state-size-warning",
	EventStateLimit: "state-limit",
}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is a change in the local view or a report.
type Event struct {
	Kind       EventKind
	Node       wire.ProcID
	Key        Key    // EventChanged
	Value      string // EventChanged: new value; EventLeft: status; EventClusterMismatch: cluster; EventAssassinateRefused: reason
	Generation uint64 // EventRestarted, EventGenerationRejected, EventRemoved (self)
	Bytes      int    // EventStateSizeWarning
}

func (e Event) String() string {
	s := fmt.Sprintf("%s %d", e.Kind, e.Node)
	switch e.Kind {
	case EventChanged:
		s += fmt.Sprintf(" %s=%q", e.Key, e.Value)
	case EventLeft, EventClusterMismatch, EventAssassinateRefused:
		s += fmt.Sprintf(" %q", e.Value)
	case EventRestarted, EventGenerationRejected:
		s += fmt.Sprintf(" gen=%d", e.Generation)
	case EventStateSizeWarning:
		s += fmt.Sprintf(" bytes=%d", e.Bytes)
	}
	return s
}

// Ready is the batch of outputs since the last Advance.
//
// REQUIRES: if Generation is non-zero, the driver stores it durably (and
// passes it back as Config.StoredGeneration on restart) before sending any
// of Messages. Messages are immutable (see Message).
type Ready struct {
	Generation uint64
	Messages   []Envelope
	Events     []Event
}

// Empty reports whether rd carries nothing.
func (rd *Ready) Empty() bool {
	return rd.Generation == 0 && len(rd.Messages) == 0 && len(rd.Events) == 0
}

// Stats are a node's counters and gauges.
type Stats struct {
	Rounds                      uint64
	SynSent, AckSent, Ack2Sent  uint64
	SynRecv, AckRecv, Ack2Recv  uint64
	BytesSent                   uint64 // encoded size of all messages sent
	PagedMessages               uint64 // messages cut at MaxMessageBytes
	Convictions                 uint64 // EventDead
	Revivals                    uint64 // convicted endpoints seen alive again (flaps)
	SuppressedChecks            uint64 // rounds whose convictions a guard suppressed
	ClusterMismatches           uint64 // SYNs dropped for their cluster name
	GenerationRejected          uint64 // digests/states over the generation guard
	QuarantineDrops             uint64 // digests/states about quarantined endpoints
	GapDrops                    uint64 // deltas whose base the local record lacks
	ExpiredDrops                uint64 // departed records received after their expiry
	StaleReplies                uint64 // ACK/ACK2 without a pending exchange
	DroppedSyns                 uint64 // SYNs dropped at MaxPendingAcks
	RefusedEndpoints            uint64 // new endpoints refused at MaxStateBytes
	Evictions                   uint64 // expired departed records removed
	Restarts                    uint64 // records replaced by a newer generation
	Endpoints, Live, Quarantine int    // gauges: known (self included), up (self excluded), quarantined
	StateBytes                  int    // gauge: accounted size of the local view
	PendingAcks                 int    // gauge: ACKs awaiting ACK2
}

// Member is a snapshot of one endpoint in the local view.
type Member struct {
	Node       wire.ProcID
	Generation uint64
	Heartbeat  uint64
	Version    uint64 // highest version held
	Alive      bool   // judged up (always true for self until it leaves)
	Departed   bool   // LEFT or REMOVED
	Expire     int64  // departed: eviction time (Unix ns)
}

// Endpoint flags.
const (
	fAlive     uint8 = 1 << iota // judged up
	fDeparted                    // status LEFT or REMOVED
	fConvicted                   // convicted in this generation (for Revivals)
)

// endpoint is one record of the local view.
type endpoint struct {
	id     wire.ProcID
	flags  uint8
	gen    uint64
	hb     uint64
	maxVer uint64
	expire int64      // departed: eviction time
	app    []AppState // sorted by key; immutable, replaced on change
	fd     phi.Window
}

func (e *endpoint) alive() bool    { return e.flags&fAlive != 0 }
func (e *endpoint) departed() bool { return e.flags&fDeparted != 0 }

// Accounted sizes for MaxStateBytes: roughly the encoded size of a record
// plus bookkeeping.
const (
	endpointCost = 48
	itemCost     = 16
)

func appCost(app []AppState) int {
	c := 0
	for i := range app {
		c += itemCost + len(app[i].Value)
	}
	return c
}

type pending struct {
	peer wire.ProcID
	at   int64
}

type tombstone struct {
	until int64
	ep    endpoint // the final record, sent to holders of older copies
}

type assassination struct {
	target   wire.ProcID
	gen, hb  uint64
	deadline int64
}

type reportKey struct {
	kind EventKind
	node wire.ProcID
}

// maxReports bounds the once-per-peer report memory.
const maxReports = 1024

// Node is one gossip participant. It is not safe for concurrent use.
type Node struct {
	cfg   Config
	id    wire.ProcID
	seeds []wire.ProcID // sorted, without self
	rng   *rand.Rand
	fd    *phi.Detector

	gen uint64
	ver uint64     // the one version counter
	eps []endpoint // sorted by id, self included

	quar      []tombstone // sorted by id
	pendSyn   []pending   // SYNs awaiting ACK, oldest first
	pendAck   []pending   // ACKs awaiting ACK2, oldest first
	assassins []assassination

	leaving, stopped bool
	leaveAt          int64
	superseded       bool

	backlog  int
	lastStep int64

	stateBytes int
	warned     bool
	reported   map[reportKey]struct{}

	cursor wire.ProcID // first node of the next digest page

	stats Stats
	rd    Ready

	live, unr, seedBuf []wire.ProcID // scratch
}

// NewNode starts a node at now. Its generation is
// max(cfg.StoredGeneration+1, now in seconds), reported in the first Ready
// for the driver to persist.
func NewNode(cfg Config, now int64) (*Node, error) {
	seeds, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	fd, err := phi.New(cfg.FD)
	if err != nil {
		return nil, fmt.Errorf("membership: %w", err)
	}
	gen := max(cfg.StoredGeneration+1, unixSeconds(now))
	n := &Node{
		cfg:      cfg,
		id:       cfg.ID,
		seeds:    seeds,
		rng:      rand.New(cfg.Rand),
		fd:       fd,
		gen:      gen,
		ver:      1,
		reported: map[reportKey]struct{}{},
	}
	n.eps = []endpoint{{id: cfg.ID, flags: fAlive, gen: gen, hb: 1, maxVer: 1}}
	n.stateBytes = endpointCost
	n.rd.Generation = gen
	return n, nil
}

func unixSeconds(now int64) uint64 {
	if now < 0 {
		return 0
	}
	return uint64(now / 1e9)
}

// ID returns the node's id.
func (n *Node) ID() wire.ProcID { return n.id }

// Generation returns the node's generation.
func (n *Node) Generation() uint64 { return n.gen }

// Stopped reports whether the node finished leaving.
func (n *Node) Stopped() bool { return n.stopped }

// HasReady reports whether Ready would return a non-empty batch.
func (n *Node) HasReady() bool { return !n.rd.Empty() }

// Ready returns the outputs since the last Advance; the slices are owned
// by the node until Advance.
func (n *Node) Ready() Ready { return n.rd }

// Advance tells the node the last Ready was handled.
func (n *Node) Advance() {
	clear(n.rd.Messages)
	clear(n.rd.Events)
	n.rd = Ready{Messages: n.rd.Messages[:0], Events: n.rd.Events[:0]}
}

// SetSeeds replaces the seed list at runtime (Cassandra's reloadSeeds).
// Keep it identical on every node.
func (n *Node) SetSeeds(seeds []wire.ProcID) {
	n.seeds = n.seeds[:0]
	for _, s := range seeds {
		if s != n.id {
			n.seeds = append(n.seeds, s)
		}
	}
	slices.Sort(n.seeds)
	n.seeds = slices.Compact(n.seeds)
}

// Seeds returns the current seed list (sorted, without this node).
func (n *Node) Seeds() []wire.ProcID { return slices.Clone(n.seeds) }

// SetBacklog tells the node how many received messages are queued and not
// yet passed to Step (the backlog guard). Drivers that drain their inbox
// before each Tick can leave it at 0.
func (n *Node) SetBacklog(pending int) { n.backlog = pending }

func (n *Node) emit(e Event) { n.rd.Events = append(n.rd.Events, e) }

func (n *Node) reportOnce(e Event) {
	k := reportKey{e.Kind, e.Node}
	if _, ok := n.reported[k]; ok || len(n.reported) >= maxReports {
		return
	}
	n.reported[k] = struct{}{}
	n.emit(e)
}

func (n *Node) send(to wire.ProcID, m Message, size int) {
	n.rd.Messages = append(n.rd.Messages, Envelope{From: n.id, To: to, Msg: m})
	n.stats.BytesSent += uint64(size)
}

// find returns the index of id in eps, or -1.
func (n *Node) find(id wire.ProcID) int {
	i := sort.Search(len(n.eps), func(i int) bool { return n.eps[i].id >= id })
	if i < len(n.eps) && n.eps[i].id == id {
		return i
	}
	return -1
}

func (n *Node) self() *endpoint { return &n.eps[n.find(n.id)] }

// Tick runs one gossip round at now: guards, heartbeat, expiries, the
// status check (convictions, evictions), pending assassinations, then the
// SYNs of the round.
func (n *Node) Tick(now int64) {
	if n.stopped {
		return
	}
	n.stats.Rounds++
	verdict := n.fd.Check(now, n.backlog, n.lastStep)
	if verdict != phi.Allow {
		n.stats.SuppressedChecks++
	}
	self := n.self()
	n.ver++
	self.hb, self.maxVer = n.ver, n.ver
	n.expirePending(now)
	n.expireQuarantine(now)
	n.statusCheck(now, verdict == phi.Allow)
	n.runAssassinations(now)
	n.gossip(now)
	if n.leaving && now >= n.leaveAt {
		n.stopped = true
		n.emit(Event{Kind: EventLeaveComplete, Node: n.id})
	}
}

func expire(ps []pending, before int64) []pending {
	k := 0
	for ; k < len(ps) && ps[k].at < before; k++ {
	}
	if k == 0 {
		return ps
	}
	return slices.Delete(ps, 0, k)
}

func (n *Node) expirePending(now int64) {
	before := now - int64(n.cfg.ExchangeTimeout)
	n.pendSyn = expire(n.pendSyn, before)
	n.pendAck = expire(n.pendAck, before)
}

// takePending removes the oldest pending exchange with peer.
func takePending(ps *[]pending, peer wire.ProcID) bool {
	for i, p := range *ps {
		if p.peer == peer {
			*ps = slices.Delete(*ps, i, i+1)
			return true
		}
	}
	return false
}

func (n *Node) expireQuarantine(now int64) {
	n.quar = slices.DeleteFunc(n.quar, func(t tombstone) bool { return t.until <= now })
}

// quarantined returns id's tombstone, or nil.
func (n *Node) quarantined(id wire.ProcID) *tombstone {
	i := sort.Search(len(n.quar), func(i int) bool { return n.quar[i].ep.id >= id })
	if i < len(n.quar) && n.quar[i].ep.id == id {
		return &n.quar[i]
	}
	return nil
}

// statusCheck convicts silent endpoints (if the guards allow) and evicts
// expired departed ones.
func (n *Node) statusCheck(now int64, convict bool) {
	evict := false
	for i := range n.eps {
		e := &n.eps[i]
		if e.id == n.id {
			continue
		}
		if e.departed() {
			evict = evict || now > e.expire
			continue
		}
		if convict && e.alive() && n.fd.Convict(&e.fd, now) {
			e.flags = e.flags&^fAlive | fConvicted
			n.stats.Convictions++
			n.emit(Event{Kind: EventDead, Node: e.id})
		}
	}
	if !evict {
		return
	}
	k := 0
	for i := range n.eps {
		e := &n.eps[i]
		if e.id != n.id && e.departed() && now > e.expire {
			n.evict(now, e)
			continue
		}
		n.eps[k] = *e
		k++
	}
	clear(n.eps[k:])
	n.eps = n.eps[:k]
	n.checkWarn()
}

// evict removes e's record into quarantine.
func (n *Node) evict(now int64, e *endpoint) {
	n.stateBytes -= endpointCost + appCost(e.app)
	n.stats.Evictions++
	n.emit(Event{Kind: EventRemoved, Node: e.id})
	if n.cfg.QuarantineDelay <= 0 {
		return
	}
	t := tombstone{until: now + int64(n.cfg.QuarantineDelay), ep: *e}
	t.ep.fd = phi.Window{}
	i := sort.Search(len(n.quar), func(i int) bool { return n.quar[i].ep.id >= e.id })
	if i < len(n.quar) && n.quar[i].ep.id == e.id {
		n.quar[i] = t
		return
	}
	n.quar = slices.Insert(n.quar, i, t)
}

func (n *Node) checkWarn() {
	switch {
	case !n.warned && n.stateBytes >= n.cfg.StateWarnBytes:
		n.warned = true
		n.emit(Event{Kind: EventStateSizeWarning, Node: n.id, Bytes: n.stateBytes})
	case n.warned && n.stateBytes < n.cfg.StateWarnBytes/10*9:
		n.warned = false
	}
}

// gossip sends the round's SYNs.
func (n *Node) gossip(now int64) {
	live, unr := n.live[:0], n.unr[:0]
	for i := range n.eps {
		e := &n.eps[i]
		if e.id == n.id || e.departed() {
			continue
		}
		if e.alive() {
			live = append(live, e.id)
		} else {
			unr = append(unr, e.id)
		}
	}
	seeds := n.seedBuf[:0]
	for _, s := range n.seeds {
		if i := n.find(s); i < 0 || !n.eps[i].departed() {
			seeds = append(seeds, s)
		}
	}
	n.live, n.unr, n.seedBuf = live, unr, seeds

	ds, size := n.digests()
	syn := &Syn{Cluster: n.cfg.ClusterName, Digests: ds}
	var sent [3]wire.ProcID
	ns := 0
	send := func(to wire.ProcID) {
		if slices.Contains(sent[:ns], to) {
			return
		}
		sent[ns] = to
		ns++
		n.send(to, syn, size)
		n.stats.SynSent++
		if len(n.pendSyn) >= n.cfg.MaxPendingAcks {
			n.pendSyn = slices.Delete(n.pendSyn, 0, 1)
		}
		n.pendSyn = append(n.pendSyn, pending{to, now})
	}
	seedPicked := false
	if len(live) > 0 {
		p := live[n.rng.IntN(len(live))]
		send(p)
		_, seedPicked = slices.BinarySearch(n.seeds, p)
	}
	if len(unr) > 0 && n.rng.Float64() < float64(len(unr))/float64(len(live)+1) {
		send(unr[n.rng.IntN(len(unr))])
	}
	if len(seeds) > 0 && (!seedPicked || len(live) < len(seeds)) {
		if len(live) == 0 {
			send(seeds[n.rng.IntN(len(seeds))])
		} else if n.rng.Float64() <= float64(len(seeds))/float64(len(live)+len(unr)) {
			send(seeds[n.rng.IntN(len(seeds))])
		}
	}
}

// Leave publishes STATUS=LEFT with expiry now+LeftExpiry. The node keeps
// gossiping for LeaveAnnounce, then stops (EventLeaveComplete).
func (n *Node) Leave(now int64) error {
	switch {
	case n.stopped:
		return ErrStopped
	case n.leaving:
		return ErrLeaving
	}
	n.leaving = true
	n.leaveAt = now + int64(n.cfg.LeaveAnnounce)
	exp := now + int64(n.cfg.LeftExpiry)
	n.setLocal(n.self(), KeyStatus, departedValue(StatusLeft, exp))
	self := n.self()
	self.flags = self.flags&^fAlive | fDeparted
	self.expire = exp
	return nil
}

// SetAppState sets one of this node's application states, stamped with
// the next version. Setting the current value again is a no-op, and the
// node emits no event for its own changes.
func (n *Node) SetAppState(key Key, value string) error {
	switch {
	case n.stopped:
		return ErrStopped
	case n.leaving:
		return ErrLeaving
	case key == KeyInvalid:
		return ErrInvalidKey
	case len(value) > n.cfg.MaxValueBytes:
		return fmt.Errorf("%w: %s is %d bytes, limit %d", ErrValueTooLarge, key, len(value), n.cfg.MaxValueBytes)
	}
	if key == KeyStatus {
		if d, _ := departedStatus(value); d {
			return ErrReservedStatus
		}
	}
	self := n.self()
	i, found := slices.BinarySearchFunc(self.app, key, func(a AppState, k Key) int { return int(a.Key) - int(k) })
	grow := itemCost + len(value)
	if found {
		if self.app[i].Value == value {
			return nil
		}
		grow = len(value) - len(self.app[i].Value)
	} else if len(self.app) >= MaxItems {
		return ErrTooManyKeys
	}
	if n.stateBytes+grow > n.cfg.MaxStateBytes {
		return ErrStateLimit
	}
	n.setLocal(self, key, value)
	return nil
}

// setLocal stamps key=value with the next version (copy on write).
func (n *Node) setLocal(self *endpoint, key Key, value string) {
	n.ver++
	a := AppState{Key: key, Version: n.ver, Value: value}
	i, found := slices.BinarySearchFunc(self.app, key, func(a AppState, k Key) int { return int(a.Key) - int(k) })
	app := make([]AppState, 0, len(self.app)+1)
	app = append(app, self.app[:i]...)
	app = append(app, a)
	if found {
		n.stateBytes += len(value) - len(self.app[i].Value)
		i++
	} else {
		n.stateBytes += itemCost + len(value)
	}
	self.app = append(app, self.app[i:]...)
	self.maxVer = n.ver
	n.checkWarn()
}

// Assassinate starts the forced removal of target, Cassandra's last
// resort for a record that will not die. It never blocks: it records the
// target's generation and heartbeat, and Tick watches them for
// AssassinateCheck. Any progress abandons it (EventAssassinateRefused: the
// node is visibly alive); otherwise the node publishes a REMOVED record
// for target under generation+1, which replaces every copy of the old
// life (EventAssassinated). It returns an error for an unknown, departed
// or self target, or one already being assassinated.
func (n *Node) Assassinate(now int64, target wire.ProcID) error {
	if n.stopped {
		return ErrStopped
	}
	if target == n.id {
		return ErrAssassinateSelf
	}
	i := n.find(target)
	if i < 0 {
		return fmt.Errorf("%w: %d", ErrUnknownNode, target)
	}
	e := &n.eps[i]
	if e.departed() {
		return fmt.Errorf("%w: %d", ErrAlreadyDeparted, target)
	}
	for _, a := range n.assassins {
		if a.target == target {
			return fmt.Errorf("%w: %d", ErrAssassinatePending, target)
		}
	}
	n.assassins = append(n.assassins, assassination{target: target, gen: e.gen, hb: e.hb, deadline: now + int64(n.cfg.AssassinateCheck)})
	return nil
}

func (n *Node) runAssassinations(now int64) {
	keep := n.assassins[:0]
	for _, a := range n.assassins {
		i := n.find(a.target)
		var e *endpoint
		if i >= 0 {
			e = &n.eps[i]
		}
		switch {
		case e == nil:
			n.emit(Event{Kind: EventAssassinateRefused, Node: a.target, Value: "record evicted during the check"})
		case e.gen != a.gen || e.hb != a.hb:
			n.emit(Event{Kind: EventAssassinateRefused, Node: a.target,
				Value: fmt.Sprintf("alive: generation %d heartbeat %d became generation %d heartbeat %d during the check", a.gen, a.hb, e.gen, e.hb)})
		case e.departed():
			n.emit(Event{Kind: EventAssassinateRefused, Node: a.target, Value: "departed during the check"})
		case now < a.deadline:
			keep = append(keep, a)
		default:
			rec := EndpointState{Node: a.target, Generation: e.gen + 1, Heartbeat: 1,
				States: []AppState{{Key: KeyStatus, Version: 2, Value: departedValue(StatusRemoved, now+int64(n.cfg.LeftExpiry))}}}
			n.applyKnown(now, e, &rec)
			n.emit(Event{Kind: EventAssassinated, Node: a.target})
		}
	}
	clear(n.assassins[len(keep):])
	n.assassins = keep
}

// Member returns the local view of endpoint id.
func (n *Node) Member(id wire.ProcID) (Member, bool) {
	i := n.find(id)
	if i < 0 {
		return Member{}, false
	}
	return n.member(&n.eps[i]), true
}

func (n *Node) member(e *endpoint) Member {
	return Member{Node: e.id, Generation: e.gen, Heartbeat: e.hb, Version: e.maxVer,
		Alive: e.alive(), Departed: e.departed(), Expire: e.expire}
}

// Members returns the local view, sorted by node, self included.
func (n *Node) Members() []Member {
	ms := make([]Member, len(n.eps))
	for i := range n.eps {
		ms[i] = n.member(&n.eps[i])
	}
	return ms
}

// LiveMembers returns the endpoints judged up, sorted, self excluded.
func (n *Node) LiveMembers() []wire.ProcID {
	var ids []wire.ProcID
	for i := range n.eps {
		if e := &n.eps[i]; e.id != n.id && e.alive() {
			ids = append(ids, e.id)
		}
	}
	return ids
}

// IsAlive reports whether id is judged up.
func (n *Node) IsAlive(id wire.ProcID) bool {
	i := n.find(id)
	return i >= 0 && n.eps[i].alive()
}

// AppState returns endpoint id's state for key.
func (n *Node) AppState(id wire.ProcID, key Key) (AppState, bool) {
	i := n.find(id)
	if i < 0 {
		return AppState{}, false
	}
	app := n.eps[i].app
	j, ok := slices.BinarySearchFunc(app, key, func(a AppState, k Key) int { return int(a.Key) - int(k) })
	if !ok {
		return AppState{}, false
	}
	return app[j], true
}

// AppStates returns a copy of endpoint id's states, sorted by key.
func (n *Node) AppStates(id wire.ProcID) []AppState {
	i := n.find(id)
	if i < 0 {
		return nil
	}
	return slices.Clone(n.eps[i].app)
}

// Phi returns the failure detector's phi for id at now (0 for self,
// unknown endpoints and endpoints without arrivals).
func (n *Node) Phi(id wire.ProcID, now int64) float64 {
	i := n.find(id)
	if i < 0 || id == n.id {
		return 0
	}
	return n.fd.Phi(&n.eps[i].fd, now)
}

// Quarantined reports whether gossip about id is being ignored.
func (n *Node) Quarantined(id wire.ProcID) bool { return n.quarantined(id) != nil }

// Stats returns the node's counters and gauges.
func (n *Node) Stats() Stats {
	s := n.stats
	s.Endpoints = len(n.eps)
	s.Live = 0
	for i := range n.eps {
		if n.eps[i].id != n.id && n.eps[i].alive() {
			s.Live++
		}
	}
	s.Quarantine = len(n.quar)
	s.StateBytes = n.stateBytes
	s.PendingAcks = len(n.pendAck)
	return s
}
