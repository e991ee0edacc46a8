package membership

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// The known failures of gossip-anchors.md §5, each as a scenario.

// TestZombieQuarantine (§5 #1): node 4 leaves while node 3 is partitioned
// away, so node 3 still holds 4's old NORMAL record when everyone else
// evicts 4 at expiry. Node 3 comes back inside the quarantine window. With
// quarantine, peers ignore its copy and hand it the final LEFT record, so
// it evicts 4 too and 4 is gone for good. Without quarantine (control),
// node 3 resurrects 4 everywhere.
func TestZombieQuarantine(t *testing.T) {
	for _, tc := range []struct {
		name       string
		quarantine time.Duration
		zombie     bool
	}{
		{"quarantine", 60 * time.Second, false},
		{"control-no-quarantine", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := Cassandra()
			base.LeftExpiry = 2 * time.Minute
			base.QuarantineDelay = tc.quarantine
			nw := newNet(t, 5, 5, testConfig(base, 0, 1))
			nw.converge(30 * time.Second)
			isolated := map[wire.ProcID]bool{3: true}
			nw.cut = func(a, b wire.ProcID) bool { return isolated[a] != isolated[b] }
			nw.runFor(5 * time.Second)
			if err := nw.node(4).Leave(nw.now); err != nil {
				t.Fatal(err)
			}
			nw.drain(nw.nodes[4])
			leaveAt := nw.now
			// Past the expiry at everyone but node 3, plus 20 s.
			nw.runUntil(leaveAt+int64(2*time.Minute+20*time.Second), nil)
			for _, id := range []wire.ProcID{0, 1, 2} {
				if _, ok := nw.node(id).Member(4); ok {
					t.Fatalf("node %d did not evict 4", id)
				}
			}
			if m, ok := nw.node(3).Member(4); !ok || m.Departed {
				t.Fatalf("node 3 should hold 4's pre-LEFT record: %+v %v", m, ok)
			}
			isolated = map[wire.ProcID]bool{} // heal, inside the quarantine window
			nw.runFor(3 * time.Minute)        // well past the quarantine too
			zombies := 0
			for _, id := range []wire.ProcID{0, 1, 2, 3} {
				_, holds := nw.node(id).Member(4)
				rejoined := 0
				for _, e := range nw.events(id, EventJoin, 4) {
					if e.at > leaveAt {
						rejoined++
					}
				}
				if holds || rejoined > 0 {
					zombies++
				}
				t.Logf("node %d: holds 4: %v, re-joins of 4 after its leave: %d, quarantine drops %d",
					id, holds, rejoined, nw.node(id).Stats().QuarantineDrops)
			}
			if tc.zombie && zombies == 0 {
				t.Error("control: expected the departed node to come back without quarantine")
			}
			if !tc.zombie && zombies != 0 {
				t.Errorf("zombie: %d nodes hold or re-joined the departed node", zombies)
			}
			if !tc.zombie && len(nw.events(3, EventLeft, 4)) != 1 {
				t.Error("node 3 never learned the final LEFT record from the quarantine")
			}
		})
	}
}

// TestAssassinate (§5 #2): assassinate never blocks, refuses a live node,
// fails clearly for an unknown one, removes a dead one everywhere, and a
// node that was assassinated while isolated learns it and can rejoin by
// restarting.
func TestAssassinate(t *testing.T) {
	nw := newNet(t, 6, 6, testConfig(Cassandra(), 0, 1))
	nw.converge(30 * time.Second)
	n0 := nw.node(0)

	t.Run("errors", func(t *testing.T) {
		err := n0.Assassinate(nw.now, 42)
		if !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), "42") {
			t.Errorf("unknown node: %v", err)
		}
		if err := n0.Assassinate(nw.now, 0); !errors.Is(err, ErrAssassinateSelf) {
			t.Errorf("self: %v", err)
		}
	})

	t.Run("live node refused", func(t *testing.T) {
		start := nw.now
		if err := n0.Assassinate(nw.now, 5); err != nil {
			t.Fatal(err)
		}
		if err := n0.Assassinate(nw.now, 5); !errors.Is(err, ErrAssassinatePending) {
			t.Errorf("second assassinate: %v", err)
		}
		nw.runFor(40 * time.Second)
		ref := nw.events(0, EventAssassinateRefused, 5)
		if len(ref) != 1 || !strings.Contains(ref[0].Value, "alive") {
			t.Fatalf("refusals %v", ref)
		}
		t.Logf("assassinate of live node 5 refused after %v: %s", time.Duration(ref[0].at-start), ref[0].Value)
		if ref[0].at-start > int64(5*time.Second) {
			t.Errorf("refusal took %v; progress should show within a few rounds", time.Duration(ref[0].at-start))
		}
		if len(nw.events(0, EventAssassinated, -1)) != 0 || !nw.allSeeAlive(nw.up()) {
			t.Error("live node was removed")
		}
	})

	t.Run("dead node removed without blocking", func(t *testing.T) {
		nw.crash(4)
		nw.runFor(40 * time.Second) // convicted everywhere
		start := nw.now
		hb0 := n0.Member
		before, _ := hb0(0)
		if err := n0.Assassinate(nw.now, 4); err != nil {
			t.Fatal(err)
		}
		nw.runFor(45 * time.Second)
		as := nw.events(0, EventAssassinated, 4)
		if len(as) != 1 {
			t.Fatalf("assassinated events %v", as)
		}
		if d := time.Duration(as[0].at - start); d < 30*time.Second || d > 32*time.Second {
			t.Errorf("assassination took %v, want the 30 s check window", d)
		}
		after, _ := hb0(0)
		if after.Heartbeat-before.Heartbeat < 40 {
			t.Errorf("assassinating node gossiped only %d rounds in 45 s: it blocked", after.Heartbeat-before.Heartbeat)
		}
		for _, id := range []wire.ProcID{0, 1, 2, 3, 5} {
			if len(nw.events(id, EventDead, 0)) != 0 {
				t.Errorf("node %d convicted the assassinating node", id)
			}
			m, ok := nw.node(id).Member(4)
			l := nw.events(id, EventLeft, 4)
			if !ok || !m.Departed || len(l) != 1 || !strings.HasPrefix(l[0].Value, StatusRemoved+",") {
				t.Errorf("node %d: member 4 %+v %v, left events %v", id, m, ok, l)
			}
		}
		nw.start(4) // a restart: new generation beats the spoofed one
		nw.converge(30 * time.Second)
	})

	t.Run("isolated live node learns it was removed", func(t *testing.T) {
		isolated := map[wire.ProcID]bool{5: true}
		nw.cut = func(a, b wire.ProcID) bool { return isolated[a] != isolated[b] }
		nw.runFor(30 * time.Second)
		if err := n0.Assassinate(nw.now, 5); err != nil {
			t.Fatal(err)
		}
		nw.runFor(40 * time.Second)
		if len(nw.events(0, EventAssassinated, 5)) != 1 {
			t.Fatal("assassination of the isolated node did not complete")
		}
		isolated = map[wire.ProcID]bool{}
		nw.runFor(20 * time.Second)
		if r := nw.events(5, EventRemoved, 5); len(r) != 1 {
			t.Errorf("node 5 did not learn it was removed: %v", r)
		}
		for _, id := range []wire.ProcID{0, 1, 2, 3, 4} {
			if m, _ := nw.node(id).Member(5); !m.Departed || m.Alive {
				t.Errorf("node %d: removed node back: %+v", id, m)
			}
		}
		nw.crash(5)
		nw.runFor(2 * time.Second)
		nw.start(5)
		nw.converge(30 * time.Second)
	})
}

// TestPauseFlapping (§5 #3): node 3 stalls for 30 s (GC, VM pause). When
// it resumes, its overdue tick runs before its queued messages: every
// peer looks 30 s silent. The local-pause guard suppresses those
// convictions; without it (control) node 3 convicts everyone and flaps
// them back up.
func TestPauseFlapping(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pause time.Duration
		flaps bool
	}{
		{"guard", 5 * time.Second, false},
		{"control-no-guard", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := Cassandra()
			base.FD.MaxLocalPause = tc.pause
			nw := newNet(t, 7, 8, testConfig(base, 0, 1))
			nw.converge(30 * time.Second)
			nw.runFor(30 * time.Second)
			nw.pause(3)
			nw.runFor(30 * time.Second)
			nw.resume(3)
			nw.runFor(30 * time.Second)
			dead := nw.events(3, EventDead, -1)
			st := nw.node(3).Stats()
			t.Logf("paused node: %d convictions, %d revivals, %d suppressed checks", len(dead), st.Revivals, st.SuppressedChecks)
			if tc.flaps && (len(dead) < 7 || st.Revivals < 7) {
				t.Errorf("control: expected node 3 to convict and revive all 7 peers, got %d/%d", len(dead), st.Revivals)
			}
			if !tc.flaps && (len(dead) != 0 || st.SuppressedChecks == 0) {
				t.Errorf("guard: node 3 convicted %v", dead)
			}
			// The others rightly convicted node 3 and saw it come back.
			for _, id := range []wire.ProcID{0, 1, 2, 4} {
				if len(nw.events(id, EventDead, 3)) != 1 || !nw.node(id).IsAlive(3) {
					t.Errorf("node %d: dead events for 3: %v, alive now %v", id, nw.events(id, EventDead, 3), nw.node(id).IsAlive(3))
				}
			}
		})
	}
}

// TestBacklogGuard: a node that has inbound gossip queued but processed
// none for longer than BacklogWindow convicts nobody that round.
func TestBacklogGuard(t *testing.T) {
	nw := newNet(t, 8, 4, testConfig(Cassandra(), 0))
	nw.converge(30 * time.Second)
	nw.runFor(10 * time.Second)
	sn := nw.nodes[2]
	sn.n.SetBacklog(1000) // the driver's inbox is stuck
	nw.pause(2)           // ...and it processes nothing, but keeps ticking:
	for i := 0; i < 40; i++ {
		nw.runFor(time.Second)
		sn.n.Tick(nw.clock(sn))
		nw.drain(sn)
	}
	if d := nw.events(2, EventDead, -1); len(d) != 0 {
		t.Errorf("backlogged node convicted %v", d)
	}
	sn.n.SetBacklog(0)
	sn.n.Tick(nw.clock(sn))
	nw.drain(sn)
	if d := nw.events(2, EventDead, -1); len(d) != 3 {
		t.Errorf("without backlog, expected 3 convictions (stale view), got %v", d)
	}
	nw.resume(2)
}

// TestGenerationGuard (§5 #8, CASSANDRA-10969): after more than a year of
// uptime, node 0 must still accept a peer's restart (the guard compares
// with the local clock, not node 0's own old generation), while a
// generation over a year ahead of the clock is refused for both known and
// new endpoints.
func TestGenerationGuard(t *testing.T) {
	nw := newNet(t, 9, 4, testConfig(Cassandra(), 0))
	nw.converge(30 * time.Second)
	g0 := nw.node(0).Generation()

	// 400 days pass (everyone stalls once, which the pause guard absorbs).
	const jump = int64(400 * 24 * time.Hour)
	nw.now += jump
	for i := range nw.q {
		nw.q[i].at += jump
	}
	nw.runFor(30 * time.Second)
	nw.crash(1)
	nw.runFor(2 * time.Second)
	nw.start(1)
	g1 := nw.node(1).Generation()
	if g1 <= g0+uint64(365*24*3600) {
		t.Fatalf("precondition: new generation %d is not over a year past node 0's %d", g1, g0)
	}
	nw.converge(30 * time.Second)
	if r := nw.events(0, EventRestarted, 1); len(r) != 1 || r[0].Generation != g1 {
		t.Errorf("node 0 (up %d days) did not accept node 1's restart: %v", (uint64(nw.now/1e9)-g0)/86400, r)
	}

	// Node 2 restarts with its clock two years ahead: refused by all.
	nw.crash(2)
	nw.nodes[2].skew = int64(2 * 365 * 24 * time.Hour)
	nw.runFor(time.Second)
	nw.start(2)
	nw.runFor(60 * time.Second)
	for _, id := range []wire.ProcID{0, 1, 3} {
		n := nw.node(id)
		m, _ := n.Member(2)
		if m.Generation == nw.node(2).Generation() {
			t.Errorf("node %d accepted a generation two years ahead", id)
		}
		if r := nw.events(id, EventGenerationRejected, 2); len(r) != 1 || r[0].Generation != nw.node(2).Generation() {
			t.Errorf("node %d: rejection reports %v", id, r)
		}
		if n.Stats().GenerationRejected == 0 {
			t.Errorf("node %d: no rejections counted", id)
		}
		if n.IsAlive(2) {
			t.Errorf("node %d judges the future-generation node alive", id)
		}
	}
}

// TestGenerationGuardNewEndpoint: Cassandra applied the guard to known
// endpoints only; weft refuses an unknown endpoint too.
func TestGenerationGuardNewEndpoint(t *testing.T) {
	base := Cassandra()
	nw := newNet(t, 10, 3, testConfig(base, 0))
	nw.nodes[2].skew = int64(2 * 365 * 24 * time.Hour)
	nw.crash(2)
	nw.nodes[2].stored = 0
	nw.start(2)
	nw.runFor(30 * time.Second)
	for _, id := range []wire.ProcID{0, 1} {
		if _, ok := nw.node(id).Member(2); ok {
			t.Errorf("node %d accepted an unknown endpoint two years ahead", id)
		}
	}
	// Node 2 gossips only with its seed, node 0.
	if r := nw.events(0, EventGenerationRejected, 2); len(r) != 1 {
		t.Errorf("seed: rejection reports %v, want one", r)
	}
	if !nw.allSeeAlive([]wire.ProcID{0, 1}) {
		t.Error("the sane nodes did not converge")
	}
}

// TestWrongClusterSeeds (§5 #9): a node whose seed list points at another
// cluster never joins it; the seed drops its SYNs, counts them, and
// reports once.
func TestWrongClusterSeeds(t *testing.T) {
	nw := newNet(t, 11, 5, func(id wire.ProcID) Config {
		c := testConfig(Cassandra(), 0)(id)
		if id == 4 {
			c.ClusterName = "other-cluster"
		}
		return c
	})
	nw.runFor(60 * time.Second)
	if !nw.allSeeAlive([]wire.ProcID{0, 1, 2, 3}) {
		t.Fatal("cluster did not form")
	}
	for _, id := range []wire.ProcID{0, 1, 2, 3} {
		if _, ok := nw.node(id).Member(4); ok {
			t.Errorf("node %d let the foreign node in", id)
		}
	}
	mm := nw.events(0, EventClusterMismatch, 4)
	if len(mm) != 1 || mm[0].Value != "other-cluster" {
		t.Errorf("seed reports %v, want one", mm)
	}
	st := nw.node(0).Stats()
	t.Logf("seed dropped %d foreign SYNs, reported once", st.ClusterMismatches)
	if st.ClusterMismatches < 30 {
		t.Errorf("only %d drops counted", st.ClusterMismatches)
	}
	f := nw.node(4).Stats()
	if f.Endpoints != 1 || f.AckRecv != 0 {
		t.Errorf("foreign node: %d endpoints, %d ACKs received", f.Endpoints, f.AckRecv)
	}
}

// TestPartitionHeals (§5 #10): two halves partitioned for a minute convict
// each other, then re-converge after the heal, through the seeds and the
// unreachable-peer probes; with a single seed, the half without a seed
// heals through the probes alone.
func TestPartitionHeals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seeds []wire.ProcID
	}{
		{"seeds in both halves", []wire.ProcID{0, 5}},
		{"seed in one half only", []wire.ProcID{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nw := newNet(t, 12, 10, testConfig(Cassandra(), tc.seeds...))
			nw.converge(30 * time.Second)
			nw.cut = func(a, b wire.ProcID) bool { return (a < 5) != (b < 5) }
			nw.runFor(60 * time.Second)
			for _, id := range ids(0, 10) {
				if live := nw.node(id).Stats().Live; live != 4 {
					t.Fatalf("node %d sees %d live during the partition, want 4", id, live)
				}
			}
			nw.cut = nil
			took := nw.converge(60 * time.Second)
			t.Logf("healed: all 10 see all alive %v after the partition ended", took)
			if took > 10*time.Second {
				t.Errorf("healing took %v", took)
			}
		})
	}
}

// TestOversizedState (§5 #5): app state far larger than one message still
// converges, every message stays under the cap (deltas are paged), the
// state-size warning fires once, values over MaxValueBytes are refused,
// and past MaxStateBytes new endpoints are refused and reported.
func TestOversizedState(t *testing.T) {
	base := Cassandra()
	base.MaxValueBytes = 4 << 10
	base.MaxMessageBytes = 2*base.MaxValueBytes + 1024 // 9 KiB
	base.StateWarnBytes = 100 << 10
	base.MaxStateBytes = 1 << 20
	nw := newNet(t, 13, 10, testConfig(base, 0, 1))
	nw.codec = true
	value := strings.Repeat("v", 2000)
	for _, sn := range nw.nodes {
		for k := Key(0); k < 8; k++ {
			if err := sn.n.SetAppState(KeyFirstApp+k, value); err != nil {
				t.Fatal(err)
			}
		}
		if err := sn.n.SetAppState(KeyLoad, strings.Repeat("x", base.MaxValueBytes+1)); !errors.Is(err, ErrValueTooLarge) {
			t.Errorf("oversized value: %v", err)
		}
		nw.drain(sn)
	}
	full := func() bool {
		for _, a := range nw.nodes {
			for _, b := range nw.nodes {
				if len(a.n.AppStates(b.id)) != 8 {
					return false
				}
			}
		}
		return true
	}
	if !nw.runUntil(nw.now+int64(2*time.Minute), full) {
		t.Fatalf("160 KB of state did not converge through 9 KiB messages: %s", nw.summary())
	}
	t.Logf("converged after %v; largest message %d B (cap %d)", nw.elapsed(), nw.maxMsg, base.MaxMessageBytes)
	if nw.maxMsg > base.MaxMessageBytes {
		t.Errorf("message of %d bytes over the %d cap", nw.maxMsg, base.MaxMessageBytes)
	}
	paged := uint64(0)
	for _, sn := range nw.nodes {
		paged += sn.n.Stats().PagedMessages
		if w := nw.events(sn.id, EventStateSizeWarning, -1); len(w) != 1 || w[0].Bytes < base.StateWarnBytes {
			t.Errorf("node %d: warnings %v", sn.id, w)
		}
	}
	if paged == 0 {
		t.Error("no message was paged")
	}
	t.Logf("%d paged messages", paged)
}

// TestStateLimitRefusesEndpoints: at MaxStateBytes a node refuses new
// endpoints (reported once each) rather than growing without bound.
func TestStateLimitRefusesEndpoints(t *testing.T) {
	base := Cassandra()
	base.MaxValueBytes = 1 << 10
	base.MaxStateBytes = 3 * (endpointCost + itemCost + 1000)
	base.StateWarnBytes = base.MaxStateBytes / 2
	nw := newNet(t, 14, 6, testConfig(base, 0))
	for _, sn := range nw.nodes {
		if err := sn.n.SetAppState(KeyHostID, strings.Repeat("h", 1000)); err != nil {
			t.Fatal(err)
		}
		nw.drain(sn)
	}
	nw.runFor(30 * time.Second)
	for _, sn := range nw.nodes {
		st := sn.n.Stats()
		if st.Endpoints > 3 || st.StateBytes > base.MaxStateBytes {
			t.Errorf("node %d: %d endpoints, %d bytes: over the limit", sn.id, st.Endpoints, st.StateBytes)
		}
		if sn.id == 0 && (st.Endpoints != 3 || st.RefusedEndpoints == 0) {
			t.Errorf("seed: %d endpoints, %d refused", st.Endpoints, st.RefusedEndpoints)
		}
		distinct := map[wire.ProcID]bool{}
		for _, e := range nw.events(sn.id, EventStateLimit, -1) {
			if distinct[e.Node] {
				t.Errorf("node %d: endpoint %d reported twice", sn.id, e.Node)
			}
			distinct[e.Node] = true
		}
		if (st.RefusedEndpoints > 0) != (len(distinct) > 0) {
			t.Errorf("node %d: %d refusals but %d reports", sn.id, st.RefusedEndpoints, len(distinct))
		}
	}
	if r := nw.events(0, EventStateLimit, -1); len(r) != 3 {
		t.Errorf("seed: limit reports %v, want one for each of the 3 endpoints it could not hold", r)
	}
}
