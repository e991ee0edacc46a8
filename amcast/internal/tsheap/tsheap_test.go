package tsheap

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// TestHeapSortsLikeSlices checks the heap against a sorted slice (naive twin).
func TestHeapSortsLikeSlices(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var h Heap[struct{}]
		var want []Entry[struct{}]
		for i := 0; i < r.IntN(100); i++ {
			e := Entry[struct{}]{TS: wire.Timestamp{T: r.Uint64N(20), G: wire.GroupID(r.IntN(3))}, ID: wire.MsgID{Seq: uint64(i)}}
			h.Push(e)
			want = append(want, e)
		}
		slices.SortFunc(want, func(a, b Entry[struct{}]) int {
			if less(a, b) {
				return -1
			}
			if less(b, a) {
				return 1
			}
			return 0
		})
		for i, w := range want {
			if got := h.Pop(); got != w {
				t.Fatalf("round %d pop %d: got %+v want %+v", round, i, got, w)
			}
		}
		if h.Len() != 0 {
			t.Fatal("heap not empty")
		}
	}
}
