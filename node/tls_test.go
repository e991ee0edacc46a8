package node

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// TestClusterOverMutualTLS: 2 groups x 3 replicas on loopback TCP, every
// connection mutual TLS with per-node certificates, a client with a client
// certificate multicasting to one and two groups; every delivery is
// checked. A client without a certificate and one holding a node's
// certificate are refused, and say why.
func TestClusterOverMutualTLS(t *testing.T) {
	now := time.Now()
	ca, err := transport.NewDevCA("test CA", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	certs := map[wire.ProcID]*transport.TLS{}
	tlsFor := func(id transport.Identity) *transport.TLS {
		c, err := transport.DevTLS("test", id, ca, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newCluster(t, 2, 3, func(cfg *Config) {
		mu.Lock()
		defer mu.Unlock()
		if certs[cfg.ID] == nil {
			certs[cfg.ID] = tlsFor(transport.NodeIdentity(cfg.ID))
		}
		cfg.TLS = certs[cfg.ID]
	})
	cl := c.clientWith(func(cfg *client.Config) { cfg.TLS = tlsFor(transport.AnyClientIdentity()) })
	res := multicast(t, cl, 300, 8, func(i int) []wire.GroupID {
		if i%3 == 0 {
			return []wire.GroupID{0, 1}
		}
		return []wire.GroupID{wire.GroupID(i % 2)}
	})
	if len(res) != 300 {
		t.Fatalf("%d results", len(res))
	}
	c.waitDelivered(t, 200) // each group is a destination of 200 of the 300
	rep := check.Check(c.history(t), check.Options{Termination: check.TermAll})
	if !rep.OK() {
		t.Fatal(rep.Error())
	}
	t.Log(rep.Error())
	var accepts uint64
	for _, n := range c.nodes {
		st := n.tr.Stats()
		accepts += st.Accepts
		if len(st.Rejected)+len(st.DialFailures) != 0 {
			t.Errorf("node %d: rejected %v, dial failures %v", n.cfg.ID, st.Rejected, st.DialFailures)
		}
	}
	if accepts < 6*5 {
		t.Errorf("%d accepted connections, want at least the 30 of the mesh", accepts)
	}

	// A client without a certificate is refused (and told why); one
	// holding a node's certificate does not start (the nodes' own refusal
	// of such a dialer is covered in transport).
	plain, err := client.New(client.Config{Cluster: "test", Topology: c.topo, Nodes: c.addrs, RetryTicks: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go plain.Multicast(ctx, []wire.GroupID{0}, []byte("x"))
	deadline := time.Now().Add(10 * time.Second) // failure guard only
	for plain.TransportStats().DialFailures[transport.ReasonTLS] == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the plain client was not refused: %+v", plain.TransportStats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := plain.TransportStats(); st.Connects != 0 {
		t.Errorf("the plain client connected: %+v", st)
	}
	_, err = client.New(client.Config{Cluster: "test", Topology: c.topo, Nodes: c.addrs, TLS: tlsFor(transport.NodeIdentity(0))})
	if err == nil || !strings.Contains(err.Error(), "a client cannot use node 0's TLS certificate") {
		t.Errorf("a client with a node certificate: %v", err)
	}
}
