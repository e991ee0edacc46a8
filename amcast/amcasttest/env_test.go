package amcasttest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// echo is a toy protocol for testing the environment: a replica delivers a
// MULTICAST at once with gts (seq, client) (the client id in place of a
// group id: the same at every destination) and answers the client; a Tick
// makes it send a HEARTBEAT to the next replica.
type echo struct {
	amcast.Outbox
	id   wire.ProcID
	topo *amcast.Topology
}

func newEcho(protocol string, topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) {
	if protocol != "echo" {
		return nil, fmt.Errorf("unknown protocol %q", protocol)
	}
	return &echo{id: id, topo: topo}, nil
}

func (p *echo) ID() wire.ProcID { return p.id }

func (p *echo) Tick() {
	next := (int(p.id) + 1) % p.topo.NumReplicas()
	p.Send(p.id, wire.ProcID(next), &wire.Heartbeat{B: wire.Ballot{P: p.id}})
}

func (p *echo) Step(env wire.Envelope) error {
	switch m := env.Msg.(type) {
	case *wire.Multicast:
		g, _ := p.topo.GroupOf(p.id)
		gts := wire.Timestamp{T: m.M.ID.Seq, G: wire.GroupID(m.M.ID.Client)}
		p.Persist(&wire.RecDelivered{M: m.M, GTS: gts})
		p.Deliver(m.M, gts)
		p.Send(p.id, m.M.ID.Client, &wire.Delivered{ID: m.M.ID, G: g, GTS: gts, Leader: p.id})
		return nil
	case *wire.Heartbeat:
		return nil
	}
	return fmt.Errorf("%w: echo does not handle %s", amcast.ErrBadMessage, env.Msg.Kind())
}

func (p *echo) Status() fmt.Stringer { return status("UP") }

type status string

func (s status) String() string { return string(s) }

// echoStore counts the records an echo replica persisted.
type echoStore struct{ n int }

func (s *echoStore) Apply(rec wire.Message) error {
	if _, ok := rec.(*wire.RecDelivered); !ok {
		return fmt.Errorf("echo store: unexpected %s", rec.Kind())
	}
	s.n++
	return nil
}

func (s *echoStore) Messages() int { return s.n }

var echoDurability = &Durability{
	NewStore: func(protocol string, _ *amcast.Topology, _ wire.ProcID) (amcast.Store, error) {
		return &echoStore{}, nil
	},
	Restore: func(protocol string, topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error) {
		if _, ok := st.(*echoStore); !ok {
			return nil, fmt.Errorf("echo cannot restore from %T", st)
		}
		return newEcho(protocol, topo, id)
	},
}

func TestEnv(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		e := New(newEcho)
		e.Unordered = true // echo delivers what reaches it, in no agreed order
		e.DefaultProtocol = "echo"
		e.Durability = echoDurability
		e.Commands["hello"] = func(t *testing.T, e *Env, d *datadriven.TestData) string {
			return fmt.Sprintf("hello from an extra command, %d in flight\n", e.InFlight())
		}
		datadriven.RunTest(t, path, e.Handle)
	})
}

func TestCheckSafety(t *testing.T) {
	topo, err := amcast.NewTopology(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	m := func(c wire.ProcID, seq uint64, dest ...wire.GroupID) wire.AppMsg {
		return wire.AppMsg{ID: wire.MsgID{Client: c, Seq: seq}, Dest: dest}
	}
	ts := func(t uint64, g wire.GroupID) wire.Timestamp { return wire.Timestamp{T: t, G: g} }
	a, b := m(2, 1, 0, 1), m(2, 2, 0)
	a2 := a
	a2.Payload = []byte("forged")
	for _, tc := range []struct {
		name string
		hist [][]amcast.Delivery // p0, p1, c2
		want string              // "" for no violation, else a substring of the error
	}{
		{"ok", [][]amcast.Delivery{
			{{M: a, GTS: ts(1, 1)}, {M: b, GTS: ts(2, 0)}},
			{{M: a, GTS: ts(1, 1)}},
			{{M: b, GTS: ts(2, 0)}, {M: a, GTS: ts(1, 1)}}, // clients complete in any order
		}, ""},
		{"order", [][]amcast.Delivery{
			{{M: b, GTS: ts(2, 0)}, {M: a, GTS: ts(1, 1)}},
			nil, nil,
		}, "gts: proc 0 delivered 2.1 with gts (1,1) after 2.2 with gts (2,0)"},
		{"gts", [][]amcast.Delivery{
			{{M: a, GTS: ts(1, 1)}},
			{{M: a, GTS: ts(1, 0)}},
			nil,
		}, "gts: 2.1 delivered with gts (1,1) at proc 0 but (1,0) at proc 1"},
		{"client gts", [][]amcast.Delivery{
			{{M: a, GTS: ts(1, 1)}},
			nil,
			{{M: a, GTS: ts(3, 1)}},
		}, "c2 completed 2.1 with gts 3.g1 but p0 delivered it with gts 1.g1"},
		{"client twice", [][]amcast.Delivery{
			{{M: a, GTS: ts(1, 1)}},
			nil,
			{{M: a, GTS: ts(1, 1)}, {M: a}},
		}, "c2 completed 2.1 twice"},
		{"payload", [][]amcast.Delivery{
			{{M: a, GTS: ts(1, 1)}},
			{{M: a2, GTS: ts(1, 1)}},
			nil,
		}, "validity: proc 1 delivered 2.1 with payload digest"},
		{"twice", [][]amcast.Delivery{
			{{M: a, GTS: ts(1, 1)}, {M: a, GTS: ts(1, 1)}},
			nil, nil,
		}, "integrity: proc 0 delivered 2.1 more than once"},
		{"bottom", [][]amcast.Delivery{
			{{M: a}},
			nil, nil,
		}, "p0 delivered 2.1 with gts ⊥"},
		{"not addressed", [][]amcast.Delivery{
			nil,
			{{M: b, GTS: ts(2, 0)}},
			nil,
		}, "validity: proc 1 delivered 2.2 in group 1, not in its dest [0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Env{Topo: topo, delivered: tc.hist}
			err := e.CheckSafety()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected violation: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("violation %q not detected", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("got %q, want %q", err, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	if ts, err := ParseTimestamp("12.g3"); err != nil || ts != (wire.Timestamp{T: 12, G: 3}) {
		t.Errorf("ParseTimestamp: %v %v", ts, err)
	}
	if b, err := ParseBallot("2.p7"); err != nil || b != (wire.Ballot{N: 2, P: 7}) {
		t.Errorf("ParseBallot: %v %v", b, err)
	}
	if id, err := ParseMsgID("6.2"); err != nil || id != (wire.MsgID{Client: 6, Seq: 2}) {
		t.Errorf("ParseMsgID: %v %v", id, err)
	}
	want := wire.MsgID{Client: 6, Session: wire.Session(0xbeef), Seq: 2}
	if id, err := ParseMsgID(want.String()); err != nil || id != want {
		t.Errorf("ParseMsgID(%q): %v %v", want.String(), id, err)
	}
	for _, s := range []string{"6", "6.x", "6.2@", "6.2@zz", "x.2@1"} {
		if _, err := ParseMsgID(s); err == nil {
			t.Errorf("ParseMsgID(%q) accepted", s)
		}
	}
	if k, err := ParseKind("accept_ack"); err != nil || k != wire.KindAcceptAck {
		t.Errorf("ParseKind: %v %v", k, err)
	}
	for _, s := range []string{"p3", "c3", "3"} {
		if p, err := ParseProc(s); err != nil || p != 3 {
			t.Errorf("ParseProc(%q): %v %v", s, p, err)
		}
	}
	for _, bad := range []string{"", "1", "1.2", "x.g1", "1.gx"} {
		if _, err := ParseTimestamp(bad); err == nil {
			t.Errorf("ParseTimestamp(%q) accepted", bad)
		}
	}
	if _, err := ParseKind("NOPE"); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("ParseKind(NOPE): %v", err)
	}
}

func TestDo(t *testing.T) {
	e := New(newEcho)
	e.DefaultProtocol = "echo"
	e.Do(t, "topology groups=1 replicas=2")
	e.Do(t, "multicast dest=0 payload=x")
	if got, want := e.Do(t, "queued"), "p2->p0 MULTICAST 2.1 dest=[0] payload=\"x\"\n"; got != want {
		t.Fatalf("queued: got %q, want %q", got, want)
	}
	e.Do(t, "stabilize")
	if n := len(e.Deliveries(0)); n != 1 {
		t.Fatalf("p0 delivered %d messages, want 1", n)
	}
}
