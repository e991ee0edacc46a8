package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestNodeMessagesRejectBadInput(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    error
		wantMsg string
	}{
		{"gossip over cap", raw(Version, KindGossip, MaxGossip+1), ErrTooLarge, "data"},
		{"gossip truncated", raw(Version, KindGossip, 3, []byte{1, 2}), ErrMalformed, "data"},
		{"view request with body", raw(Version, KindViewRequest, 0), ErrMalformed, "trailing"},
		{"view ids not increasing", raw(Version, KindView, 2, 5, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0), ErrMalformed, "ids not strictly increasing"},
		{"view unknown flags", raw(Version, KindView, 1, 5, 0, 0, 0, 4, 0), ErrMalformed, "flag bits"},
		{"view addr over cap", raw(Version, KindView, 1, 5, 0, 0, 0, 0, MaxAddr+1), ErrTooLarge, "addr"},
		{"view too many entries", raw(Version, KindView, MaxViewEntries+1), ErrTooLarge, "entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.in)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("Decode = %v, want %v containing %q", err, tc.want, tc.wantMsg)
			}
		})
	}
}
