package client_test

import (
	"testing"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// TestClientIDFromCertificate: a client certificate bound to one client id
// gives the client that id; an any-id certificate leaves it random.
func TestClientIDFromCertificate(t *testing.T) {
	topo, err := amcast.NewTopology(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := transport.NewDevCA("test CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[wire.ProcID]string{0: "127.0.0.1:1"}
	for _, tc := range []struct {
		id   transport.Identity
		want wire.ProcID // 0: random
	}{
		{transport.Identity{Role: transport.RoleClient, ID: 4242}, 4242},
		{transport.AnyClientIdentity(), 0},
	} {
		tlsc, err := transport.DevTLS("c", tc.id, ca, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := client.New(client.Config{Cluster: "c", Topology: topo, Nodes: nodes, TLS: tlsc})
		if err != nil {
			t.Fatal(err)
		}
		got := cl.ID()
		cl.Close()
		if (tc.want != 0 && got != tc.want) || (tc.want == 0 && (got == 0 || topo.IsReplica(got))) {
			t.Errorf("%s: client id %d", tc.id, got)
		}
	}
}
