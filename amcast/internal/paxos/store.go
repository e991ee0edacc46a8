package paxos

import (
	"slices"

	"github.com/weft-dev/weft/wire"
)

// Store is the durable image of a member's log: its promise and every
// accepted and learned value (the result of applying its REC_BALLOT,
// REC_SLOT_ACCEPTED and REC_SLOT_DECIDED records in order).
type Store struct {
	Ballot  wire.Ballot
	slots   map[uint64]*storedSlot
	records int
}

type storedSlot struct {
	accB    wire.Ballot
	cmd     wire.Command
	has     bool
	decided bool
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{slots: map[uint64]*storedSlot{}} }

// Records returns the number of records applied.
func (st *Store) Records() int { return st.records }

// Slots returns the number of slots holding a value.
func (st *Store) Slots() int { return len(st.slots) }

// Apply applies one of the log's records; it returns false for other
// records (the protocol's own).
func (st *Store) Apply(rec wire.Message) bool {
	switch r := rec.(type) {
	case *wire.RecBallot:
		if st.Ballot.Less(r.Ballot) {
			st.Ballot = r.Ballot
		}
	case *wire.RecSlotAccepted:
		s := st.slot(r.Slot)
		if !s.decided {
			s.accB, s.cmd, s.has = r.B, r.Cmd, true
		}
	case *wire.RecSlotDecided:
		s := st.slot(r.Slot)
		s.cmd, s.has, s.decided = r.Cmd, true, true
	default:
		return false
	}
	st.records++
	return true
}

func (st *Store) slot(n uint64) *storedSlot {
	s := st.slots[n]
	if s == nil {
		s = &storedSlot{}
		st.slots[n] = s
	}
	return s
}

func (st *Store) sortedSlots() []uint64 {
	ns := make([]uint64, 0, len(st.slots))
	for n := range st.slots {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// Snapshot returns records from which Apply, on an empty store, rebuilds
// this store exactly (promise, and every slot's accepted ballot, value and
// decision): a REC_BALLOT with the promise (if any), then for each slot in
// order a REC_SLOT_ACCEPTED with its accepted ballot and value (omitted for
// a chosen slot whose accepted ballot is the zero ballot, which an empty
// slot already has) and, if the slot is chosen, a REC_SLOT_DECIDED. A node
// writes these records as its compaction snapshot. Superseded promises
// and values (overwritten by later records) are what compaction drops;
// the chosen prefix itself is kept, since a restored member re-executes
// it.
func (st *Store) Snapshot() []wire.Message {
	out := make([]wire.Message, 0, 1+2*len(st.slots))
	if st.Ballot != (wire.Ballot{}) {
		out = append(out, &wire.RecBallot{Ballot: st.Ballot})
	}
	for _, n := range st.sortedSlots() {
		s := st.slots[n]
		if !s.decided || s.accB != (wire.Ballot{}) {
			out = append(out, &wire.RecSlotAccepted{B: s.accB, Slot: n, Cmd: s.cmd})
		}
		if s.decided {
			out = append(out, &wire.RecSlotDecided{Slot: n, Cmd: s.cmd})
		}
	}
	return out
}
