package wbcast_test

import (
	"strings"
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/amcasttest"
	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/sim"
	"github.com/weft-dev/weft/wire"
)

// handOverEnv is a group of three led by p0 that delivered one message.
func handOverEnv(t *testing.T) *amcasttest.Env {
	env := amcasttest.New(sim.NewReplica)
	env.DefaultProtocol = "wbcast"
	env.Durability = durability(false)
	env.Commands["handover"] = cmdHandOver
	env.Do(t, "topology groups=1 replicas=3")
	env.Do(t, "multicast dest=0 payload=m1")
	env.Do(t, "stabilize")
	return env
}

// tickDropping ticks every replica n times, delivering everything in
// between except HANDOVER messages, which are lost.
func tickDropping(t *testing.T, env *amcasttest.Env, n int) string {
	var sb strings.Builder
	for range n {
		sb.WriteString(env.Do(t, "tick"))
		sb.WriteString(env.Do(t, "drop kind=HANDOVER"))
		env.Do(t, "stabilize")
	}
	return sb.String()
}

// TestHandOverLostAsksNext: a HANDOVER that is lost makes the leader ask
// the next member after ElectionTicks; when every HANDOVER is lost it
// gives up after handOverTicks election timeouts and proposes what it
// held, so no multicast is lost either way.
func TestHandOverLostAsksNext(t *testing.T) {
	env := handOverEnv(t)
	if out := env.Do(t, "handover p=0"); !strings.Contains(out, "p0 hands over to p1") {
		t.Fatalf("handover: %s", out)
	}
	env.Do(t, "multicast dest=0 payload=m2") // held by p0 while it hands over
	out := tickDropping(t, env, 11)
	if !strings.Contains(out, "p0->p2 HANDOVER b=0.p0") {
		t.Fatalf("p0 did not ask p2 after p1's HANDOVER was lost:\n%s", out)
	}
	out = tickDropping(t, env, 30)
	p0 := env.Machine(0).(*wbcast.Process)
	if !p0.IsLeader() || p0.HandedOver() {
		t.Fatalf("p0 leader=%v handed over=%v after every HANDOVER was lost", p0.IsLeader(), p0.HandedOver())
	}
	if b, _ := p0.Ballot(); b != (wire.Ballot{N: 0, P: 0}) {
		t.Fatalf("p0 leads ballot %s", b)
	}
	env.Do(t, "stabilize")
	if got := env.Do(t, "deliveries"); !strings.Contains(got, "p2: 3.1@1.g0 3.2@2.g0") {
		t.Fatalf("the held multicast was not proposed after p0 gave up:\n%s", got)
	}
	// And a new hand-over after giving up goes through.
	if out := env.Do(t, "handover p=0"); !strings.Contains(out, "hands over to p1") {
		t.Fatalf("second handover: %s", out)
	}
	env.Do(t, "stabilize")
	if !env.Machine(1).(amcast.Observable).IsLeader() || !p0.HandedOver() {
		t.Fatalf("p1 leader=%v, p0 handed over=%v", env.Machine(1).(amcast.Observable).IsLeader(), p0.HandedOver())
	}
}

// inFlightEnv is handOverEnv with m2 proposed by p0 and accepted by p1 and
// p2, their ACCEPT_ACKs not yet at p0.
func inFlightEnv(t *testing.T) *amcasttest.Env {
	env := handOverEnv(t)
	env.Do(t, "run ticks=2 quiet") // heartbeats: everyone reports 1.g0
	env.Do(t, "stabilize")
	env.Do(t, "multicast dest=0 payload=m2")
	env.Do(t, "deliver kind=MULTICAST")
	env.Do(t, "deliver kind=ACCEPT")
	return env
}

// TestHandOverStaleReport: a member whose last heartbeat predates the
// leader's newest delivery is not behind; the DELIVER is on its way. p2's
// heartbeat reports m2 delivered, p1's was sent before its DELIVER
// arrived, so p0's floor passes p1's report; the hand-over still goes to
// p1, the next member. (CI, node.TestGossipLeaderLeaves: a departing
// leader handed over to p2 because p1's report was one heartbeat old.)
func TestHandOverStaleReport(t *testing.T) {
	env := inFlightEnv(t)
	env.Do(t, "deliver kind=ACCEPT_ACK")     // p0 delivers m2
	env.Do(t, "deliver kind=DELIVER to=2")   // p2 too; p1's DELIVER waits
	env.Do(t, "tick")                        // p1 reports 1.g0, p2 2.g0
	env.Do(t, "deliver kind=HEARTBEAT to=0") //
	env.Do(t, "tick")                        // p0's floor: 2.g0
	env.Do(t, "deliver kind=HEARTBEAT to=0") //
	if f := env.Machine(0).(*wbcast.Process).Floor(); f != (wire.Timestamp{T: 2, G: 0}) {
		t.Fatalf("p0's floor is %s, want 2.g0 (the scenario needs it above p1's report)", f)
	}
	if out := env.Do(t, "handover p=0"); !strings.Contains(out, "p0 hands over to p1") {
		t.Fatalf("handover: %s", out)
	}
	env.Do(t, "stabilize")
	if !env.Machine(1).(amcast.Observable).IsLeader() {
		t.Fatalf("p1 does not lead after the hand-over:\n%s", env.Do(t, "status"))
	}
}

// TestHandOverInFlightCommit: messages the leader commits after it sent
// HANDOVER (their ACCEPT_ACKs were on their way) do not make its successor
// give its ballot up as behind the floor. The successor ignores their
// DELIVERs (it is a candidate by then), so the leader must not raise the
// group's floor past what it sent before HANDOVER; the new ballot's
// recovery delivers them. (demo.TestPlannedStopHandsOver: p1 gave 1.p1
// up, p2 took the group over, and p1 needed a SNAPSHOT.)
func TestHandOverInFlightCommit(t *testing.T) {
	env := inFlightEnv(t)
	if out := env.Do(t, "handover p=0"); !strings.Contains(out, "p0 hands over to p1") {
		t.Fatalf("handover: %s", out)
	}
	env.Do(t, "deliver kind=ACCEPT_ACK")   // p0 commits m2 after HANDOVER
	env.Do(t, "deliver kind=DELIVER to=2") // p2 delivers it
	for range 2 {                          // p0 hears p2's report and computes a floor
		env.Do(t, "tick")
		env.Do(t, "deliver kind=HEARTBEAT")
	}
	env.Do(t, "stabilize")
	p1 := env.Machine(1).(*wbcast.Process)
	if !p1.IsLeader() || p1.Coverage().BallotsAbandoned != 0 {
		t.Fatalf("p1 leader=%v, ballots abandoned %d:\n%s", p1.IsLeader(), p1.Coverage().BallotsAbandoned, env.Do(t, "status"))
	}
	if got := env.Do(t, "deliveries"); !strings.Contains(got, "p1: 3.1@1.g0 3.2@2.g0") {
		t.Fatalf("p1 did not deliver m2 in order:\n%s", got)
	}
}
