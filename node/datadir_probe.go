package node

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
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

// probePeers asks every peer for its gossip view (VIEW_REQUEST, the
// question a client asks to find the leaders) and reports the peers whose
// view lists cfg.ID: they have heard this member's gossip, so it ran in
// this cluster before, with a data directory of its own. It returns once
// every peer answered or after d. A peer that is down, or runs without
// gossip, knows nothing; see openDataDir for what that leaves uncovered.
//
// The probe is a short-lived transport of the node itself, on its own
// address, id, key and certificate (under mutual TLS only a node's
// certificate is at hand, and a node certificate may not connect as a
// client): a peer answers a node's VIEW_REQUEST over its own stream to the
// node, so the probe listens for the answers. Of what else arrives, only
// another member's probe is answered, with an empty view (this member has
// seen nobody run): when a new cluster starts, every member probes at
// once and none waits out its window. A node given a Listener
// (Config.Listener) cannot lend it to a probe: it is not probed.
func probePeers(cfg *Config, d time.Duration) (probeResult, error) {
	var (
		mu   sync.Mutex
		res  probeResult
		all  = make(chan struct{})
		self atomic.Pointer[transport.Transport]
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
	tr, err := transport.New(transport.Config{
		ClusterName:    cfg.Cluster,
		Self:           cfg.ID,
		Listen:         cfg.Listen,
		Peers:          peers,
		Key:            cfg.ClusterKey,
		TLS:            cfg.TLS,
		Logger:         slog.New(slog.DiscardHandler), // dial failures of peers not up yet are expected
		DialBackoffMax: 100 * time.Millisecond,
		Seed:           uint64(time.Now().UnixNano()),
		Handler: func(from wire.ProcID, m wire.Message) {
			if _, ok := m.(*wire.ViewRequest); ok {
				// Another member probing at the same time (a new cluster
				// starting): this one has seen nobody run, and says so at
				// once instead of letting it wait out its window.
				if tr := self.Load(); tr != nil {
					tr.Send(from, &wire.View{})
				}
				return
			}
			v, ok := m.(*wire.View)
			if !ok {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if _, ok := peers[from]; !ok || slices.Contains(res.answered, from) {
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
	self.Store(tr)
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
