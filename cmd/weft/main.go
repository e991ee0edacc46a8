// Command weft is the weft toolkit and daemon: simulator runs, latency
// tables and (later) the real node.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "weft:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "weft",
		Short:         "weft: atomic multicast and gossip membership for partitioned, replicated services",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(simCmd(), agentCmd(), configCmd(), multicastCmd(), kvCmd(), membersCmd(), leaveCmd(), assassinateCmd(), statusCmd(), versionCmd(), demoCmd(), benchCmd(), benchClientCmd(), certsCmd())
	return root
}
