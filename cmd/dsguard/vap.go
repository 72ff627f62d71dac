//go:build !offline

package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/vap"
)

type vapOptions struct {
	configFile    string
	policyKey     string
	namespace     string
	excluded      []string
	failOpen      []string
	failurePolicy string
	granterRole   string
	today         string
	confine       string
}

func newVAPCommand() *cobra.Command {
	var o vapOptions
	cmd := &cobra.Command{
		Use:   "vap",
		Short: "Render the node-independent rules as ValidatingAdmissionPolicies",
		Long: "Render, from the same policy document the webhook uses, a ValidatingAdmissionPolicy and binding\n" +
			"for each action of each rule that needs no live node set, so that the API server enforces them\n" +
			"in-process. What CEL cannot express is listed, per rule, in comments at the top of the output\n" +
			"and in each policy's dsguard.io/not-expressed annotation. See docs/modes.md.",
		Example: "  dsguard vap > policies.yaml\n" +
			"  dsguard vap --config policy.yaml | kubectl apply --server-side --field-manager=dsguard -f -\n" +
			"  kubectl get configmap -n dsguard-system dsguard-policy -o yaml | dsguard vap --config -",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.confine != "" {
				return writeConfinement(cmd.OutOrStdout(), o.confine)
			}
			cfg, err := loadPolicyDocument(o.configFile, o.policyKey, cmd.InOrStdin())
			if err != nil {
				return err
			}
			opts := vap.Options{Namespace: o.namespace, ExcludedNamespaces: o.excluded, FailOpenNamespaces: o.failOpen,
				GranterRole: o.granterRole, FailurePolicy: admissionregistrationv1.FailurePolicyType(o.failurePolicy)}
			switch opts.FailurePolicy {
			case admissionregistrationv1.Fail, admissionregistrationv1.Ignore:
			default:
				return fmt.Errorf("--failure-policy %q: want Fail or Ignore", o.failurePolicy)
			}
			if o.today != "" {
				if opts.Today, err = time.Parse(time.DateOnly, o.today); err != nil {
					return fmt.Errorf("--today %q: want YYYY-MM-DD", o.today)
				}
			}
			res, err := vap.Render(cfg, opts)
			if err != nil {
				return err
			}
			return vap.WriteYAML(cmd.OutOrStdout(), res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.configFile, "config", "", policyFileUsage)
	f.StringVar(&o.policyKey, "policy-key", "policy.yaml", "key of the policy document when --config is a ConfigMap")
	f.StringVarP(&o.namespace, "namespace", "n", "dsguard-system", "dsguard's own namespace, never judged")
	f.StringSliceVar(&o.excluded, "exclude-namespace", nil, "namespace whose DaemonSets are never judged (repeatable)")
	f.StringSliceVar(&o.failOpen, "fail-open-namespaces", policy.InfrastructureNamespaces,
		"infrastructure namespaces where the exemption gate (exemptions.allowedGroups) only warns, as dsguard serve's --fail-open-namespaces")
	f.StringVar(&o.granterRole, "exemption-granter-clusterrole", "", "the ClusterRole that lets its subjects grant exemptions (exemptions.grantedByRBAC), named in the gate's refusals")
	f.StringVar(&o.failurePolicy, "failure-policy", "Fail", "what the API server does when a deny policy's CEL cannot be evaluated: Fail or Ignore")
	f.StringVar(&o.confine, "static-confinement", "", "instead of rendering, print the static policy that limits what this ServiceAccount user (system:serviceaccount:<namespace>:<name>) may create among ValidatingAdmissionPolicies, for the API server's static manifests directory (docs/security.md)")
	f.StringVar(&o.today, "today", "", "day exemption expiries are judged against, YYYY-MM-DD (default: today, UTC)")
	return cmd
}

// writeConfinement prints vap.Confinement for user as a YAML stream.
func writeConfinement(w io.Writer, user string) error {
	policy, binding, err := vap.Confinement(user)
	if err != nil {
		return err
	}
	// The comment sits inside the first document: the API server's
	// manifest loader takes text before a first "---" as a document of
	// its own, and refuses one without a kind.
	fmt.Fprintf(w, "---\n# Limits what %s may create among ValidatingAdmissionPolicies and bindings.\n"+
		"# Load it as a static manifest: put this file in the directory named by staticManifestsDir of the\n"+
		"# ValidatingAdmissionPolicy plugin in the API server's --admission-control-config-file. Applied with\n"+
		"# kubectl it would refuse nothing: the API server evaluates no policy created through its API on\n"+
		"# ValidatingAdmissionPolicies or bindings.\n", user)
	for i, obj := range []any{policy, binding} {
		out, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprint(w, "---\n")
		}
		fmt.Fprintf(w, "%s", out)
	}
	return nil
}
