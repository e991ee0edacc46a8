package config

import (
	"errors"
	"strings"
	"testing"
)

// The data directory and member identity keys: defaults, valid values, and
// each bad value refused with an error naming its key.
func TestDataDirKeys(t *testing.T) {
	c, err := Parse(minimal, Agent)
	if err != nil {
		t.Fatal(err)
	}
	if c.InitialState != DefaultInitialState || c.BootstrapProbe != DefaultBootstrapProbe {
		t.Errorf("defaults: initial_state %q, bootstrap_probe %v", c.InitialState, c.BootstrapProbe)
	}
	c, err = Parse("initial_state = \"existing\"\nbootstrap_probe = \"0s\"\n"+minimal, Agent)
	if err != nil {
		t.Fatal(err)
	}
	if c.InitialState != "existing" || c.BootstrapProbe != 0 {
		t.Errorf("set: initial_state %q, bootstrap_probe %v", c.InitialState, c.BootstrapProbe)
	}
	if d, err := Parse(c.Format(), Agent); err != nil || d.InitialState != "existing" || d.BootstrapProbe != 0 {
		t.Errorf("Format round trip: %+v, %v", d, err)
	}
	for _, tc := range []struct{ text, field, msg string }{
		{"initial_state = \"old\"\n", "initial_state", `must be "new" or "existing", got "old"`},
		{"initial_state = \"\"\n", "initial_state", `got ""`},
		{"bootstrap_probe = \"-1s\"\n", "bootstrap_probe", "must be 0 (no probe) or between 10ms and 1m0s, got -1s"},
		{"bootstrap_probe = \"2m\"\n", "bootstrap_probe", "got 2m0s"},
		{"bootstrap_probe = 3\n", "bootstrap_probe", "got 3ns"},
	} {
		_, err := Parse(tc.text+minimal, Agent)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) {
			t.Errorf("%q: got %v, want an error naming %s with %q", tc.text, err, tc.field, tc.msg)
		}
	}
}
