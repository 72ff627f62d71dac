// Command dsguard enforces DaemonSet coverage policy: as an admission webhook
// (serve), offline in CI (check), and over a live cluster (audit).
//
// This package only wires flags to the packages that do the work.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

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
		Use: "dsguard",
		// --version, like version.
		Version: versionString(),
		Short:   "Keep DaemonSets on every node they should cover",
		Long: "dsguard enforces DaemonSet coverage policy: it rejects or warns about DaemonSets that would\n" +
			"skip nodes, wedge their rollouts or hide gaps, as an admission webhook and offline in CI.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("dsguard {{.Version}}\n")
	if asKubectlPlugin(os.Args[0]) {
		// kubectl runs kubectl-dsguard for "kubectl dsguard": help and
		// completion then speak of the command the user typed.
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl dsguard"}
	}
	root.AddCommand(newCheckCommand(), newTestCommand(), newRulesCommand(), newVersionCommand())
	root.AddCommand(clusterCommands()...)
	return root
}

// asKubectlPlugin reports whether the binary runs as a kubectl plugin:
// kubectl finds plugins as kubectl-<name> on PATH.
func asKubectlPlugin(arg0 string) bool {
	return strings.HasPrefix(filepath.Base(arg0), "kubectl-")
}
