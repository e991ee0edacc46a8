package membership

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// TestSharedTableAndPool runs one scenario (bootstrap from seeds, an app
// change, a crash, a leave) twice on the codec: nodes with their own
// tables and fresh messages, then nodes sharing one AppTable and one
// Pool. Sharing is a memory matter only: every view, event and byte must
// be the same.
func TestSharedTableAndPool(t *testing.T) {
	run := func(shared bool) (string, uint64, *AppTable) {
		base := testConfig(Cassandra(), 0, 1, 2)
		var apps *AppTable
		var pool *Pool
		if shared {
			apps, pool = NewAppTable(), &Pool{}
		}
		nw := newNet(t, 11, 25, func(id wire.ProcID) Config {
			c := base(id)
			c.Apps, c.Pool = apps, pool
			return c
		})
		nw.codec = true
		for _, sn := range nw.nodes {
			if err := sn.n.SetAppState(KeyStatus, StatusNormal); err != nil {
				t.Fatal(err)
			}
		}
		nw.converge(60 * time.Second)
		if err := nw.node(9).SetAppState(KeyLoad, "7"); err != nil {
			t.Fatal(err)
		}
		nw.drain(nw.nodes[9])
		nw.runFor(5 * time.Second)
		nw.crash(13)
		if err := nw.node(4).Leave(nw.now); err != nil {
			t.Fatal(err)
		}
		nw.drain(nw.nodes[4])
		nw.runFor(60 * time.Second)
		var b strings.Builder
		for _, sn := range nw.nodes {
			if sn.n == nil {
				continue
			}
			fmt.Fprintf(&b, "node %d: %+v\n", sn.id, sn.n.Members())
			for _, m := range sn.n.Members() {
				fmt.Fprintf(&b, "  %d %v\n", m.Node, sn.n.AppStates(m.Node))
			}
			for _, e := range sn.events {
				fmt.Fprintf(&b, "  %d %v\n", e.at, e.Event)
			}
		}
		return b.String(), nw.wireBytes, apps
	}
	own, ownBytes, _ := run(false)
	sh, shBytes, apps := run(true)
	if own != sh || ownBytes != shBytes {
		t.Fatalf("shared table and pool changed the run (%d vs %d bytes)", shBytes, ownBytes)
	}
	if !strings.Contains(own, `dead 13`) || !strings.Contains(own, `left 4`) {
		t.Fatal("scenario did not exercise a crash and a leave")
	}
	// 25 nodes hold 25 records each, but few distinct lists.
	if apps.Lists() > 30 {
		t.Errorf("shared table holds %d lists for 25 endpoints", apps.Lists())
	}
	t.Logf("%d wire bytes; shared table: %d lists", ownBytes, apps.Lists())
}

// TestPreload: a preloaded view is up at once, silent, and gossips like a
// learned one.
func TestPreload(t *testing.T) {
	a := newTestNode(t, 1, t0, nil)
	b := newTestNode(t, 2, t0, nil)
	c := newTestNode(t, 3, t0, nil)
	if err := c.SetAppState(KeyLoad, "9"); err != nil {
		t.Fatal(err)
	}
	a.Advance()
	var view []EndpointState
	for _, n := range []*Node{a, b, c} {
		m, _ := n.Member(n.ID())
		view = append(view, EndpointState{Node: n.ID(), Generation: m.Generation, Heartbeat: m.Heartbeat, States: n.AppStates(n.ID())})
	}
	if err := a.Preload(t0+sec, view); err != nil {
		t.Fatal(err)
	}
	if rd := a.Ready(); !rd.Empty() {
		t.Fatalf("Preload emitted %+v", rd)
	}
	if got := a.LiveMembers(); !reflect.DeepEqual(got, []wire.ProcID{2, 3}) {
		t.Fatalf("live after preload %v", got)
	}
	if v, ok := a.AppState(3, KeyLoad); !ok || v.Value != "9" {
		t.Fatalf("app state %v %v", v, ok)
	}
	checkInvariants(t, a)
	// Lists are validated as in Step.
	if err := a.Preload(t0, []EndpointState{{Node: 2, Generation: 5}, {Node: 1}}); err == nil {
		t.Fatal("unsorted states accepted")
	}
	a.Tick(t0 + 2*sec)
	if n := len(a.Ready().Messages); n != 1 {
		t.Fatalf("round after preload sent %d SYNs, want 1 (to a live peer)", n)
	}
	// Silence after the preload convicts like any endpoint.
	for at := t0 + 3*sec; at <= t0+40*sec; at += sec {
		a.Advance()
		a.Tick(at)
	}
	if a.IsAlive(2) || a.Stats().Convictions != 2 {
		t.Fatalf("after 39 s of silence: alive(2)=%v, %d convictions", a.IsAlive(2), a.Stats().Convictions)
	}
}
