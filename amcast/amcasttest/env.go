// Package amcasttest is an interaction environment for datadriven tests of
// weft's atomic multicast protocols, in the spirit of etcd-io/raft's
// interaction tests. A script builds a topology of protocol machines and
// clients, multicasts messages and then moves messages between machines by
// hand or until quiescence; the golden output is the protocol's message
// flow, one line per message, record and delivery.
//
// The environment keeps one FIFO queue of in-flight envelopes per ordered
// (from, to) pair. Every protocol message passes through the wire codec on
// its way into a queue, as in the simulator. After each input the recipient's
// Ready is drained: Persist records are counted, printed and (when the
// environment has Durability) passed through the codec and applied to the
// process's Store, then messages go into the queues and deliveries are
// recorded. After every command (and every round of run) the deliveries so
// far are checked (see CheckSafety); a violation fails the test. A
// process's deliveries are kept across its crashes and restarts, so the
// check also catches a restarted process delivering again.
//
// Faults: a crashed process's machine is discarded; its store stays, the
// messages it sent stay in flight, and messages to it are dropped when they
// are delivered while it is down. Partitions act on directed links at
// delivery time: a cut link drops its messages, a held link keeps them
// queued (in FIFO order) until it heals.
//
// # Commands
//
//	topology protocol=wbcast groups=2 replicas=3 [clients=1]
//	topology protocol=wbcast sizes=(1,5) [clients=1]
//	    Creates the replicas (group g holds the next replicas ids, so with
//	    groups x replicas the members of g are g*replicas+i) and the clients
//	    (ids after the replicas), and prints the layout. The first member of
//	    each group is its initial leader.
//	multicast [client=0] dest=0,1 [payload=hello]
//	    The client with that index multicasts a new message, whose id is
//	    "<client id>.<seq>" (seq counts from 1 per client). Prints what the
//	    client sends. A refused multicast prints "error: ...".
//	resend [client=0] seq=1 [to=P,...]
//	    A client retry: the MULTICAST of an earlier message of the client is
//	    queued again, to the given processes or to the initial leaders of its
//	    destination groups. The message keeps its id.
//	deliver [from=P,...] [to=P,...] [kind=K,...] [msg=ID,...] [n=N]
//	    Delivers the queued messages that match every given filter, visiting
//	    links in (from, to) order and each link in FIFO order. Only messages
//	    in flight when the command starts are delivered; messages they cause
//	    wait for the next command. A link whose head does not match stops
//	    there (links are FIFO); matching messages held behind it are noted.
//	    n caps the number delivered. Each delivered envelope is printed with,
//	    indented under it, what its recipient produced, in Ready order:
//	    "persist: <record>" lines, sent envelopes, and deliveries, printed
//	    as "DELIVER p3 <msg> gts=<ts>" (replicas) or "DONE c6 <msg> gts=<ts>"
//	    (clients). A refused message prints "error: ...".
//	    Messages on a cut link or to a crashed process are taken off the
//	    queue and printed with "dropped: <why>"; held links are skipped.
//	drop [from=] [to=] [kind=] [msg=] [n=]
//	    Discards the queued messages matching the filters (anywhere in their
//	    link) and prints them.
//	stabilize [quiet]
//	    Delivers everything in flight, round after round, until nothing is
//	    left (messages on held links stay). Round k delivers the messages
//	    sent in round k-1, so with the multicast queued before round 1,
//	    "round k" is time kδ. No ticks. quiet prints only deliveries and a
//	    summary.
//	run ticks=N [quiet]
//	stabilize ticks=N [quiet]
//	    N rounds; each delivers every message in flight at its start (what
//	    they cause waits for the next round), then ticks every live process
//	    once, in id order: one round is one δ and one tick. Each round
//	    prints what was delivered and what the ticks produced, leaving out
//	    heartbeats that caused nothing but heartbeats, then role changes
//	    ("p1 becomes RECOVERING b=1.p1 cb=0.p0", "p1 is ..." when only the
//	    ballot changed), from Status() and Ballot(). quiet prints only
//	    deliveries and role changes, each prefixed with its round. Both end
//	    with a summary line (messages handled and dropped, deliveries, in
//	    flight).
//	crash p=P,...
//	    Crashes replicas (see Faults above).
//	restart p=P,...
//	    Rebuilds crashed replicas from their stores with
//	    Durability.Restore and prints their status.
//	partition from=P,... to=Q,... [hold]
//	partition a=P,... b=Q,... [hold]
//	    Cuts the directed links from each P to each Q, or both ways between
//	    each P and each Q; with hold, the links hold their messages instead
//	    of dropping them.
//	isolate p=P,... [dir=in|out|both]
//	    Cuts every link into (in), out of (out) or both ways between P and
//	    every other process, clients included. Default both.
//	heal [p=P,...]
//	    Restores every cut or held link, or only those touching P.
//	inject from=P to=P kind=K msg=ID [dest=] [payload=] [g=] [b=] [lts=]
//	       [gts=] [ballots=] [maxd=] [leader=]
//	    Hands a forged message to its recipient at once (bypassing the
//	    queues and the codec) and prints the result as deliver does. The
//	    message body comes from msg's multicast unless dest= is given. A
//	    DELIVER carries its message (as in a catch-up) when dest= or
//	    payload= is given.
//	queued [from=] [to=] [kind=] [msg=] [n=]
//	    Lists the messages in flight (those matching the filters), link by
//	    link, marking those on cut or held links.
//	deliveries
//	    Per process, its deliveries (clients: completions) in order, as
//	    <msg>@<gts>.
//	status
//	    One line per process with what the machine exposes: Status(),
//	    Ballot(), Clock(), MaxDelivered(), Outstanding(), and for an
//	    amcast.Observable its Retained() and non-zero Coverage() counters;
//	    stored= is the store's Messages() when it has that method. A crashed
//	    process shows DOWN.
//	tick [p=P,...] [n=1]
//	    Calls Tick on the given machines (default all live ones), n times,
//	    draining their Ready after each call.
//
// Replicas print as p<id> and clients as c<id> in the environment's own
// lines; envelopes print every process as p<id> (wire.DescribeEnvelope).
// Process arguments accept "3", "p3" and "c3". Commands that print nothing
// else print "ok".
//
// Protocol tests can add commands through Env.Commands, and drive the
// environment from Go with Env.Do.
//
// The package is pure like the protocol cores: no I/O, clock or randomness.
package amcasttest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// ReplicaFunc builds the replica id of the named protocol (sim.NewReplica
// has this signature).
type ReplicaFunc func(protocol string, topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error)

// Command is an extra script command. It returns the command's output.
type Command func(t *testing.T, e *Env, d *datadriven.TestData) string

// MaxStabilizeRounds caps the rounds of one stabilize command.
const MaxStabilizeRounds = 1000

type link struct{ from, to wire.ProcID }

// Env is an interaction environment. Create it with New and feed it script
// commands with Handle.
type Env struct {
	// NewReplica builds replicas.
	NewReplica ReplicaFunc
	// DefaultProtocol is used by topology when protocol= is absent.
	DefaultProtocol string
	// Commands holds extra commands, looked up after the built-in ones.
	Commands map[string]Command

	// Protocol is the protocol of the current topology.
	Protocol string
	// Topo is the current topology (nil before the topology command).
	Topo *amcast.Topology
	// Durability, when set, gives replicas durable stores and lets scripts
	// crash and restart them (see crash and restart). Nil: no stores;
	// crash is still allowed (crash-stop), restart is not.
	Durability *Durability
	// Unordered says the protocol under test does not order messages (a toy
	// used to test the environment itself): CheckSafety then ignores the
	// checker's order violations (a group skipping a message it was sent).
	Unordered bool

	// Procs holds every process, indexed by id: replicas, then clients.
	// A crashed process's entry is nil until it restarts.
	Procs []amcast.Machine
	// Clients holds the clients, by client index.
	Clients []*amcast.Client

	queues    map[link][]wire.Envelope
	delivered [][]amcast.Delivery
	persisted []int
	msgs      map[wire.MsgID]wire.AppMsg
	seq       []uint64

	stores []amcast.Store   // per process; nil entries keep nothing
	down   []bool           // crashed and not restarted
	cut    map[link]cutMode // partitioned directed links
	// batch: each Ready's messages from one replica to another travel as
	// BATCH messages, as a node sends them (amcast.Coalesce; topology's
	// batch argument), and a replica steps a batch's messages in order.
	batch bool
}

// cutMode is what a partitioned link does with the messages on it.
type cutMode uint8

const (
	cutDrop cutMode = iota + 1 // messages are dropped at delivery time
	cutHold                    // messages stay queued until the link heals
)

// Durability supplies a protocol's durable stores. The functions have the
// shape of ReplicaFunc so a test can switch on the protocol.
type Durability struct {
	// NewStore returns the empty store of replica id, or nil if the
	// protocol keeps no durable state.
	NewStore func(protocol string, topo *amcast.Topology, id wire.ProcID) (amcast.Store, error)
	// Restore rebuilds replica id after a crash from its store, as a new
	// incarnation (as the replica constructor does for a fresh process).
	Restore func(protocol string, topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error)
}

// New returns an environment that builds replicas with newReplica.
func New(newReplica ReplicaFunc) *Env {
	return &Env{NewReplica: newReplica, Commands: map[string]Command{}}
}

// Handle runs one script command and returns its output. It is meant to be
// passed to datadriven.RunTest.
func (e *Env) Handle(t *testing.T, d *datadriven.TestData) string {
	t.Helper()
	var w strings.Builder
	switch d.Cmd {
	case "topology":
		e.cmdTopology(t, d, &w)
	default:
		if e.Topo == nil {
			d.Fatalf(t, "%s before topology", d.Cmd)
		}
		switch d.Cmd {
		case "multicast":
			e.cmdMulticast(t, d, &w)
		case "resend":
			e.cmdResend(t, d, &w)
		case "deliver":
			f := e.parseFilter(t, d)
			if e.deliverMatching(t, f, &w) == 0 && w.Len() == 0 {
				w.WriteString("no messages to deliver\n")
			}
		case "pass":
			e.cmdPass(t, d, &w)
		case "drop":
			e.cmdDrop(t, d, &w)
		case "stabilize":
			if d.HasArg("ticks") {
				e.cmdRun(t, d, &w)
			} else {
				e.cmdStabilize(t, d, &w)
			}
		case "inject":
			e.cmdInject(t, d, &w)
		case "queued":
			e.cmdQueued(e.parseFilter(t, d), &w)
		case "deliveries":
			e.cmdDeliveries(&w)
		case "status":
			for id := range e.Procs {
				w.WriteString(e.StatusLine(wire.ProcID(id)))
				w.WriteByte('\n')
			}
		case "tick":
			e.cmdTick(t, d, &w)
		case "run":
			e.cmdRun(t, d, &w)
		case "crash":
			e.cmdCrash(t, d, &w)
		case "restart":
			e.cmdRestart(t, d, &w)
		case "partition":
			e.cmdPartition(t, d, &w)
		case "isolate":
			e.cmdIsolate(t, d, &w)
		case "heal":
			e.cmdHeal(t, d, &w)
		default:
			cmd, ok := e.Commands[d.Cmd]
			if !ok {
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			w.WriteString(cmd(t, e, d))
		}
	}
	if e.Topo != nil {
		if err := e.CheckSafety(); err != nil {
			d.Fatalf(t, "safety violation: %v\noutput so far:\n%s", err, w.String())
		}
	}
	if w.Len() == 0 {
		return "ok\n"
	}
	return w.String()
}

// Do runs one script command written as a script line, such as
// "run ticks=10 quiet", and returns its output. It lets Go tests drive the
// environment without a script file.
func (e *Env) Do(t *testing.T, line string) string {
	t.Helper()
	cmd, args, err := datadriven.ParseLine(line)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return e.Handle(t, &datadriven.TestData{Pos: "Do: " + line, Cmd: cmd, CmdArgs: args})
}

// Name returns "p<id>" for a replica and "c<id>" for a client.
func (e *Env) Name(id wire.ProcID) string {
	if e.Topo != nil && !e.Topo.IsReplica(id) {
		return fmt.Sprintf("c%d", id)
	}
	return fmt.Sprintf("p%d", id)
}

// Machine returns process id, or nil.
func (e *Env) Machine(id wire.ProcID) amcast.Machine {
	if int(id) >= len(e.Procs) {
		return nil
	}
	return e.Procs[id]
}

// Deliveries returns process id's deliveries (a client's completions) so far.
func (e *Env) Deliveries(id wire.ProcID) []amcast.Delivery {
	if int(id) >= len(e.delivered) {
		return nil
	}
	return e.delivered[id]
}

// Message returns a message multicast earlier in the script. Scripts name
// messages without their digest ("6.1"): the lookup ignores id.Digest
// (the env's clients never reuse a sequence number).
func (e *Env) Message(id wire.MsgID) (wire.AppMsg, bool) {
	m, ok := e.msgs[nameOf(id)]
	return m, ok
}

// nameOf is id without its digest: how scripts write it.
func nameOf(id wire.MsgID) wire.MsgID {
	id.Digest = wire.Digest{}
	return id
}

// Queued returns the messages in flight, link by link in (from, to) order.
func (e *Env) Queued() []wire.Envelope {
	var out []wire.Envelope
	for _, l := range e.links() {
		out = append(out, e.queues[l]...)
	}
	return out
}

// InFlight returns the number of messages in flight.
func (e *Env) InFlight() int {
	n := 0
	for _, q := range e.queues {
		n += len(q)
	}
	return n
}

// links returns the links with messages in flight, in (from, to) order.
func (e *Env) links() []link {
	ls := make([]link, 0, len(e.queues))
	for l, q := range e.queues {
		if len(q) > 0 {
			ls = append(ls, l)
		}
	}
	slices.SortFunc(ls, func(a, b link) int {
		if a.from != b.from {
			return int(a.from) - int(b.from)
		}
		return int(a.to) - int(b.to)
	})
	return ls
}

// Send puts env at the tail of its link, through the wire codec.
func (e *Env) Send(t *testing.T, env wire.Envelope) {
	t.Helper()
	if int(env.To) >= len(e.Procs) {
		t.Fatalf("%s sent %s to unknown process %d", e.Name(env.From), wire.Describe(env.Msg), env.To)
	}
	msg, err := wire.Decode(wire.Append(nil, env.Msg))
	if err != nil {
		t.Fatalf("%s: codec round trip: %v", wire.DescribeEnvelope(env), err)
	}
	env.Msg = msg
	l := link{env.From, env.To}
	e.queues[l] = append(e.queues[l], env)
}

// Step hands env to its recipient now, then drains the recipient's Ready.
// It prints env and, indented, the result. A message to a crashed process
// is dropped (and printed as such).
func (e *Env) Step(t *testing.T, env wire.Envelope, w *strings.Builder) {
	t.Helper()
	e.step(t, env, true).write(w, "  ")
}

// outLine is one line of what a process produced: a record, a message or
// a delivery.
type outLine struct {
	text    string
	hb      bool // a HEARTBEAT sent
	deliver bool // an application delivery (DELIVER or DONE line)
}

// stepResult is what handing one envelope to its recipient did.
type stepResult struct {
	env     wire.Envelope
	dropped string // why env did not reach its recipient; "" if it did
	err     string // the error Step returned
	out     []outLine
}

func (r *stepResult) write(w *strings.Builder, indent string) {
	w.WriteString(wire.DescribeEnvelope(r.env))
	w.WriteByte('\n')
	if r.dropped != "" {
		fmt.Fprintf(w, "%sdropped: %s\n", indent, r.dropped)
	}
	if r.err != "" {
		fmt.Fprintf(w, "%serror: %s\n", indent, r.err)
	}
	writeLines(w, indent, r.out)
}

func writeLines(w *strings.Builder, indent string, ls []outLine) {
	for _, l := range ls {
		w.WriteString(indent)
		w.WriteString(l.text)
		w.WriteByte('\n')
	}
}

// step hands env to its recipient, unless the recipient is down, and with
// drain handles the recipient's Ready.
func (e *Env) step(t *testing.T, env wire.Envelope, drain bool) *stepResult {
	t.Helper()
	r := &stepResult{env: env}
	if int(env.To) < len(e.down) && e.down[env.To] {
		r.dropped = e.Name(env.To) + " is down"
		return r
	}
	m := e.Machine(env.To)
	if m == nil {
		r.err = fmt.Sprintf("no process %d", env.To)
		return r
	}
	r.err = stepAll(m, env)
	if drain {
		r.out = e.drain(t, env.To)
	}
	return r
}

// stepAll steps env into m, a batch message by message (amcast.Unbatch);
// it returns the refusals, "" if none.
func stepAll(m amcast.Machine, env wire.Envelope) string {
	var errs []string
	for x := range amcast.Unbatch(env) {
		if err := m.Step(x); err != nil {
			errs = append(errs, err.Error())
		}
	}
	return strings.Join(errs, "; ")
}

// Drain handles process id's Ready until it has none, printing each record,
// message and delivery on its own line prefixed with indent.
func (e *Env) Drain(t *testing.T, id wire.ProcID, w *strings.Builder, indent string) {
	t.Helper()
	writeLines(w, indent, e.drain(t, id))
}

// drain handles process id's Ready until it has none: each Persist record
// goes through the wire codec and into the process's store (if it has
// one) before any message is queued or delivery recorded.
func (e *Env) drain(t *testing.T, id wire.ProcID) []outLine {
	t.Helper()
	var out []outLine
	m := e.Procs[id]
	for i := 0; m.HasReady(); i++ {
		if i == 100 {
			t.Fatalf("%s: HasReady still true after %d Advance calls", e.Name(id), i)
		}
		rd := m.Ready()
		if len(rd.Persist) > 0 && !rd.MustSync {
			t.Fatalf("%s: Ready has %d Persist records but MustSync is false", e.Name(id), len(rd.Persist))
		}
		for _, r := range rd.Persist {
			e.persisted[id]++
			out = append(out, outLine{text: "persist: " + wire.Describe(r)})
			if st := e.stores[id]; st != nil {
				rec, err := wire.Decode(wire.Append(nil, r))
				if err != nil {
					t.Fatalf("%s: record codec round trip of %s: %v", e.Name(id), wire.Describe(r), err)
				}
				if err := st.Apply(rec); err != nil {
					t.Fatalf("%s: store refused %s: %v", e.Name(id), wire.Describe(r), err)
				}
			}
		}
		msgs := rd.Messages
		// A message to the process itself (a WbCast leader's own
		// ACCEPT_ACK) is stepped back once the Ready is handled, as a
		// driver does after the sync (wbcast/pipeline.go); it is not
		// printed, as the steps inside one Step are not.
		var self []wire.Envelope
		msgs = slices.DeleteFunc(slices.Clone(msgs), func(env wire.Envelope) bool {
			if env.To == id {
				self = append(self, env)
				return true
			}
			return false
		})
		if e.batch && e.Topo.IsReplica(id) {
			msgs = amcast.Coalesce(msgs, e.Topo.IsReplica, 0)
		}
		for _, env := range msgs {
			if env.From != id {
				t.Fatalf("%s: Ready message with sender p%d: %s", e.Name(id), env.From, wire.DescribeEnvelope(env))
			}
			out = append(out, outLine{text: wire.DescribeEnvelope(env), hb: env.Msg.Kind() == wire.KindHeartbeat})
			e.Send(t, env)
		}
		for _, dl := range rd.Deliveries {
			if dl.Rec < -1 || dl.Rec >= len(rd.Persist) {
				t.Fatalf("%s: delivery of %s names record %d of a Ready with %d", e.Name(id), dl.M.ID, dl.Rec, len(rd.Persist))
			}
			dl.M.Dest = slices.Clone(dl.M.Dest)
			dl.M.Payload = slices.Clone(dl.M.Payload)
			e.delivered[id] = append(e.delivered[id], dl)
			verb := "DELIVER"
			if dl.Install {
				out = append(out, outLine{text: fmt.Sprintf("INSTALL %s point=%s", e.Name(id), dl.GTS), deliver: true})
				continue
			}
			if !e.Topo.IsReplica(id) {
				verb = "DONE"
			}
			out = append(out, outLine{text: fmt.Sprintf("%s %s %s gts=%s", verb, e.Name(id), dl.M.ID, dl.GTS), deliver: true})
		}
		m.Advance()
		for _, env := range self {
			if err := m.Step(env); err != nil {
				t.Fatalf("%s: refused its own %s: %v", e.Name(id), wire.DescribeEnvelope(env), err)
			}
		}
	}
	return out
}
