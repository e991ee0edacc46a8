package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// gatedKV is weft-kv's store whose votes wait for a gate while it is
// closed (a group slow to vote).
type gatedKV struct {
	*kv.Store
	gate *gate
}

type gate struct {
	mu     sync.Mutex
	closed bool
	open   chan struct{}
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) close() {
	g.mu.Lock()
	g.closed, g.open = true, make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) release() {
	g.mu.Lock()
	if g.closed {
		g.closed = false
		close(g.open)
	}
	g.mu.Unlock()
}

func (g *gate) wait() {
	g.mu.Lock()
	ch, closed := g.open, g.closed
	g.mu.Unlock()
	if closed {
		<-ch
	}
}

func (s *gatedKV) Vote(e rsm.Entry) []byte {
	s.gate.wait()
	return s.Store.Vote(e)
}

var _ rsm.Exchanger = (*gatedKV)(nil)

// kvCluster starts groups x replicas nodes running weft-kv; the stores of
// group 1 vote through g (nil: never gated).
func kvVoteCluster(t *testing.T, g *gate, tune func(*Config)) (*cluster, *kv.Client) {
	t.Helper()
	c := newCluster(t, 2, 3, func(cfg *Config) {
		if cfg.Topology == nil {
			return // newCluster's probe of the protocol
		}
		grp, _ := cfg.Topology.GroupOf(cfg.ID)
		st, err := kv.NewStore(grp, 2)
		if err != nil {
			t.Fatal(err)
		}
		cfg.StateMachine = st
		if grp == 1 && g != nil {
			cfg.StateMachine = &gatedKV{Store: st, gate: g}
		}
		if tune != nil {
			tune(cfg)
		}
	})
	cl := c.clientWith(func(cc *client.Config) { cc.AllGroups = true })
	k, err := kv.NewClient(cl, 2)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// keysOn returns a key of shard 0 and one of shard 1 (of 2).
func keysOn() (string, string) {
	a, b := "a0", "b0"
	for i := 0; kv.Shard(a, 2) != 0; i++ {
		a = "a" + string(rune('0'+i%10)) + string(rune('a'+i/10))
	}
	for i := 0; kv.Shard(b, 2) != 1; i++ {
		b = "b" + string(rune('0'+i%10)) + string(rune('a'+i/10))
	}
	return a, b
}

// txnAsync runs txn on its own goroutine; the channel gets nil once it
// committed, else why not.
func txnAsync(ctx context.Context, k *kv.Client, txn kv.Txn) <-chan error {
	done := make(chan error, 1)
	go func() {
		res, err := k.Txn(ctx, txn)
		if err == nil && !res.Committed {
			err = fmt.Errorf("not committed: %+v", res)
		}
		done <- err
	}()
	return done
}

func transfer(a, b string, x int64) kv.Txn {
	return kv.Txn{If: []kv.Cond{{Key: a, Kind: kv.CondAtLeast, Num: x}},
		Then: []kv.Write{{Key: a, Kind: kv.WriteAdd, Delta: -x}, {Key: b, Kind: kv.WriteAdd, Delta: x}}}
}

// TestVotesRefusedFromStrangers: a VOTE in the name of a group from a
// replica of another group (neither the voter nor a relay of the
// receiver's group) is refused and counted, and changes nothing; a client
// connection cannot send votes at all (the transport refuses the kind).
func TestVotesRefusedFromStrangers(t *testing.T) {
	c, k := kvVoteCluster(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := keysOn()
	if err := k.Put(ctx, a, []byte("10")); err != nil {
		t.Fatal(err)
	}
	res, err := k.Txn(ctx, transfer(a, b, 4))
	if err != nil || !res.Committed {
		t.Fatalf("transfer: %+v %v", res, err)
	}
	tr, err := transport.New(transport.Config{ClusterName: "test", Self: 9000, Role: transport.RoleClient, Peers: c.addrs,
		Handler: func(wire.ProcID, wire.Message) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	forged := &wire.Vote{ID: res2ID(), GTS: wire.Timestamp{T: 1 << 40}, G: 1, Vote: []byte{1}}
	for p := range c.nodes {
		if err := tr.Send(p, forged); err != nil {
			t.Fatal(err)
		}
	}
	// A replica of group 0 claims group 1's vote to group 1's replicas.
	liar := c.topo.Members(0)[1]
	for _, q := range c.topo.Members(1) {
		if err := c.nodes[liar].tr.Send(q, forged); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, q := range c.topo.Members(1) {
		for c.nodes[q].Status().Stats.Votes.Refused < 1 {
			if time.Now().After(deadline) {
				t.Fatalf("p%d did not refuse group 1's vote from p%d of group 0", q, liar)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Every member votes once it delivers the transfer; a follower
	// delivers after its leader answered the client (its DELIVER may
	// wait for the leader's next message or tick: lazy.go), so wait.
	for p, n := range c.nodes {
		for st := n.Status().Service; st.VotesIn == 0 || st.VotesCast == 0; st = n.Status().Service {
			if time.Now().After(deadline) {
				t.Fatalf("p%d: votes cast %d, received %d: the transfer was not exchanged", p, st.VotesCast, st.VotesIn)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The forged vote reached no driver: still all applied, same outcome.
	res, err = k.Txn(ctx, kv.Txn{Reads: []string{a, b}})
	if err != nil || string(res.Reads[0].Value) != "6" || string(res.Reads[1].Value) != "4" {
		t.Fatalf("balances after the forged votes: %+v %v", res, err)
	}
}

func res2ID() wire.MsgID { return wire.MsgID{Client: 9000, Session: wire.Session(1), Seq: 77} }

// TestVotesBackPressure: while a group is slow to vote, the other group
// holds the transaction and what follows; past the held bytes' bound its
// leader refuses new client multicasts (OVERLOADED, counted); once the
// votes come everything held applies, and the client's transaction
// commits.
func TestVotesBackPressure(t *testing.T) {
	g := newGate()
	c, k := kvVoteCluster(t, g, func(cfg *Config) { cfg.RSM.MaxPendingBytes = 1 })
	t.Cleanup(g.release) // before the nodes close (cleanups run last first): a loop waits in Vote
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := keysOn()
	if err := k.Put(ctx, a, []byte("10")); err != nil {
		t.Fatal(err)
	}
	g.close()
	done := txnAsync(ctx, k, transfer(a, b, 3))
	// Wait until group 0 holds it, then write to group 0: shed.
	deadline := time.Now().Add(20 * time.Second)
	shed := false
	for !shed {
		if time.Now().After(deadline) {
			t.Fatal("group 0 never refused a client while holding entries over the bound")
		}
		// A write that arrived before the transfer was held may be
		// delivered after it, and held too: it is answered once the votes
		// come, so each try waits briefly.
		wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := k.Put(wctx, a+"x", []byte("1"))
		wcancel()
		switch {
		case errors.Is(err, client.ErrOverloaded):
			shed = true
		case err != nil && !errors.Is(err, context.DeadlineExceeded):
			t.Fatal(err)
		}
	}
	var sheds uint64
	for p, n := range c.nodes {
		if grp, _ := c.topo.GroupOf(p); grp == 0 {
			sheds += n.Status().Stats.Votes.Shed
		}
	}
	if sheds == 0 {
		t.Fatal("no node counted a shed")
	}
	g.release()
	if err := <-done; err != nil {
		t.Fatalf("the transfer after the votes came: %v", err)
	}
	if err := k.Put(ctx, a+"x", []byte("2")); err != nil {
		t.Fatalf("a write once the held entries drained: %v", err)
	}
}

// TestVotesPulled: the votes group 1 sends to one replica of group 0
// are lost; that replica holds the transfers, pulls the votes (from group
// 1's replicas and its own group's), and ends with its group's state.
func TestVotesPulled(t *testing.T) {
	var victim wire.ProcID
	var lost atomic.Int64
	c, k := kvVoteCluster(t, nil, func(cfg *Config) {
		victim = cfg.Topology.Members(0)[2] // a follower of group 0
		cfg.loseVote = func(to wire.ProcID, v *wire.Vote, pulled bool) bool {
			if to == victim && v.G == 1 && !pulled {
				lost.Add(1)
				return true
			}
			return false
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fundAndTransfer(ctx, t, k, 20)
	leader := c.topo.Members(0)[0]
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, ref := c.nodes[victim].Status(), c.nodes[leader].Status()
		if st.Service.AppliedGTS == ref.Service.AppliedGTS && st.Service.Held == 0 {
			v := st.Stats.Votes
			if v.Pulls == 0 || lost.Load() == 0 {
				t.Fatalf("p%d caught up with %d votes lost and %d pulls", victim, lost.Load(), v.Pulls)
			}
			t.Logf("p%d caught up to %s: %d votes lost, %d pulls sent, %+v", victim, st.Service.AppliedGTS, lost.Load(), v.Pulls, v)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("p%d applied to %s (held %d), the leader to %s; votes %+v", victim, st.Service.AppliedGTS, st.Service.Held, ref.Service.AppliedGTS, st.Stats.Votes)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var answered uint64
	for _, n := range c.nodes {
		answered += n.Status().Stats.Votes.PullsAnswered
	}
	if answered == 0 {
		t.Fatal("no replica answered a pull")
	}
}

// TestVotesAfterRestarts: a replica of group 0 down during transfers, then
// every replica of group 1 restarted (they replay the transfers from their
// logs and need group 0's votes again): every replica ends with its
// group's state, and the balances are right.
func TestVotesAfterRestarts(t *testing.T) {
	c, k := kvVoteCluster(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := keysOn()
	if err := k.Put(ctx, a, []byte("100")); err != nil {
		t.Fatal(err)
	}
	// A follower of group 0 misses the transfers; then every replica of
	// group 1 restarts (the votes queued for the follower die with them).
	victim := c.topo.Members(0)[2]
	c.stop(victim)
	for range 20 {
		if res, err := k.Txn(ctx, transfer(a, b, 3)); err != nil || !res.Committed {
			t.Fatalf("transfer: %+v %v", res, err)
		}
	}
	for _, q := range c.topo.Members(1) {
		c.stop(q)
	}
	for _, q := range c.topo.Members(1) {
		c.restart(q)
	}
	c.restart(victim)
	// Every replica catches up: from its log and snapshot, the votes
	// queued for it, re-cast on replays, or pulled.
	deadline := time.Now().Add(20 * time.Second)
	for {
		caught := true
		for grp := range wire.GroupID(2) {
			ms := c.topo.Members(grp)
			ref := c.nodes[ms[0]].Status().Service.AppliedGTS
			for _, q := range ms {
				st := c.nodes[q].Status()
				caught = caught && st.Service.AppliedGTS == ref && st.Service.Held == 0
			}
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			for p, n := range c.nodes {
				st := n.Status()
				t.Logf("p%d: applied %s held %d votes %+v", p, st.Service.AppliedGTS, st.Service.Held, st.Stats.Votes)
			}
			t.Fatal("the replicas did not catch up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// And the balances are what 20 transfers of 3 leave.
	res, err := k.Txn(ctx, kv.Txn{Reads: []string{a, b}})
	if err != nil || string(res.Reads[0].Value) != "40" || string(res.Reads[1].Value) != "60" {
		t.Fatalf("balances: %+v %v", res, err)
	}
}

// TestVotesFallBackToTransfer: one replica of group 0 never gets group 1's
// votes (sent or pulled: a test hook drops them); after the give-up time it
// fetches its group's application state, whose members applied the
// transfers, and ends with their state.
func TestVotesFallBackToTransfer(t *testing.T) {
	var victim wire.ProcID
	c, k := kvVoteCluster(t, nil, func(cfg *Config) {
		victim = cfg.Topology.Members(0)[2]
		cfg.votePullGiveUp = 300 * time.Millisecond
		cfg.loseVote = func(to wire.ProcID, v *wire.Vote, _ bool) bool { return to == victim && v.G == 1 }
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fundAndTransfer(ctx, t, k, 10)
	leader := c.topo.Members(0)[0]
	waitVotes(t, c, func() bool {
		st, ref := c.nodes[victim].Status(), c.nodes[leader].Status()
		return st.Service.AppliedGTS == ref.Service.AppliedGTS && st.Service.Held == 0 && st.Stats.Votes.Fallbacks > 0 && st.Stats.StateTransfers > 0
	})
}

// TestVotesTransferCalledOff: every replica of group 0 misses group 1's
// votes for a while (as when group 1 is down), so each gives up and starts
// fetching its group's state, which no member can serve (none applied the
// transfer); once the votes come again the fetches are called off and the
// group applies everything.
func TestVotesTransferCalledOff(t *testing.T) {
	var lose atomic.Bool
	lose.Store(true)
	c, k := kvVoteCluster(t, nil, func(cfg *Config) {
		cfg.votePullGiveUp = 300 * time.Millisecond
		cfg.loseVote = func(to wire.ProcID, v *wire.Vote, _ bool) bool {
			g, _ := cfg.Topology.GroupOf(to)
			return lose.Load() && g == 0 && v.G == 1
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := keysOn()
	if err := k.Put(ctx, a, []byte("100")); err != nil {
		t.Fatal(err)
	}
	// The transfer's condition is on shard 0 and its add on shard 1: both
	// vote, so shard 0 waits for shard 1's vote.
	done := txnAsync(ctx, k, transfer(a, b, 3))
	g0 := c.topo.Members(0)
	waitVotes(t, c, func() bool {
		for _, p := range g0 {
			if c.nodes[p].Status().Stats.Votes.Fallbacks == 0 {
				return false
			}
		}
		return true
	})
	lose.Store(false)
	if err := <-done; err != nil {
		t.Fatalf("the transfer once the votes came: %v", err)
	}
	waitVotes(t, c, func() bool {
		ref := c.nodes[g0[0]].Status().Service.AppliedGTS
		for _, p := range g0 {
			if st := c.nodes[p].Status(); st.Service.AppliedGTS != ref || st.Service.Held > 0 || st.Stats.Votes.CalledOff == 0 {
				return false
			}
		}
		return true
	})
	res, err := k.Txn(ctx, kv.Txn{Reads: []string{a, b}})
	if err != nil || string(res.Reads[0].Value) != "97" || string(res.Reads[1].Value) != "3" {
		t.Fatalf("balances: %+v %v", res, err)
	}
}

// fundAndTransfer puts 100 in a key of shard 0, then runs n transfers of
// 3 from it to a key of shard 1, each of which must commit.
func fundAndTransfer(ctx context.Context, t *testing.T, k *kv.Client, n int) {
	t.Helper()
	a, b := keysOn()
	if err := k.Put(ctx, a, []byte("100")); err != nil {
		t.Fatal(err)
	}
	for range n {
		if res, err := k.Txn(ctx, transfer(a, b, 3)); err != nil || !res.Committed {
			t.Fatalf("transfer: %+v %v", res, err)
		}
	}
}

// waitVotes waits up to 20 s for cond, logging every node's vote counters
// if it never holds.
func waitVotes(t *testing.T, c *cluster, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			for p, n := range c.nodes {
				st := n.Status()
				t.Logf("p%d: applied %s held %d transfers %d votes %+v", p, st.Service.AppliedGTS, st.Service.Held, st.Stats.StateTransfers, st.Stats.Votes)
			}
			t.Fatal("the condition never held")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
