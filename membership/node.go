package membership

import (
	"cmp"
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
	ClockSamples                uint64 // clock offset samples taken (clock.go)
	ClockUnmatched              uint64 // reply stamps echoing another exchange: not used
	ClockNegative               uint64 // reply stamps giving a negative round trip: not used
	ClockSpikes                 uint64 // samples whose delay was too high to move the offset
	GenerationsAhead            uint64 // EventGenerationAhead
	PingSent, PongRecv          uint64 // direct probes sent, their answers received (probe.go)
	PingRecv                    uint64 // probes received
	UnknownPings                uint64 // Pings from endpoints not in the view: not answered
	ProbeConvictions            uint64 // probe peers convicted after ProbeTimeout of silence
	VerdictConvictions          uint64 // convictions by a published verdict before phi's
	BadVerdicts                 uint64 // malformed or surplus KeyConvicted entries skipped
	DroppedVerdicts             uint64 // verdicts beyond the table's bound
	ClockSkewed                 int    // gauge: peers reported beyond ClockSkewThreshold
	Endpoints, Live, Quarantine int    // gauges: known (self included), up (self excluded), quarantined
	StateBytes                  int    // gauge: accounted size of the local view
	PendingAcks                 int    // gauge: ACKs awaiting ACK2
}

// endpoint is one record of the local view: 32 bytes without pointers, as
// a node keeps one per cluster member (a simulator holding 10,000 nodes
// keeps 10^8). Its app states are a shared list in the node's AppTable,
// its arrival window is slot i of Node.fds for eps[i], the highest version
// held is derived (maxVer: every item and the heartbeat are at most it,
// and a delta is applied only without gaps, so it is the larger of the
// heartbeat and the highest item), and a departed endpoint's eviction
// time is in Node.expires.
type endpoint struct {
	gen   uint64
	hb    uint64
	id    wire.ProcID
	app   appRef // sorted by key; immutable, replaced on change
	flags uint8
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

// expiry is a departed endpoint's eviction time.
type expiry struct {
	id wire.ProcID
	at int64
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
	boot  []wire.ProcID // Config.Bootstrap without self, until a peer is up
	// bootTried counts the rounds that contacted a bootstrap peer.
	bootTried int
	rng       *rand.Rand
	fd        *phi.Detector
	fds       *phi.Arena // arrival windows, fds slot i for eps[i]
	apps      *AppTable
	pool      *Pool

	gen     uint64
	ver     uint64     // the one version counter
	eps     []endpoint // sorted by id, self included
	expires []expiry   // departed endpoints (self included), sorted by id

	quar      []tombstone  // sorted by id
	clocks    []clockEntry // sorted by id, known endpoints only (clock.go)
	pendSyn   []pending    // SYNs awaiting ACK, oldest first
	pendAck   []pending    // ACKs awaiting ACK2, oldest first
	assassins []assassination
	probes    []probe   // Config.ProbePeers, sorted by id (probe.go)
	verdicts  []verdict // published verdicts, sorted by target
	// verdictsDirty: a KeyConvicted value or the endpoint set changed
	// since verdicts was built.
	verdictsDirty bool

	leaving, stopped bool
	leaveAt          int64
	superseded       bool

	backlog  int
	lastStep int64

	stateBytes int
	warned     bool
	reported   map[reportKey]struct{}
	preload    bool // Preload in progress: no events, new endpoints up

	cursor wire.ProcID // first node of the next digest page

	stats Stats
	rd    Ready

	seedBuf []wire.ProcID // scratch
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
	fds, err := fd.NewArena()
	if err != nil {
		return nil, fmt.Errorf("membership: %w", err)
	}
	apps := cfg.Apps
	if apps == nil {
		apps = NewAppTable()
	}
	gen := max(cfg.StoredGeneration+1, unixSeconds(now))
	n := &Node{
		cfg:      cfg,
		id:       cfg.ID,
		seeds:    seeds,
		rng:      rand.New(cfg.Rand),
		fd:       fd,
		fds:      fds,
		apps:     apps,
		pool:     cfg.Pool,
		gen:      gen,
		ver:      1,
		reported: map[reportKey]struct{}{},
	}
	for _, p := range cfg.Bootstrap {
		if p != cfg.ID && !slices.Contains(n.boot, p) {
			n.boot = append(n.boot, p)
		}
	}
	n.initProbes(now)
	n.eps = []endpoint{{id: cfg.ID, flags: fAlive, gen: gen, hb: 1}}
	n.fds.Resize(1)
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

// Advance tells the node the last Ready was handled. With Config.Pool,
// the lists of the messages it carried go back to the pool.
func (n *Node) Advance() {
	if n.pool != nil {
		var prev Message
		for _, env := range n.rd.Messages {
			if env.Msg != prev { // a SYN goes to up to three peers
				n.pool.recycle(env.Msg)
				prev = env.Msg
			}
		}
	}
	msgs, evs := n.rd.Messages, n.rd.Events
	clear(msgs)
	clear(evs)
	// Keep the buffers for the next batch unless a burst (a Preload, a
	// big merge) grew them: a simulator holds thousands of nodes.
	if cap(msgs) > 64 {
		msgs = nil
	}
	if cap(evs) > 1024 {
		evs = nil
	}
	n.rd = Ready{Messages: msgs[:0], Events: evs[:0]}
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

func (n *Node) emit(e Event) {
	switch e.Kind {
	case EventJoin, EventRestarted, EventRemoved, EventLeft:
		n.verdictsDirty = true
	case EventChanged:
		n.verdictsDirty = n.verdictsDirty || e.Key == KeyConvicted
	}
	if !n.preload {
		n.rd.Events = append(n.rd.Events, e)
	}
}

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

// find returns the index of id in eps, or -1. Cluster ids are often dense
// (0..N-1): it tries position id first.
func (n *Node) find(id wire.ProcID) int {
	if uint64(id) < uint64(len(n.eps)) && n.eps[id].id == id {
		return int(id)
	}
	i := sort.Search(len(n.eps), func(i int) bool { return n.eps[i].id >= id })
	if i < len(n.eps) && n.eps[i].id == id {
		return i
	}
	return -1
}

func (n *Node) self() *endpoint { return &n.eps[n.find(n.id)] }

// maxVer returns the highest version held of e's record.
func (n *Node) maxVer(e *endpoint) uint64 { return max(e.hb, n.apps.maxVer(e.app)) }

// appsOf returns e's app states (immutable).
func (n *Node) appsOf(e *endpoint) []AppState { return n.apps.items(e.app) }

// expireOf returns the eviction time of departed endpoint id (0 if none).
func (n *Node) expireOf(id wire.ProcID) int64 {
	i, ok := slices.BinarySearchFunc(n.expires, id, func(x expiry, id wire.ProcID) int { return cmp.Compare(x.id, id) })
	if !ok {
		return 0
	}
	return n.expires[i].at
}

func (n *Node) setExpire(id wire.ProcID, at int64) {
	i, ok := slices.BinarySearchFunc(n.expires, id, func(x expiry, id wire.ProcID) int { return cmp.Compare(x.id, id) })
	if ok {
		n.expires[i].at = at
		return
	}
	n.expires = slices.Insert(n.expires, i, expiry{id, at})
}

func (n *Node) dropExpire(id wire.ProcID) {
	if i, ok := slices.BinarySearchFunc(n.expires, id, func(x expiry, id wire.ProcID) int { return cmp.Compare(x.id, id) }); ok {
		n.expires = slices.Delete(n.expires, i, i+1)
	}
}

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
	self.hb = n.ver
	n.expirePending(now)
	n.expireQuarantine(now)
	n.probeRound(now, verdict == phi.Allow)
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

// takePending removes the pending exchange with peer sent at echo (the
// reply's Times.Echo), else the oldest one with peer, and returns when it
// was sent. A reply matched to another exchange than the one it answers
// (echo differs) still delivers its states; clockSample then ignores its
// stamps.
func takePending(ps *[]pending, peer wire.ProcID, echo int64) (at int64, ok bool) {
	k := -1
	for i, p := range *ps {
		if p.peer != peer {
			continue
		}
		if k < 0 {
			k = i
		}
		if echo != 0 && p.at == echo {
			k = i
			break
		}
	}
	if k < 0 {
		return 0, false
	}
	at = (*ps)[k].at
	*ps = slices.Delete(*ps, k, k+1)
	return at, true
}

func (n *Node) expireQuarantine(now int64) {
	k := 0
	for i := range n.quar {
		if n.quar[i].until <= now {
			n.apps.release(n.quar[i].ep.app)
			continue
		}
		n.quar[k] = n.quar[i]
		k++
	}
	clear(n.quar[k:])
	n.quar = n.quar[:k]
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
	if convict {
		for i := range n.eps {
			e := &n.eps[i]
			if e.flags&(fAlive|fDeparted) != fAlive || e.id == n.id {
				continue
			}
			byPhi := n.fds.Convict(i, now)
			if byPhi || n.condemned(e) {
				if !byPhi {
					n.stats.VerdictConvictions++
				}
				e.flags = e.flags&^fAlive | fConvicted
				n.stats.Convictions++
				n.emit(Event{Kind: EventDead, Node: e.id})
			}
		}
	}
	evict := false
	for _, x := range n.expires {
		evict = evict || x.id != n.id && now > x.at
	}
	if !evict {
		return
	}
	k := 0
	for i := range n.eps {
		e := &n.eps[i]
		if e.id != n.id && e.departed() && now > n.expireOf(e.id) {
			n.evict(now, e)
			continue
		}
		n.eps[k] = *e
		n.fds.Move(k, i)
		k++
	}
	clear(n.eps[k:])
	n.eps = n.eps[:k]
	n.fds.Resize(k)
	n.checkWarn()
}

// evict removes e's record into quarantine.
// The tombstone takes over the record's reference to its app states.
func (n *Node) evict(now int64, e *endpoint) {
	n.stateBytes -= endpointCost + n.apps.cost(e.app)
	n.stats.Evictions++
	n.emit(Event{Kind: EventRemoved, Node: e.id})
	n.dropExpire(e.id)
	n.dropClock(e.id)
	if n.cfg.QuarantineDelay <= 0 {
		n.apps.release(e.app)
		return
	}
	t := tombstone{until: now + int64(n.cfg.QuarantineDelay), ep: *e}
	i := sort.Search(len(n.quar), func(i int) bool { return n.quar[i].ep.id >= e.id })
	if i < len(n.quar) && n.quar[i].ep.id == e.id {
		n.apps.release(n.quar[i].ep.app)
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
	ds, size, nlive, nunr := n.digests(now)
	// pick returns the k-th live (or unreachable) peer in id order.
	pick := func(alive bool, k int) wire.ProcID {
		for i := range n.eps {
			e := &n.eps[i]
			if e.flags&fDeparted != 0 || e.id == n.id || (e.flags&fAlive != 0) != alive {
				continue
			}
			if k == 0 {
				return e.id
			}
			k--
		}
		panic("membership: peer count changed during selection")
	}
	seeds := n.seedBuf[:0]
	for _, s := range n.seeds {
		if i := n.find(s); i < 0 || !n.eps[i].departed() {
			seeds = append(seeds, s)
		}
	}
	n.seedBuf = seeds

	syn := &Syn{Sent: max(now, 0), Cluster: n.cfg.ClusterName, Digests: ds}
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
	if nlive > 0 {
		n.boot = nil // found the cluster
	} else if len(n.boot) > 0 {
		send(n.boot[n.bootTried%len(n.boot)])
		n.bootTried++
	}
	// Remembered peers first: the seeds once each of them was tried.
	seedTurn := len(n.boot) == 0 || n.bootTried > len(n.boot)
	seedPicked := false
	if nlive > 0 {
		p := pick(true, n.rng.IntN(nlive))
		send(p)
		_, seedPicked = slices.BinarySearch(n.seeds, p)
	}
	if nunr > 0 && n.rng.Float64() < float64(nunr)/float64(nlive+1) {
		send(pick(false, n.rng.IntN(nunr)))
	}
	if len(seeds) > 0 && seedTurn && (!seedPicked || nlive < len(seeds)) {
		if nlive == 0 {
			send(seeds[n.rng.IntN(len(seeds))])
		} else if n.rng.Float64() <= float64(len(seeds))/float64(nlive+nunr) {
			send(seeds[n.rng.IntN(len(seeds))])
		}
	}
}

// Preload installs a view obtained out of band (a snapshot of a converged
// cluster, a seed's full state as in Cassandra's shadow round, a
// simulator's starting point) as if its states had arrived by gossip at
// now, with two differences: the endpoints it adds are up at once (the
// caller vouches that their heartbeats were progressing when the snapshot
// was taken; each window starts with one arrival at now, as for any new
// endpoint), and it emits no events. States must be sorted by node, as
// in a message; the node's own entry is ignored.
func (n *Node) Preload(now int64, states []EndpointState) error {
	if n.stopped {
		return ErrStopped
	}
	if err := validStates(states); err != nil {
		return err
	}
	n.preload = true
	n.apply(now, states)
	n.preload = false
	return nil
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
	n.setExpire(n.id, exp)
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
	app := n.appsOf(n.self())
	i, found := slices.BinarySearchFunc(app, key, func(a AppState, k Key) int { return int(a.Key) - int(k) })
	grow := itemCost + len(value)
	if found {
		if app[i].Value == value {
			return nil
		}
		grow = len(value) - len(app[i].Value)
	} else if len(app) >= MaxItems {
		return ErrTooManyKeys
	}
	if n.stateBytes+grow > n.cfg.MaxStateBytes {
		return ErrStateLimit
	}
	n.setLocal(n.self(), key, value)
	return nil
}

// setLocal stamps key=value with the next version (copy on write).
func (n *Node) setLocal(self *endpoint, key Key, value string) {
	n.ver++
	a := AppState{Key: key, Version: n.ver, Value: value}
	old := n.appsOf(self)
	i, found := slices.BinarySearchFunc(old, key, func(a AppState, k Key) int { return int(a.Key) - int(k) })
	app := make([]AppState, 0, len(old)+1)
	app = append(app, old[:i]...)
	app = append(app, a)
	if found {
		n.stateBytes += len(value) - len(old[i].Value)
		i++
	} else {
		n.stateBytes += itemCost + len(value)
	}
	app = append(app, old[i:]...)
	r := n.apps.intern(app)
	n.apps.release(self.app)
	self.app = r
	n.checkWarn()
}

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
	for i := range n.clocks {
		if n.clocks[i].skewed {
			s.ClockSkewed++
		}
	}
	return s
}
