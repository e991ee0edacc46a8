package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/membership"
	"github.com/weft-dev/weft/transport"
	"github.com/weft-dev/weft/wire"
)

// versionInfo is what weft version prints.
type versionInfo struct {
	Module    string `json:"module"`
	Version   string `json:"version"`          // the main module's version, "(devel)" for a local build
	Commit    string `json:"commit,omitempty"` // vcs.revision, when the build recorded it
	CommitAt  string `json:"commit_time,omitempty"`
	Modified  bool   `json:"modified,omitempty"` // the working tree had changes
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	// Protocol versions: a node refuses frames and handshakes of another.
	Wire      int `json:"wire_version"`
	Transport int `json:"transport_version"`
	Gossip    int `json:"gossip_wire_version"`
}

func buildVersion() versionInfo {
	v := versionInfo{Module: "github.com/weft-dev/weft", Version: "(unknown)", GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, Wire: wire.Version, Transport: transport.TransportVersion,
		Gossip: membership.WireVersion}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitAt = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func versionCmd() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "version [-o table|json]",
		Short: "Print weft's version, commit, Go version and protocol versions",
		Long: `Print the build's module version and commit (from the binary's build
information: a binary built from a git checkout without -buildvcs=false
records its commit), the Go version, and the wire, transport and gossip
protocol versions (nodes and clients of different protocol versions refuse
each other's frames and handshakes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildVersion()
			if format == outJSON {
				return printJSON(cmd.OutOrStdout(), v)
			}
			writeVersion(cmd.OutOrStdout(), v)
			return nil
		},
	}
	addOutput(c, &format, "")
	return c
}

func writeVersion(w io.Writer, v versionInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	commit := v.Commit
	if commit == "" {
		commit = "(not recorded)"
	}
	if v.Modified {
		commit += " (modified)"
	}
	if v.CommitAt != "" {
		commit += " " + v.CommitAt
	}
	fmt.Fprintf(tw, "weft\t%s %s\n", v.Module, v.Version)
	fmt.Fprintf(tw, "commit\t%s\n", commit)
	fmt.Fprintf(tw, "go\t%s %s\n", v.GoVersion, v.Platform)
	fmt.Fprintf(tw, "protocols\twire %d, transport %d, gossip %d\n", v.Wire, v.Transport, v.Gossip)
	tw.Flush()
}
