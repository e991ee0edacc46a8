package demo

import (
	"context"
	"testing"
	"time"
)

func TestOptionsAreChecked(t *testing.T) {
	for _, opt := range []Options{
		{Exe: "x", Duration: time.Second},
		{Exe: "x", Groups: 9, Replicas: 9},
		{Exe: "x", Clients: -1},
		{Exe: "x", KillGroup: 3},
	} {
		if _, err := Run(context.Background(), opt); err == nil {
			t.Errorf("Run(%+v) accepted bad options", opt)
		}
	}
}

func TestFormatting(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
	for d, want := range map[time.Duration]string{0: "-", 500 * time.Microsecond: "500µs", 7250 * time.Microsecond: "7.2ms",
		42 * time.Millisecond: "42ms", 1500 * time.Millisecond: "1.50s"} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
	lat := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if pct(lat, 0.5) != 6 || pct(lat, 0.99) != 10 || pct(nil, 0.5) != 0 {
		t.Errorf("pct: %v %v", pct(lat, 0.5), pct(lat, 0.99))
	}
}
