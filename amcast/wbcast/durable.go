package wbcast

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/weft-dev/weft/wire"
)

// CompareRestored checks that restored, a process rebuilt by Restore from
// every record live persisted so far, agrees with live on the durable part
// of the protocol state (issue #10 item 4: "restore equals live"). It
// returns the first difference, or nil.
//
// A restarted process is legitimately less informed than the live one was:
// what it never persisted is gone, and Restore must rebuild nothing the
// live process does not hold. "Equal" is therefore:
//
//   - ballot, cballot and maxDelivered: identical.
//   - client sessions (sessions.go): the same collected ids (mark and set
//     above it) for every session either holds ids of; a restored floor at
//     most the live one (live also learns floors from messages it has not
//     persisted); no session restored that live does not hold.
//   - status: restored is FOLLOWER if ballot = cballot, else RECOVERING;
//     live is RECOVERING whenever ballot != cballot. Whether live leads or
//     is a candidate that adopted its own state is volatile (a restarted
//     process must win a ballot to lead again).
//   - clock: restored.clock <= live.clock. The clock advances on proposals,
//     which are not durable (a PROPOSED message is forgotten: H8.8); the
//     restored clock covers every durable timestamp (INV-6 holds for it).
//   - messages restored holds: live holds each, with the same destinations
//     and payload, the same delivered flag, lts and gts, and the same
//     phase, except that a live leader's COMMITTED may be restored as
//     ACCEPTED (the leader learns the commit from acks and persists only
//     the delivery) with the same lts.
//   - messages live holds ACCEPTED, or delivered: restored holds each (they
//     were persisted: RecAccepted, RecNewState, RecDelivered).
//   - ACCEPT vectors: every ACCEPT restored holds, live holds too: for the
//     own group exactly (same ballot and lts; an own-group ACCEPT restored
//     but dropped live, as H9.3 drops them on adopt, would let a restarted
//     member ack under a vector it has left), for another group under the
//     same or a higher ballot (live may have taken a newer leader's ACCEPT
//     since; its lts is compared when the ballots are equal). ACCEPTs of a
//     set not yet complete are volatile (nothing is acked from them).
//
// Volatile, not compared: ack tallies and the candidate's acks (rebuilt by
// a new round), delivery queues (rebuilt by becomeLeader), START and
// PROPOSED messages (re-multicast, H12), peers' reports, linf floors and
// failure-detector state (refreshed by heartbeats), timers, deferred
// messages, coverage and reject counters, and the delivery log's trimming
// (the log is derived from the delivered records).
func CompareRestored(live, restored *Process) error {
	if live.id != restored.id {
		return fmt.Errorf("wbcast: comparing p%d with p%d", live.id, restored.id)
	}
	if err := live.checkRefs(); err != nil {
		return err
	}
	pf := func(format string, args ...any) error {
		return fmt.Errorf("wbcast: p%d restored != live: "+format, append([]any{live.id}, args...)...)
	}
	if live.ballot != restored.ballot || live.cballot != restored.cballot {
		return pf("ballot/cballot %s/%s, live %s/%s", restored.ballot, restored.cballot, live.ballot, live.cballot)
	}
	want := Follower
	if live.ballot != live.cballot {
		want = Recovering
	}
	if restored.status != want || (want == Recovering && live.status != Recovering) {
		return pf("status %s, live %s, with ballot %s cballot %s", restored.status, live.status, live.ballot, live.cballot)
	}
	if restored.clock > live.clock {
		return pf("clock %d above live's %d", restored.clock, live.clock)
	}
	if live.maxDelivered != restored.maxDelivered {
		return pf("maxDelivered %s, live %s", restored.maxDelivered, live.maxDelivered)
	}
	if d := restored.sess.durableDiff(&live.sess); d != "" {
		return pf("client sessions: %s", d)
	}
	// Map order: a run reports its first difference; which one is found
	// first among several does not matter.
	for id, r := range restored.recs {
		l := live.recs[id]
		if l == nil || !l.known {
			return pf("%s is held (phase %s, delivered %v) but not live", id, r.phase, r.issued)
		}
		if err := compareRecord(l, r, live.g); err != "" {
			return pf("%s: %s", id, err)
		}
	}
	for id, l := range live.recs {
		if (l.issued || (l.known && l.phase == wire.PhaseAccepted)) && restored.recs[id] == nil {
			return pf("%s is live (phase %s, delivered %v) but was not restored", id, l.phase, l.issued)
		}
	}
	return nil
}

// compareRecord compares one message's restored record r with the live
// one l (see CompareRestored); "" means they agree.
func compareRecord(l, r *record, g wire.GroupID) string {
	if !slices.Equal(l.m.Dest, r.m.Dest) || !bytes.Equal(l.m.Payload, r.m.Payload) {
		return fmt.Sprintf("message dest=%v (%d bytes), live dest=%v (%d bytes)", r.m.Dest, len(r.m.Payload), l.m.Dest, len(l.m.Payload))
	}
	if l.issued != r.issued {
		return fmt.Sprintf("delivered %v, live %v", r.issued, l.issued)
	}
	if l.lts != r.lts {
		return fmt.Sprintf("lts %s, live %s", r.lts, l.lts)
	}
	leaderCommit := !l.issued && l.phase == wire.PhaseCommitted && r.phase == wire.PhaseAccepted
	if l.phase != r.phase && !leaderCommit {
		return fmt.Sprintf("phase %s, live %s", r.phase, l.phase)
	}
	if l.gts != r.gts && !leaderCommit {
		return fmt.Sprintf("gts %s, live %s", r.gts, l.gts)
	}
	own := r.m.DestIndex(g)
	for j, re := range r.acc {
		if !re.ok {
			continue
		}
		le := l.acc[j]
		switch {
		case !le.ok:
			return fmt.Sprintf("ACCEPT of group %d (%s, %s) restored, none live", r.m.Dest[j], re.b, re.lts)
		case j == own && le != re:
			return fmt.Sprintf("own-group ACCEPT (%s, %s), live (%s, %s)", re.b, re.lts, le.b, le.lts)
		case le.b.Less(re.b) || (le.b == re.b && le.lts != re.lts):
			return fmt.Sprintf("ACCEPT of group %d (%s, %s), live (%s, %s)", r.m.Dest[j], re.b, re.lts, le.b, le.lts)
		}
	}
	return ""
}
