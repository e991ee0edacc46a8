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
