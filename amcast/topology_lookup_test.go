package amcast

import (
	"testing"

	"github.com/weft-dev/weft/wire"
)

// TestTopologyLookups: GroupOf, IsReplica and MemberIndex answer from the
// dense table what the member lists say, for small replica ids (the
// table) and large ones (the maps alone), for members, clients' ids past
// the table and ids between members.
func TestTopologyLookups(t *testing.T) {
	for _, groups := range [][][]wire.ProcID{
		{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}},
		{{10, 3}, {7}, {100, 40, 41}},               // sparse, below the table's bound
		{{5000, 5001}, {7, 9000}},                   // a replica past the bound: maps only
		{{maxDenseProcID - 1}, {0}},                 // the table's last slot
		{{maxDenseProcID}, {maxDenseProcID + 1, 1}}, // just past it
	} {
		topo, err := TopologyOf(groups)
		if err != nil {
			t.Fatal(err)
		}
		want := map[wire.ProcID][2]int{}
		for g, ms := range groups {
			for i, p := range ms {
				want[p] = [2]int{g, i}
			}
		}
		probe := []wire.ProcID{0, 1, 2, 6, 11, 99, 101, maxDenseProcID - 1, maxDenseProcID, maxDenseProcID + 1, 1 << 20, 1<<32 - 1}
		for p := range want {
			probe = append(probe, p, p+1)
		}
		for _, p := range probe {
			w, member := want[p]
			g, ok := topo.GroupOf(p)
			if ok != member || topo.IsReplica(p) != member || (member && (int(g) != w[0] || topo.MemberIndex(p) != w[1])) {
				t.Errorf("%v: id %d: GroupOf %d %v, IsReplica %v, MemberIndex %d; want member %v of group %d at %d",
					groups, p, g, ok, topo.IsReplica(p), topo.MemberIndex(p), member, w[0], w[1])
			}
		}
	}
}
