package node

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/weft-dev/weft/config"
	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/wire"
)

// countingDetector is a tick-timeout detector that counts the Heard calls
// it gets (from every node sharing the counter).
type countingDetector struct {
	timeout uint64
	last    map[wire.ProcID]uint64
	heard   *atomic.Int64
}

func (d *countingDetector) Heard(p wire.ProcID, now uint64) {
	d.last[p] = now
	d.heard.Add(1)
}

func (d *countingDetector) Suspected(p wire.ProcID, now uint64) bool {
	return now > d.last[p]+d.timeout
}

// TestNodeRunsEveryProtocol starts 2 groups of 3 in-process nodes (1 for
// Skeen) of each protocol, multicasts to one and both groups, and checks
// every delivery. For the fault-tolerant protocols it stops group 0's
// leader mid-run and restarts it from its log (a snapshot: the log is
// compacted every few KiB), and checks that the failure detector the node
// was given is the one the protocol uses. A Skeen node refuses to restart.
func TestNodeRunsEveryProtocol(t *testing.T) {
	for _, tc := range []struct {
		protocol string
		replicas int
	}{
		{ProtocolWbCast, 3},
		{ProtocolFTSkeen, 3},
		{ProtocolFastCast, 3},
		{ProtocolSkeen, 1},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			ps, err := lookupProtocol(tc.protocol)
			if err != nil {
				t.Fatal(err)
			}
			var heard atomic.Int64
			c := newCluster(t, 2, tc.replicas, func(cfg *Config) {
				cfg.Protocol = tc.protocol
				cfg.CompactBytes = 4 << 10
				cfg.Detector = &countingDetector{timeout: DefaultElectionTicks, last: map[wire.ProcID]uint64{}, heard: &heard}
			})
			cl := c.client()
			dest := func(i int) []wire.GroupID {
				switch i % 3 {
				case 0:
					return []wire.GroupID{0}
				case 1:
					return []wire.GroupID{1}
				}
				return []wire.GroupID{0, 1}
			}
			multicast(t, cl, 120, 6, dest)
			for p, n := range c.nodes {
				if st := n.Status(); st.Protocol != tc.protocol {
					t.Errorf("node %d status says protocol %q", p, st.Protocol)
				}
			}
			if ps.faultTolerant {
				old, ok := c.leader(0)
				if !ok {
					t.Fatal("group 0 has no leader")
				}
				c.stop(old)
				multicast(t, cl, 60, 6, dest)
				c.restart(old)
				st := c.nodes[old].Status()
				if st.Stats.RestoredSnapshotBytes == 0 {
					t.Errorf("node %d restarted without a snapshot (%d records)", old, st.Stats.RestoredRecords)
				}
				if st.Leader {
					t.Errorf("node %d restarted as a leader", old)
				}
				multicast(t, cl, 60, 6, dest)
				c.waitDelivered(t, 160) // each group gets 2/3 of 240
				if heard.Load() == 0 {
					t.Errorf("the protocol never told Config.Detector it heard from a member")
				}
			} else {
				c.waitDelivered(t, 80)
			}
			for p, n := range c.nodes {
				st := n.Status()
				t.Logf("node %d: %s %s ballot %s delivered %d restored %d (snapshot %d B) compactions %d retained %d",
					p, st.Protocol, st.Role, st.Ballot, st.Stats.Delivered, st.Stats.RestoredRecords,
					st.Stats.RestoredSnapshotBytes, st.Stats.Compactions, st.Retained)
			}
			rep := check.Check(c.history(t), check.Options{Termination: check.TermAll})
			if !rep.OK() {
				t.Fatal(rep.Error())
			}
			if !ps.faultTolerant {
				c.stop(0)
				err := c.tryStart(0)
				if err == nil || !strings.Contains(err.Error(), "not fault tolerant") {
					t.Errorf("restarting a skeen node: %v, want a refusal", err)
				}
			}
		})
	}
}

// tryStart starts node p again and returns New's error (nil: started).
func (c *cluster) tryStart(p wire.ProcID) error {
	cfg := Config{Cluster: "test", ID: p, Topology: c.topo, Peers: c.addrs, Listen: "127.0.0.1:0", DataDir: c.dirs[p]}
	if c.tune != nil {
		c.tune(&cfg)
	}
	n, err := New(cfg)
	if err == nil {
		c.nodes[p] = n
	}
	return err
}

func TestConfigProtocolErrors(t *testing.T) {
	c := newCluster(t, 1, 3, nil) // only for its topology and addresses
	for _, tc := range []struct {
		protocol, want string
	}{
		{"paxos", `Config.Protocol "paxos" is not one of`},
		{ProtocolSkeen, "needs exactly 1 replica per group"},
	} {
		cfg := Config{Cluster: "test", ID: 0, Topology: c.topo, Peers: c.addrs, Listen: "127.0.0.1:0",
			DataDir: t.TempDir(), Protocol: tc.protocol}
		n, err := New(cfg)
		if err == nil {
			n.Close()
			t.Errorf("protocol %q: New succeeded", tc.protocol)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Config.Protocol") {
			t.Errorf("protocol %q: error %q, want one naming Config.Protocol with %q", tc.protocol, err, tc.want)
		}
	}
}

// TestNodeRefusesAnotherProtocolsDataDir: a data directory written by a
// WbCast node does not start an FT-Skeen node.
func TestNodeRefusesAnotherProtocolsDataDir(t *testing.T) {
	c := newCluster(t, 1, 1, nil)
	multicast(t, c.client(), 10, 2, func(int) []wire.GroupID { return []wire.GroupID{0} })
	c.stop(0)
	c.tune = func(cfg *Config) { cfg.Protocol = ProtocolFTSkeen }
	err := c.tryStart(0)
	if err == nil {
		t.Fatal("an ftskeen node started from a wbcast node's data directory")
	}
	t.Log(err)
}

// TestProtocolsMatchConfig: the config's "protocol" values are the
// protocols a node runs, with the same default.
func TestProtocolsMatchConfig(t *testing.T) {
	if !slices.Equal(Protocols, config.Protocols) || DefaultProtocol != config.DefaultProtocol {
		t.Errorf("node runs %v (default %s); config accepts %v (default %s)", Protocols, DefaultProtocol, config.Protocols, config.DefaultProtocol)
	}
	for _, p := range Protocols {
		if _, err := lookupProtocol(p); err != nil {
			t.Error(err)
		}
	}
}
