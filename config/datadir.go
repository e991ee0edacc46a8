package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// The data directory and member identity keys (docs/operations.md, "Data
// directory and member identity"; node/datadir.go).

// Defaults and limits of the data directory keys.
const (
	DefaultInitialState   = "new"
	DefaultBootstrapProbe = time.Second
	MinBootstrapProbe     = 10 * time.Millisecond
	MaxBootstrapProbe     = time.Minute
)

func (c *Config) setDataDirDefaults(md toml.MetaData) {
	if !md.IsDefined("initial_state") {
		c.InitialState = DefaultInitialState
	}
	if !md.IsDefined("bootstrap_probe") {
		c.BootstrapProbe = DefaultBootstrapProbe
	}
}

// validateDataDir checks the data directory and member identity keys.
func (c *Config) validateDataDir() error {
	if c.InitialState != "new" && c.InitialState != "existing" {
		return &FieldError{Field: "initial_state", Msg: fmt.Sprintf("must be \"new\" or \"existing\", got %q", c.InitialState)}
	}
	if p := c.BootstrapProbe; p != 0 && (p < MinBootstrapProbe || p > MaxBootstrapProbe) {
		return &FieldError{Field: "bootstrap_probe", Msg: fmt.Sprintf("must be 0 (no probe) or between %v and %v, got %v", MinBootstrapProbe, MaxBootstrapProbe, p)}
	}
	return nil
}

func (c *Config) formatDataDir(sb *strings.Builder) {
	if c.InitialState != "" {
		fmt.Fprintf(sb, "initial_state = %q\n", c.InitialState)
	}
	fmt.Fprintf(sb, "bootstrap_probe = %q\n", c.BootstrapProbe.String())
}
