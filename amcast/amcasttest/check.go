package amcasttest

import (
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// CheckSafety checks what has been delivered so far:
//   - every replica delivers in strictly increasing global timestamp order;
//   - every delivery of one message, at replicas and clients, carries the
//     same global timestamp, which is a real timestamp (not ⊥);
//   - no process delivers (or completes) a message twice;
//   - a replica only delivers messages addressed to its group.
//
// It returns the first violation found, scanning processes in id order.
func (e *Env) CheckSafety() error {
	gts := map[wire.MsgID]wire.Timestamp{}
	first := map[wire.MsgID]wire.ProcID{}
	for p, ds := range e.delivered {
		id := wire.ProcID(p)
		replica := e.Topo.IsReplica(id)
		seen := map[wire.MsgID]bool{}
		var last wire.Timestamp
		for i, d := range ds {
			name := e.Name(id)
			if seen[d.M.ID] {
				return fmt.Errorf("%s delivered %s twice", name, d.M.ID)
			}
			seen[d.M.ID] = true
			if d.GTS.IsZero() {
				if !replica {
					// A client's completion of a message delivered long ago
					// and collected: the leader remembers the delivery, not
					// its timestamp (wire.Delivered).
					continue
				}
				return fmt.Errorf("%s delivered %s with gts ⊥", name, d.M.ID)
			}
			if replica {
				if i > 0 && !last.Less(d.GTS) {
					return fmt.Errorf("%s delivered %s with gts %s after gts %s", name, d.M.ID, d.GTS, last)
				}
				last = d.GTS
				if g, _ := e.Topo.GroupOf(id); d.M.DestIndex(g) < 0 {
					return fmt.Errorf("%s (group %d) delivered %s, which is addressed to %v", name, g, d.M.ID, d.M.Dest)
				}
			}
			if g, ok := gts[d.M.ID]; ok && g != d.GTS {
				return fmt.Errorf("%s delivered %s with gts %s but %s delivered it with gts %s", name, d.M.ID, d.GTS, e.Name(first[d.M.ID]), g)
			}
			if _, ok := gts[d.M.ID]; !ok {
				gts[d.M.ID] = d.GTS
				first[d.M.ID] = id
			}
		}
	}
	return nil
}
