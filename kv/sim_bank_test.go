package kv_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

// The bank in the simulator's swarm (issue #12 item 4): transactions across
// shards, with the shards' votes exchanged between the simulated replicas'
// drivers, under the swarm's faults (crashes, torn writes, partitions,
// link resets, delay spikes, disk loss, leader hand-overs).
//
// Accounts hold an offset from bankInitial (an absent key is 0), so the
// bank starts full without a set-up phase: a transfer of x from a to b is
// "if a >= x - bankInitial then a -= x, b += x". Every full read (a
// transaction reading every account, multicast to every shard) must see
// the initial total, every shard of a transaction must agree whether it
// committed, and at the end every shard's replicas hold the same state.

const bankInitial = 100

type bankRun struct {
	t        *testing.T
	topo     *amcast.Topology
	shards   int
	accts    [][]string // per shard
	all      []string
	newStore func(g wire.GroupID) (rsm.StateMachine, *kv.Store)
	reps     map[wire.ProcID]*bankReplica
	r        *rand.Rand // the harness's own choices: lost votes, pulls
	failed   error
	// outcome of each transaction at each shard, and the full reads.
	outcome   map[wire.MsgID]map[wire.GroupID]bool
	parts     map[wire.MsgID]map[wire.GroupID]int64 // full reads: each shard's sum
	fullReads int
	votes     struct{ sent, lost, pulled int }
	// noOutcome turns the outcome-agreement check off, to show the
	// total's checks catch a broken executor on their own.
	noOutcome bool
}

type bankReplica struct {
	st *kv.Store
	d  *rsm.Driver
}

func (b *bankRun) fail(format string, args ...any) {
	if b.failed == nil {
		b.failed = fmt.Errorf(format, args...)
	}
}

func newBankRun(t *testing.T, cfg *sim.Config, newStore func(g wire.GroupID, shards int) (rsm.StateMachine, *kv.Store)) *bankRun {
	topo, err := amcast.NewTopology(cfg.Groups, cfg.Replicas)
	if err != nil {
		t.Fatal(err)
	}
	b := &bankRun{t: t, topo: topo, shards: cfg.Groups, reps: map[wire.ProcID]*bankReplica{},
		r: rand.New(rand.NewPCG(cfg.Seed, 0xba4c)), outcome: map[wire.MsgID]map[wire.GroupID]bool{},
		parts: map[wire.MsgID]map[wire.GroupID]int64{}}
	b.newStore = func(g wire.GroupID) (rsm.StateMachine, *kv.Store) { return newStore(g, cfg.Groups) }
	b.accts = make([][]string, b.shards)
	for i := 0; ; i++ {
		k := fmt.Sprintf("acct-%d", i)
		if g := kv.Shard(k, b.shards); len(b.accts[g]) < 2 {
			b.accts[g] = append(b.accts[g], k)
			b.all = append(b.all, k)
		}
		if len(b.all) == 2*b.shards {
			break
		}
	}
	for g := range b.shards {
		for _, p := range topo.Members(wire.GroupID(g)) {
			b.reps[p] = b.replica(wire.GroupID(g))
		}
	}
	wr := rand.New(rand.NewPCG(cfg.Seed, 0xba4d))
	cfg.Payload = func(_ int, dest []wire.GroupID) []byte { return b.payload(wr, dest) }
	cfg.OnDeliver = b.deliver
	return b
}

func (b *bankRun) replica(g wire.GroupID) *bankReplica {
	sm, st := b.newStore(g)
	d, err := rsm.NewDriver(sm, rsm.Config{Group: g, VoteCache: 64})
	if err != nil {
		b.t.Fatal(err)
	}
	return &bankReplica{st: st, d: d}
}

// payload is a full read (every shard, one time in two when the message
// goes to every shard) or a transfer from an account of dest[0] to one of
// each other destination (within dest[0] when it is the only one).
func (b *bankRun) payload(r *rand.Rand, dest []wire.GroupID) []byte {
	if len(dest) == b.shards && r.IntN(2) == 0 {
		t := kv.Txn{Reads: b.all}
		return t.Encode(nil)
	}
	src := b.accts[dest[0]][r.IntN(2)]
	var t kv.Txn
	total := int64(0)
	for _, g := range dest[1:] {
		x := int64(1 + r.IntN(40))
		total += x
		t.Then = append(t.Then, kv.Write{Key: b.accts[g][r.IntN(2)], Kind: kv.WriteAdd, Delta: x})
	}
	if len(dest) == 1 {
		total = int64(1 + r.IntN(40))
		other := b.accts[dest[0]][0]
		if other == src {
			other = b.accts[dest[0]][1]
		}
		t.Then = append(t.Then, kv.Write{Key: other, Kind: kv.WriteAdd, Delta: total})
	}
	t.If = []kv.Cond{{Key: src, Kind: kv.CondAtLeast, Num: total - bankInitial}}
	t.Then = append(t.Then, kv.Write{Key: src, Kind: kv.WriteAdd, Delta: -total})
	return t.Encode(nil)
}

func (b *bankRun) deliver(p wire.ProcID, d amcast.Delivery) {
	rp := b.reps[p]
	g, _ := b.topo.GroupOf(p)
	if d.Install {
		b.install(p, g, d.GTS)
		return
	}
	if err := rp.d.Apply([]rsm.Entry{rsm.EntryOf(&d.M, d.GTS)}); err != nil {
		b.fail("p%d: %v", p, err)
	}
	b.exchange()
}

// install replaces p's service by a copy of the member of its shard that
// applied furthest, at least to point (a node's state transfer).
func (b *bankRun) install(p wire.ProcID, g wire.GroupID, point wire.Timestamp) {
	var src *bankReplica
	for _, q := range b.topo.Members(g) {
		if rq := b.reps[q]; q != p && (src == nil || src.d.Received().Less(rq.d.Received())) {
			src = rq
		}
	}
	// Received, not Applied: the snapshot carries the entries held for
	// votes (rsm/exchange.go).
	if src == nil || src.d.Received().Less(point) {
		b.fail("p%d installs a snapshot at %s but no member of its shard applied that far", p, point)
		return
	}
	var buf bytes.Buffer
	if err := src.d.Snapshot(&buf); err != nil {
		b.fail("snapshot: %v", err)
		return
	}
	rp := b.replica(g)
	if err := rp.d.Restore(&buf); err != nil {
		b.fail("restore: %v", err)
		return
	}
	b.reps[p] = rp
	b.exchange()
}

// exchange delivers the votes every replica cast (one in five is lost),
// then lets replicas that wait pull what they miss (one pass in three),
// until nothing moves.
func (b *bankRun) exchange() {
	for moved := true; moved; {
		moved = false
		for _, p := range b.procs() {
			for _, v := range b.reps[p].d.TakeVotes() {
				for _, g := range v.To {
					for _, q := range b.topo.Members(g) {
						b.votes.sent++
						if b.r.IntN(5) == 0 {
							b.votes.lost++
							continue
						}
						b.add(q, v)
						moved = true
					}
				}
			}
		}
		if moved || b.r.IntN(3) > 0 {
			continue
		}
		moved = b.pull()
	}
}

// pull has every waiting replica ask the replicas of the groups it misses
// and of its own group; it reports whether a vote was found.
func (b *bankRun) pull() bool {
	found := false
	for _, p := range b.procs() {
		id, gts, missing, ok := b.reps[p].d.Waiting()
		if !ok {
			continue
		}
		own, _ := b.topo.GroupOf(p)
		for _, g := range missing {
			for _, q := range append(slices.Clone(b.topo.Members(g)), b.topo.Members(own)...) {
				if v, ok := b.reps[q].d.VoteOf(id, g); ok && v.GTS == gts && q != p {
					b.votes.pulled++
					b.add(p, v)
					found = true
					break
				}
			}
		}
	}
	return found
}

func (b *bankRun) add(q wire.ProcID, v rsm.Vote) {
	if err := b.reps[q].d.AddVote(v); err != nil {
		b.fail("p%d refused %s's vote of g%d: %v", q, v.ID, v.G, err)
	}
}

func (b *bankRun) procs() []wire.ProcID {
	ps := make([]wire.ProcID, 0, len(b.reps))
	for p := range wire.ProcID(b.topo.NumReplicas()) {
		ps = append(ps, p)
	}
	return ps
}

// check runs the end-of-run checks.
func (b *bankRun) check(res *sim.Result) error {
	for b.pull() { // what the run's last votes left waiting
		b.exchange()
	}
	if b.failed != nil {
		return b.failed
	}
	down := map[wire.ProcID]bool{}
	for _, p := range res.Down {
		down[p] = true
	}
	sum := int64(0)
	for g := range b.shards {
		var ref *bankReplica
		for _, p := range b.topo.Members(wire.GroupID(g)) {
			if rp := b.reps[p]; !down[p] && (ref == nil || ref.d.Applied().Less(rp.d.Applied())) {
				ref = rp
			}
		}
		for _, p := range b.topo.Members(wire.GroupID(g)) {
			rp := b.reps[p]
			if down[p] {
				continue
			}
			if _, _, _, waiting := rp.d.Waiting(); waiting {
				return fmt.Errorf("p%d still holds entries for votes at the end", p)
			}
			if rp.d.Applied() != ref.d.Applied() || rp.st.Digest() != ref.st.Digest() {
				return fmt.Errorf("p%d (up) applied to %s with state %x; its shard's furthest %s, %x", p, rp.d.Applied(), rp.st.Digest(), ref.d.Applied(), ref.st.Digest())
			}
		}
		for _, a := range b.accts[g] {
			v, ok := ref.st.Get(a)
			n, err := strconv.ParseInt(string(v), 10, 64)
			if ok && err != nil {
				return fmt.Errorf("account %s holds %q", a, v)
			}
			sum += n
		}
	}
	if sum != 0 {
		return fmt.Errorf("the accounts' offsets sum to %d at the end, want 0 (the total changed)", sum)
	}
	return nil
}

// record inspects the results every replica holds for the messages it
// applied: the outcome per shard, and every full read's total.
func (b *bankRun) record(p wire.ProcID, g wire.GroupID, m *wire.AppMsg) {
	raw, ok := b.reps[p].d.Result(m.ID)
	if !ok {
		return
	}
	t, err := kv.DecodeTxn(m.Payload)
	if err != nil {
		b.fail("p%d: %v", p, err)
		return
	}
	if len(t.If) == 0 { // a full read: this shard's part of the total
		b.readPart(p, g, m.ID, raw, &t)
		return
	}
	committed := raw[0] == byte(kv.StatusOK)
	o := b.outcome[m.ID]
	if o == nil {
		o = map[wire.GroupID]bool{}
		b.outcome[m.ID] = o
	}
	if prev, seen := o[g]; seen && prev != committed {
		b.fail("p%d: %s committed=%v, another replica of shard %d said %v", p, m.ID, committed, g, prev)
	}
	o[g] = committed
	for h, c := range o {
		if b.noOutcome {
			break
		}
		if c != committed {
			b.fail("%s: shard %d committed=%v, shard %d committed=%v", m.ID, g, committed, h, c)
		}
	}
}

// readPart takes one shard's part of a full read; once every shard's is
// in, the total must be the initial one (offsets summing to 0).
func (b *bankRun) readPart(p wire.ProcID, g wire.GroupID, id wire.MsgID, raw []byte, t *kv.Txn) {
	vals, err := kv.TxnReads(raw, t)
	if err != nil {
		b.fail("p%d: full read %s: %v", p, id, err)
		return
	}
	part := int64(0)
	for _, v := range vals {
		n, err := strconv.ParseInt(string(v.Value), 10, 64)
		if v.Present && err != nil {
			b.fail("p%d: full read %s: account value %q", p, id, v.Value)
		}
		part += n
	}
	ps := b.parts[id]
	if ps == nil {
		ps = map[wire.GroupID]int64{}
		b.parts[id] = ps
	}
	if prev, seen := ps[g]; seen {
		if prev != part {
			b.fail("p%d: full read %s: shard %d's part %d, another replica's %d", p, id, g, part, prev)
		}
		return
	}
	ps[g] = part
	if len(ps) < b.shards {
		return
	}
	sum := int64(0)
	for _, v := range ps {
		sum += v
	}
	if sum != 0 {
		b.fail("full read %s: the offsets sum to %d, want 0 (parts per shard %v)", id, sum, ps)
	}
	b.fullReads++
}

func runBank(t *testing.T, cfg sim.Config, newStore func(wire.GroupID, int) (rsm.StateMachine, *kv.Store), noOutcome bool) (*bankRun, error) {
	t.Helper()
	b := newBankRun(t, &cfg, newStore)
	b.noOutcome = noOutcome
	deliver := cfg.OnDeliver
	cfg.OnDeliver = func(p wire.ProcID, d amcast.Delivery) {
		deliver(p, d)
		if !d.Install {
			g, _ := b.topo.GroupOf(p)
			b.record(p, g, &d.M)
		}
	}
	res, err := sim.Run(cfg)
	if err != nil {
		return b, err
	}
	if err := sim.CheckResult(res); err != nil {
		return b, err
	}
	if !res.Converged {
		return b, fmt.Errorf("seed %d did not converge", cfg.Seed)
	}
	return b, b.check(res)
}

func plainStore(g wire.GroupID, shards int) (rsm.StateMachine, *kv.Store) {
	st, err := kv.NewStore(g, shards)
	if err != nil {
		panic(err)
	}
	return st, st
}

// TestSimBank runs the bank over swarm seeds of WbCast.
func TestSimBank(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	var committed, aborted, reads, sent, lost, pulled int
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		b, err := runBank(t, sim.SwarmConfig("wbcast", seed), plainStore, false)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, o := range b.outcome {
			for _, c := range o {
				if c {
					committed++
				} else {
					aborted++
				}
				break
			}
		}
		reads += b.fullReads
		sent, lost, pulled = sent+b.votes.sent, lost+b.votes.lost, pulled+b.votes.pulled
	}
	t.Logf("%d seeds: %d transfers committed, %d aborted, %d full reads at the initial total; votes: %d sent, %d lost, %d pulled",
		seeds, committed, aborted, reads, sent, lost, pulled)
	if committed == 0 || aborted == 0 || pulled == 0 || reads == 0 {
		t.Fatal("the workload did not exercise commits, aborts and pulls")
	}
}

// brokenStore is a deliberately broken executor: at every shard but a
// transaction's first, it treats the transaction as if some shard voted
// no (writesOnOneShard: the writes land on the first shard only), or as if
// every other shard voted yes (ignoreVotes: a shard decides alone).
type brokenStore struct {
	*kv.Store
	shard       wire.GroupID
	ignoreVotes bool
}

func (s *brokenStore) Apply(batch []rsm.Entry) ([][]byte, error) {
	for i := range batch {
		e := &batch[i]
		if e.Votes == nil || e.Dest[0] == s.shard {
			continue
		}
		votes := make([][]byte, len(e.Votes))
		for j := range votes {
			votes[j] = []byte{0}
			if s.ignoreVotes || e.Dest[j] == s.shard {
				votes[j] = []byte{1}
			}
		}
		if s.ignoreVotes {
			votes[slices.Index(e.Dest, s.shard)] = e.Votes[slices.Index(e.Dest, s.shard)]
		}
		e.Votes = votes
	}
	return s.Store.Apply(batch)
}

// TestSimBankCatchesBrokenExecutor: the bank's checks fail within a few
// seeds against each broken executor, with the shards' outcomes compared
// and, without that, by the total alone.
func TestSimBankCatchesBrokenExecutor(t *testing.T) {
	for _, mode := range []struct{ ignore, noOutcome bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		ignore := mode.ignore
		name := map[bool]string{false: "writes on one shard only", true: "a shard ignores the others' votes"}[ignore]
		if mode.noOutcome {
			name += " (the total's checks alone)"
		}
		broken := func(g wire.GroupID, shards int) (rsm.StateMachine, *kv.Store) {
			st, err := kv.NewStore(g, shards)
			if err != nil {
				panic(err)
			}
			return &brokenStore{Store: st, shard: g, ignoreVotes: ignore}, st
		}
		caught := uint64(0)
		for seed := uint64(1); seed <= 20 && caught == 0; seed++ {
			if _, err := runBank(t, sim.SwarmConfig("wbcast", seed), broken, mode.noOutcome); err != nil {
				caught = seed
				t.Logf("%s: caught at seed %d: %v", name, seed, err)
			}
		}
		if caught == 0 {
			t.Fatalf("%s: not caught in 20 seeds", name)
		}
	}
}
