package wbcast

import (
	"testing"

	"github.com/weft-dev/weft/amcast"
)

// TestFollowersMakeQuorum: a group's other members make its quorums
// without the process only with three members or more, and only while
// its detector suspects none of them.
func TestFollowersMakeQuorum(t *testing.T) {
	for _, c := range []struct {
		replicas int
		silent   bool // no member heard from past the detector's timeout
		want     bool
	}{
		{1, false, false},
		{2, false, false},
		{3, false, true},
		{3, true, false},
		{5, false, true},
	} {
		topo, err := amcast.NewTopology(1, c.replicas)
		if err != nil {
			t.Fatal(err)
		}
		det := NewTimeoutDetector(3)
		p, err := New(Config{Topology: topo, ID: 0, Detector: det})
		if err != nil {
			t.Fatal(err)
		}
		if c.silent {
			for range 5 {
				p.Tick()
			}
		}
		if got := p.FollowersMakeQuorum(); got != c.want {
			t.Errorf("%d replicas, silent %v: FollowersMakeQuorum %v, want %v", c.replicas, c.silent, got, c.want)
		}
	}
}
