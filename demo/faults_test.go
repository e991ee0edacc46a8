package demo

// Multi-process fault tests: real agent processes on loopback under a
// closed-loop load, SIGKILLed and restarted from their data directories,
// partitioned through fault-injecting proxies (see harness_test.go). After
// each scenario the merged histories must pass the project's checkers
// (validity, integrity, order, gts, quorum termination, agreement), and
// every multicast a client got a reply for must be in the agents'
// deliveries logs. Nothing is timed: the tests wait for conditions with
// generous deadlines. Skipped with -short.

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/faultproxy"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/wire"
)

// A follower is SIGKILLed under load; its group goes on with the other
// two; it restarts from its WAL and catches up.
func TestFaultKillFollower(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 2, Replicas: 3, Clients: 8})
	c.load(time.Second, 50)
	f := c.follower(0)
	c.kill(f.ID)
	c.waitDelivering(0, c.members(0, f.ID))
	c.load(time.Second, 50)
	c.restart(f.ID)
	st := c.waitRejoin(f.ID)
	if st.Stats.RestoredRecords == 0 {
		t.Errorf("p%d restarted without replaying its WAL", f.ID)
	}
	c.load(time.Second, 50)
	c.finish()
}

// A leader is SIGKILLed under load; its group elects another and delivers
// again; the old leader restarts from its WAL and rejoins as a follower.
func TestFaultKillLeader(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 2, Replicas: 3, Clients: 8})
	c.load(time.Second, 50)
	l := c.leader(1)
	c.kill(l.ID)
	c.waitNewLeader(1, l)
	c.waitDelivering(1, c.members(1, l.ID))
	c.load(500*time.Millisecond, 50)
	c.restart(l.ID)
	st := c.waitRejoin(l.ID)
	if st.Stats.RestoredRecords == 0 {
		t.Errorf("p%d restarted without replaying its WAL", l.ID)
	}
	c.load(time.Second, 50)
	c.finish()
}

// A leader is cut off from its group's followers (both directions, through
// the proxies) under load. It keeps running, still reachable by clients and
// by the other group; the followers elect a new leader and deliver; after
// the heal the old leader follows the new ballot and catches up.
func TestFaultPartitionLeader(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 2, Replicas: 3, Clients: 8})
	c.load(time.Second, 50)
	l := c.leader(0)
	followers := c.members(0, l.ID)
	c.cut([]wire.ProcID{l.ID}, followers)
	c.waitNewLeader(0, l)
	c.waitDelivering(0, followers)
	c.load(time.Second, 50)
	if n, _ := c.refused([]wire.ProcID{l.ID}, followers); n == 0 {
		t.Errorf("the partition refused no connection: it was not enforced")
	}
	c.healAll()
	c.waitRejoin(l.ID)
	c.load(time.Second, 50)
	c.finish()
}

// Two groups at once: with three groups, the leaders of g0 and g1 are
// partitioned together from everyone else (they still reach each other and
// the clients), while multicasts go to one or two groups. Both groups fail
// over, g2 keeps delivering, and after the heal both old leaders rejoin.
func TestFaultPartitionTwoLeaders(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 3, Replicas: 3, Clients: 8})
	c.load(time.Second, 50)
	l0, l1 := c.leader(0), c.leader(1)
	minority := []wire.ProcID{l0.ID, l1.ID}
	c.cut(minority, c.others(minority...))
	c.waitNewLeader(0, l0)
	c.waitNewLeader(1, l1)
	c.waitDelivering(0, c.members(0, l0.ID))
	c.waitDelivering(1, c.members(1, l1.ID))
	c.waitDelivering(2, c.members(2))
	c.load(time.Second, 50)
	if n, _ := c.refused(minority, c.others(minority...)); n == 0 {
		t.Errorf("the partition refused no connection: it was not enforced")
	}
	c.healAll()
	c.waitRejoin(l0.ID)
	c.waitRejoin(l1.ID)
	c.load(time.Second, 50)
	c.finish()
}

// Two groups at once, by crashes: the leaders of both groups are SIGKILLed
// together under load (every multicast to both groups), both groups fail
// over, and both old leaders restart from their WALs and rejoin.
func TestFaultKillTwoLeaders(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 2, Replicas: 3, Clients: 8, DestGroups: 2})
	c.load(time.Second, 50)
	l0, l1 := c.leader(0), c.leader(1)
	c.kill(l0.ID)
	c.kill(l1.ID)
	c.waitNewLeader(0, l0)
	c.waitNewLeader(1, l1)
	c.waitDelivering(0, c.members(0, l0.ID))
	c.waitDelivering(1, c.members(1, l1.ID))
	c.load(500*time.Millisecond, 50)
	c.restart(l0.ID)
	c.restart(l1.ID)
	for _, p := range []wire.ProcID{l0.ID, l1.ID} {
		if st := c.waitRejoin(p); st.Stats.RestoredRecords == 0 {
			t.Errorf("p%d restarted without replaying its WAL", p)
		}
	}
	c.load(time.Second, 50)
	c.finish()
}

// A one-way fault: everything the leader of g1 sends to its followers is
// dropped (the connections stay open), while it still hears them. The
// followers elect a new leader; after the heal (which closes the streams
// that lost bytes) the old leader rejoins.
func TestFaultOneWayLeader(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 2, Replicas: 3, Clients: 8})
	c.load(time.Second, 50)
	l := c.leader(1)
	followers := c.members(1, l.ID)
	for _, f := range followers {
		c.proxies[pair{l.ID, f}].Blackhole(faultproxy.Forward)
	}
	c.logf("dropping everything p%d sends to %v", l.ID, followers)
	c.waitNewLeader(1, l)
	c.waitDelivering(1, followers)
	c.load(time.Second, 50)
	if _, n := c.refused([]wire.ProcID{l.ID}, followers); n == 0 {
		t.Errorf("the blackhole dropped nothing")
	}
	c.healAll()
	c.waitRejoin(l.ID)
	c.load(time.Second, 50)
	c.finish()
}

// Connection cuts without a partition: under load, random agent-to-agent
// streams are reset every few tens of milliseconds (the messages in them
// are lost; the agents redial at once).
func TestFaultConnectionResets(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 2, Replicas: 3, Clients: 8})
	c.load(500*time.Millisecond, 50)
	pairs := make([]pair, 0, len(c.proxies))
	for p := range c.proxies {
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(a, b pair) int { return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To)) })
	rng := rand.New(rand.NewPCG(c.r.opt.Seed, 1))
	start := c.completed()
	resets := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); resets++ {
		c.proxies[pairs[rng.IntN(len(pairs))]].Reset()
		time.Sleep(time.Duration(10+rng.IntN(40)) * time.Millisecond)
	}
	c.logf("reset %d streams; %d multicasts completed meanwhile", resets, c.completed()-start)
	c.load(time.Second, 50)
	c.finish()
}

// A partition and crashes together: the leader of g0 is cut off from its
// followers, and once they have elected a new leader, that new leader is
// SIGKILLed too, leaving g0 without a quorum on either side. The heal lets
// the old leader and the last follower form a quorum again; then the killed
// agent restarts from its WAL and rejoins.
func TestFaultPartitionThenKillNewLeader(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 2, Replicas: 3, Clients: 8})
	c.load(time.Second, 50)
	l := c.leader(0)
	followers := c.members(0, l.ID)
	c.cut([]wire.ProcID{l.ID}, followers)
	nl := c.waitNewLeader(0, l)
	c.waitDelivering(0, followers)
	c.load(500*time.Millisecond, 50)
	c.kill(nl.ID)
	time.Sleep(500 * time.Millisecond) // g0 cannot deliver now; the load piles up
	c.healAll()
	live := c.members(0, nl.ID)
	c.waitFor("g0 to elect a leader among the live members", leaderWithin, func(sts map[wire.ProcID]node.Status) bool {
		ld, ok := c.r.leaderOf(sts, 0)
		return ok && ld.ID != nl.ID && nl.Ballot.Less(ld.Ballot)
	})
	c.waitDelivering(0, live)
	c.restart(nl.ID)
	if st := c.waitRejoin(nl.ID); st.Stats.RestoredRecords == 0 {
		t.Errorf("p%d restarted without replaying its WAL", nl.ID)
	}
	c.load(time.Second, 50)
	c.finish()
}

// Slow links: everything to and from the leader of g1 is delayed by 40ms
// in each direction for two seconds under load (below the election
// timeout: nothing is lost or reordered, the group only slows down).
func TestFaultSlowLinks(t *testing.T) {
	c := startCluster(t, clusterSpec{Groups: 2, Replicas: 3, Clients: 8})
	c.load(time.Second, 50)
	l := c.leader(1)
	var slowed []*faultproxy.Proxy
	for _, q := range c.others(l.ID) {
		slowed = append(slowed, c.proxies[pair{l.ID, q}], c.proxies[pair{q, l.ID}])
	}
	for _, p := range slowed {
		p.SetDelay(40 * time.Millisecond)
	}
	c.logf("delaying every stream to and from p%d by 40ms", l.ID)
	c.load(2*time.Second, 50)
	for _, p := range slowed {
		p.SetDelay(0)
	}
	c.logf("delays removed")
	c.load(time.Second, 50)
	c.finish()
}

// TestFaultBaselines runs the fault-tolerant baselines through a leader
// SIGKILL with restart and a leader partition: the same agents, proxies and
// checks as WbCast, with FT-Skeen's and FastCast's per-group Multi-Paxos
// behind gossip's failure detector.
func TestFaultBaselines(t *testing.T) {
	for _, proto := range []string{"ftskeen", "fastcast"} {
		t.Run(proto, func(t *testing.T) {
			c := startCluster(t, clusterSpec{Groups: 2, Replicas: 3, Clients: 8, Protocol: proto})
			c.load(time.Second, 50)
			l := c.leader(0)
			c.kill(l.ID)
			c.waitNewLeader(0, l)
			c.waitDelivering(0, c.members(0, l.ID))
			c.restart(l.ID)
			c.waitRejoin(l.ID)
			l1 := c.leader(1)
			c.cut([]wire.ProcID{l1.ID}, c.members(1, l1.ID))
			c.waitNewLeader(1, l1)
			c.waitDelivering(1, c.members(1, l1.ID))
			c.healAll()
			c.waitRejoin(l1.ID)
			c.load(time.Second, 50)
			c.finish()
		})
	}
}
