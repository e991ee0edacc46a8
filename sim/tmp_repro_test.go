package sim

import (
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/weft-dev/weft/amcast/wbcast"
)

func TestTmpQuorumGCSweep(t *testing.T) {
	start, _ := strconv.Atoi(os.Getenv("QGC_START"))
	n, _ := strconv.Atoi(os.Getenv("QGC_N"))
	if n == 0 {
		t.Skip()
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := start
	bad := 0
	for range 2 {
		wg.Go(func() {
			for {
				mu.Lock()
				seed := next
				next++
				mu.Unlock()
				if seed >= start+n {
					return
				}
				cfg := SwarmConfig("wbcast", uint64(seed))
				ForgedClients(&cfg)
				cfg.Spec = WbCastSpec(func(c *wbcast.Config) { c.CollectAfterQuorum = true })
				r := RunSwarmConfig(cfg)
				if r.Violations() > 0 {
					mu.Lock()
					bad++
					t.Logf("seed %d: %s", seed, r.Failure())
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d seeds from %d: %d failing", n, start, bad)
}
