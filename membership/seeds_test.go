package membership

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/weft-dev/weft/wire"
)

func TestSeedDigest(t *testing.T) {
	d := SeedDigest([]wire.ProcID{0, 3, 6})
	if !strings.HasPrefix(d, "3:") || len(d) != 2+16 {
		t.Fatalf("digest %q", d)
	}
	// Order and duplicates do not matter; content does.
	if SeedDigest([]wire.ProcID{6, 0, 3, 3}) != d {
		t.Error("digest depends on order or duplicates")
	}
	for _, other := range [][]wire.ProcID{{0, 3}, {0, 3, 7}, {0, 3, 6, 9}, nil} {
		if SeedDigest(other) == d {
			t.Errorf("%v has the digest of [0 3 6]", other)
		}
	}
	if SeedDigest(nil) != "0:cbf29ce484222325" { // FNV-1a 64 offset basis: pinned across releases
		t.Errorf("empty list: %q", SeedDigest(nil))
	}
}

func TestSeedMajority(t *testing.T) {
	const a, b, c = "3:aaaa", "3:bbbb", "2:cccc"
	v := func(ds ...string) []SeedVote {
		var out []SeedVote
		for i, d := range ds {
			out = append(out, SeedVote{Node: wire.ProcID(i), Digest: d})
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		votes    []SeedVote
		majority string
		differ   []wire.ProcID
		voters   int
	}{
		{"nobody", nil, "", nil, 0},
		{"alone", v(a), a, nil, 1},
		{"all agree", v(a, a, a), a, nil, 3},
		{"one differs", v(a, b, a), a, []wire.ProcID{1}, 3},
		{"two differ differently", v(a, b, a, c, a), a, []wire.ProcID{1, 3}, 5},
		{"no majority: tie", v(a, b), "", []wire.ProcID{0, 1}, 2},
		{"no majority: plurality is not enough", v(a, a, b, c), "", []wire.ProcID{0, 1, 2, 3}, 4},
		{"empty digests do not vote", v(a, "", b, a), a, []wire.ProcID{2}, 3},
	} {
		got := SeedMajority(tc.votes)
		if got.Majority != tc.majority || !reflect.DeepEqual(got.Differ, tc.differ) || got.Voters != tc.voters {
			t.Errorf("%s: %+v, want majority %q differ %v voters %d", tc.name, got, tc.majority, tc.differ, tc.voters)
		}
		for _, p := range tc.differ {
			if !got.Mismatch(p) {
				t.Errorf("%s: Mismatch(%d) false", tc.name, p)
			}
		}
	}
}

// TestSeedVotes: the electorate is this node and the members judged up
// that publish a digest.
func TestSeedVotes(t *testing.T) {
	n := newTestNode(t, 1, t0, nil)
	if err := n.SetAppState(KeySeedDigest, "3:aaaa"); err != nil {
		t.Fatal(err)
	}
	g := uint64(t0 / sec)
	dig := func(d string) []AppState { return []AppState{{KeySeedDigest, 1, d}} }
	n.Preload(t0, []EndpointState{ // Preload marks them up
		{Node: 2, Generation: g, Heartbeat: 2, States: dig("3:bbbb")},
		{Node: 3, Generation: g, Heartbeat: 2, States: dig("3:aaaa")},
		{Node: 4, Generation: g, Heartbeat: 2}, // an older release: no digest
	})
	n.apply(t0, []EndpointState{{Node: 5, Generation: g, Heartbeat: 2, States: dig("3:bbbb")}}) // not judged up yet
	got := fmt.Sprint(n.SeedVotes())
	if got != "[{1 3:aaaa} {2 3:bbbb} {3 3:aaaa}]" {
		t.Errorf("votes %s", got)
	}
	if v := SeedMajority(n.SeedVotes()); v.Majority != "3:aaaa" || !v.Mismatch(2) || v.Mismatch(1) {
		t.Errorf("verdict %+v", v)
	}
}

// TestBootstrapContactsFirst: a restarted node with remembered peers
// sends its SYNs to them in turn, the seeds joining once each was tried,
// and forgets them once a peer is up.
func TestBootstrapContactsFirst(t *testing.T) {
	n := newTestNode(t, 1, t0, func(c *Config) {
		c.Seeds = []wire.ProcID{9}
		c.Bootstrap = []wire.ProcID{5, 1, 3, 5} // self and duplicates ignored
	})
	n.Advance()
	var rounds []string
	for r := range 4 {
		n.Tick(t0 + int64(r)*sec)
		var to []wire.ProcID
		for _, e := range n.Ready().Messages {
			to = append(to, e.To)
		}
		rounds = append(rounds, fmt.Sprint(to))
		n.Advance()
	}
	if got := strings.Join(rounds, " "); got != "[5] [3] [5 9] [3 9]" {
		t.Errorf("SYN targets per round %s, want [5] [3] [5 9] [3 9]", got)
	}
	// Peer 3 answers and shows progress: it is up, the contacts are
	// forgotten, and gossip goes on as usual.
	g := uint64(t0 / sec)
	n.apply(t0, []EndpointState{{Node: 3, Generation: g, Heartbeat: 2}})
	n.apply(t0+sec, []EndpointState{{Node: 3, Generation: g, Heartbeat: 3}})
	if !n.IsAlive(3) {
		t.Fatal("3 not up")
	}
	n.Advance()
	n.Tick(t0 + 5*sec)
	if n.boot != nil {
		t.Errorf("contacts kept: %v", n.boot)
	}
	for _, e := range n.Ready().Messages {
		if e.To == 5 {
			t.Errorf("SYN to a forgotten contact")
		}
	}
	// Without contacts, the seed from the first round.
	m := newTestNode(t, 1, t0, func(c *Config) { c.Seeds = []wire.ProcID{9} })
	m.Advance()
	m.Tick(t0)
	if to := envTo(m.Ready(), 9); len(to) != 1 {
		t.Errorf("no SYN to the seed: %v", m.Ready().Messages)
	}
}
