package main

import (
	"fmt"
	"log/slog"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/kvhttp"
	"github.com/weft-dev/weft/rsm"
)

// serviceOf returns the state machine the configuration's service key
// names for this node (nil: none).
func serviceOf(cfg *config.Config, topo *amcast.Topology) (rsm.StateMachine, error) {
	switch cfg.Service {
	case config.ServiceKV:
		g, ok := topo.GroupOf(cfg.ID)
		if !ok {
			return nil, fmt.Errorf("service kv: node %d is in no group", cfg.ID)
		}
		st, err := kv.NewStore(g, topo.NumGroups())
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	return nil, nil
}

// kvHTTP is weft-kv's HTTP API in the agent ([kv] http) and its client.
type kvHTTP struct {
	srv *kvhttp.Server
	cl  *client.Client
}

// serveKVHTTP starts weft-kv's HTTP API over a kv client of the agent's
// own cluster, built as `weft kv --config` builds it: the API is a client
// like any other and never reaches into the node's loop.
func serveKVHTTP(cfg *config.Config, logger *slog.Logger) (*kvHTTP, error) {
	ccfg, err := clusterClientConfig(cfg)
	if err != nil {
		return nil, err
	}
	ccfg.TLS = cfg.KVClientTLS() // nil without TLS
	ccfg.Logger = logger.With("component", "kv_http")
	k, cl, err := newKVClient(ccfg)
	if err != nil {
		return nil, err
	}
	srv, err := kvhttp.Listen(cfg.KV.HTTP, k, kvhttp.Options{Token: cfg.KVToken(), Timeout: cfg.KV.Timeout,
		MaxRequests: cfg.KV.MaxRequests, Logger: ccfg.Logger})
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &kvHTTP{srv: srv, cl: cl}, nil
}

// Close stops the API, then its client.
func (h *kvHTTP) Close() error {
	err := h.srv.Close()
	if cerr := h.cl.Close(); err == nil {
		err = cerr
	}
	return err
}
