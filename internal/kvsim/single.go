package kvsim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/internal/kvcheck"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

// ErrNotLinearizable is wrapped by RunKV's error when porcupine finds the
// clients' history of a key not linearizable.
var ErrNotLinearizable = errors.New("kvsim: the single-key history is not linearizable (porcupine: Illegal)")

// ErrCheckTimeout is wrapped by RunKV's error when porcupine did not
// decide within KVOptions.CheckTimeout: the history is unchecked.
var ErrCheckTimeout = errors.New("kvsim: porcupine did not decide in time")

// DefaultCheckTimeout bounds porcupine's search per run.
const DefaultCheckTimeout = time.Minute

// historyBytes bounds a run's history (kvcheck.History): a swarm run
// multicasts at most a few hundred commands of a few bytes each.
const historyBytes = 4 << 20

// recentValues is how many of a key's last values a compare-and-set
// picks its expected value from.
const recentValues = 3

// OpsPerKey is how many commands of RunKV's workload go to each key, on
// average: the keys per shard are the commands over OpsPerKey times the
// shards (at least 3). More commands per key make more of them concurrent
// (a command waits out a partition or a failover, or its outcome stays
// unknown), and porcupine's search grows exponentially with them: with 3
// keys per shard it ran past a minute in 3 seeds of the first 100, with 8
// in 2 of the first 164; with 10 commands per key the longest check of the
// first 1,000 seeds is well under a second, and stale reads are still
// caught in about half the seeds (16 of the first 30).
const OpsPerKey = 10

// hotKeys is the number of keys per shard of a run of cfg.
func hotKeys(cfg *sim.Config) int {
	return max(3, (cfg.Workload.Messages+OpsPerKey*cfg.Groups-1)/(OpsPerKey*cfg.Groups))
}

// KVOptions changes RunKV.
type KVOptions struct {
	// NewStore builds each replica's state machine (default kv.NewStore).
	NewStore StoreFunc
	// Answer, when set, gives the outcome a client's reply carries instead
	// of the replier's result (Reply.Outcome): tests break the reply path
	// with it. ok false: the outcome is unknown.
	Answer func(r *Reply) (out kvcheck.Output, ok bool)
	// CheckTimeout bounds porcupine (default DefaultCheckTimeout).
	CheckTimeout time.Duration
}

// Reply is a client's reply to a command, as RunKV sees it when the
// client receives it.
type Reply struct {
	ID      wire.MsgID
	Cmd     kv.Command
	Replier *Replica
	// Shard holds the replicas of the command's shard, the replier among
	// them, in member order.
	Shard []*Replica
}

// Outcome is the outcome the reply carries: the replier's rsm.Driver
// result for the message, as the node's DELIVERED reply carries it
// (node/service.go). ok is false if the replier holds no result for it
// (forgotten, or lost with its disk): the client learns only that it was
// delivered.
func (r *Reply) Outcome() (kvcheck.Output, bool, error) {
	raw, ok := r.Replier.Driver.Result(r.ID)
	if !ok {
		return kvcheck.Output{}, false, nil
	}
	res, err := kv.DecodeResult(raw)
	if err != nil {
		return kvcheck.Output{}, false, fmt.Errorf("p%d's result for %s: %w", r.Replier.Proc, r.ID, err)
	}
	out := kvcheck.Output{Value: string(res.Value), Present: res.Present}
	switch res.Status {
	case kv.StatusOK:
		out.OK = true
	case kv.StatusNotFound, kv.StatusCASFailed:
	default:
		return kvcheck.Output{}, false, fmt.Errorf("p%d refused %s (%s): %q", r.Replier.Proc, r.ID, r.Cmd.Op, res.Value)
	}
	// The model reads a value for a get and a failed compare-and-set, and
	// Present for the latter only.
	if r.Cmd.Op != kv.OpGet && r.Cmd.Op != kv.OpCAS {
		out.Value = ""
	}
	if r.Cmd.Op != kv.OpCAS {
		out.Present = false
	}
	return out, true, nil
}

// KVFigures counts what RunKV checked.
type KVFigures struct {
	Commands int // multicast
	// Checked counts the operations in the linearizability check, Unknown
	// those of them of unknown outcome (no reply, or a reply without a
	// result), UnknownGets the gets of unknown outcome left out (they
	// changed nothing).
	Checked, Unknown, UnknownGets int
	Keys                          int
	Installs                      int // state transfers
	// CheckTime is porcupine's time (summed by Add), MaxCheckTime the
	// longest of one run.
	CheckTime, MaxCheckTime time.Duration
}

// Add adds o's counts to f.
func (f *KVFigures) Add(o KVFigures) {
	f.Commands += o.Commands
	f.Checked += o.Checked
	f.Unknown += o.Unknown
	f.UnknownGets += o.UnknownGets
	f.Keys += o.Keys
	f.Installs += o.Installs
	f.CheckTime += o.CheckTime
	f.MaxCheckTime = max(f.MaxCheckTime, o.MaxCheckTime)
}

// kvRun is one run of the single-key workload.
type kvRun struct {
	*replicas
	opt  KVOptions
	keys [][]string // per shard
	// writes counts the values written; recent holds the last ones per
	// key, for compare-and-sets to expect.
	writes int
	recent map[string][]string
	hist   *kvcheck.History
	ops    map[wire.MsgID]*kvOp // issued, not answered yet
	fig    KVFigures
	fail   firstErr
}

type kvOp struct {
	client int
	in     kvcheck.Input
	cmd    kv.Command
	call   int64
}

// RunKV runs cfg (a swarm configuration: sim.SwarmConfig) with single-key
// commands (get, put, delete, compare-and-set) on a few keys per shard (OpsPerKey),
// each multicast to its key's shard alone, and checks it: the run's own
// checks (sim.CheckResult) and convergence, that every replica of a shard
// applied a prefix of one sequence with the same results and the replicas
// up at the end all of it with the same state, and, with porcupine, that
// the clients' history is linearizable per key. An operation whose reply
// never came, or came without a result, is of unknown outcome.
func RunKV(cfg sim.Config, opt KVOptions) (KVFigures, error) {
	if opt.CheckTimeout <= 0 {
		opt.CheckTimeout = DefaultCheckTimeout
	}
	rs, err := newReplicas(cfg.Groups, cfg.Replicas, opt.NewStore)
	if err != nil {
		return KVFigures{}, err
	}
	k := &kvRun{replicas: rs, opt: opt, hist: kvcheck.NewHistory(historyBytes), ops: map[wire.MsgID]*kvOp{},
		recent: map[string][]string{}}
	k.keys, _ = keysPerShard("k", hotKeys(&cfg), cfg.Groups)
	k.fig.Keys = len(k.keys[0]) * cfg.Groups
	cfg.Workload.DestMin, cfg.Workload.DestMax = 1, 1
	r := rand.New(rand.NewPCG(cfg.Seed, 7))
	cfg.Payload = func(_ int, dest []wire.GroupID) []byte {
		c := k.command(r, dest[0])
		return c.Encode(nil)
	}
	cfg.OnDeliver = k.deliver
	cfg.OnIssue = k.issue
	cfg.OnReply = k.reply
	res, err := sim.Run(cfg)
	if err != nil {
		return k.fig, err
	}
	if k.fail.err != nil {
		return k.fig, k.fail.err
	}
	if err := sim.CheckResult(res); err != nil {
		return k.fig, err
	}
	if !res.Converged {
		return k.fig, fmt.Errorf("seed %d: did not converge", cfg.Seed)
	}
	if err := k.checkReplicas(res.Down); err != nil {
		return k.fig, err
	}
	return k.fig, k.checkLinearizable()
}

// command draws a command on one of shard g's keys. Every value written
// is new (the run's count of writes), and a compare-and-set expects one of
// the last values written to its key, or its absence: unique values let
// porcupine tell the writes apart, which keeps its search short.
func (k *kvRun) command(r *rand.Rand, g wire.GroupID) kv.Command {
	c := kv.Command{Key: k.keys[g][r.IntN(len(k.keys[g]))]}
	switch r.IntN(4) {
	case 0:
		c.Op = kv.OpGet
		return c
	case 1:
		c.Op = kv.OpPut
	case 2:
		c.Op = kv.OpDelete
		return c
	default:
		c.Op = kv.OpCAS
		if rec := k.recent[c.Key]; len(rec) > 0 && r.IntN(3) > 0 {
			c.Expect, c.ExpectPresent = []byte(rec[r.IntN(len(rec))]), true
		}
	}
	k.writes++
	v := fmt.Sprint(k.writes)
	c.Value = []byte(v)
	rec := append(k.recent[c.Key], v)
	k.recent[c.Key] = rec[max(len(rec)-recentValues, 0):]
	return c
}

func (k *kvRun) deliver(p wire.ProcID, d amcast.Delivery) {
	if d.Install {
		k.fig.Installs++
		k.fail.set(k.install(p, d.GTS, (*rsm.Driver).Received))
		return
	}
	rp := k.reps[p]
	before := rp.Driver.Applied()
	if err := rp.Driver.Apply([]rsm.Entry{rsm.EntryOf(&d.M, d.GTS)}); err != nil {
		k.fail.failf("p%d: %w", p, err)
	}
	res, ok := rp.Driver.Result(d.M.ID)
	if !ok || rp.Driver.Applied() == before {
		return // at or below the applied gts (delivered again after a disk loss): not applied again
	}
	rp.applied = append(rp.applied, d.M.ID)
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%x", rp.results, res)
	rp.results = h.Sum64()
}

func (k *kvRun) issue(client int, m *wire.AppMsg, at int64) {
	k.fig.Commands++
	c, err := kv.DecodeCommand(m.Payload)
	if err != nil {
		k.fail.failf("%s: %w", m.ID, err)
		return
	}
	in := kvcheck.Input{Op: c.Op, Key: c.Key, Value: string(c.Value), Expect: string(c.Expect), ExpectPresent: c.ExpectPresent}
	k.ops[m.ID] = &kvOp{client: client, in: in, cmd: c, call: at}
}

func (k *kvRun) reply(client int, d amcast.Delivery, at int64) {
	op := k.ops[d.M.ID]
	if op == nil || len(d.Replies) == 0 {
		k.fail.failf("client %d: a reply to %s, not outstanding", client, d.M.ID)
		return
	}
	delete(k.ops, d.M.ID)
	replier := d.Replies[0].Leader
	g, _ := k.topo.GroupOf(replier)
	r := &Reply{ID: d.M.ID, Cmd: op.cmd, Replier: k.reps[replier], Shard: k.shard(g)}
	var out kvcheck.Output
	var ok bool
	if k.opt.Answer != nil {
		out, ok = k.opt.Answer(r)
	} else {
		var err error
		if out, ok, err = r.Outcome(); err != nil {
			k.fail.set(err)
			return
		}
	}
	if !ok {
		k.unknown(op)
		return
	}
	k.hist.AddAt(op.client, op.in, out, op.call, at)
}

// unknown records op as of unknown outcome (a get is left out).
func (k *kvRun) unknown(op *kvOp) {
	if op.in.Op == kv.OpGet {
		k.fig.UnknownGets++
	} else {
		k.fig.Unknown++
	}
	k.hist.Unknown(op.client, op.in, op.call)
}

// checkReplicas: every replica of a shard applied a prefix of the same
// sequence; those up at the end all of it, with the same results and
// state.
func (k *kvRun) checkReplicas(down []wire.ProcID) error {
	for g := range k.topo.NumGroups() {
		shard := k.shard(wire.GroupID(g))
		var ref *Replica
		for _, rp := range shard {
			if ref == nil || len(rp.applied) > len(ref.applied) {
				ref = rp
			}
		}
		for _, rp := range shard {
			if !slices.Equal(rp.applied, ref.applied[:len(rp.applied)]) {
				i := 0
				for i < len(rp.applied) && rp.applied[i] == ref.applied[i] {
					i++
				}
				return fmt.Errorf("p%d applied a sequence that is not a prefix of its shard's: #%d is %s, the longest's %s (lengths %d, %d)",
					rp.Proc, i+1, rp.applied[i], ref.applied[i], len(rp.applied), len(ref.applied))
			}
			if slices.Contains(down, rp.Proc) {
				continue
			}
			if len(rp.applied) != len(ref.applied) || rp.results != ref.results || rp.Store.Digest() != ref.Store.Digest() {
				return fmt.Errorf("p%d (up) applied %d with results %x and state %x; its shard's longest %d, %x, %x",
					rp.Proc, len(rp.applied), rp.results, rp.Store.Digest(), len(ref.applied), ref.results, ref.Store.Digest())
			}
		}
	}
	return nil
}

// checkLinearizable records the operations never answered as of unknown
// outcome and checks the history with porcupine.
func (k *kvRun) checkLinearizable() error {
	for _, id := range wire.SortedIDs(k.ops) {
		k.unknown(k.ops[id])
	}
	began := time.Now()
	verdict, _, err := k.hist.Check(k.opt.CheckTimeout)
	k.fig.CheckTime = time.Since(began)
	k.fig.MaxCheckTime = k.fig.CheckTime
	k.fig.Checked = k.hist.Len()
	if err != nil {
		return err
	}
	switch verdict {
	case porcupine.Ok:
		return nil
	case porcupine.Illegal:
		return fmt.Errorf("%w: %d operations on %d keys, %d of unknown outcome", ErrNotLinearizable, k.fig.Checked, k.fig.Keys, k.fig.Unknown)
	}
	return fmt.Errorf("%w: %d operations, %s", ErrCheckTimeout, k.fig.Checked, k.opt.CheckTimeout)
}
