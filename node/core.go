package node

import (
	"fmt"
	"slices"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/fastcast"
	"github.com/weft-dev/weft/amcast/ftskeen"
	"github.com/weft-dev/weft/amcast/skeen"
	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/wire"
)

// Protocol names (Config.Protocol, Status.Protocol, the deliveries log's
// header).
const (
	ProtocolWbCast   = "wbcast"
	ProtocolFTSkeen  = "ftskeen"
	ProtocolFastCast = "fastcast"
	ProtocolSkeen    = "skeen"
)

// DefaultProtocol is the protocol of a Config with an empty Protocol.
const DefaultProtocol = ProtocolWbCast

// Protocols lists the protocols a node can run, the default first.
var Protocols = []string{ProtocolWbCast, ProtocolFTSkeen, ProtocolFastCast, ProtocolSkeen}

// core is the protocol state machine a Node drives, whatever the protocol,
// with the durable image the node mirrors to write compaction snapshots.
type core interface {
	amcast.Machine
	// role is the process's role for the status ("LEADER", "FOLLOWER",
	// "RECOVERING", "CANDIDATE").
	role() string
	// leader reports whether the process leads its group.
	leader() bool
	// ballots returns the ballot the process joined and the ballot of its
	// state (the same for the baselines, zero for Skeen).
	ballots() (ballot, cballot wire.Ballot)
	// clock is the process's logical clock.
	clock() uint64
	// maxDelivered is the gts of the last delivery.
	maxDelivered() wire.Timestamp
	// retained is the number of messages held in memory.
	retained() int
	// coverage returns this incarnation's protocol counters.
	coverage() amcast.Coverage
	// store is the durable image the node applies every record it makes
	// durable to, or nil when the machine keeps its own (image).
	store() coreStore
	// image freezes the machine's own durable image, when store is nil,
	// for a compaction's goroutine; ok is false when it holds none to
	// compact now (a WbCast replica inert after a disk loss).
	image() (img coreImage, ok bool)
}

// coreImage is what a compaction writes: a protocol's durable image,
// read by the compaction's goroutine.
type coreImage interface {
	// messages is the number of messages (or log slots) the image holds.
	messages() int
	// snapshot hands emit, one at a time, the records from which Apply,
	// on an empty store, rebuilds the image (what compaction writes in
	// place of the log), each REC_SNAPSHOT as its pages of at most budget
	// bytes (wire.SnapshotPages); a record is valid only until emit
	// returns. It returns emit's first error; ok is false if the protocol
	// cannot compact (its log is then kept).
	snapshot(budget int, emit func(wire.Message) error) (ok bool, err error)
}

// coreStore is a protocol's durable image kept apart from its machine
// (amcast.Store), which the node mirrors every persisted record into.
type coreStore interface {
	amcast.Store
	coreImage
}

// coreConfig is what a protocol core is built from.
type coreConfig struct {
	Topology                                  *amcast.Topology
	ID                                        wire.ProcID
	HeartbeatTicks, ElectionTicks, RetryTicks int
	SessionTicks                              int  // wbcast only
	CollectAfterAll                           bool // wbcast only
}

// protocolSpec describes how a node runs one protocol.
type protocolSpec struct {
	name string
	// faultTolerant: replicas persist their state and restart from it; a
	// protocol that is not runs one replica per group and never restarts.
	faultTolerant bool
	newStore      func() coreStore
	// open builds a fresh core (st nil) or restores one from st. det is
	// the failure detector (nil: the protocol's tick timeout).
	open func(cc coreConfig, det Detector, st coreStore) (core, error)
	// amnesiac builds the core of a member whose durable state was lost
	// (Config.Rejoin; datadir.go): inert until it is replaced. nil: the
	// protocol has no disk-loss path and the node refuses a rejoin.
	amnesiac func(cc coreConfig, det Detector, st coreStore) (core, error)
	// sendsBeforeSync, if set, names the messages that may leave before
	// their Ready's records are durable (wbcast.SendsBeforeSync; ready in
	// node.go). nil: every message waits for the sync.
	sendsBeforeSync func(wire.Message) bool
	// mayWait, if set, names the messages that may wait for the next
	// message to the same peer or the next tick (wbcast.MayWait; lazy.go).
	// nil: every message leaves with its Ready.
	mayWait func(wire.Message) bool
}

var protocolSpecs = map[string]*protocolSpec{
	ProtocolWbCast: {name: ProtocolWbCast, faultTolerant: true,
		newStore: func() coreStore { return wbcastStore{wbcast.NewStore()} }, open: openWbCast, amnesiac: openWbCastAmnesiac,
		sendsBeforeSync: wbcast.SendsBeforeSync, mayWait: wbcast.MayWait},
	ProtocolFTSkeen: {name: ProtocolFTSkeen, faultTolerant: true,
		newStore: func() coreStore { return rskeenStore{ftskeen.NewStore()} }, open: openFTSkeen},
	ProtocolFastCast: {name: ProtocolFastCast, faultTolerant: true,
		newStore: func() coreStore { return rskeenStore{fastcast.NewStore()} }, open: openFastCast},
	ProtocolSkeen: {name: ProtocolSkeen, faultTolerant: false,
		newStore: func() coreStore { return skeenStore{} }, open: openSkeen},
}

// lookupProtocol returns the spec of the named protocol ("" is the
// default).
func lookupProtocol(name string) (*protocolSpec, error) {
	if name == "" {
		name = DefaultProtocol
	}
	ps, ok := protocolSpecs[name]
	if !ok {
		return nil, fmt.Errorf("node: Config.Protocol %q is not one of %v", name, Protocols)
	}
	return ps, nil
}

// checkTopology reports whether the protocol can run on topo: Skeen is
// not fault tolerant and needs exactly one replica per group.
func (ps *protocolSpec) checkTopology(topo *amcast.Topology) error {
	if ps.faultTolerant {
		return nil
	}
	for g, ms := range topo.Groups {
		if len(ms) != 1 {
			return fmt.Errorf("node: Config.Protocol %q is not fault tolerant and needs exactly 1 replica per group; Config.Topology group %d has %d",
				ps.name, g, len(ms))
		}
	}
	return nil
}

// newCore builds the node's protocol core. A node whose data directory has
// no log yet (fresh) starts in the initial state; otherwise recs (the
// latest snapshot's records, then the log's) are applied to a new store
// and the core is restored from it. det is the failure detector for the
// fault-tolerant protocols (nil: the protocol's tick timeout).
//
// Skeen persists nothing: a restarted Skeen process would have lost its
// clock and its pending messages, and could deliver out of order or twice.
// A Skeen node therefore refuses to start from a data directory that
// already holds a log (an earlier incarnation ran there); the directory
// must be removed, and the whole cluster started afresh.
func newCore(ps *protocolSpec, cc coreConfig, det Detector, fresh bool, recs []wire.Message) (core, error) {
	if !ps.faultTolerant {
		if !fresh {
			return nil, fmt.Errorf("node: %s is not fault tolerant: node %d cannot restart from the log of an earlier run; remove its data directory (and restart the whole cluster) to start afresh",
				ps.name, cc.ID)
		}
		return ps.open(cc, det, nil)
	}
	if fresh && len(recs) == 0 {
		return ps.open(cc, det, nil)
	}
	st, err := replayStore(ps, recs)
	if err != nil {
		return nil, err
	}
	return ps.open(cc, det, st)
}

// replayStore applies recs to a new store of protocol ps.
func replayStore(ps *protocolSpec, recs []wire.Message) (coreStore, error) {
	st := ps.newStore()
	for i, r := range recs {
		if err := st.Apply(r); err != nil {
			return nil, fmt.Errorf("node: replaying the log as %s (record %d of %d; was the data directory written by another protocol?): %w",
				ps.name, i+1, len(recs), err)
		}
	}
	return st, nil
}

// durableDeliveries returns the deliveries recs make durable, in delivery
// (gts) order: the REC_DELIVERED records and the delivered messages of
// WbCast's REC_SNAPSHOT. A snapshot lists its messages in id order (and
// FT-Skeen's its REC_DELIVERED records too), not in delivery order, so
// they are sorted: the hand-over after a crash skips whatever is at or
// below the deliveries log's last gts, and walks this list in order.
func durableDeliveries(recs []wire.Message) []*wire.RecDelivered {
	var out []*wire.RecDelivered
	for _, r := range recs {
		switch r := r.(type) {
		case *wire.RecDelivered:
			out = append(out, r)
		case *wire.RecSnapshot:
			for i, m := range r.Msgs {
				if r.Delivered[i] {
					out = append(out, &wire.RecDelivered{M: m.M, LTS: m.LTS, GTS: m.GTS})
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *wire.RecDelivered) int { return a.GTS.Compare(b.GTS) })
	return out
}

// durableInstalls returns the points of the state transfers recs make
// durable (each RecInstall's last page), in log order.
func durableInstalls(recs []wire.Message) []wire.Timestamp {
	var out []wire.Timestamp
	for _, r := range recs {
		if in, ok := r.(*wire.RecInstall); ok && !in.More {
			out = append(out, in.Image.MaxDelivered)
		}
	}
	return out
}

// WbCast.

// wbcastCore keeps no store: the process keeps its durable image itself
// (wbcast.Image), so the node mirrors nothing; a store is built only to
// restore the process at a start (replayStore).
type wbcastCore struct {
	*wbcast.Process
}

type wbcastStore struct{ *wbcast.Store }

func (s wbcastStore) messages() int { return s.Messages() }
func (s wbcastStore) snapshot(budget int, emit func(wire.Message) error) (bool, error) {
	return true, emitRecords([]wire.Message{s.Snapshot()}, budget, emit)
}

// wbcastImage is a process's frozen image (wbcast.Image). It streams its
// pages (wbcast.Image.Pages): no copy of every collected id.
type wbcastImage struct{ *wbcast.Image }

func (i wbcastImage) messages() int { return i.Messages() }
func (i wbcastImage) snapshot(budget int, emit func(wire.Message) error) (bool, error) {
	return true, i.Pages(budget, func(p *wire.RecSnapshot) error { return emit(p) })
}

func wbcastConfig(cc coreConfig, det Detector) wbcast.Config {
	cfg := wbcast.Config{Topology: cc.Topology, ID: cc.ID, HeartbeatTicks: cc.HeartbeatTicks,
		ElectionTicks: cc.ElectionTicks, RetryTicks: cc.RetryTicks, SessionTicks: cc.SessionTicks,
		CollectAfterAll: cc.CollectAfterAll}
	if det != nil {
		cfg.Detector = det
	}
	return cfg
}

// openWbCastAmnesiac restores a WbCast replica that lost its store
// (wbcast.RestoreAmnesiac, docs/disk-loss.md): inert until it rejoined;
// st is what its new directory's log holds since (nothing at first).
func openWbCastAmnesiac(cc coreConfig, det Detector, st coreStore) (core, error) {
	ws := wbcastStore{wbcast.NewStore()}
	if st != nil {
		ws = st.(wbcastStore)
	}
	p, err := wbcast.RestoreAmnesiac(wbcastConfig(cc, det), ws.Store)
	if err != nil {
		return nil, err
	}
	return &wbcastCore{Process: p}, nil
}

func openWbCast(cc coreConfig, det Detector, st coreStore) (core, error) {
	cfg := wbcastConfig(cc, det)
	c := &wbcastCore{}
	var err error
	if st == nil {
		c.Process, err = wbcast.New(cfg)
	} else {
		c.Process, err = wbcast.Restore(cfg, st.(wbcastStore).Store)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (c *wbcastCore) role() string                        { return c.Status().String() }
func (c *wbcastCore) leader() bool                        { return c.IsLeader() }
func (c *wbcastCore) ballots() (wire.Ballot, wire.Ballot) { return c.Ballot() }
func (c *wbcastCore) clock() uint64                       { return c.Clock() }
func (c *wbcastCore) maxDelivered() wire.Timestamp        { return c.MaxDelivered() }
func (c *wbcastCore) retained() int                       { return c.Retained() }
func (c *wbcastCore) coverage() amcast.Coverage           { return c.Coverage() }
func (c *wbcastCore) store() coreStore                    { return nil }
func (c *wbcastCore) image() (coreImage, bool) {
	img, ok := c.Image()
	if !ok {
		return nil, false
	}
	return wbcastImage{img}, true
}

// FT-Skeen and FastCast (Skeen replicated by per-group Multi-Paxos; one
// store type, rskeen.Store, under two names).

// rskeenProcess is what ftskeen.Process and fastcast.Process share (their
// rskeen.Core).
type rskeenProcess interface {
	amcast.Machine
	amcast.Observable
	Role() string
	Ballot() (wire.Ballot, wire.Ballot)
	Clock() uint64
	MaxDelivered() wire.Timestamp
}

// rskeenCore adapts ftskeen.Process and fastcast.Process.
type rskeenCore struct {
	rskeenProcess
	st rskeenStore
}

type rskeenStore struct{ *ftskeen.Store } // = rskeen.Store = fastcast.Store

func (s rskeenStore) messages() int { return s.Messages() }
func (s rskeenStore) snapshot(budget int, emit func(wire.Message) error) (bool, error) {
	return true, emitRecords(s.Snapshot(), budget, emit)
}

// openRSkeen opens an FT-Skeen or FastCast replica (ftskeen.Config and
// fastcast.Config are one type), fresh (st nil) or restored from st.
func openRSkeen[P rskeenProcess](cc coreConfig, det Detector, st coreStore,
	fresh func(ftskeen.Config) (P, error), restore func(ftskeen.Config, *ftskeen.Store) (P, error)) (core, error) {
	cfg := ftskeen.Config{Topology: cc.Topology, ID: cc.ID, HeartbeatTicks: cc.HeartbeatTicks,
		ElectionTicks: cc.ElectionTicks, RetryTicks: cc.RetryTicks}
	if det != nil {
		cfg.Detector = det
	}
	var p P
	var err error
	rs := rskeenStore{ftskeen.NewStore()}
	if st == nil {
		p, err = fresh(cfg)
	} else {
		rs = st.(rskeenStore)
		p, err = restore(cfg, rs.Store)
	}
	if err != nil {
		return nil, err
	}
	return &rskeenCore{rskeenProcess: p, st: rs}, nil
}

func openFTSkeen(cc coreConfig, det Detector, st coreStore) (core, error) {
	return openRSkeen(cc, det, st, ftskeen.New, ftskeen.Restore)
}

func openFastCast(cc coreConfig, det Detector, st coreStore) (core, error) {
	return openRSkeen(cc, det, st, fastcast.New, fastcast.Restore)
}

func (c *rskeenCore) role() string                        { return c.Role() }
func (c *rskeenCore) leader() bool                        { return c.IsLeader() }
func (c *rskeenCore) ballots() (wire.Ballot, wire.Ballot) { return c.Ballot() }
func (c *rskeenCore) clock() uint64                       { return c.Clock() }
func (c *rskeenCore) maxDelivered() wire.Timestamp        { return c.MaxDelivered() }
func (c *rskeenCore) retained() int                       { return c.Retained() }
func (c *rskeenCore) coverage() amcast.Coverage           { return c.Coverage() }
func (c *rskeenCore) store() coreStore                    { return c.st }
func (c *rskeenCore) image() (coreImage, bool)            { return nil, false }

// Skeen (one process per group, nothing durable).

type skeenCore struct {
	*skeen.Process
	maxDel wire.Timestamp // the gts of the last delivery handed out
}

// Ready implements amcast.Machine, noting the last delivery's gts
// (deliveries come in gts order).
func (c *skeenCore) Ready() amcast.Ready {
	rd := c.Process.Ready()
	if n := len(rd.Deliveries); n > 0 {
		c.maxDel = rd.Deliveries[n-1].GTS
	}
	return rd
}

// skeenStore is Skeen's durable image: there is none (the process never
// persists a record).
type skeenStore struct{}

func (skeenStore) Apply(rec wire.Message) error {
	return fmt.Errorf("node: skeen persists no records, got %s", rec.Kind())
}
func (skeenStore) messages() int                                        { return 0 }
func (skeenStore) snapshot(int, func(wire.Message) error) (bool, error) { return false, nil }

func openSkeen(cc coreConfig, _ Detector, st coreStore) (core, error) {
	if st != nil {
		return nil, fmt.Errorf("node: skeen cannot restore a process")
	}
	p, err := skeen.New(cc.Topology, cc.ID)
	if err != nil {
		return nil, err
	}
	return &skeenCore{Process: p}, nil
}

// The only process of its group leads it.
func (c *skeenCore) role() string                        { return "LEADER" }
func (c *skeenCore) leader() bool                        { return true }
func (c *skeenCore) ballots() (wire.Ballot, wire.Ballot) { return wire.Ballot{}, wire.Ballot{} }
func (c *skeenCore) clock() uint64                       { return c.Clock() }
func (c *skeenCore) maxDelivered() wire.Timestamp        { return c.maxDel }
func (c *skeenCore) retained() int                       { return c.Retained() }
func (c *skeenCore) coverage() amcast.Coverage           { return amcast.Coverage{} }
func (c *skeenCore) store() coreStore                    { return skeenStore{} }
func (c *skeenCore) image() (coreImage, bool)            { return nil, false }
