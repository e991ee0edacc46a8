// Package client is weft's Go client: it connects to the nodes of a
// cluster (transport role client), multicasts messages to sets of groups
// and returns each message's global timestamp once a destination group
// delivered it, with the group's result when the nodes run a replicated
// service (package rsm; with Config.AllGroups, once every destination
// group answered, with every group's result).
//
// A Client drives an amcast.Client state machine with a ticker. A message
// goes to its view of the leader of each destination group; without a
// reply within RetryTicks ticks it is sent again, with the same id, to
// every member of its destination groups (with exponential backoff up to
// 8 x RetryTicks), so it survives lost messages and leader changes, and
// is delivered at most once whatever the retries.
//
// Leader discovery: the client asks one node at a time (rotating through
// Nodes) for its gossip view (VIEW_REQUEST; any node answers for the whole
// cluster) at start, every ViewTicks ticks and after a retry, and sends
// each group's messages to the member the view shows leading with the
// highest ballot among those judged up. The Leader hint of every DELIVERED
// reply updates the view between two answers. Before the first answer
// (or against nodes without gossip) it starts at each group's first
// member.
//
// Admission control: a node whose client inbox is full sheds a MULTICAST
// unread and answers OVERLOADED (wire.Overloaded). When the leader a
// message was sent to does so, Multicast returns ErrOverloaded at once and
// the message is no longer retried: back off before sending more.
//
// Reads (reads.go, Read): a query of one group's state without a
// multicast, linearizable through the leader's read index or local (any
// member's state, possibly stale), retried on a leader change.
//
// Message ids are (client id, session, sequence number), sequences counting
// from 1 (wire.MsgID). Every Client draws a fresh random 128-bit session
// from crypto/rand when it is created, so a process restarted with a fixed
// Config.ID never reuses an id of its previous incarnation and is never
// answered with that incarnation's results. Config.ID = 0 picks a random id
// above the replica ids. Nodes accept a client's MULTICAST only from the
// connection that authenticated as the message's client id.
package client

import (
	"context"
	crand "crypto/rand"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// Defaults for zero Config fields.
const (
	DefaultTick       = 10 * time.Millisecond
	DefaultRetryTicks = 20
	DefaultViewTicks  = 50
	// DefaultSessionLease is half the nodes' default session_lease (1m):
	// the client stops retrying well before the replicas may forget that
	// they delivered the message.
	DefaultSessionLease = 30 * time.Second
	// DefaultMaxInFlight is the nodes' default client_share
	// (config.DefaultClientShare): a client that never has more messages
	// outstanding than that is never shed for its share.
	DefaultMaxInFlight = 64
)

// ErrClosed is returned by Multicast after Close.
var ErrClosed = errors.New("client: closed")

// ErrOverloaded is returned by Multicast when the leader of a destination
// group shed the message unread because its client inbox was full
// (wire.Overloaded; admission control, docs/operations.md). Back off before
// sending more. The client stops retrying the message; like a Multicast
// whose ctx ended, it may still be delivered (a copy sent earlier, or
// another destination group's leader, may have taken it in), at most once:
// its id is never reused. Test with errors.Is; the Result returned with it
// carries the shed message's id (and nothing else).
var ErrOverloaded = errors.New("client: node overloaded (message shed; back off)")

// ErrSessionExpired is returned by Multicast when the message was not
// answered within Config.SessionLease of its first send (a partition, or
// nodes down that long). Past the lease the client cannot retry without
// risking a second delivery (replicas forget delivered ids after their
// session_lease, docs/sessions.md), so it gives up: the message may or may
// not have been delivered, and it is never sent again. Test with
// errors.Is.
var ErrSessionExpired = errors.New("client: session expired (no reply within the session lease; the message may or may not have been delivered)")

// Config configures a Client.
type Config struct {
	// Cluster is the cluster name.
	Cluster string
	// ClusterKey is the cluster's shared secret, if it has one (see
	// node.Config.ClusterKey).
	ClusterKey []byte
	// TLS, if set, connects over mutual TLS with a client certificate
	// (transport.Config.TLS): one from the nodes' client CA, or with the
	// URI SAN weft://<cluster>/client[/<id>]. A certificate bound to one
	// client id sets ID when ID is 0.
	TLS *transport.TLS
	// ID is the client's process id; it must not be a replica id, nor
	// 2^32-1 (reserved). 0 picks a random id in [2^24, 2^32-1).
	ID wire.ProcID
	// Session is the session of this incarnation (wire.MsgID). The zero
	// session draws a fresh random 128-bit one from crypto/rand, which is
	// what every real client should do; a fixed value is for tests that
	// replay an incarnation.
	Session wire.SessionID
	// Topology is the cluster's group layout.
	Topology *amcast.Topology
	// Nodes maps every replica id to the address clients use.
	Nodes map[wire.ProcID]string
	// Tick is the client's tick (default DefaultTick).
	Tick time.Duration
	// RetryTicks is the reply timeout in ticks (default DefaultRetryTicks).
	RetryTicks int
	// SessionLease is how long the client retries an unanswered message
	// before it gives up with ErrSessionExpired (default
	// DefaultSessionLease; negative retries forever). Keep it below the
	// nodes' session_lease, by at least the longest network delay.
	SessionLease time.Duration
	// ViewTicks is how often, in ticks, the client asks a node for the
	// cluster's view (default DefaultViewTicks; negative never asks).
	ViewTicks int
	// AllGroups makes Multicast wait for the reply of every destination
	// group, each with its group's result (Result.Results), instead of the
	// first one (amcast.Client.AllGroups). Only nodes that run a
	// replicated service (node.Config.StateMachine, e.g. weft-kv) answer
	// from every destination group: against nodes without one, leave it
	// off, or a message to several groups never completes.
	AllGroups bool
	// MaxInFlight bounds the multicasts outstanding at once (default
	// DefaultMaxInFlight; negative: no bound). Multicast waits for a slot
	// (or its context) when the client is at the bound. A node sheds a
	// client's MULTICASTs beyond client_share waiting in its inbox
	// (ErrOverloaded); a client shared by many goroutines would otherwise
	// run into that limit whenever a leader's loop fell a little behind,
	// and a message to several groups shed by one leader and accepted by
	// another holds up its groups' deliveries until a re-multicast (weft
	// bench --shared-clients 1 at 180 workers to 2 groups: p99 over 120 ms,
	// the agents half idle). Keep it at or below the nodes' client_share.
	MaxInFlight int
	// OnMulticast, if set, is called for each message just before it is
	// first sent, from the goroutine that called Multicast, under the
	// client's lock (a history recorder logs the multicast event there).
	// It must not call the Client.
	OnMulticast func(m wire.AppMsg, at time.Time)
	// Logger receives transport events (default: discard).
	Logger *slog.Logger
}

// Result is the outcome of one multicast.
type Result struct {
	ID wire.MsgID
	// GTS is the message's global timestamp. It is zero when the reply
	// came from a node that had delivered and garbage-collected the message
	// long before (only possible for a retry of an old id).
	GTS wire.Timestamp
	// Group is the destination group whose leader answered, and Leader
	// that leader.
	Group  wire.GroupID
	Leader wire.ProcID
	// Latency is the time from the first send to the reply.
	Latency time.Duration
	// Results are the answering groups' results (the replicated service's,
	// package rsm), in the order they arrived: every destination group
	// with Config.AllGroups, else the group that answered.
	Results []GroupResult
}

// GroupResult is one destination group's answer to a message.
type GroupResult struct {
	Group wire.GroupID
	// Result is the group's state machine's result. OK is false when the
	// node runs no state machine, or no longer holds the result (a retry
	// answered after the bounds of docs/rsm.md forgot it).
	Result []byte
	OK     bool
}

// Of returns group g's result, if g answered with one.
func (r *Result) Of(g wire.GroupID) ([]byte, bool) {
	for _, gr := range r.Results {
		if gr.Group == g {
			return gr.Result, gr.OK
		}
	}
	return nil, false
}

type request struct {
	dest    []wire.GroupID
	payload []byte
	reply   chan answer
	start   time.Time
}

// answer is how a request ends: a result or an error (ErrOverloaded).
type answer struct {
	res Result
	err error
}

// Client multicasts messages to a cluster. It is safe for concurrent use.
//
// There is no loop goroutine: the goroutine that calls Multicast or Read,
// the transport's reader that hands over a reply, and the ticker each step
// the client's state machine under lk and send what it made ready. A loop
// that every request and every reply passed through cost two goroutine
// hand-offs per multicast; with a client per worker (weft bench) its
// select was 15% of a client process's CPU. Without it the client
// processes used 4-8% fewer cores for the same throughput, which itself
// did not move (docs/batching.md, "A client without its loop").
type Client struct {
	cfg   Config
	tr    *transport.Transport
	stop  chan struct{}
	done  chan struct{} // the ticker's goroutine has returned
	once  sync.Once
	slots chan struct{} // one per multicast in flight (Config.MaxInFlight); nil: no bound

	// lk guards the state machine and what goes with it. Nothing under lk
	// blocks: the transport's Send queues or drops, and each request's
	// reply channel has room for its one answer.
	lk      sync.Mutex
	closed  bool
	m       *amcast.Client
	seq     uint64
	waiting map[wire.MsgID]*request
	nodes   []wire.ProcID // every node, in the order views are asked
	ticks   int
	nextAsk int                 // next view request at this tick
	asked   int                 // views requested
	seenRe  int                 // retries when the last view was asked
	reads   map[uint64]*readReq // reads in flight, by sequence (reads.go)
	rseq    uint64

	// mu guards the counters and views the getters read (taken under lk,
	// never the other way round).
	mu          sync.Mutex
	leaders     []wire.ProcID
	retries     int
	views       int // views applied
	overloaded  int // messages shed by a node (ErrOverloaded)
	readRetries int
}

// New starts a client. It dials every node in the background; messages
// wait in the transport's queues until connections are up.
func New(cfg Config) (*Client, error) {
	if cfg.Topology == nil {
		return nil, errors.New("client: Config.Topology is nil")
	}
	if cfg.Tick == 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.RetryTicks == 0 {
		cfg.RetryTicks = DefaultRetryTicks
	}
	if cfg.ViewTicks == 0 {
		cfg.ViewTicks = DefaultViewTicks
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Tick < time.Millisecond || cfg.RetryTicks < 1 {
		return nil, fmt.Errorf("client: Tick %v below 1ms or RetryTicks %d below 1", cfg.Tick, cfg.RetryTicks)
	}
	if cfg.ID == 0 && cfg.TLS != nil {
		cfg.ID = certClientID(cfg.TLS, cfg.Cluster)
	}
	if cfg.ID == 0 {
		for {
			cfg.ID = wire.ProcID(1<<24 + rand.Uint32N(math.MaxUint32-1<<24))
			if !cfg.Topology.IsReplica(cfg.ID) {
				break
			}
		}
	}
	if cfg.ID == math.MaxUint32 {
		return nil, errors.New("client: id 2^32-1 is reserved")
	}
	for cfg.Session.IsZero() {
		var b [16]byte
		if _, err := crand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("client: drawing a session: %w", err)
		}
		cfg.Session = wire.SessionID{Hi: binary.LittleEndian.Uint64(b[:8]), Lo: binary.LittleEndian.Uint64(b[8:])}
	}
	m, err := amcast.NewSessionClient(cfg.Topology, cfg.ID, cfg.Session)
	if err != nil {
		return nil, err
	}
	m.RetryTicks = cfg.RetryTicks
	m.AllGroups = cfg.AllGroups
	if cfg.SessionLease == 0 {
		cfg.SessionLease = DefaultSessionLease
	}
	if cfg.SessionLease > 0 {
		m.ExpireTicks = max(1, int(cfg.SessionLease/cfg.Tick))
	}
	c := &Client{
		cfg:     cfg,
		reads:   map[uint64]*readReq{},
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		m:       m,
		waiting: map[wire.MsgID]*request{},
	}
	if cfg.MaxInFlight > 0 {
		c.slots = make(chan struct{}, cfg.MaxInFlight)
	}
	for g := range cfg.Topology.Groups {
		c.leaders = append(c.leaders, cfg.Topology.InitialLeader(wire.GroupID(g)))
	}
	peers := map[wire.ProcID]string{}
	for g := range cfg.Topology.Groups {
		for _, p := range cfg.Topology.Members(wire.GroupID(g)) {
			addr, ok := cfg.Nodes[p]
			if !ok || addr == "" {
				return nil, fmt.Errorf("client: no address for node %d", p)
			}
			peers[p] = addr
			c.nodes = append(c.nodes, p)
		}
	}
	rand.Shuffle(len(c.nodes), func(i, j int) { c.nodes[i], c.nodes[j] = c.nodes[j], c.nodes[i] })
	c.tr, err = transport.New(transport.Config{
		ClusterName: cfg.Cluster,
		Self:        cfg.ID,
		Role:        transport.RoleClient,
		Peers:       peers,
		Handler:     c.handle,
		Logger:      cfg.Logger,
		Seed:        uint64(time.Now().UnixNano()),
		Key:         cfg.ClusterKey,
		TLS:         cfg.TLS,
	})
	if err != nil {
		return nil, err
	}
	go c.tick()
	return c, nil
}

// Session returns the client's session (see Config.Session).
func (c *Client) Session() wire.SessionID { return c.cfg.Session }

// ID returns the client's id.
func (c *Client) ID() wire.ProcID { return c.cfg.ID }

// Leaders returns the client's view of each group's leader.
func (c *Client) Leaders() []wire.ProcID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.leaders)
}

// Retries returns how many times the client re-sent a message.
func (c *Client) Retries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retries
}

// Overloaded returns how many Multicast calls ended with ErrOverloaded.
func (c *Client) Overloaded() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overloaded
}

// TransportStats returns the client's transport counters (connections,
// handshake failures by reason, drops).
func (c *Client) TransportStats() transport.Stats { return c.tr.Stats() }

// Views returns how many cluster views the client applied.
func (c *Client) Views() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.views
}

// handle steps a node's reply (the transport's Handler, on the reader of
// that node's connection).
func (c *Client) handle(from wire.ProcID, m wire.Message) {
	c.lk.Lock()
	defer c.lk.Unlock()
	if c.closed {
		return
	}
	switch m := m.(type) {
	case *wire.Delivered:
		c.delivered(from, m)
	case *wire.View:
		c.applyView(m)
	case *wire.Overloaded:
		c.shed(from, m.ID)
	case *wire.ReadReply:
		c.readReply(from, m)
	default:
		return
	}
	c.flush()
}

// Multicast sends payload to the groups in dest and waits for the reply
// of a destination group, or of every one with Config.AllGroups (or ctx). dest need not be sorted. If ctx ends
// first the message stays in flight (it may still be delivered). If a
// destination group's leader sheds it, Multicast returns ErrOverloaded
// (see there): the caller should back off.
func (c *Client) Multicast(ctx context.Context, dest []wire.GroupID, payload []byte) (Result, error) {
	d := slices.Clone(dest)
	slices.Sort(d)
	d = slices.Compact(d)
	for _, g := range d {
		if int(g) >= c.cfg.Topology.NumGroups() {
			return Result{}, fmt.Errorf("client: no group %d (the cluster has %d)", g, c.cfg.Topology.NumGroups())
		}
	}
	if len(d) == 0 {
		return Result{}, errors.New("client: no destination group")
	}
	if c.slots != nil {
		select {
		case c.slots <- struct{}{}: // a free slot: no select over shared channels
		default:
			select {
			case c.slots <- struct{}{}:
			case <-c.stop:
				return Result{}, ErrClosed
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
		}
		defer func() { <-c.slots }()
	}
	r := &request{dest: d, payload: payload, reply: make(chan answer, 1)}
	if err := c.enter(ctx); err != nil {
		return Result{}, err
	}
	c.submit(r)
	c.flush()
	c.lk.Unlock()
	a, err := wait(ctx, r.reply)
	if err != nil {
		return Result{}, err
	}
	return a.res, a.err
}

// enter takes lk for a new request, unless the client is closed or ctx
// has ended (nothing is sent then).
func (c *Client) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.lk.Lock()
	if c.closed {
		c.lk.Unlock()
		return ErrClosed
	}
	return nil
}

// wait waits for a request's answer on reply, or for ctx (the request then
// stays in flight, its answer, if any, to nobody). Close answers every
// request still waiting with ErrClosed, so wait need not also select on
// c.stop: a channel every caller's select locked, under load from many
// goroutines at once (docs/batching.md, "A client's wait").
func wait[A any](ctx context.Context, reply <-chan A) (A, error) {
	done := ctx.Done()
	if done == nil {
		return <-reply, nil
	}
	select {
	case a := <-reply:
		return a, nil
	case <-done:
		var zero A
		return zero, ctx.Err()
	}
}

// Close stops the client. Messages in flight are abandoned.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.lk.Lock()
		c.closed = true
		for id, r := range c.waiting {
			delete(c.waiting, id)
			r.reply <- answer{err: ErrClosed}
		}
		for seq, r := range c.reads {
			delete(c.reads, seq)
			r.reply <- readAnswer{err: ErrClosed}
		}
		c.lk.Unlock()
		close(c.stop)
	})
	<-c.done
	return c.tr.Close()
}

// tick ticks the state machine every Config.Tick until Close.
func (c *Client) tick() {
	defer close(c.done)
	ticker := time.NewTicker(c.cfg.Tick)
	defer ticker.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-ticker.C:
		}
		c.lk.Lock()
		if !c.closed {
			c.m.Tick()
			c.ticks++
			c.askView()
			c.tickReads()
			c.flush()
		}
		c.lk.Unlock()
	}
}

// flush sends what the state machine made ready and answers the requests
// it ended (under lk).
func (c *Client) flush() {
	if c.m.HasReady() {
		c.ready()
	}
}

func (c *Client) submit(r *request) {
	c.seq++
	m := wire.AppMsg{ID: wire.MsgID{Client: c.cfg.ID, Session: c.cfg.Session, Seq: c.seq}, Dest: r.dest, Payload: r.payload}
	m.Seal()
	r.start = time.Now()
	if c.cfg.OnMulticast != nil {
		c.cfg.OnMulticast(m, r.start)
	}
	if err := c.m.MulticastSealed(m); err != nil { // sealed just above
		// Validated in Multicast; cannot happen.
		panic(fmt.Sprintf("client: %v", err))
	}
	c.waiting[m.ID] = r
}

// askView asks the next node for the cluster's view: on the first tick,
// every ViewTicks ticks, and at the first tick after a retry.
func (c *Client) askView() {
	if c.cfg.ViewTicks < 0 || len(c.nodes) == 0 {
		return
	}
	if c.ticks < c.nextAsk && c.m.Retries() == c.seenRe {
		return
	}
	c.seenRe = c.m.Retries()
	c.nextAsk = c.ticks + c.cfg.ViewTicks
	c.tr.Send(c.nodes[c.asked%len(c.nodes)], &wire.ViewRequest{})
	c.asked++
}

// applyView points each group at the member the view shows leading with
// the highest ballot among those judged up.
func (c *Client) applyView(v *wire.View) {
	best := map[wire.GroupID]wire.ViewEntry{}
	for _, e := range v.Entries {
		if !e.Leader || !e.Alive {
			continue
		}
		if g, ok := c.cfg.Topology.GroupOf(e.ID); !ok || g != e.Group {
			continue
		}
		if b, ok := best[e.Group]; !ok || b.Ballot.Less(e.Ballot) {
			best[e.Group] = e
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(v.Entries) > 0 {
		c.views++
	}
	for g, e := range best {
		if c.m.SetLeader(g, e.ID) == nil {
			c.leaders[g] = e.ID
		}
	}
}

// delivered steps a DELIVERED reply (under lk).
func (c *Client) delivered(from wire.ProcID, d *wire.Delivered) {
	if err := c.m.Step(wire.Envelope{From: from, To: c.cfg.ID, Msg: d}); err != nil {
		return // a reply naming a non-replica leader or an unknown group
	}
	c.mu.Lock()
	c.leaders[d.G] = d.Leader
	c.mu.Unlock()
}

// shed ends a request whose message node from shed (wire.Overloaded) with
// ErrOverloaded, if from is the leader the client sends that message to in
// one of its destination groups. A follower shedding a retry says nothing
// about whether the leader took the message in.
func (c *Client) shed(from wire.ProcID, id wire.MsgID) {
	r := c.waiting[id]
	if r == nil {
		return // answered, or shed already
	}
	leads := false
	for _, g := range r.dest {
		leads = leads || c.m.Leader(g) == from
	}
	if !leads || !c.m.Abandon(id) {
		return
	}
	delete(c.waiting, id)
	c.mu.Lock()
	c.overloaded++
	c.mu.Unlock()
	r.reply <- answer{res: Result{ID: id}, err: ErrOverloaded}
}

func (c *Client) ready() {
	rd := c.m.Ready()
	for _, env := range rd.Messages {
		c.tr.Send(env.To, env.Msg)
	}
	var now time.Time
	if len(rd.Deliveries) > 0 {
		now = time.Now() // not for a Ready of messages only: a clock read is 55 ns on this VM class
	}
	for _, d := range rd.Deliveries {
		r := c.waiting[d.M.ID]
		delete(c.waiting, d.M.ID)
		if r == nil {
			continue
		}
		if d.Expired {
			r.reply <- answer{err: fmt.Errorf("%w: %s after %v", ErrSessionExpired, d.M.ID, now.Sub(r.start).Round(time.Millisecond))}
			continue
		}
		res := Result{ID: d.M.ID, GTS: d.GTS, Latency: now.Sub(r.start)}
		for i, rp := range d.Replies {
			if i == 0 {
				res.Group, res.Leader = rp.G, rp.Leader
			}
			res.Results = append(res.Results, GroupResult{Group: rp.G, Result: rp.Result, OK: rp.HasResult})
		}
		r.reply <- answer{res: res}
	}
	c.mu.Lock()
	c.retries = c.m.Retries()
	c.mu.Unlock()
	c.m.Advance()
}

// certClientID returns the client id a TLS certificate is bound to, or 0
// (any id, or no certificate the client could use: transport.New says
// why).
func certClientID(t *transport.TLS, cluster string) wire.ProcID {
	if len(t.Certificate.Certificate) == 0 {
		return 0
	}
	leaf, err := x509.ParseCertificate(t.Certificate.Certificate[0])
	if err != nil {
		return 0
	}
	id, found, err := transport.CertIdentity(leaf, cluster)
	if err != nil || !found || id.Role != transport.RoleClient || id.AnyClient {
		return 0
	}
	return id.ID
}
