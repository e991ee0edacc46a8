package main

import (
	"fmt"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/kv"
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
