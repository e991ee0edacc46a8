package membership

import (
	"fmt"

	"github.com/weft-dev/weft/wire"
)

// assassination is an Assassinate in progress: the target's generation
// and heartbeat when it started, and when the check ends.
type assassination struct {
	target   wire.ProcID
	gen, hb  uint64
	deadline int64
}

// Assassinate starts the forced removal of target, Cassandra's last
// resort for a record that will not die. It never blocks: it records the
// target's generation and heartbeat, and Tick watches them for
// AssassinateCheck. Any progress abandons it (EventAssassinateRefused: the
// node is visibly alive); otherwise the node publishes a REMOVED record
// for target under generation+1, which replaces every copy of the old
// life (EventAssassinated). It returns an error for an unknown, departed
// or self target, or one already being assassinated.
func (n *Node) Assassinate(now int64, target wire.ProcID) error {
	if n.stopped {
		return ErrStopped
	}
	if target == n.id {
		return ErrAssassinateSelf
	}
	i := n.find(target)
	if i < 0 {
		return fmt.Errorf("%w: %d", ErrUnknownNode, target)
	}
	e := &n.eps[i]
	if e.departed() {
		return fmt.Errorf("%w: %d", ErrAlreadyDeparted, target)
	}
	for _, a := range n.assassins {
		if a.target == target {
			return fmt.Errorf("%w: %d", ErrAssassinatePending, target)
		}
	}
	n.assassins = append(n.assassins, assassination{target: target, gen: e.gen, hb: e.hb, deadline: now + int64(n.cfg.AssassinateCheck)})
	return nil
}

func (n *Node) runAssassinations(now int64) {
	keep := n.assassins[:0]
	for _, a := range n.assassins {
		i := n.find(a.target)
		var e *endpoint
		if i >= 0 {
			e = &n.eps[i]
		}
		switch {
		case e == nil:
			n.emit(Event{Kind: EventAssassinateRefused, Node: a.target, Value: "record evicted during the check"})
		case e.gen != a.gen || e.hb != a.hb:
			n.emit(Event{Kind: EventAssassinateRefused, Node: a.target,
				Value: fmt.Sprintf("alive: generation %d heartbeat %d became generation %d heartbeat %d during the check", a.gen, a.hb, e.gen, e.hb)})
		case e.departed():
			n.emit(Event{Kind: EventAssassinateRefused, Node: a.target, Value: "departed during the check"})
		case now < a.deadline:
			keep = append(keep, a)
		default:
			rec := EndpointState{Node: a.target, Generation: e.gen + 1, Heartbeat: 1,
				States: []AppState{{Key: KeyStatus, Version: 2, Value: departedValue(StatusRemoved, now+int64(n.cfg.LeftExpiry))}}}
			n.applyKnown(now, i, &rec)
			n.emit(Event{Kind: EventAssassinated, Node: a.target})
		}
	}
	clear(n.assassins[len(keep):])
	n.assassins = keep
}
