package config

import (
	"errors"
	"testing"
	"time"
)

func TestGossipDefaultsAndOverrides(t *testing.T) {
	d, err := Parse(minimal, Agent)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Gossip.Enabled || d.Gossip.Profile != DefaultGossipProfile {
		t.Fatalf("gossip defaults: %+v", d.Gossip)
	}
	s, err := Parse(Sample, Agent)
	if err != nil {
		t.Fatal(err)
	}
	if s.Gossip.Enabled != d.Gossip.Enabled || s.Gossip.Profile != d.Gossip.Profile {
		t.Errorf("sample gossip differs from the defaults: %+v vs %+v", s.Gossip, d.Gossip)
	}
	mc := d.Membership()
	if mc == nil || mc.Interval != 100*time.Millisecond || mc.FD.Threshold != 12 || mc.ClockSkewThreshold != 500*time.Millisecond ||
		mc.ProbeTimeout != 600*time.Millisecond {
		t.Fatalf("lan profile: %+v", mc)
	}
	// An overridden interval keeps the lan profile's ratios: windows of 4
	// rounds, a probe timeout of 6.
	l, err := Parse(minimal+"[gossip]\ninterval = \"50ms\"\n", Agent)
	if err != nil {
		t.Fatal(err)
	}
	if mc := l.Membership(); mc.FD.MaxInterval != 200*time.Millisecond || mc.FD.InitialInterval != 200*time.Millisecond || mc.ProbeTimeout != 300*time.Millisecond {
		t.Fatalf("lan with a 50ms interval: %+v", mc)
	}
	c, err := Parse(minimal+"[gossip]\nprofile = \"local\"\ninterval = \"25ms\"\nphi_threshold = 6\nseeds = [2]\nclock_skew_threshold = \"2s\"\n", Agent)
	if err != nil {
		t.Fatal(err)
	}
	mc = c.Membership()
	if mc.Interval != 25*time.Millisecond || mc.FD.MaxInterval != 50*time.Millisecond || mc.FD.Threshold != 6 ||
		len(mc.Seeds) != 1 || mc.Seeds[0] != 2 || mc.ClockSkewThreshold != 2*time.Second {
		t.Fatalf("overrides: %+v", mc)
	}
	back, err := Parse(c.Format(), Agent)
	if err != nil || back.Format() != c.Format() {
		t.Fatalf("round trip: %v\n%s\n---\n%s", err, c.Format(), back.Format())
	}
	off, err := Parse(minimal+"[gossip]\nenabled = false\n", Agent)
	if err != nil || off.Membership() != nil {
		t.Fatalf("disabled gossip: %v %+v", err, off.Membership())
	}
	// A Config built in Go with a zero Gossip has gossip off, and formats
	// as such.
	zero := *d
	zero.Gossip = Gossip{}
	back, err = Parse(zero.Format(), Agent)
	if err != nil || back.Gossip.Enabled || back.Membership() != nil {
		t.Fatalf("zero Gossip: %v %+v\n%s", err, back.Gossip, zero.Format())
	}
}

func TestGossipErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ text, field string }{
		{minimal + "[gossip]\nprofile = \"wan\"\n", "gossip.profile"},
		{minimal + "[gossip]\ninterval = \"1ms\"\n", "gossip.interval"},
		{minimal + "[gossip]\ninterval = \"2m\"\n", "gossip.interval"},
		{minimal + "[gossip]\nphi_threshold = -1\n", "gossip.phi_threshold"},
		{minimal + "[gossip]\nphi_threshold = 1000\n", "gossip.phi_threshold"},
		{minimal + "[gossip]\nseeds = [9]\n", "gossip.seeds"},
		{minimal + "[gossip]\nclock_skew_threshold = \"500us\"\n", "gossip.clock_skew_threshold"},
		{minimal + "[gossip]\nclock_skew_threshold = \"2h\"\n", "gossip.clock_skew_threshold"},
		{minimal + "[gossip]\nclock_skew_threshold = \"-1s\"\n", "gossip.clock_skew_threshold"},
		{minimal + "[gossip]\nclock_skew_threshold = 5\n", "gossip.clock_skew_threshold"},
		{minimal + "[gossip]\nfanout = 3\n", "gossip.fanout"},
		{minimal + "[gossip]\nenabled = \"yes\"\n", "gossip.enabled"},
	} {
		_, err := Parse(tc.text, Agent)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%q: got %v, want a FieldError naming %s", tc.text, err, tc.field)
		}
	}
}
