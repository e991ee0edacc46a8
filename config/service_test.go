package config

import (
	"strings"
	"testing"
)

// TestService: "service" defaults to none, takes kv, and refuses anything
// else with an error naming the key and the choices.
func TestService(t *testing.T) {
	c, err := Parse(minimal, Agent)
	if err != nil || c.Service != ServiceNone {
		t.Fatalf("default: %q %v", c.Service, err)
	}
	c, err = Parse("service = \"kv\"\n"+minimal, Agent)
	if err != nil || c.Service != ServiceKV {
		t.Fatalf("kv: %q %v", c.Service, err)
	}
	if back, err := Parse(c.Format(), Agent); err != nil || back.Service != ServiceKV {
		t.Fatalf("Format round trip: %v", err)
	}
	_, err = Parse("service = \"redis\"\n"+minimal, Agent)
	if err == nil || !strings.Contains(err.Error(), "service") || !strings.Contains(err.Error(), "none, kv") {
		t.Fatalf("bad service: %v", err)
	}
}
