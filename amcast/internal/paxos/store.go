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
