package sim

import (
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// TestOnIssueOnReply: over swarm seeds (crashes, partitions, client
// sessions and give-ups), OnIssue sees every workload message once, as its
// client sends it, and OnReply every completion on a reply, after the
// issue, from a replica of the message's first destination group that
// delivers it by the end of the run (a leader answers before its own
// delivery record is durable: wbcast.SendsBeforeSync), unless that replica
// installed a snapshot of its group's order instead.
func TestOnIssueOnReply(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		cfg := SwarmConfig("wbcast", seed)
		issued := map[wire.MsgID]int64{}
		client := map[wire.MsgID]int{}
		topo, err := amcast.NewTopology(cfg.Groups, cfg.Replicas)
		if err != nil {
			t.Fatal(err)
		}
		// delivered: the replicas that delivered each message; installed:
		// those that installed a snapshot (a prefix of their group's
		// order, delivered without OnDeliver).
		delivered := map[wire.MsgID]map[wire.ProcID]bool{}
		installed := map[wire.ProcID]bool{}
		repliers := map[wire.MsgID]wire.ProcID{} // who answered each message
		replies, expired := 0, 0
		var failed string
		fail := func(s string) {
			if failed == "" {
				failed = s
			}
		}
		cfg.OnIssue = func(c int, m *wire.AppMsg, at int64) {
			if _, dup := issued[m.ID]; dup {
				fail("issued twice: " + m.ID.String())
			}
			issued[m.ID], client[m.ID] = at, c
		}
		cfg.OnDeliver = func(p wire.ProcID, d amcast.Delivery) {
			if d.Install {
				installed[p] = true
				return
			}
			if delivered[d.M.ID] == nil {
				delivered[d.M.ID] = map[wire.ProcID]bool{}
			}
			delivered[d.M.ID][p] = true
		}
		var now int64
		cfg.OnReply = func(c int, d amcast.Delivery, at int64) {
			replies++
			if at < now {
				fail("replies out of time order")
			}
			now = at
			call, ok := issued[d.M.ID]
			switch {
			case d.Expired:
				expired++
			case !ok:
				fail("reply to a message never issued: " + d.M.ID.String())
			case at < call || client[d.M.ID] != c:
				fail("reply before its issue, or to another client: " + d.M.ID.String())
			case len(d.Replies) == 0:
				fail("reply without its DELIVERED: " + d.M.ID.String())
			}
			if len(d.Replies) == 0 {
				return
			}
			from := d.Replies[0].Leader
			if g, _ := topo.GroupOf(from); g != d.M.Dest[0] {
				fail("reply from a replica outside the first destination group: " + d.M.ID.String())
			}
			repliers[d.M.ID] = from
		}
		res, err := Run(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for id, from := range repliers {
			if !delivered[id][from] && !installed[from] {
				fail("reply from a replica that never delivered it: " + id.String())
			}
		}
		if failed != "" {
			t.Fatalf("seed %d: %s", seed, failed)
		}
		if len(issued) != res.Stats.Multicasts || replies != res.Stats.Replies || expired != 0 {
			t.Fatalf("seed %d: %d issued, %d replies (%d expired); the run counted %d multicasts, %d replies",
				seed, len(issued), replies, expired, res.Stats.Multicasts, res.Stats.Replies)
		}
		if replies == 0 || replies > len(issued) {
			t.Fatalf("seed %d: %d replies to %d messages", seed, replies, len(issued))
		}
	}
}
