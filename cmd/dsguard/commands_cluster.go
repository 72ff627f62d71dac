//go:build !offline

package main

import "github.com/spf13/cobra"

// clusterCommands are the commands that talk to a cluster (and the vap
// renderer beside them). A build with -tags offline leaves them out: that
// binary has check, test, rules and version only, and compiles a fifth of the
// packages, which is what lets `make demo` show an offline verdict before
// the control plane is built.
func clusterCommands() []*cobra.Command {
	return []*cobra.Command{newServeCommand(), newAuditCommand(), newNodesCommand(), newVAPCommand(), newHookCommand(),
		newNodeChangeCommand(taintChange), newNodeChangeCommand(labelChange)}
}
