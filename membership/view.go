package membership

import (
	"slices"

	"github.com/weft-dev/weft/wire"
)

// The node's read-only view of the cluster: members as gossip sees them,
// their application states and phi.

// Member is a snapshot of one endpoint in the local view.
type Member struct {
	Node       wire.ProcID
	Generation uint64
	Heartbeat  uint64
	Version    uint64 // highest version held
	Alive      bool   // judged up (always true for self until it leaves)
	Departed   bool   // LEFT or REMOVED
	Expire     int64  // departed: eviction time (Unix ns)
}

// Endpoint flags.
const (
	fAlive     uint8 = 1 << iota // judged up
	fDeparted                    // status LEFT or REMOVED
	fConvicted                   // convicted in this generation (for Revivals)
)

// Member returns the local view of endpoint id.
func (n *Node) Member(id wire.ProcID) (Member, bool) {
	i := n.find(id)
	if i < 0 {
		return Member{}, false
	}
	return n.member(&n.eps[i]), true
}

func (n *Node) member(e *endpoint) Member {
	m := Member{Node: e.id, Generation: e.gen, Heartbeat: e.hb, Version: n.maxVer(e),
		Alive: e.alive(), Departed: e.departed()}
	if m.Departed {
		m.Expire = n.expireOf(e.id)
	}
	return m
}

// Members returns the local view, sorted by node, self included.
func (n *Node) Members() []Member {
	ms := make([]Member, len(n.eps))
	for i := range n.eps {
		ms[i] = n.member(&n.eps[i])
	}
	return ms
}

// LiveMembers returns the endpoints judged up, sorted, self excluded.
func (n *Node) LiveMembers() []wire.ProcID {
	var ids []wire.ProcID
	for i := range n.eps {
		if e := &n.eps[i]; e.id != n.id && e.alive() {
			ids = append(ids, e.id)
		}
	}
	return ids
}

// IsAlive reports whether id is judged up.
func (n *Node) IsAlive(id wire.ProcID) bool {
	i := n.find(id)
	return i >= 0 && n.eps[i].alive()
}

// AppState returns endpoint id's state for key.
func (n *Node) AppState(id wire.ProcID, key Key) (AppState, bool) {
	i := n.find(id)
	if i < 0 {
		return AppState{}, false
	}
	app := n.appsOf(&n.eps[i])
	j, ok := slices.BinarySearchFunc(app, key, func(a AppState, k Key) int { return int(a.Key) - int(k) })
	if !ok {
		return AppState{}, false
	}
	return app[j], true
}

// AppStates returns a copy of endpoint id's states, sorted by key.
func (n *Node) AppStates(id wire.ProcID) []AppState {
	i := n.find(id)
	if i < 0 {
		return nil
	}
	return slices.Clone(n.appsOf(&n.eps[i]))
}

// Phi returns the failure detector's phi for id at now (0 for self,
// unknown endpoints and endpoints without arrivals).
func (n *Node) Phi(id wire.ProcID, now int64) float64 {
	i := n.find(id)
	if i < 0 || id == n.id {
		return 0
	}
	return n.fds.Phi(i, now)
}

// Quarantined reports whether gossip about id is being ignored.
func (n *Node) Quarantined(id wire.ProcID) bool { return n.quarantined(id) != nil }
