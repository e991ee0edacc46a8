package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const minimal = `
id = 1
data_dir = "/tmp/x"
groups = [[0, 1, 2]]
[nodes]
0 = "127.0.0.1:7000"
1 = "127.0.0.1:7001"
2 = "127.0.0.1:7002"
`

func TestSampleParsesWithDefaults(t *testing.T) {
	c, err := Parse(Sample, Agent)
	if err != nil {
		t.Fatal(err)
	}
	// The sample spells out every default.
	d, err := Parse(minimal, Agent)
	if err != nil {
		t.Fatal(err)
	}
	if c.Cluster != d.Cluster || c.Tick != d.Tick || c.ElectionTicks != d.ElectionTicks ||
		c.HeartbeatTicks != d.HeartbeatTicks || c.RetryTicks != d.RetryTicks || c.LogLevel != d.LogLevel ||
		c.WALSegmentSize != d.WALSegmentSize || c.CompactBytes != d.CompactBytes || c.Protocol != d.Protocol {
		t.Errorf("sample values differ from the defaults:\nsample   %+v\ndefaults %+v", c, d)
	}
	if d.Protocol != DefaultProtocol || d.Cluster != DefaultCluster || d.Tick != DefaultTick || d.ElectionTicks != DefaultElectionTicks || d.Admin != "" {
		t.Errorf("defaults: %+v", d)
	}
	if d.Listen != "127.0.0.1:7001" || d.ClientAddr != "127.0.0.1:7001" {
		t.Errorf("listen/client_addr default to the node's address, got %q %q", d.Listen, d.ClientAddr)
	}
	topo, err := c.Topology()
	if err != nil || topo.NumGroups() != 3 || topo.NumReplicas() != 9 {
		t.Errorf("Topology: %v %v", topo, err)
	}
	if p := c.Peers(); len(p) != 9 || p[8] != "127.0.0.1:7108" {
		t.Errorf("Peers: %v", p)
	}
	// Every key of Config is in the sample.
	for _, key := range []string{"cluster", "protocol", "id", "data_dir", "listen", "client_addr", "admin", "tick", "election_ticks",
		"heartbeat_ticks", "retry_ticks", "session_lease", "wal_segment_size", "compact_bytes", "unsafe_no_fsync", "log_level", "log_format", "groups", "[nodes]"} {
		if !strings.Contains(Sample, "\n"+key) {
			t.Errorf("sample lacks %s", key)
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	c, err := Parse(Sample, Agent)
	if err != nil {
		t.Fatal(err)
	}
	c.Tick = 5 * time.Millisecond
	c.Admin = ""
	d, err := Parse(c.Format(), Agent)
	if err != nil {
		t.Fatalf("%v\n%s", err, c.Format())
	}
	if d.Format() != c.Format() {
		t.Errorf("round trip:\n%s\n---\n%s", c.Format(), d.Format())
	}
}

func TestErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		text, field string
	}{
		{"bogus = 1\n" + minimal, "bogus"},
		{minimal + "bogus = 1\n", "nodes.bogus"},
		{"colour = 1\n" + minimal, "colour"},
		{minimal + "[extra]\nx = 1\n", "extra"},
		{minimal + "[admin_opts]\n", "admin_opts"},
		{"election_ticks = 0\n" + minimal, "election_ticks"},
		{"election_ticks = \"x\"\n" + minimal, "election_ticks"},
		{"heartbeat_ticks = 30\n" + minimal, "heartbeat_ticks"},
		{"retry_ticks = -1\n" + minimal, "retry_ticks"},
		{"session_lease = \"500ms\"\n" + minimal, "session_lease"}, // below 100 ticks of 10ms
		{"session_lease = 5\n" + minimal, "session_lease"},
		{"tick = \"0s\"\n" + minimal, "tick"},
		{"wal_segment_size = 100\n" + minimal, "wal_segment_size"},
		{"compact_bytes = -1\n" + minimal, "compact_bytes"},
		{"tick = \"1h\"\n" + minimal, "tick"},
		{"tick = \"fast\"\n" + minimal, "tick"},
		{"cluster = \"\"\n" + minimal, "cluster"},
		{"log_level = \"loud\"\n" + minimal, "log_level"},
		{"log_format = \"xml\"\n" + minimal, "log_format"},
		{"protocol = \"paxos\"\n" + minimal, "protocol"},
		{"protocol = \"\"\n" + minimal, "protocol"},
		{"protocol = 3\n" + minimal, "protocol"},
		{"protocol = \"skeen\"\n" + minimal, "protocol"},
		{"listen = \"nowhere\"\n" + minimal, "listen"},
		{"admin = \"x:y\"\n" + minimal, "admin"},
		{strings.Replace(minimal, "id = 1", "id = 7", 1), "id"},
		{strings.Replace(minimal, "id = 1", "id = -1", 1), "id"},
		{strings.Replace(minimal, "id = 1\n", "", 1), "id"},
		{strings.Replace(minimal, "data_dir = \"/tmp/x\"", "data_dir = \"\"", 1), "data_dir"},
		{strings.Replace(minimal, "[[0, 1, 2]]", "[[0, 1, 2], [2]]", 1), "groups[1]"},
		{strings.Replace(minimal, "[[0, 1, 2]]", "[[0, 1, 2], []]", 1), "groups[1]"},
		{strings.Replace(minimal, "[[0, 1, 2]]", "[]", 1), "groups"},
		{strings.Replace(minimal, "[[0, 1, 2]]", "[[0, 1, 2, 3]]", 1), "groups[0]"},
		{minimal + "3 = \"127.0.0.1:7003\"\n", "nodes.3"},
		{minimal + "x = \"127.0.0.1:7003\"\n", "nodes.x"},
		{strings.Replace(minimal, "\"127.0.0.1:7002\"", "\"127.0.0.1\"", 1), "nodes.2"},
		{strings.Replace(minimal, "\"127.0.0.1:7002\"", "\"127.0.0.1:0\"", 1), "nodes.2"},
	} {
		_, err := Parse(tc.text, Agent)
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%q: got %v, want a FieldError naming %s", tc.text, err, tc.field)
			continue
		}
		if fe.Field != tc.field {
			t.Errorf("%q: error names %q, want %q (%v)", tc.text, fe.Field, tc.field, err)
		}
	}
}

func TestLoadClusterNeedsOnlyTheLayout(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	text := strings.Replace(strings.Replace(minimal, "id = 1\n", "", 1), "data_dir = \"/tmp/x\"\n", "", 1)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCluster(path); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "id") {
		t.Errorf("Load of a client config: %v", err)
	}
}

func TestProtocols(t *testing.T) {
	for _, p := range Protocols {
		text := "protocol = \"" + p + "\"\n" + minimal
		if p == "skeen" {
			text = "protocol = \"skeen\"\nid = 1\ndata_dir = \"/tmp/x\"\ngroups = [[0], [1]]\n[nodes]\n0 = \"127.0.0.1:7000\"\n1 = \"127.0.0.1:7001\"\n"
		}
		c, err := Parse(text, Agent)
		if err != nil {
			t.Errorf("protocol %s: %v", p, err)
			continue
		}
		if c.Protocol != p {
			t.Errorf("protocol %s parsed as %q", p, c.Protocol)
		}
		d, err := Parse(c.Format(), Agent)
		if err != nil || d.Protocol != p {
			t.Errorf("protocol %s: Format round trip gives %q, %v", p, d.Protocol, err)
		}
	}
	_, err := Parse("protocol = \"skeen\"\n"+minimal, Agent)
	if err == nil || !strings.Contains(err.Error(), "protocol: skeen is not fault tolerant and needs exactly 1 member per group; groups[0] has 3") {
		t.Errorf("skeen with 3 members per group: %v", err)
	}
}

// TestUnsafeNoFsync: the key round-trips through Format, and a value that
// is not a boolean is an error naming it.
func TestUnsafeNoFsync(t *testing.T) {
	c, err := Parse(Sample, Agent)
	if err != nil || c.UnsafeNoFsync {
		t.Fatalf("sample: %v, unsafe_no_fsync %v", err, c.UnsafeNoFsync)
	}
	c.UnsafeNoFsync = true
	back, err := Parse(c.Format(), Agent)
	if err != nil || !back.UnsafeNoFsync {
		t.Fatalf("round trip: %v, unsafe_no_fsync %v\n%s", err, back.UnsafeNoFsync, c.Format())
	}
	_, err = Parse(strings.Replace(Sample, "unsafe_no_fsync = false", `unsafe_no_fsync = "yes"`, 1), Agent)
	if err == nil || !strings.Contains(err.Error(), "unsafe_no_fsync") {
		t.Errorf("a string value: %v, want an error naming unsafe_no_fsync", err)
	}
}

// TestGC: the key "gc" round-trips through Format, defaults to
// collection by a quorum, and is refused with another value or for a
// protocol other than WbCast.
func TestGC(t *testing.T) {
	c, err := Parse(Sample, Agent)
	if err != nil || c.CollectAfterAll() {
		t.Fatalf("sample: %v, gc %q", err, c.GC)
	}
	if !strings.Contains(Sample, `# gc = "quorum"`) {
		t.Error(`the sample does not show gc = "quorum", the default`)
	}
	// Left out, the key means "quorum" for WbCast and nothing for the
	// other protocols, so the sample runs them all.
	if _, err := Parse(strings.Replace(Sample, `protocol = "wbcast"`, `protocol = "ftskeen"`, 1), Agent); err != nil {
		t.Errorf("the sample with ftskeen: %v", err)
	}
	withGC := strings.Replace(Sample, `# gc = "quorum"`, `gc = "quorum"`, 1)
	c.GC = GCAll
	back, err := Parse(c.Format(), Agent)
	if err != nil || !back.CollectAfterAll() {
		t.Fatalf("round trip: %v, gc %q\n%s", err, back.GC, c.Format())
	}
	var fe *FieldError
	for _, text := range []string{
		strings.Replace(withGC, `gc = "quorum"`, `gc = "some"`, 1),
		strings.Replace(withGC, `protocol = "wbcast"`, `protocol = "ftskeen"`, 1),
	} {
		if _, err := Parse(text, Agent); !errors.As(err, &fe) || fe.Field != "gc" {
			t.Errorf("%v, want a FieldError naming gc", err)
		}
	}
}
