package amcast_test

import (
	"testing"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// TestFloorOf: the floor a quorum reaches is the q-th highest timestamp,
// whatever the order the members are listed in.
func TestFloorOf(t *testing.T) {
	ts := func(v ...uint64) []wire.Timestamp {
		out := make([]wire.Timestamp, len(v))
		for i, x := range v {
			out[i] = wire.Timestamp{T: x}
		}
		return out
	}
	for _, tc := range []struct {
		in   []wire.Timestamp
		q    int
		want uint64
	}{
		{ts(5, 9, 7), 2, 7},
		{ts(9, 5, 7), 3, 5},
		{ts(0, 3, 3), 2, 3},
		{ts(4), 1, 4},
		{ts(1, 8, 2, 6, 4), 3, 4},
	} {
		if got := amcast.FloorOf(tc.in, tc.q); got.T != tc.want {
			t.Errorf("FloorOf(q=%d) = %d, want %d", tc.q, got.T, tc.want)
		}
	}
}
