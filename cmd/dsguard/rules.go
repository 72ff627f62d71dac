package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dsguard/dsguard/policy/rules"
)

func newRulesCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Print the rule catalogue",
		Long:  "Print every rule with its default action, why it matters, the fix and its parameters.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "text":
				return rules.Builtin().WriteCatalogueText(cmd.OutOrStdout())
			case "markdown":
				return rules.Builtin().WriteCatalogueMarkdown(cmd.OutOrStdout())
			}
			return fmt.Errorf("unknown output format %q (want text or markdown)", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or markdown")
	return cmd
}
