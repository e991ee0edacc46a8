package paxos

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// randomLogRecords returns a plausible random sequence of a member's log
// records: promises, accepted values (re-accepted at higher ballots) and
// decisions, some slots decided without an accepted value (catch-up).
func randomLogRecords(rng *rand.Rand, n int) []wire.Message {
	var out []wire.Message
	b := wire.Ballot{N: 0, P: wire.ProcID(rng.IntN(2))}
	cmd := func(slot uint64) wire.Command {
		c := wire.Command{Op: wire.CmdOp(rng.IntN(3))}
		if c.Op != wire.CmdNoop {
			c.M = wire.AppMsg{ID: wire.MsgID{Client: 100, Seq: slot + 1}, Dest: []wire.GroupID{0}, Payload: []byte{byte(rng.IntN(256))}}
			c.TS = wire.Timestamp{T: slot + 1}
		}
		return c
	}
	for len(out) < n {
		slot := uint64(rng.IntN(40))
		switch k := rng.IntN(10); {
		case k == 0:
			b = wire.Ballot{N: b.N + 1, P: wire.ProcID(rng.IntN(3))}
			out = append(out, &wire.RecBallot{Ballot: b})
		case k < 6:
			out = append(out, &wire.RecSlotAccepted{B: b, Slot: slot, Cmd: cmd(slot)})
		default:
			out = append(out, &wire.RecSlotDecided{Slot: slot, Cmd: cmd(slot)})
		}
	}
	return out
}

func codec(t *testing.T, m wire.Message) wire.Message {
	t.Helper()
	d, err := wire.Decode(wire.Append(nil, m))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStoreSnapshotRebuildsStore: a store rebuilt from its snapshot
// (through the codec) holds the same promise and slots, and its own
// snapshot is the same.
func TestStoreSnapshotRebuildsStore(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 3))
		st := NewStore()
		for _, r := range randomLogRecords(rng, 1+rng.IntN(150)) {
			if !st.Apply(codec(t, r)) {
				t.Fatalf("seed %d: Apply refused %s", seed, wire.Describe(r))
			}
		}
		snap := st.Snapshot()
		st2 := NewStore()
		for _, r := range snap {
			if !st2.Apply(codec(t, r)) {
				t.Fatalf("seed %d: Apply refused snapshot record %s", seed, wire.Describe(r))
			}
		}
		if st.Ballot != st2.Ballot || !reflect.DeepEqual(st.slots, st2.slots) {
			t.Fatalf("seed %d: the snapshot does not rebuild the store:\nballot %s slots %+v\nballot %s slots %+v",
				seed, st.Ballot, st.slots, st2.Ballot, st2.slots)
		}
		if !reflect.DeepEqual(snap, st2.Snapshot()) {
			t.Fatalf("seed %d: the rebuilt store's snapshot differs", seed)
		}
		if st2.Records() > st.Records() {
			t.Fatalf("seed %d: the snapshot has %d records, the log %d", seed, st2.Records(), st.Records())
		}
	}
}
