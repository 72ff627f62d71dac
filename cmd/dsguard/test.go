package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dsguard/dsguard/check"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
	"github.com/dsguard/dsguard/render"
	"github.com/dsguard/dsguard/testrun"
)

func newTestCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "test [DIR|FILE...]",
		Short: "Run policy tests: the verdicts expected per DaemonSet and rule, judged as check judges",
		Long: "Test finds every " + testrun.FileName + " under the directories given (recursively; a file is taken as\n" +
			"given) and runs it: the manifests it names are judged exactly as dsguard check judges them, with its\n" +
			"node set and policy, and each expectation (a DaemonSet, a rule, deny, warn, audit or pass, optionally\n" +
			"the nodes the findings name) passes or fails.\n\n" +
			"Exit status: 0 every expectation holds; 1 any differs; 2 usage or input error: a test file that is\n" +
			"not valid (an unknown rule or result, a DaemonSet the manifests do not hold) or an input that cannot\n" +
			"be read.",
		Example: "  dsguard test tests/\n" +
			"  dsguard test . -o junit > dsguard-tests.xml",
		RunE: func(cmd *cobra.Command, args []string) error {
			write, ok := testrun.Formats[output]
			if !ok {
				return fmt.Errorf("unknown output format %q (want %s)", output, strings.Join(slices.Sorted(maps.Keys(testrun.Formats)), ", "))
			}
			if len(args) == 0 {
				args = []string{"."}
			}
			runner := testrun.Runner{Registry: rules.Builtin(), Prepare: prepareTest}
			rep, err := runner.Run(args)
			if err != nil {
				return err
			}
			if err := write(cmd.OutOrStdout(), rep); err != nil {
				return err
			}
			if code := rep.ExitCode(); code != testrun.ExitOK {
				return exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or junit")
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion("text", "json", "junit"))
	return cmd
}

// prepareTest builds the input of a test as check builds it from the
// flags --config, --nodes, --previous and --namespace.
func prepareTest(t testrun.Inputs) (check.Input, error) {
	pol, err := loadPolicy(t.Policy, "policy.yaml", nil)
	if err != nil {
		return check.Input{}, err
	}
	in := check.Input{Namespace: t.Namespace, Env: policy.Env{Policy: pol, Now: cmp.Or(t.Now, time.Now())},
		Render: render.Renderer{Options: render.Options{Namespace: t.Namespace}}}
	if t.Previous != "" {
		if in.Previous, err = readPrevious(t.Previous, t.Namespace, nil); err != nil {
			return check.Input{}, err
		}
	}
	if t.Nodes != "" {
		nodes, err := readNodes(t.Nodes, nil)
		if err != nil {
			return check.Input{}, err
		}
		nodes.apply(&in)
	}
	return in, nil
}
