// Command dsguard enforces DaemonSet coverage policy: as an admission webhook
// (serve), offline in CI (check), and over a live cluster (audit).
//
// This package only wires flags to the packages that do the work.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitError carries a specific exit code out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Exit codes shared by all commands: usage and input errors are 2, so that
// scripts can tell "policy says no" (1) from "could not judge" (2).
const exitUsage = 2

func main() {
	root := newRootCommand()
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		os.Exit(ee.code)
	default:
		fmt.Fprintln(os.Stderr, "dsguard:", err)
		os.Exit(exitUsage)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "dsguard",
		Short: "Keep DaemonSets on every node they should cover",
		Long: "dsguard enforces DaemonSet coverage policy: it rejects or warns about DaemonSets that would\n" +
			"skip nodes, wedge their rollouts or hide gaps, as an admission webhook and offline in CI.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(), newCheckCommand(), newAuditCommand(), newRulesCommand(), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the dsguard version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version)
			return err
		},
	}
}
