package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/sim"
)

// gcFlags are --gc (and the older --quorum-gc) of weft sim sweep and weft
// sim gc: how WbCast garbage-collects.
type gcFlags struct {
	mode     string
	quorumGC bool // --quorum-gc: collection by a quorum was opt-in; now the default
}

const (
	gcQuorum = "quorum"
	gcAll    = "all"
)

func addGCFlags(c *cobra.Command, g *gcFlags) {
	f := c.Flags()
	f.StringVar(&g.mode, "gc", gcQuorum, "WbCast's garbage collection: quorum (collect what a quorum of each group delivered; members behind get a SNAPSHOT) or all (wait for every member: wbcast.Config.CollectAfterAll)")
	f.BoolVar(&g.quorumGC, "quorum-gc", false, "same as --gc quorum, the default")
	_ = f.MarkDeprecated("quorum-gc", "collection by a quorum is the default; --gc all keeps every-member collection")
}

// all reports whether the flags ask for collection by every member; an
// error for a mode other than quorum or all, for contradicting flags, and
// for --gc with a protocol other than WbCast (the others collect nothing
// by a floor).
func (g *gcFlags) all(c *cobra.Command, protocol string) (bool, error) {
	if g.mode != gcQuorum && g.mode != gcAll {
		return false, fmt.Errorf("--gc %q: want quorum or all", g.mode)
	}
	if g.quorumGC && g.mode == gcAll {
		return false, fmt.Errorf("--quorum-gc contradicts --gc all")
	}
	if (c.Flags().Changed("gc") || g.quorumGC) && protocol != "wbcast" {
		return false, fmt.Errorf("--gc: only wbcast collects by a quorum or by every member (--protocol %s)", protocol)
	}
	return g.mode == gcAll, nil
}

// collectAllSpec is WbCast collecting once every member delivered.
func collectAllSpec() *sim.ProtocolSpec {
	return sim.WbCastSpec(func(c *wbcast.Config) { c.CollectAfterAll = true })
}
