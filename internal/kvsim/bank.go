package kvsim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

// The bank: transactions across shards, with the shards' votes exchanged
// between the simulated replicas' drivers (one in five lost, pulled
// again).
//
// Accounts hold an offset from bankInitial (an absent key is 0), so the
// bank starts full without a set-up phase: a transfer of x from a to b is
// "if a >= x - bankInitial then a -= x, b += x". Every full read (a
// transaction reading every account, multicast to every shard) must see
// the initial total, every shard of a transaction must agree whether it
// committed, and at the end every shard's replicas hold the same state.

const bankInitial = 100

// BankOptions changes RunBank.
type BankOptions struct {
	// NewStore builds each replica's state machine (default kv.NewStore).
	NewStore StoreFunc
	// NoOutcomeCheck turns the outcome-agreement check off, to show that
	// the total's checks catch a broken executor on their own.
	NoOutcomeCheck bool
}

// BankFigures counts what RunBank checked.
type BankFigures struct {
	Committed, Aborted int // transfers, by their outcome
	FullReads          int // full-balance reads, each at the initial total
	// Votes sent to replicas (one per vote and replica of its groups),
	// lost on the way, and found again by replicas that pulled them.
	VotesSent, VotesLost, VotesPulled int
	// Installs counts state transfers (the protocol's SNAPSHOTs),
	// Fallbacks those of replicas that waited for a vote no pull found
	// (bankRun.fallback).
	Installs, Fallbacks int
}

// Add adds o's counts to f.
func (f *BankFigures) Add(o BankFigures) {
	f.Committed += o.Committed
	f.Aborted += o.Aborted
	f.FullReads += o.FullReads
	f.VotesSent += o.VotesSent
	f.VotesLost += o.VotesLost
	f.VotesPulled += o.VotesPulled
	f.Installs += o.Installs
	f.Fallbacks += o.Fallbacks
}

type bankRun struct {
	*replicas
	opt   BankOptions
	accts [][]string // per shard
	all   []string
	r     *rand.Rand // the harness's own choices: lost votes, pulls
	fail  firstErr
	// outcome of each transaction at each shard, and the full reads.
	outcome map[wire.MsgID]map[wire.GroupID]bool
	parts   map[wire.MsgID]map[wire.GroupID]int64 // full reads: each shard's sum
	fig     BankFigures
}

// RunBank runs cfg (a swarm configuration: sim.SwarmConfig) with the bank
// workload (2 accounts per shard; a multicast to every shard is a full
// read one time in two, any other a transfer from an account of its first
// destination to one of each other destination) and checks it: the run's
// own checks (sim.CheckResult) and convergence, every full read's total,
// the shards' agreement on each transaction's outcome, and at the end
// that no replica up still waits for votes, that the replicas up of each
// shard hold the same state, and the total.
func RunBank(cfg sim.Config, opt BankOptions) (BankFigures, error) {
	rs, err := newReplicas(cfg.Groups, cfg.Replicas, opt.NewStore)
	if err != nil {
		return BankFigures{}, err
	}
	b := &bankRun{replicas: rs, opt: opt, r: rand.New(rand.NewPCG(cfg.Seed, 0xba4c)),
		outcome: map[wire.MsgID]map[wire.GroupID]bool{}, parts: map[wire.MsgID]map[wire.GroupID]int64{}}
	b.accts, b.all = keysPerShard("acct-", 2, cfg.Groups)
	wr := rand.New(rand.NewPCG(cfg.Seed, 0xba4d))
	cfg.Payload = func(_ int, dest []wire.GroupID) []byte { return b.payload(wr, dest) }
	cfg.OnDeliver = b.deliver
	res, err := sim.Run(cfg)
	if err == nil {
		err = sim.CheckResult(res)
	}
	if err == nil && !res.Converged {
		err = fmt.Errorf("seed %d did not converge", cfg.Seed)
	}
	if err == nil {
		err = b.check(res.Down)
	}
	b.tally()
	return b.fig, err
}

// payload is a full read (every shard, one time in two when the message
// goes to every shard) or a transfer from an account of dest[0] to one of
// each other destination (within dest[0] when it is the only one).
func (b *bankRun) payload(r *rand.Rand, dest []wire.GroupID) []byte {
	if len(dest) == b.topo.NumGroups() && r.IntN(2) == 0 {
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
	if d.Install {
		b.fig.Installs++
		b.fail.set(b.install(p, d.GTS, (*rsm.Driver).Received))
		b.exchange()
		return
	}
	if err := b.reps[p].Driver.Apply([]rsm.Entry{rsm.EntryOf(&d.M, d.GTS)}); err != nil {
		b.fail.failf("p%d: %w", p, err)
	}
	b.exchange()
	g, _ := b.topo.GroupOf(p)
	b.record(p, g, &d.M)
}

// noteApplied tells every replica each group's applied floor, the highest
// gts a quorum of its replicas applied, as a node's APPLIED reports do
// (node/votes.go): votes kept past the cache for a group behind are
// forgotten once it is not.
func (b *bankRun) noteApplied() {
	for g := range b.topo.NumGroups() {
		var ts []wire.Timestamp
		for _, rp := range b.shard(wire.GroupID(g)) {
			ts = append(ts, rp.Driver.Applied())
		}
		floor := amcast.FloorOf(ts, b.topo.Quorum(wire.GroupID(g)))
		for _, rp := range b.reps {
			rp.Driver.NoteApplied(wire.GroupID(g), floor)
		}
	}
}

// exchange delivers the votes every replica cast (one in five is lost)
// to every replica of the groups each is for, then lets replicas that
// wait pull what they miss (one pass in three), until nothing moves.
func (b *bankRun) exchange() {
	defer b.noteApplied()
	for moved := true; moved; {
		moved = false
		for _, rp := range b.reps {
			for _, v := range rp.Driver.TakeVotes() {
				for _, g := range v.To {
					for _, q := range b.topo.Members(g) {
						b.fig.VotesSent++
						if b.r.IntN(5) == 0 {
							b.fig.VotesLost++
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
	for p, rp := range b.reps {
		id, gts, missing, ok := rp.Driver.Waiting()
		if !ok {
			continue
		}
		// As a node does (node/votes.go): every destination's replicas.
		var asked []wire.ProcID
		for _, h := range rp.Driver.HeldDest(id) {
			asked = append(asked, b.topo.Members(h)...)
		}
	votes:
		for _, g := range missing {
			for _, q := range asked {
				if v, ok := b.reps[q].Driver.VoteOf(id, g); ok && v.GTS == gts && int(q) != p {
					b.fig.VotesPulled++
					b.add(wire.ProcID(p), v)
					found = true
					continue votes
				}
			}
		}
	}
	return found
}

// fallback is a node's way out when a vote cannot be pulled (docs/kv.md:
// after 10 s it fetches its group's state): every replica up that still
// waits once the pulls found nothing installs the state of the member of
// its shard that applied furthest, past the entry it waits on. A vote is
// lost for good when every replica that received it has forgotten it
// (the votes of the last 64 applied messages are kept) or only the other
// destinations' replicas, which a pull does not ask, hold it. It reports
// whether a replica installed.
func (b *bankRun) fallback(down []wire.ProcID) bool {
	moved := false
	for _, rp := range b.reps {
		_, gts, _, waiting := rp.Driver.Waiting()
		if !waiting || slices.Contains(down, rp.Proc) {
			continue
		}
		if err := b.install(rp.Proc, gts, (*rsm.Driver).Applied); err != nil {
			b.fail.failf("p%d waits for votes no replica it asks holds: %w", rp.Proc, err)
			return false
		}
		b.fig.Fallbacks++
		moved = true
	}
	return moved
}

func (b *bankRun) add(q wire.ProcID, v rsm.Vote) {
	if err := b.reps[q].Driver.AddVote(v); err != nil {
		b.fail.failf("p%d refused %s's vote of g%d: %w", q, v.ID, v.G, err)
	}
}

// check runs the end-of-run checks.
func (b *bankRun) check(down []wire.ProcID) error {
	for moved := true; moved; {
		for b.pull() { // what the run's last votes left waiting
			b.exchange()
		}
		moved = b.fallback(down)
	}
	if b.fail.err != nil {
		return b.fail.err
	}
	sum := int64(0)
	for g := range b.topo.NumGroups() {
		var ref *Replica
		var up []*Replica
		for _, rp := range b.shard(wire.GroupID(g)) {
			if slices.Contains(down, rp.Proc) {
				continue
			}
			up = append(up, rp)
			if ref == nil || ref.Driver.Applied().Less(rp.Driver.Applied()) {
				ref = rp
			}
		}
		for _, rp := range up {
			if _, _, _, waiting := rp.Driver.Waiting(); waiting {
				return fmt.Errorf("p%d still holds entries for votes at the end", rp.Proc)
			}
			if rp.Driver.Applied() != ref.Driver.Applied() || rp.Store.Digest() != ref.Store.Digest() {
				return fmt.Errorf("p%d (up) applied to %s with state %x; its shard's furthest %s, %x",
					rp.Proc, rp.Driver.Applied(), rp.Store.Digest(), ref.Driver.Applied(), ref.Store.Digest())
			}
		}
		for _, a := range b.accts[g] {
			v, ok := ref.Store.Get(a)
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

// tally counts the transfers by outcome (the shards agree, or the run
// failed).
func (b *bankRun) tally() {
	for _, o := range b.outcome {
		for _, c := range o {
			if c {
				b.fig.Committed++
			} else {
				b.fig.Aborted++
			}
			break
		}
	}
}

// record inspects the result replica p holds for m, if it applied it:
// the outcome per shard, or a full read's part of the total.
func (b *bankRun) record(p wire.ProcID, g wire.GroupID, m *wire.AppMsg) {
	raw, ok := b.reps[p].Driver.Result(m.ID)
	if !ok {
		return
	}
	t, err := kv.DecodeTxn(m.Payload)
	if err != nil {
		b.fail.failf("p%d: %w", p, err)
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
		b.fail.failf("p%d: %s committed=%v, another replica of shard %d said %v", p, m.ID, committed, g, prev)
	}
	o[g] = committed
	for h, c := range o {
		if b.opt.NoOutcomeCheck {
			break
		}
		if c != committed {
			b.fail.failf("%s: shard %d committed=%v, shard %d committed=%v", m.ID, g, committed, h, c)
		}
	}
}

// readPart takes one shard's part of a full read; once every shard's is
// in, the total must be the initial one (offsets summing to 0).
func (b *bankRun) readPart(p wire.ProcID, g wire.GroupID, id wire.MsgID, raw []byte, t *kv.Txn) {
	vals, err := kv.TxnReads(raw, t)
	if err != nil {
		b.fail.failf("p%d: full read %s: %w", p, id, err)
		return
	}
	part := int64(0)
	for _, v := range vals {
		n, err := strconv.ParseInt(string(v.Value), 10, 64)
		if v.Present && err != nil {
			b.fail.failf("p%d: full read %s: account value %q", p, id, v.Value)
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
			b.fail.failf("p%d: full read %s: shard %d's part %d, another replica's %d", p, id, g, part, prev)
		}
		return
	}
	ps[g] = part
	if len(ps) < b.topo.NumGroups() {
		return
	}
	sum := int64(0)
	for _, v := range ps {
		sum += v
	}
	if sum != 0 {
		b.fail.failf("full read %s: the offsets sum to %d, want 0 (parts per shard %v)", id, sum, ps)
	}
	b.fig.FullReads++
}
