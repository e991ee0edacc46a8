package rskeen

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// TestStoreSnapshotRebuildsStore: random log and delivery records; the
// store rebuilt from the snapshot (through the codec) has the same
// promise, deliveries and snapshot (paxos's own test shows its snapshot
// determines its slots).
func TestStoreSnapshotRebuildsStore(t *testing.T) {
	codec := func(m wire.Message) wire.Message {
		d, err := wire.Decode(wire.Append(nil, m))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 5))
		st := NewStore()
		b := wire.Ballot{}
		var gts uint64
		for range 1 + rng.IntN(150) {
			slot := uint64(rng.IntN(30))
			m := wire.AppMsg{ID: wire.MsgID{Client: 100, Seq: 1 + uint64(rng.IntN(40))}, Dest: []wire.GroupID{0, 1}, Payload: []byte("x")}
			var r wire.Message
			switch k := rng.IntN(10); {
			case k == 0:
				b = wire.Ballot{N: b.N + 1, P: wire.ProcID(rng.IntN(3))}
				r = &wire.RecBallot{Ballot: b}
			case k < 4:
				r = &wire.RecSlotAccepted{B: b, Slot: slot, Cmd: wire.Command{Op: wire.CmdAssign, M: m}}
			case k < 7:
				r = &wire.RecSlotDecided{Slot: slot, Cmd: wire.Command{Op: wire.CmdFinal, M: m, TS: wire.Timestamp{T: slot + 1}}}
			default:
				gts += 1 + uint64(rng.IntN(3))
				r = &wire.RecDelivered{M: m, LTS: wire.Timestamp{T: gts - 1}, GTS: wire.Timestamp{T: gts, G: 1}}
			}
			if err := st.Apply(codec(r)); err != nil {
				t.Fatal(err)
			}
		}
		snap := st.Snapshot()
		st2 := NewStore()
		for _, r := range snap {
			if err := st2.Apply(codec(r)); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		if st.Log.Ballot != st2.Log.Ballot || st.maxDelivered != st2.maxDelivered || !reflect.DeepEqual(st.delivered, st2.delivered) {
			t.Fatalf("seed %d: the snapshot does not rebuild the store", seed)
		}
		if !reflect.DeepEqual(snap, st2.Snapshot()) {
			t.Fatalf("seed %d: the rebuilt store's snapshot differs", seed)
		}
	}
}
