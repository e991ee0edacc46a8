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
// RestoreAmnesiac brings it back inert: it promises, acks, proposes,
// leads and sends nothing, like a member that is down, so every quorum is
// formed by members that remember. Its group keeps working while at most
// f members are down or amnesiac. It rejoins only as a new member with its
// state transferred (docs/disk-loss.md says what that needs and why a
// quick rejoin from the group's current state is not enough without
// application snapshots). An operator must therefore never restart a
// member on a wiped data directory as if nothing happened: the node
// refuses to (it knows its identity), and the member is replaced.
type amnesia struct{}

// RestoreAmnesiac returns a process that lost its durable state: inert
// until it is replaced (see above). The driver must keep restoring it with
// RestoreAmnesiac after a crash: its store stays empty.
func RestoreAmnesiac(cfg Config) (*Process, error) {
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

// Amnesiac reports whether the process lost its durable state (it is then
// inert).
func (p *Process) Amnesiac() bool { return p.amn != nil }
