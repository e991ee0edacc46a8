package wbcast

import (
	"fmt"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// Read index: linearizable reads of one group's state without a multicast
// (issue #12 item 1; docs/reads.md), in the spirit of Raft's ReadIndex.
//
// The driver (node/reads.go) asks the leader for a read index
// (ReadIndex(ctx)). The leader records its last delivery, maxDelivered,
// as the read's index, and confirms that it still leads its ballot B with
// one round of READ_INDEX(B, seq) to its group, answered by READ_INDEX_ACK
// carrying each member's promise. A round sent after the request arrived
// that a quorum (the leader included) acknowledged with promise B releases
// the read with its index (Ready.Reads); the driver runs the query once its
// application applied through the index. A process that is not the leader,
// that sees a member promise a higher ballot, whose ballot changes, or
// whose round is not acknowledged within ElectionTicks, fails the read
// (amcast.ErrNotLeader): the client retries at the new leader.
//
// One round covers every read that arrived before it left the process:
// a round stays open to new reads until Ready hands its READ_INDEXes out,
// so a burst of reads costs one round trip, not one each, and a read never
// waits for the next tick.
//
// Safety: every message whose delivery was acknowledged to a client before
// the read's request arrived at the leader has a gts at or below the read's
// index. An acknowledgement (wire.Delivered, or the node's result reply)
// is sent only by a leader when it delivers the message, or later (a
// retry answered from the record or the service's results); a follower
// delivers, and the node answers from its state, only after its leader's
// DELIVER, which that leader sent after delivering. So the message m was
// delivered by the leader of some ballot b of this group before the read
// started. Take the read's leader p, of ballot B:
//
//   - b = B: p delivered m itself before the request arrived; deliveries
//     are in increasing gts order (INV-8) and the index is p's last
//     delivery when the read joins a round, after the request arrived.
//   - b < B: m committed under b on acks of a quorum of this group, so
//     every leader of a later ballot holds m at phase ACCEPTED or above,
//     with the same gts (INV-4, INV-5), unless a member collected it,
//     which it does only after it delivered it at or below the floor its
//     NEW_LEADER_ACK reported (ackedFloor). p serves no read of B before
//     it delivered every message it held at phase ACCEPTED or COMMITTED
//     when it first served one (the barrier; settled), and reached
//     ackedFloor: then m is delivered at p, and the index, taken after,
//     is at or above its gts.
//   - b > B: the leader of b became leader on NEW_STATE_ACKs of a quorum
//     promised to b, before it delivered m, hence before the read started.
//     The round p sent after the request is acknowledged by a quorum
//     promised to B; a ballot never decreases (the promise is durable), so
//     a member of both quorums would have answered with a promise of b or
//     more, and the round does not complete: the read fails. This is what
//     a deposed leader, cut off while a new ballot was established, runs
//     into (TestReadIndexDeposedLeader).
//
// Reads are therefore linearizable: a read returns a state containing
// every write completed before it started, and only delivered writes,
// which every later read's leader delivers before its index (the same
// argument with "delivered" for "acknowledged").
//
// Multi-group messages: a message to groups g and h is acknowledged once
// the leader of its first destination group delivered it; h may deliver
// it later. A read index at h is ordered only against h's deliveries, so
// a read of h that starts after the client got g's answer may not see the
// message yet. A client that needs the effect at h visible to reads of h
// waits for every group's answer (client.Config.AllGroups) before relying
// on it. Single-group messages, like weft-kv's single-key writes, are
// unaffected.
//
// Reads are bounded: at most MaxPendingReads wait here, past which a read
// fails with amcast.ErrReadOverloaded. Nothing of a read is durable.

type pendingRead struct {
	ctx   uint64
	at    uint64 // tick it joined a round, or was held back
	index wire.Timestamp
}

type readRound struct {
	seq   uint64
	reads []pendingRead
}

type readIndex struct {
	ballot wire.Ballot // the ballot the reads below run under
	seq    uint64      // last round sent
	open   bool        // the last round's READ_INDEXes have not left yet
	rounds []readRound // in flight, by seq
	acked  []uint64    // per member index: highest round acked with promise ballot
	held   []pendingRead
	n      int // reads held and in rounds

	// The barrier (safety, case b < B): the messages to deliver before
	// this ballot's first read, computed when it is first asked for.
	barrierFor wire.Ballot
	barrierSet bool
	barrier    []wire.MsgID
	settled    bool

	// noQuorum is test only (export_test.go): release reads without the
	// round, the broken variant the tests show unsafe.
	noQuorum bool
}

// ReadIndex implements amcast.ReadIndexer: ask for a read index under ctx;
// its outcome comes in a later Ready's Reads.
func (p *Process) ReadIndex(ctx uint64) {
	ri := &p.ri
	if p.amn != nil || p.status != Leader {
		p.out.Read(amcast.ReadState{Ctx: ctx, Err: fmt.Errorf("%w: p%d is %s in ballot %s", amcast.ErrNotLeader, p.id, p.status, p.ballot)})
		return
	}
	p.checkReads()
	if ri.n >= p.cfg.MaxPendingReads {
		p.out.Read(amcast.ReadState{Ctx: ctx, Err: fmt.Errorf("%w: %d reads pending at p%d (MaxPendingReads)", amcast.ErrReadOverloaded, ri.n, p.id)})
		return
	}
	ri.n++
	if !p.readsSettled() {
		ri.held = append(ri.held, pendingRead{ctx: ctx, at: p.ticks})
		return
	}
	p.joinRound(pendingRead{ctx: ctx, at: p.ticks})
}

// joinRound records the read's index, the last delivery now, and puts it
// in the open round, or in a new one sent at once.
func (p *Process) joinRound(r pendingRead) {
	ri := &p.ri
	r.index = p.maxDelivered
	if p.topo.Quorum(p.g) == 1 || ri.noQuorum {
		p.releaseRead(r) // a group of one is its own quorum
		return
	}
	if ri.open && len(ri.rounds) > 0 {
		last := &ri.rounds[len(ri.rounds)-1]
		last.reads = append(last.reads, r)
		return
	}
	ri.seq++
	ri.open = true
	ri.rounds = append(ri.rounds, readRound{seq: ri.seq, reads: []pendingRead{r}})
	m := &wire.ReadIndex{B: p.ballot, Seq: ri.seq}
	for _, q := range p.topo.Members(p.g) {
		if q != p.id {
			p.send(q, m)
		}
	}
}

func (p *Process) releaseRead(r pendingRead) {
	p.ri.n--
	p.out.Read(amcast.ReadState{Ctx: r.ctx, Index: r.index})
}

// Ready implements amcast.Machine. The open round's READ_INDEXes leave
// with this batch: a read asked for from now on needs a new round.
func (p *Process) Ready() amcast.Ready {
	p.ri.open = false
	return p.out.Ready()
}

// onReadIndex answers a leader's round with this member's promise.
func (p *Process) onReadIndex(from wire.ProcID, m *wire.ReadIndex) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g || from == p.id || m.B.Leader() != from {
		return p.rejects.Reject("wrong_sender", "READ_INDEX %s from p%d", m.B, from)
	}
	p.send(from, &wire.ReadIndexAck{B: p.ballot, Seq: m.Seq})
	return nil
}

// onReadIndexAck counts a member's answer: under this leader's ballot it
// acknowledges every round up to its seq (links are FIFO and rounds are
// sent in order); a higher promise means this leader was deposed.
func (p *Process) onReadIndexAck(from wire.ProcID, m *wire.ReadIndexAck) error {
	if g, ok := p.topo.GroupOf(from); !ok || g != p.g || from == p.id {
		return p.rejects.Reject("wrong_sender", "READ_INDEX_ACK from p%d outside group %d", from, p.g)
	}
	if err := p.checkBallot("READ_INDEX_ACK", m.B); err != nil {
		return err
	}
	ri := &p.ri
	if p.status != Leader || ri.ballot != p.ballot || len(ri.rounds) == 0 {
		return nil // stale: its reads were failed already
	}
	if m.B == p.ballot && m.Seq > ri.seq {
		return p.rejects.Reject("bad_seq", "READ_INDEX_ACK for round %d, only %d sent", m.Seq, ri.seq)
	}
	switch {
	case p.ballot.Less(m.B):
		p.failReads(fmt.Errorf("%w: p%d promised ballot %s above this leader's %s", amcast.ErrNotLeader, from, m.B, p.ballot))
	case m.B == p.ballot:
		i := p.topo.MemberIndex(from)
		ri.acked[i] = max(ri.acked[i], m.Seq)
		p.releaseRounds()
	}
	return nil
}

// releaseRounds releases the rounds, in order, that a quorum acknowledged.
func (p *Process) releaseRounds() {
	ri := &p.ri
	for len(ri.rounds) > 0 {
		rd := &ri.rounds[0]
		n := 1 // the leader itself
		for i, s := range ri.acked {
			if i != p.gi && s >= rd.seq {
				n++
			}
		}
		if n < p.topo.Quorum(p.g) {
			return
		}
		for _, r := range rd.reads {
			p.releaseRead(r)
		}
		ri.rounds = ri.rounds[1:]
	}
}

// checkReads runs after every input (Step, Tick): reads of a ballot this
// process no longer leads fail; rounds not acknowledged within
// ElectionTicks fail (the leader is cut off, and its detector will say so
// later); held reads join a round once the leader settled.
func (p *Process) checkReads() {
	ri := &p.ri
	if p.status != Leader || ri.ballot != p.ballot || ri.acked == nil {
		if ri.n > 0 {
			p.failReads(fmt.Errorf("%w: p%d left ballot %s (now %s in %s)", amcast.ErrNotLeader, p.id, ri.ballot, p.status, p.ballot))
		}
		if ri.ballot != p.ballot || ri.acked == nil {
			ri.ballot = p.ballot
			ri.acked = make([]uint64, len(p.peers))
		}
		if p.status != Leader {
			return
		}
	}
	et := uint64(p.cfg.ElectionTicks)
	for len(ri.rounds) > 0 && p.ticks >= ri.rounds[0].reads[0].at+et {
		rd := ri.rounds[0]
		ri.rounds = ri.rounds[1:]
		p.failList(rd.reads, fmt.Errorf("%w: p%d's round %d under %s not acknowledged by a quorum in %d ticks", amcast.ErrNotLeader, p.id, rd.seq, p.ballot, et))
	}
	if len(ri.held) == 0 {
		return
	}
	if p.readsSettled() {
		held := ri.held
		ri.held = nil
		for _, r := range held {
			p.joinRound(r)
		}
		return
	}
	k := 0
	for k < len(ri.held) && p.ticks >= ri.held[k].at+et {
		k++
	}
	if k > 0 {
		expired := ri.held[:k]
		ri.held = ri.held[k:]
		p.failList(expired, fmt.Errorf("%w: p%d has not yet delivered its predecessors' messages after %d ticks", amcast.ErrNotLeader, p.id, et))
	}
}

func (p *Process) failReads(err error) {
	ri := &p.ri
	for _, rd := range ri.rounds {
		p.failList(rd.reads, err)
	}
	p.failList(ri.held, err)
	ri.rounds, ri.held, ri.open = nil, nil, false
}

func (p *Process) failList(rs []pendingRead, err error) {
	for _, r := range rs {
		p.ri.n--
		p.out.Read(amcast.ReadState{Ctx: r.ctx, Err: err})
	}
}

// readsSettled reports whether this leader delivered everything a leader
// of an earlier ballot may have delivered (the safety argument's b < B):
// every message it held at phase ACCEPTED or COMMITTED, undelivered, when
// its ballot's first read came (a superset of what it adopted), and the
// floor its NEW_LEADER_ACKs reported.
func (p *Process) readsSettled() bool {
	ri := &p.ri
	if ri.barrierSet && ri.barrierFor == p.cballot {
		if ri.settled {
			return true
		}
	} else {
		ri.barrierFor, ri.barrierSet, ri.settled = p.cballot, true, false
		ri.barrier = ri.barrier[:0]
		for _, id := range p.sortedIDs() {
			if r := p.recs[id]; r.known && !r.issued && (r.phase == wire.PhaseAccepted || r.phase == wire.PhaseCommitted) {
				ri.barrier = append(ri.barrier, id)
			}
		}
	}
	k := 0
	for _, id := range ri.barrier {
		if r := p.recs[id]; r != nil && !r.issued {
			ri.barrier[k] = id
			k++
		}
	}
	clear(ri.barrier[k:])
	ri.barrier = ri.barrier[:k]
	ri.settled = k == 0 && !p.behind() && !p.behindAcked()
	return ri.settled
}
