package node

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// probeResult is what a bootstrap probe learnt: which peers answered, and
// which of them have seen this member run (their gossip lists it).
type probeResult struct {
	asked    int // peers asked
	answered []wire.ProcID
	knownBy  []wire.ProcID
}

// probePeers asks every peer, the way a client asks for the leaders, for
// its gossip view (VIEW_REQUEST), and reports the peers whose view lists
// cfg.ID: they have heard this member's gossip, so it ran in this cluster
// before, with a data directory of its own. It returns once every peer
// answered or after d. A peer that is down, or runs without gossip, knows
// nothing; see openDataDir for what that leaves uncovered.
//
// The probe dials as a client with a random id: the node's own id would
// displace nothing (its transport is not up) but would make the peers
// count a connection from a member that is not running.
func probePeers(cfg *Config, d time.Duration) (probeResult, error) {
	var (
		mu  sync.Mutex
		res probeResult
		all = make(chan struct{})
	)
	peers := map[wire.ProcID]string{}
	for p, addr := range cfg.Peers {
		if p != cfg.ID && cfg.Topology.IsReplica(p) {
			peers[p] = addr
		}
	}
	res.asked = len(peers)
	if len(peers) == 0 {
		return res, nil
	}
	var self wire.ProcID
	for self == 0 || cfg.Topology.IsReplica(self) {
		self = wire.ProcID(1<<24 + rand.Uint32N(math.MaxUint32-1<<24))
	}
	tr, err := transport.New(transport.Config{
		ClusterName:    cfg.Cluster,
		Self:           self,
		Role:           transport.RoleClient,
		Peers:          peers,
		Key:            cfg.ClusterKey,
		Logger:         cfg.Logger,
		DialBackoffMax: 100 * time.Millisecond,
		Seed:           uint64(time.Now().UnixNano()),
		Handler: func(from wire.ProcID, m wire.Message) {
			v, ok := m.(*wire.View)
			if !ok {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if slices.Contains(res.answered, from) {
				return
			}
			res.answered = append(res.answered, from)
			for _, e := range v.Entries {
				if e.ID == cfg.ID {
					res.knownBy = append(res.knownBy, from)
					break
				}
			}
			if len(res.answered) == len(peers) {
				close(all)
			}
		},
	})
	if err != nil {
		return res, err
	}
	for p := range peers {
		tr.Send(p, &wire.ViewRequest{})
	}
	select {
	case <-all:
	case <-time.After(d):
	}
	tr.Close()
	mu.Lock()
	defer mu.Unlock()
	out := probeResult{asked: res.asked, answered: slices.Clone(res.answered), knownBy: slices.Clone(res.knownBy)}
	slices.Sort(out.answered)
	slices.Sort(out.knownBy)
	return out, nil
}
