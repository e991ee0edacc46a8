package wbcast_test

import (
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

// slowFollowerEnv is a group of three led by p0 that delivered m1 and
// heard every member report it; then p0's messages to p1 are cut (held
// or dropped), and p0 and p2 deliver m2..m4 and collect them while p1
// does nothing: the floor has passed p1's report, so p0 cannot re-send
// p1 what follows it.
func slowFollowerEnv(t *testing.T, link string) *amcasttest.Env {
	env := amcasttest.New(sim.NewReplica)
	env.DefaultProtocol = "wbcast"
	env.Durability = durability(false)
	env.Do(t, "topology groups=1 replicas=3")
	env.Do(t, "multicast dest=0 payload=m1")
	env.Do(t, "stabilize")
	env.Do(t, "run ticks=2 quiet")
	env.Do(t, "partition from=0 to=1"+link)
	for _, m := range []string{"m2", "m3", "m4"} {
		env.Do(t, "multicast dest=0 payload="+m)
		settle(t, env)
	}
	for range 8 { // heartbeats raise p0's floor; collection every 4 ticks
		env.Do(t, "tick p=0,2")
		settle(t, env)
	}
	if c := env.Machine(0).(*wbcast.Process).Coverage(); c.Collected < 3 {
		t.Fatalf("p0 collected %d messages, want m1..m4 (the scenario needs the floor past p1)", c.Collected)
	}
	return env
}

// settle delivers what is in flight, and what that causes, a few rounds
// deep; unlike stabilize it leaves held links alone.
func settle(t *testing.T, env *amcasttest.Env) {
	for range 8 {
		env.Do(t, "deliver")
	}
}

// snapshotsQueued counts the SNAPSHOT pages queued from p0 to p1.
func snapshotsQueued(t *testing.T, env *amcasttest.Env) int {
	return strings.Count(env.Do(t, "queued from=0 to=1 kind=SNAPSHOT"), "SNAPSHOT ")
}

// TestSlowFollowerNoSnapshot: a follower that was only slow (its
// DELIVERs held, not lost) resumes with a heartbeat that reports where it
// stopped. Its leader, which collected what follows, does not send it its
// whole state on that report: the follower steps the DELIVERs queued
// behind it, reports progress, and no SNAPSHOT is ever sent. (On real
// processes, slow followers got 15 and 18 SNAPSHOTs in 45 s and
// installed none.)
func TestSlowFollowerNoSnapshot(t *testing.T) {
	env := slowFollowerEnv(t, " hold")
	env.Do(t, "tick p=1") // p1 resumes: a heartbeat reporting m1
	env.Do(t, "deliver kind=HEARTBEAT from=1 to=0")
	if n := snapshotsQueued(t, env); n != 0 {
		t.Fatalf("p0 queued %d SNAPSHOT pages to p1 on its first report after a stall", n)
	}
	env.Do(t, "heal")
	for range 4 {
		env.Do(t, "stabilize")
		env.Do(t, "tick")
	}
	env.Do(t, "stabilize")
	if got := env.Do(t, "deliveries"); !strings.Contains(got, "p1: 3.1@1.g0 3.2@2.g0 3.3@3.g0 3.4@4.g0") {
		t.Fatalf("p1 did not deliver m1..m4 from its queue:\n%s", got)
	}
	if c := env.Machine(0).(*wbcast.Process).Coverage(); c.Snapshots != 0 {
		t.Fatalf("p0 sent %d SNAPSHOTs to a follower that was only slow", c.Snapshots)
	}
}

// TestLostDeliversSnapshot: a follower whose DELIVERs were lost reports
// the same delivery heartbeat after heartbeat; at the third such stalled
// report (snapshotReports) its leader sends the SNAPSHOT, and the
// follower installs it.
func TestLostDeliversSnapshot(t *testing.T) {
	env := slowFollowerEnv(t, "")
	env.Do(t, "heal")
	sent := func() int { return env.Machine(0).(*wbcast.Process).Coverage().Snapshots }
	for i := 1; i <= 3; i++ { // both tick: p0 catches up at most every 2 ticks
		env.Do(t, "tick p=0,1")
		env.Do(t, "deliver kind=HEARTBEAT from=1 to=0")
		if i < 3 && sent() != 0 {
			t.Fatalf("p0 sent a SNAPSHOT after %d stalled reports", i)
		}
	}
	if sent() == 0 {
		t.Fatalf("p0 sent no SNAPSHOT after three reports of the same delivery")
	}
	env.Do(t, "stabilize")
	p1 := env.Machine(1).(*wbcast.Process)
	if c := p1.Coverage(); c.Installs != 1 {
		t.Fatalf("p1 installed %d SNAPSHOTs, want 1:\n%s", c.Installs, env.Do(t, "status"))
	}
}

// TestInstalledRecordsCollected: the records a SNAPSHOT installs as
// delivered are not in the installing member's delivery log (its chain
// restarts there), yet collection must still find them once the floor
// passes them (gc.go, offLog); otherwise each install would leak its
// prefix's records for good.
func TestInstalledRecordsCollected(t *testing.T) {
	env := slowFollowerEnv(t, "")
	env.Do(t, "heal")
	for range 2 { // two stalled reports: no SNAPSHOT yet
		env.Do(t, "tick p=0,1")
		env.Do(t, "deliver kind=HEARTBEAT from=1 to=0")
	}
	// m5, delivered at p0 and p2 but not collected (p2 does not tick, so
	// it reports nothing new): the SNAPSHOT carries it as delivered.
	env.Do(t, "multicast dest=0 payload=m5")
	env.Do(t, "deliver from=3 to=0") // the client's MULTICAST
	for range 8 {
		env.Do(t, "deliver from=0 to=2")
		env.Do(t, "deliver from=2 to=0")
	}
	env.Do(t, "tick p=0,1")
	env.Do(t, "deliver kind=HEARTBEAT from=1 to=0")
	env.Do(t, "stabilize")
	p1 := env.Machine(1).(*wbcast.Process)
	if c := p1.Coverage(); c.Installs != 1 {
		t.Fatalf("p1 installed %d SNAPSHOTs, want 1:\n%s", c.Installs, env.Do(t, "status"))
	}
	if n := wbcast.Records(p1); n == 0 {
		t.Fatalf("p1 installed no delivered record: the scenario needs m5 in the SNAPSHOT")
	}
	for range 12 {
		env.Do(t, "tick")
		env.Do(t, "stabilize")
	}
	for i := range wire.ProcID(3) {
		if n := wbcast.Records(env.Machine(i).(*wbcast.Process)); n != 0 {
			t.Errorf("p%d holds %d records after every message was delivered everywhere and the floors passed them", i, n)
		}
	}
}
