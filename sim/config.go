package sim

// A run's configuration: delay models, the workload, the knobs of Config
// and their validation.

import (
	"errors"
	"fmt"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// DelayModel picks each message's link delay.
type DelayModel int

// Delay models.
const (
	// DelayFixed: every message takes exactly δ.
	DelayFixed DelayModel = iota
	// DelayUniform: uniform in (0, δ].
	DelayUniform
	// DelayHeavy: Pareto (α = 1.5, median ≈ δ/2), capped at 50δ.
	DelayHeavy
)

// ParseDelay parses "fixed", "uniform" or "heavy".
func ParseDelay(s string) (DelayModel, error) {
	switch s {
	case "fixed":
		return DelayFixed, nil
	case "uniform":
		return DelayUniform, nil
	case "heavy":
		return DelayHeavy, nil
	}
	return 0, fmt.Errorf("sim: unknown delay model %q (want fixed, uniform or heavy)", s)
}

func (d DelayModel) String() string {
	return [...]string{"fixed", "uniform", "heavy"}[d]
}

// Mode is how clients issue messages.
type Mode int

// Workload modes.
const (
	// ClosedLoop: each client keeps one message outstanding.
	ClosedLoop Mode = iota
	// OpenLoop: each client multicasts at exponential inter-arrival times
	// with mean Workload.Interval, whatever the replies.
	OpenLoop
	// Solo: one message at a time system-wide; the next is multicast one δ
	// after the simulation goes quiet (collision-free runs).
	Solo
	// Script: exactly the multicasts in Workload.Script.
	Script
)

// Scripted is one multicast of a Script workload.
type Scripted struct {
	At     int64
	Client int // client index, 0-based
	Dest   []wire.GroupID
}

// Workload describes the client load.
type Workload struct {
	Messages    int  // total multicasts (ignored by Script)
	Clients     int  // client processes (default 1)
	Mode        Mode // default ClosedLoop
	Interval    int64
	DestMin     int // destination-set size, uniform in [DestMin, DestMax]
	DestMax     int
	PayloadSize int
	Script      []Scripted
	// SessionEvery, if positive, makes each client start a new session
	// (wire.MsgID.Session: a client restarted with the same id) after
	// every SessionEvery of its messages, at the first moment it has none
	// outstanding. 0 keeps one session per client for the whole run.
	SessionEvery int
	// CrashClients, with SessionEvery, starts a client's new session even
	// while messages are outstanding, as a client process that crashed
	// and restarted would: the messages in flight are given up
	// (Sim.giveUp), and replies to them reach the new incarnation, which
	// ignores them.
	CrashClients bool
	// ExpireTicks, if positive, is the clients' side of the session lease
	// (amcast.Client.ExpireTicks): a message unanswered that many ticks
	// after its first send is given up (Sim.giveUp). A give-up once the
	// liveness phase has begun (GST plus Faults.Conv) fails the run: after
	// GST every message must complete. Keep it at most half the
	// replicas' session lease (wbcast.Config.SessionTicks).
	ExpireTicks int
}

// DelayFunc overrides the delay of one message; ok=false keeps the model's.
type DelayFunc func(now int64, from, to wire.ProcID, m wire.Message) (d int64, ok bool)

// ErrBudget is wrapped by the error of a run that exceeded
// Config.MaxMessages.
var ErrBudget = errors.New("sim: message budget exceeded")

// ErrFrame is wrapped by the error of a run in which a process sent a
// message whose encoding exceeds Config.MaxFrame: the transport would refuse
// to send it, so the run stops instead of delivering it.
var ErrFrame = errors.New("sim: message exceeds the frame cap")

// Config is one simulation.
type Config struct {
	Protocol string
	// Spec, when set, is the protocol to run instead of the one Protocol
	// names in the simulator's table (tests, protocols defined elsewhere).
	// Protocol then only names it in the history; empty means Spec.Name.
	Spec     *ProtocolSpec
	Groups   int
	Replicas int
	Seed     uint64
	Delta    int64 // virtual units per δ (default 1000)
	Delay    DelayModel
	DelayFn  DelayFunc
	Workload Workload
	// TickEvery is the virtual time between ticks: every live process
	// (replicas and clients, in id order) gets Tick() and then has its
	// Ready handled, once per TickEvery. 0 means Delta (one tick per δ); a
	// negative value disables ticks.
	TickEvery int64
	// MaxTime is the horizon: the run stops there even if work is left.
	// 0 means none without faults, Faults.GST+Faults.Conv with them.
	MaxTime int64
	// StallTime ends a run that has nothing of the workload in flight and
	// has seen no multicast, delivery or fault for this long (only ticks
	// and what they cause). 0 means 1000δ; with faults the check starts
	// after the fault phase and 0 means Faults.Conv.
	StallTime int64
	// MaxMessages bounds the protocol messages a run may send; past it the
	// run stops with an error wrapping ErrBudget (a livelock or a retry
	// storm). 0 means no bound.
	MaxMessages int
	// MaxFrame is the transport's frame cap: a message whose encoding is
	// longer stops the run with an error wrapping ErrFrame. 0 means
	// wire.DefaultMaxFrame, the transport's default.
	MaxFrame int
	// Faults is the fault profile; the zero value injects none.
	Faults Faults
	// NoHistory skips recording the history (and checking it).
	NoHistory bool
	// ServiceTime models CPU cost: every message a replica handles keeps it
	// busy for this many virtual units, and the messages that arrive
	// meanwhile wait in a FIFO queue, handled one after the other. 0 (the
	// default) handles messages the instant they arrive. Clients and ticks
	// cost nothing.
	ServiceTime int64
	// Inject, when set, feeds forged input to running processes (fuzz
	// targets, hostile-peer tests): it is called before every global tick
	// with the time, and each envelope it returns is handed at once to its
	// recipient (a live process of the run) as if it had just arrived from
	// From, bypassing links and codec. A refusal (Step error) of injected
	// input does not end the run: refusing it is the point. What the
	// recipient sends in answer goes out as usual (see Mute).
	Inject func(now int64) []wire.Envelope
	// Mute, when set, drops every message a process sends while it
	// returns true for it (counted in LostPartition): a replica fed input
	// forged in a correct replica's name is outside the fault model from
	// then on, and must not reach the others.
	Mute func(p wire.ProcID) bool
	// Payload, when set, makes each workload message's payload (instead
	// of Workload.PayloadSize random bytes) from the issuing client's
	// index and the message's destinations: a service's commands (kv's
	// simulator test). It is called in the run's deterministic order.
	Payload func(client int, dest []wire.GroupID) []byte
	// OnDeliver, when set, is called with every delivery at every
	// replica, in the replica's delivery order, once it is durable (also
	// the durable part of a torn crash's Ready): a replicated service's
	// driver per replica (rsm.Driver), in tests.
	OnDeliver func(p wire.ProcID, d amcast.Delivery)
	// OnIssue, when set, is called with every workload message as its
	// client first sends it (client index, message, virtual time); OnReply
	// with every completion of one on a DELIVERED reply (not a give-up)
	// as the client receives it: d.Replies holds the reply, whose Leader
	// is the replica that sent it. With them a service's test knows each
	// operation's invocation and response (kv's linearizability check).
	// The message and the delivery are the simulator's: do not keep them.
	OnIssue func(client int, m *wire.AppMsg, at int64)
	OnReply func(client int, d amcast.Delivery, at int64)
	// CheckRestore: after every Ready of every replica, a replica rebuilt
	// by the protocol's Restore from the records persisted so far must
	// agree with the live one on the durable state
	// (ProtocolSpec.CompareRestored; issue #10 item 4); a difference ends
	// the run with an error. It costs a Restore per Ready with records and
	// a comparison per Ready, about 10x the run, so it is opt-in.
	CheckRestore bool
	// Batch: each Ready's messages from one replica to another travel as
	// BATCH messages (amcast.Coalesce, what a node does), and a replica
	// steps a batch's messages one by one (amcast.Unbatch). A fault then
	// strikes a batch whole. Stats.Messages counts what travelled (a batch
	// is one); ByKind counts the messages inside batches by their kinds,
	// and the batches as BATCH.
	Batch bool
	// Hold: a replica holds the messages its protocol says may wait
	// (ProtocolSpec.MayWait; WbCast's DELIVER) when they are the last of a
	// Ready for their peer, and sends them in front of its next message to
	// that peer or at its next tick, as a node does (amcast.Held;
	// node/lazy.go). A crash loses what is held. Stats.Held and
	// Stats.HeldByTick count them. Off in the latency table, which
	// measures the protocol's delays, not the node's choice to delay its
	// followers' deliveries by up to a tick.
	Hold bool
	// holdForever breaks Hold for TestHoldCaught: ticks send nothing held.
	holdForever bool
	// Pipeline: a replica writes each Ready's records without waiting for
	// them to be durable and goes on stepping input; a sync, up to a δ
	// later, makes every record written by then durable and releases what
	// their Readys held back (amcast.Pipeline; node/pipeline.go). A crash
	// loses every unsynced record, and a torn one keeps a prefix of them.
	// Not with CheckRestore, which compares the durable store with the
	// live replica after every Ready.
	Pipeline bool
	// SyncDelay, if set, gives how long a sync replica p begins at now
	// takes with Pipeline (a slow disk); unset, up to a δ, drawn.
	SyncDelay func(now int64, p wire.ProcID) int64
}

func (c *Config) validate(ps *ProtocolSpec) error {
	if c.Protocol == "" {
		c.Protocol = ps.Name
	}
	if c.Delta == 0 {
		c.Delta = 1000
	}
	if c.Delta < 1 {
		return fmt.Errorf("sim: Delta must be positive, got %d", c.Delta)
	}
	if c.Groups < 1 || c.Groups > 64 {
		return fmt.Errorf("sim: groups must be in [1,64], got %d", c.Groups)
	}
	if c.Replicas < 1 || c.Replicas > amcast.MaxGroupSize {
		return fmt.Errorf("sim: replicas must be in [1,%d], got %d", amcast.MaxGroupSize, c.Replicas)
	}
	if c.TickEvery == 0 {
		c.TickEvery = c.Delta
	}
	if c.MaxTime < 0 || c.StallTime < 0 || c.MaxMessages < 0 || c.ServiceTime < 0 || c.MaxFrame < 0 {
		return fmt.Errorf("sim: negative MaxTime, StallTime, MaxMessages, ServiceTime or MaxFrame")
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = wire.DefaultMaxFrame
	}
	w := &c.Workload
	if w.Clients == 0 {
		w.Clients = 1
	}
	if w.Clients < 1 {
		return fmt.Errorf("sim: clients must be positive, got %d", w.Clients)
	}
	if w.DestMin == 0 {
		w.DestMin = 1
	}
	if w.DestMax == 0 {
		w.DestMax = c.Groups
	}
	if w.DestMin < 1 || w.DestMax < w.DestMin || w.DestMax > c.Groups {
		return fmt.Errorf("sim: destination sizes [%d,%d] impossible with %d groups", w.DestMin, w.DestMax, c.Groups)
	}
	if w.Messages < 0 || w.PayloadSize < 0 {
		return fmt.Errorf("sim: negative messages or payload size")
	}
	if w.Mode == OpenLoop && w.Interval <= 0 {
		w.Interval = c.Delta
	}
	if w.Mode == Solo {
		w.Clients = 1
	}
	for _, s := range w.Script {
		if s.Client < 0 || s.Client >= w.Clients {
			return fmt.Errorf("sim: scripted multicast for client %d of %d", s.Client, w.Clients)
		}
	}
	if err := c.Faults.validate(c, ps); err != nil {
		return err
	}
	if c.CheckRestore && c.Pipeline {
		return fmt.Errorf("sim: CheckRestore compares the store after every Ready, which Pipeline leaves behind")
	}
	if c.CheckRestore && (!ps.CrashTolerant() || ps.CompareRestored == nil) {
		return fmt.Errorf("sim: CheckRestore: %s has no Restore or CompareRestored", ps.Name)
	}
	if c.StallTime == 0 {
		c.StallTime = 1000 * c.Delta
		if c.Faults.Enabled() {
			c.StallTime = c.Faults.Conv
		}
	}
	return nil
}
