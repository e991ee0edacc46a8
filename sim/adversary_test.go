package sim

import (
	"testing"

	"github.com/weft-dev/weft/wire"
)

// TestSwarmForgedClients runs swarm seeds (faults, leader changes, client
// sessions turning over) with an adversary forging the genuine clients'
// ids throughout the fault phase: every checker still passes.
func TestSwarmForgedClients(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	forged := 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		cfg := SwarmConfig("wbcast", seed)
		adv := wire.ProcID(cfg.Groups*cfg.Replicas + cfg.Workload.Clients)
		cfg.Inject = Forger(&cfg, adv, &forged)
		if r := RunSwarmConfig(cfg); r.Violations() > 0 {
			t.Fatalf("seed %d with forged clients: %s", seed, r.Failure())
		}
	}
	if forged == 0 {
		t.Fatal("nothing was forged")
	}
	t.Logf("%d seeds, %d forged MULTICASTs refused", seeds, forged)
}
