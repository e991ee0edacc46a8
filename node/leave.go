package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/wire"
)

// Planned departures (issue #13 item 4; docs/operations.md, "Leaving").
//
// Leave is the seed's "decommission deliberately", in three steps:
//
//  1. LEAVING in gossip: peers, clients and operators see the node is on
//     its way out (weft members, the dashboard); its own detector from
//     now on suspects nobody, so it never starts a ballot again.
//  2. If it leads its group, it hands its leadership over
//     (amcast.HandOverer; WbCast's HANDOVER, amcast/wbcast/handover.go):
//     the next live member starts a ballot at once, without waiting for a
//     failure detector and an election timeout, and the old leader holds,
//     then forwards, the multicasts that reach it meanwhile, so none
//     fails and no client waits for its retry timeout. Leave waits until
//     the group has a new leader (or handOverTimeout).
//  3. LEFT in gossip (membership.Node.Leave): peers mark it departed at
//     once; after the profile's LeaveAnnounce it stops gossiping and
//     Config.OnLeft runs (the agent exits).
//
// HandOver is step 2 alone: the agent's SIGTERM path without gossip, and
// a leadership transfer for maintenance.

// Departure is the outcome of a hand-over (Leave, HandOver).
type Departure struct {
	// Led: this node led its group when the departure began.
	Led bool `json:"led"`
	// HandedOver: it led and the group has since established a ballot
	// led by Leader. Took is how long that took (the write
	// unavailability a client of the group could see, at most).
	HandedOver bool          `json:"handed_over"`
	Leader     wire.ProcID   `json:"leader,omitempty"`
	Took       time.Duration `json:"took_ns,omitempty"`
	// Err says why a leader did not hand over (no live member to take
	// over, the protocol cannot, or the group did not elect in time); the
	// departure went on regardless: its peers' failure detectors elect.
	Err string `json:"error,omitempty"`
}

func (d Departure) String() string {
	switch {
	case d.HandedOver:
		return fmt.Sprintf("handed leadership to p%d in %v", d.Leader, d.Took.Round(10*time.Microsecond))
	case d.Led:
		return "led its group and did not hand over: " + d.Err
	}
	return "did not lead its group: nothing to hand over"
}

// ErrDeparting is returned by Leave and HandOver while a departure is
// under way.
var ErrDeparting = errors.New("node: a departure is already under way")

// departure is a hand-over in progress, owned by the loop.
type departure struct {
	res      Departure
	start    time.Time
	deadline time.Time
	leave    bool // then publish LEFT
	finished bool
	done     chan Departure
}

// handOverTimeout bounds the wait for a new leader: the core gives up
// after four election timeouts (wbcast's handOverTicks), one more is
// slack.
func (n *Node) handOverTimeout() time.Duration {
	return 5 * time.Duration(n.cfg.ElectionTicks) * n.cfg.Tick
}

// Leave announces this node's departure: LEAVING, a leadership hand-over
// if it leads, then LEFT (see above). It returns once LEFT is published,
// with the hand-over's outcome, or when ctx ends (the departure goes on).
// The protocol keeps running (a former leader forwards clients'
// multicasts to the new one) until the node is closed. Group composition
// does not change: a replica that left counts as a failed one until it is
// restarted (with a new gossip generation).
func (n *Node) Leave(ctx context.Context) (Departure, error) {
	return n.depart(ctx, true)
}

// HandOver hands this node's leadership of its group to the next live
// member and waits until the group has a new leader (or ctx ends). A node
// that does not lead returns at once (Departure.Led false). The node
// stays a member and may lead again later; only Leave retires it.
func (n *Node) HandOver(ctx context.Context) (Departure, error) {
	return n.depart(ctx, false)
}

func (n *Node) depart(ctx context.Context, leave bool) (Departure, error) {
	var done chan Departure
	err := n.control(func() error {
		if n.dep != nil {
			return ErrDeparting
		}
		if leave {
			if n.gossip == nil {
				return errNoGossip
			}
			if n.gossip.left || n.gossip.leaving {
				return membership.ErrLeaving
			}
			if err := n.gossip.g.SetAppState(membership.KeyStatus, membership.StatusLeaving); err != nil {
				return err
			}
			n.gossip.leaving = true
			if n.det != nil {
				n.det.leaving = true
			}
			if h, ok := n.m.(amcast.HandOverer); ok {
				h.Retire()
			}
			if err := n.gossip.flush(); err != nil {
				return err
			}
		}
		d := &departure{start: time.Now(), leave: leave, done: make(chan Departure, 1)}
		d.deadline = d.start.Add(n.handOverTimeout())
		done = d.done
		n.dep = d
		if h, ok := n.m.(amcast.HandOverer); n.m.leader() {
			d.res.Led = true
			if !ok {
				d.res.Err = fmt.Sprintf("protocol %s cannot hand its leadership over", n.proto.name)
			} else if to, err := h.HandOver(); err != nil {
				d.res.Err = err.Error()
			} else {
				n.log.Info("handing leadership over", "to", uint32(to))
				return nil // checkDeparture finishes it
			}
		}
		return n.finishDeparture()
	})
	if err != nil {
		return Departure{}, err
	}
	select {
	case res := <-done:
		return res, nil
	case <-ctx.Done():
		return Departure{}, ctx.Err()
	}
}

// checkDeparture, on the loop after every pass, finishes a hand-over once
// the group has a new leader, or at its deadline.
func (n *Node) checkDeparture() error {
	d := n.dep
	if d == nil || d.finished {
		return nil
	}
	h := n.m.(amcast.HandOverer) // it handed over: depart checked
	switch now := time.Now(); {
	case h.HandedOver():
		b, _ := n.m.ballots()
		d.res.HandedOver, d.res.Leader, d.res.Took = true, b.Leader(), now.Sub(d.start)
		n.log.Info("handed leadership over", "to", uint32(b.Leader()), "ballot", b.String(), "took", d.res.Took)
	case now.After(d.deadline):
		d.res.Err = fmt.Sprintf("no new leader within %v", n.handOverTimeout())
		n.log.Warn("hand-over failed: leaving anyway (the group's failure detectors elect)", "err", d.res.Err)
	default:
		return nil
	}
	return n.finishDeparture()
}

// finishDeparture publishes LEFT (Leave) and reports the outcome. A
// hand-over alone ends the departure: another may follow.
func (n *Node) finishDeparture() error {
	d := n.dep
	d.finished = true
	var err error
	if d.leave {
		if err = n.gossip.g.Leave(n.gossip.now().UnixNano()); err == nil {
			err = n.gossip.flush()
		}
	} else {
		n.dep = nil
	}
	d.done <- d.res
	return err
}
