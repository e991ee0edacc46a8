package config

import (
	"errors"
	"testing"
	"time"
)

func TestLimitsDefaultsAndOverrides(t *testing.T) {
	d, err := Parse(minimal, Agent)
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{InboxBytes: 64 << 20, PeerQueueBytes: 8 << 20, ClientInboxBytes: 8 << 20, ClientInboxMessages: 1024,
		ClientShare: 64, ClientQueueBytes: 256 << 10, MaxConns: 1024, MaxConnsPerHost: 256,
		HandshakeTimeout: 5 * time.Second, IdleTimeout: time.Minute,
		ReadsPending: 4096, ReadsPerClient: 256, ReadBytes: 64 << 20, HeldBytes: 64 << 20}
	if d.Limits != want {
		t.Errorf("defaults %+v, want %+v", d.Limits, want)
	}
	s, err := Parse(Sample, Agent)
	if err != nil {
		t.Fatal(err)
	}
	if s.Limits != d.Limits {
		t.Errorf("the sample's limits %+v differ from the defaults %+v", s.Limits, d.Limits)
	}
	c, err := Parse(minimal+"[limits]\ninbox_bytes = 1048576\nclient_share = 8\nmax_conns_per_host = 16\nidle_timeout = \"30s\"\nreads_per_client = 9\nheld_bytes = 1048576\n", Agent)
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Limits; l.InboxBytes != 1<<20 || l.ClientShare != 8 || l.MaxConnsPerHost != 16 || l.IdleTimeout != 30*time.Second || l.MaxConns != 1024 ||
		l.ReadsPerClient != 9 || l.HeldBytes != 1<<20 || l.ReadsPending != 4096 {
		t.Errorf("overrides: %+v", l)
	}
	back, err := Parse(c.Format(), Agent)
	if err != nil || back.Limits != c.Limits || back.Format() != c.Format() {
		t.Fatalf("round trip: %v\n%s\n---\n%s", err, c.Format(), back.Format())
	}
	// A Config built in Go with zero Limits formats without the table and
	// reads back with the defaults.
	zero := *d
	zero.Limits = Limits{}
	if back, err := Parse(zero.Format(), Agent); err != nil || back.Limits != want {
		t.Errorf("zero Limits: %v %+v", err, back.Limits)
	}
}

func TestLimitsErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ text, field string }{
		{"inbox_bytes = 1000", "limits.inbox_bytes"},
		{"peer_queue_bytes = -1", "limits.peer_queue_bytes"},
		{"client_inbox_bytes = 0", "limits.client_inbox_bytes"},
		{"client_queue_bytes = 1", "limits.client_queue_bytes"},
		{"client_inbox_messages = 0", "limits.client_inbox_messages"},
		{"client_share = 2000", "limits.client_share"},
		{"client_share = 0", "limits.client_share"},
		{"max_conns = 0", "limits.max_conns"},
		{"max_conns_per_host = 2000", "limits.max_conns_per_host"},
		{"handshake_timeout = \"1ms\"", "limits.handshake_timeout"},
		{"idle_timeout = \"5s\"", "limits.idle_timeout"},
		{"idle_timeout = \"2h\"", "limits.idle_timeout"},
		{"reads_pending = 0", "limits.reads_pending"},
		{"reads_per_client = 5000", "limits.reads_per_client"},
		{"read_bytes = 10", "limits.read_bytes"},
		{"held_bytes = 0", "limits.held_bytes"},
		{"inbox = 5", "limits.inbox"},
		{"max_conns = \"many\"", "limits.max_conns"},
	} {
		_, err := Parse(minimal+"[limits]\n"+tc.text+"\n", Agent)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%q: got %v, want a FieldError naming %s", tc.text, err, tc.field)
		}
	}
}
