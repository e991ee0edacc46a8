package paxos

// Phase 2, the normal case (see the package comment): accepting a
// proposal, counting votes, deciding and executing in slot order.

import (
	"math/bits"

	"github.com/weft-dev/weft/wire"
)

func (l *Log) onAccept(from wire.ProcID, a *wire.PaxosAccept) error {
	if _, err := l.member(from); err != nil {
		return err
	}
	if err := l.checkSender("PAXOS_ACCEPT", from, a.B); err != nil {
		return err
	}
	if err := l.checkSlot(a.Slot, 1); err != nil {
		return err
	}
	if err := l.checkCommand("PAXOS_ACCEPT", a.Slot, &a.Cmd, false); err != nil {
		return err
	}
	if a.B.Less(l.ballot) && !l.cfg.Mutation.Has(MutAcceptLowerBallot) {
		return nil // a deposed leader's
	}
	if l.ballot.Less(a.B) {
		l.join(a.B)
	}
	if l.status != Follower {
		return nil // our own ballot (cannot happen: a.B's leader is from)
	}
	sl := l.at(a.Slot)
	if sl.has && sl.accB == a.B {
		// A re-sent proposal: our vote may have been lost.
		l.sendOthers(&wire.PaxosAccepted{B: a.B, Slot: a.Slot})
		return nil
	}
	if sl.decided {
		if !CommandEqual(&sl.cmd, &a.Cmd) {
			// Another value at a chosen slot comes from a deposed ballot
			// below the one that chose (phase 1 makes every higher ballot
			// propose the chosen value): a stale proposal, not a
			// contradiction. No vote: ours would let that ballot's leader
			// choose its value too (our 2b names only the ballot).
			return nil
		}
		// A new leader re-proposing a chosen slot: its value is the chosen
		// one; vote for it so the leader can learn it too.
		sl.accB = a.B
		l.sendOthers(&wire.PaxosAccepted{B: a.B, Slot: a.Slot})
		return nil
	}
	sl.accB, sl.cmd, sl.has = a.B, a.Cmd, true
	l.out.Persist(&wire.RecSlotAccepted{B: a.B, Slot: a.Slot, Cmd: a.Cmd})
	l.vote(sl, a.B, l.gi)
	l.sendOthers(&wire.PaxosAccepted{B: a.B, Slot: a.Slot})
	l.checkChosen(a.Slot)
	return nil
}

func (l *Log) vote(sl *slot, b wire.Ballot, idx int) {
	switch {
	case sl.voteB == b:
	case sl.voteB.Less(b):
		sl.voteB, sl.votes = b, 0
	default:
		return
	}
	sl.votes |= 1 << idx
}

func (l *Log) onAccepted(from wire.ProcID, a *wire.PaxosAccepted) error {
	i, err := l.member(from)
	if err != nil {
		return err
	}
	if err := l.checkBallot("PAXOS_ACCEPTED", a.B); err != nil {
		return err
	}
	if err := l.checkSlot(a.Slot, 1); err != nil {
		return err
	}
	sl := l.at(a.Slot)
	if sl.decided {
		return nil
	}
	l.vote(sl, a.B, i)
	l.checkChosen(a.Slot)
	return nil
}

// popcount is the number of set bits of x (acks as a bit set per member).
func popcount(x uint64) int { return bits.OnesCount64(x) }

// checkChosen decides slot s if a quorum voted for the value held here.
func (l *Log) checkChosen(s uint64) {
	sl := &l.slots[s]
	if sl.decided || !sl.has || sl.accB != sl.voteB || popcount(sl.votes) < l.quorum {
		return
	}
	l.decide(s, sl.cmd)
	l.executeReady()
}

func (l *Log) decide(s uint64, cmd wire.Command) {
	sl := l.at(s)
	sl.decided, sl.cmd, sl.has = true, cmd, true
	sl.votes = 0
	l.out.Persist(&wire.RecSlotDecided{Slot: s, Cmd: cmd})
}

// executeReady executes the chosen prefix. It is not re-entrant: a command
// the host proposes while executing (chosen at once in a group of one) is
// executed by the same loop, after the current one.
func (l *Log) executeReady() {
	if l.executing {
		return
	}
	l.executing = true
	for l.executed < uint64(len(l.slots)) && l.slots[l.executed].decided {
		s := l.executed
		l.executed++
		cmd := l.slots[s].cmd
		l.host.Execute(s, &cmd)
	}
	l.executing = false
}

func (l *Log) onDecided(from wire.ProcID, d *wire.PaxosDecided) error {
	if _, err := l.member(from); err != nil {
		return err
	}
	if err := l.checkSlot(d.First, uint64(len(d.Cmds))); err != nil {
		return err
	}
	for k := range d.Cmds {
		if err := l.checkCommand("PAXOS_DECIDED", d.First+uint64(k), &d.Cmds[k], true); err != nil {
			return err
		}
	}
	if l.status != Follower {
		// A leader learns its slots from its own ballot's votes (and from
		// phase 1): its commit notices then vouch only for its proposals.
		return nil
	}
	for k := range d.Cmds {
		s := d.First + uint64(k)
		if sl := l.at(s); !sl.decided {
			l.decide(s, d.Cmds[k])
		}
	}
	l.executeReady()
	return nil
}
