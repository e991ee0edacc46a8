package wbcast

import "github.com/weft-dev/weft/wire"

// Disk loss (issue #10 item 5; the "amnesia" hazard of consensus).
//
// A member whose durable state is gone has forgotten what it promised
// (NEW_LEADER_ACK), what it accepted and acked (ACCEPT_ACK) and what it
// delivered. Restarted as if new (Restore from an empty store, or New) it
// would be the leader of ballot 0 with clock 0, or a follower that never
// promised anything: it could promise a ballot it already promised away,
// join a recovery quorum with an empty state so that a message committed
// with its ack is lost (INV-4), or propose timestamps below ones it
// already gave.
//
// RestoreAmnesiac brings it back inert: it promises, acks, proposes and
// leads nothing, and rejoins in the manner of Viewstamped Replication's
// recovery (docs/disk-loss.md):
//
//  1. It listens to heartbeats until it heard a quorum of the other
//     members, and takes the highest ballot they report as its floor. Any
//     ballot whose quorum counted a promise it forgot had f other
//     promisers, and f+1 of the 2f others intersect them, so the floor is
//     at least every ballot it may have promised.
//  2. It sends REJOIN(floor) to its group. The leader establishes a
//     ballot above the floor (onRejoin) without it: it answers no
//     NEW_LEADER, so the ballot's quorum intersects every quorum its lost
//     acks were part of, and the ballot's merged state holds every message
//     committed with its help (INV-4).
//  3. It adopts the NEW_STATE of a ballot above the floor and is a
//     follower again, with no deliveries: the leader's catch-up sends it a
//     SNAPSHOT of the delivered prefix (transfer.go), after which it may
//     vote and lead like any member. Until then it is behind and cannot
//     lead.
//
// Its group keeps working while at most f members are down or rejoining.
type amnesia struct {
	floor   wire.Ballot // highest ballot reported by the members heard
	heard   uint64      // member-index bitmask of the heartbeats heard
	askedAt uint64      // tick of the last REJOIN sent (+1; 0 = never)
}

// RestoreAmnesiac returns a process that lost its durable state: inert
// until it rejoined (see above). st is what it persisted since it lost
// its disk (NewStore() at first): once st holds an adopted ballot's state
// the process rejoined and is restored from st like any other.
func RestoreAmnesiac(cfg Config, st *Store) (*Process, error) {
	if st != nil && st.rejoined {
		return Restore(cfg, st)
	}
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	p := newProcess(cfg)
	b0 := wire.Ballot{N: 0, P: cfg.Topology.InitialLeader(p.g)}
	p.ballot, p.cballot = b0, b0
	p.status = Recovering
	p.amn = &amnesia{}
	return p, nil
}

// Amnesiac reports whether the process lost its durable state and has not
// rejoined yet (it is then inert).
func (p *Process) Amnesiac() bool { return p.amn != nil }

// stepAmnesiac is Step while amnesiac: heartbeats teach it the floor, a
// NEW_STATE of a ballot above the floor lets it rejoin, the rest is
// ignored (it remembers nothing it could act on).
func (p *Process) stepAmnesiac(env wire.Envelope) error {
	switch m := env.Msg.(type) {
	case *wire.Heartbeat:
		if g, ok := p.topo.GroupOf(env.From); !ok || g != p.g || env.From == p.id {
			return p.rejects.Reject("wrong_sender", "HEARTBEAT from p%d outside group %d", env.From, p.g)
		}
		if err := p.checkPromise("HEARTBEAT", m.B, m.CBallot); err != nil {
			return err
		}
		if p.amnFloorKnown() {
			return nil // the floor bounds promises made before the loss: fixed once known
		}
		p.amn.heard |= 1 << p.topo.MemberIndex(env.From)
		if p.amn.floor.Less(m.B) {
			p.amn.floor = m.B
		}
	case *wire.NewState:
		if !p.amnFloorKnown() || !p.amn.floor.Less(m.B) {
			return nil // not yet known to be above every forgotten promise
		}
		return p.onNewState(env.From, m)
	}
	return nil
}

// amnFloorKnown reports whether a quorum of the other members was heard.
func (p *Process) amnFloorKnown() bool {
	return popcount(p.amn.heard) >= p.topo.Quorum(p.g)
}

// tickAmnesiac asks the group to rejoin, once the floor is known and then
// every ElectionTicks until a ballot above it is adopted.
func (p *Process) tickAmnesiac() {
	a := p.amn
	if !p.amnFloorKnown() || (a.askedAt != 0 && p.ticks < a.askedAt-1+uint64(p.cfg.ElectionTicks)) {
		return
	}
	a.askedAt = p.ticks + 1
	rj := &wire.Rejoin{Floor: a.floor}
	for _, q := range p.topo.Members(p.g) {
		if q != p.id {
			p.send(q, rj)
		}
	}
}

// rejoined ends amnesia once a ballot above the floor was adopted.
func (p *Process) rejoined() {
	if p.amn != nil {
		p.amn = nil
		p.cov.Rejoins++
	}
}

// onRejoin is the leader's side of step 2: establish a ballot above the
// member's floor, or, once one is, send the member its state. Every member
// remembers that the sender rejoins: it does not count towards the
// group's floor and is passed over as a successor until it heartbeats
// again.
func (p *Process) onRejoin(from wire.ProcID, r *wire.Rejoin) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g || from == p.id {
		return p.rejects.Reject("wrong_sender", "REJOIN from p%d outside group %d", from, p.g)
	}
	if err := p.checkPromise("REJOIN", r.Floor, r.Floor); err != nil {
		return err
	}
	i := p.topo.MemberIndex(from)
	pr := &p.peers[i]
	pr.rejoining = true
	pr.maxDelivered, pr.cballot, pr.caughtUp = wire.Timestamp{}, wire.Ballot{}, false
	if p.status != Leader {
		return nil
	}
	if !r.Floor.Less(p.cballot) {
		et := uint64(p.cfg.ElectionTicks)
		if !p.started || p.ticks >= p.lastStart+et {
			p.startBallotAbove(r.Floor)
		}
		return nil
	}
	if p.ticks >= pr.stateBusy && (!pr.stateSent || p.ticks >= pr.stateAt+uint64(p.cfg.ElectionTicks)/2) {
		pr.stateSent, pr.stateAt = true, p.ticks
		p.sendState(i, p.statePages(p.snapshot()))
	}
	return nil
}
