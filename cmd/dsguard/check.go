package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsguard/dsguard/check"
	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/manifest"
	"github.com/dsguard/dsguard/policy/rules"
)

func newCheckCommand() *cobra.Command {
	var (
		files      []string
		configFile string
		output     string
		namespace  string
		nodesFile  string
	)
	cmd := &cobra.Command{
		Use:   "check -f PATH...",
		Short: "Check DaemonSet manifests offline, with the webhook's verdicts",
		Long: "Check reads manifests (files, directories recursively, or - for stdin; multi-document YAML,\n" +
			"JSON and List objects), evaluates every apps/v1 DaemonSet against the policy and prints the\n" +
			"verdicts. Other objects are skipped and counted.\n\n" +
			"Exit status: 0 no DaemonSet denied, 1 some DaemonSet denied, 2 usage, parse or policy error.",
		Example: "  dsguard check -f manifests/\n" +
			"  helm template ./chart | dsguard check -f - -o json\n" +
			"  dsguard check -f ds.yaml --config policy.yaml\n" +
			"  kubectl get nodes -o yaml > nodes.yaml && dsguard check -f ds.yaml --nodes nodes.yaml",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("no input: give one or more -f PATH (or -f - for stdin)")
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("unknown output format %q (want text or json)", output)
			}
			pol := rules.Builtin().Default()
			if configFile != "" {
				data, err := os.ReadFile(configFile)
				if err != nil {
					return err
				}
				if pol, err = rules.Builtin().Parse(data); err != nil {
					return fmt.Errorf("%s: %w", configFile, err)
				}
			}
			var set manifest.Set
			if err := set.Load(files, cmd.InOrStdin()); err != nil {
				return err
			}
			env := policy.Env{Policy: pol, Now: time.Now()}
			if nodesFile != "" {
				var nodes manifest.Set
				if err := nodes.Load([]string{nodesFile}, cmd.InOrStdin()); err != nil {
					return err
				}
				if len(nodes.Errors) > 0 {
					return nodes.Errors[0]
				}
				if len(nodes.Nodes) == 0 {
					return fmt.Errorf("%s holds no Node objects (want the output of kubectl get nodes -o yaml)", nodesFile)
				}
				env.Nodes = coverage.NewNodeSnapshot(nodes.Nodes)
			}
			rep := check.Run(&set, env, namespace)
			var err error
			if output == "json" {
				err = check.WriteJSON(cmd.OutOrStdout(), rep)
			} else {
				err = check.WriteText(cmd.OutOrStdout(), rep)
			}
			if err != nil {
				return err
			}
			if code := rep.ExitCode(); code != check.ExitOK {
				return exitError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&files, "filename", "f", nil, "manifest file, directory (recursive) or - for stdin; repeatable")
	f.StringVar(&configFile, "config", "", "policy file (PolicyConfig YAML); built-in defaults when not set")
	f.StringVarP(&output, "output", "o", "text", "output format: text or json")
	f.StringVarP(&namespace, "namespace", "n", "default", "namespace assumed for DaemonSets that name none")
	f.StringVar(&nodesFile, "nodes", "", "node set to predict coverage against (kubectl get nodes -o yaml); node rules are skipped without it")
	return cmd
}
