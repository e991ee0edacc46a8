package wbcast_test

// Go tests for fault cases found while writing the scripts in testdata.
// They drive the interaction environment with the same commands a script
// would use. Each guards a fix.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

func newEnv(t *testing.T, topology string) *amcasttest.Env {
	t.Helper()
	env := amcasttest.New(sim.NewReplica)
	env.DefaultProtocol = "wbcast"
	env.Durability = durability(false)
	env.Do(t, topology)
	return env
}

// do runs script lines, turning a protocol panic into a test failure with
// the output of the commands so far.
func do(t *testing.T, env *amcasttest.Env, lines ...string) string {
	t.Helper()
	var sb strings.Builder
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("protocol panic: %v\nafter:\n%s", r, sb.String())
		}
	}()
	for _, l := range lines {
		fmt.Fprintf(&sb, "> %s\n%s", l, env.Do(t, l))
	}
	return sb.String()
}

// TestOneCrashOneElection: when the leader of a 5-member group crashes, its
// designated successor starts one ballot and every other member joins it.
// (It used to cascade: each member that joined a candidate's ballot judged
// the candidate dead on its next tick from the candidate's last heartbeat,
// sent before the candidate started its ballot, and started the next ballot
// itself: p1, p2, p3, p4 in turn. Fixed by comparing the heartbeat's ballot
// with the ballot joined.)
func TestOneCrashOneElection(t *testing.T) {
	env := newEnv(t, "topology groups=1 replicas=5")
	out := do(t, env, "crash p=0", "run ticks=40 quiet")
	started, leaders := 0, 0
	for _, m := range env.Procs {
		if o, ok := m.(amcast.Observable); ok {
			started += o.Coverage().BallotsStarted
			if o.IsLeader() {
				leaders++
			}
		}
	}
	if started != 1 || leaders != 1 {
		t.Errorf("one crash of the leader started %d ballots and left %d leaders, want 1 and 1:\n%s", started, leaders, out)
	}
}

// TestStaleAcceptAfterDelivery (P5, H2.4, H2.10): a process that delivered
// a message through its leader's DELIVER without ever holding the ACCEPT
// of another destination group then receives a stale ACCEPT for it from
// that group's crashed leader, whose proposal (2.g1) was replaced by the
// new leader's (1.g1). Nothing held marks it stale (H2.4 compares with a
// held ACCEPT only). It must be ignored; it used to complete the ACCEPT set
// with the stale lts and panic ("committed with gts 1.g1 but ACCEPTs give
// 2.g1 (INV-5)").
//
// Run: g1's leader p3 proposes 6.1 (to g1 only) and then 6.2 (to g0 and
// g1) with lts 2.g1, but its ACCEPTs to p2, p4 and p5 are held in the
// network; p3 crashes. g1 elects a new leader, which never saw 6.2 (it was
// only PROPOSED at p3) and proposes it afresh at 1.g1 when 6.2 is
// re-multicast (H12); g1's ACCEPTs to p2 are held too. 6.2 commits at
// 1.g1 and p2 delivers it through DELIVER. Then p3's held ACCEPT reaches p2.
func TestStaleAcceptAfterDelivery(t *testing.T) {
	env := newEnv(t, "topology groups=2 replicas=3")
	do(t, env,
		"partition from=3 to=2,4,5 hold",
		"partition from=4,5 to=2 hold",
		"multicast dest=1 payload=w",
		"deliver kind=MULTICAST",
		"multicast dest=0,1 payload=m",
		"deliver kind=MULTICAST",
		"crash p=3",
		"run ticks=40 quiet",
	)
	if n := len(env.Deliveries(2)); n != 1 {
		t.Fatalf("setup: p2 delivered %d messages, want 1 (6.2)", n)
	}
	do(t, env, "heal p=3", "run ticks=2 quiet", "heal", "run ticks=20 quiet")
}

// TestStaleAcceptAfterDeliveryThreeGroups is the same with three
// destination groups: p2 holds neither g1's nor g2's ACCEPT when it
// delivers, so the stale ACCEPT does not complete its set by itself; the
// current ACCEPT of g2 that arrives next does.
func TestStaleAcceptAfterDeliveryThreeGroups(t *testing.T) {
	env := newEnv(t, "topology groups=3 replicas=3")
	do(t, env,
		"partition from=3 to=2,4,5 hold",
		"partition from=4,5,6,7,8 to=2 hold",
		"multicast dest=1 payload=w",
		"deliver kind=MULTICAST",
		"multicast dest=0,1,2 payload=m",
		"deliver kind=MULTICAST",
		"crash p=3",
		"run ticks=40 quiet",
	)
	if n := len(env.Deliveries(2)); n != 1 {
		t.Fatalf("setup: p2 delivered %d messages, want 1 (9.2)", n)
	}
	do(t, env, "heal p=3", "run ticks=2 quiet", "heal", "run ticks=20 quiet")
}

// TestRetryOfCollectedMessage (P15): a client whose DELIVERED reply was
// lost retries the message (same id) after the group delivered and
// garbage-collected it. The leader recognises the id in its done set, does
// not deliver it again, and completes the client with a zero gts ("delivered
// long ago; timestamp no longer kept", wire.Delivered). Replicas deliver it
// exactly once (the environment's safety check).
func TestRetryOfCollectedMessage(t *testing.T) {
	check := func(t *testing.T, env *amcasttest.Env) {
		if n := len(env.Deliveries(3)); n != 1 {
			t.Errorf("client completed %d messages, want 1", n)
		}
		for p := wire.ProcID(0); p < 3; p++ {
			if n := len(env.Deliveries(p)); n > 1 {
				t.Errorf("p%d delivered %d messages, want at most 1", p, n)
			}
		}
	}
	t.Run("reply lost", func(t *testing.T) {
		env := newEnv(t, "topology groups=1 replicas=3")
		do(t, env,
			"multicast dest=0 payload=a",
			"deliver", "deliver", "deliver", // p0 commits and delivers 3.1
			"drop kind=DELIVERED", // its reply is lost
			// The client retries after RetryTicks (20); by then 3.1 is
			// delivered everywhere and collected.
			"run ticks=30 quiet",
		)
		check(t, env)
	})
	t.Run("leader crashed", func(t *testing.T) {
		env := newEnv(t, "topology groups=1 replicas=3")
		do(t, env,
			"multicast dest=0 payload=a",
			"deliver", "deliver", "deliver",
			"drop from=0 kind=DELIVER,DELIVERED",
			"run ticks=5 quiet", // p1, p2 deliver by catch-up and collect
			"crash p=0",
			"run ticks=25 quiet", // p1 leads; the client's retry reaches it
		)
		check(t, env)
	})
}

// TestRestartedLeaderDoesNotDeposeLiveLeader (H6.1, P17): a process that
// restarts from its store and finds that it led the ballot it remembers
// used to start a new ballot, (remembered ballot number + 1, itself), on
// its first tick, without first learning whether the group had moved on.
// When the group's current ballot had that number and a lower leader id
// (its successor wrapped around the member list), the restarted process's
// ballot was higher and deposed a live leader: safe, but a needless leader
// change. H6.1 starts a ballot only on suspicion of the current leader; a
// restarted process now listens for one ElectionTicks first
// (checkLeadership).
//
// Run, g0 = {p0 p1 p2}: leadership moves p0 -> p1 (1.p1) -> p2 (2.p2) ->
// p0 (3.p0) through crashes and restarts; then p2 restarts remembering
// 2.p2, starts 3.p2 > 3.p0, and takes over from the live p0.
func TestRestartedLeaderDoesNotDeposeLiveLeader(t *testing.T) {
	env := newEnv(t, "topology groups=1 replicas=3")
	do(t, env,
		"crash p=0", "run ticks=20 quiet", "restart p=0", "run ticks=10 quiet",
		"crash p=1", "run ticks=20 quiet", "restart p=1", "run ticks=10 quiet",
		"crash p=2", "run ticks=20 quiet",
	)
	if o, ok := env.Procs[0].(amcast.Observable); !ok || !o.IsLeader() {
		t.Fatalf("setup: p0 should lead ballot 3.p0")
	}
	out := do(t, env, "restart p=2", "run ticks=15 quiet")
	if o := env.Procs[0].(amcast.Observable); !o.IsLeader() {
		t.Errorf("the restarted p2 deposed the live leader p0:\n%s", out)
	}
}
