package main

import (
	"fmt"

	"github.com/spf13/cobra"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/dsguard/dsguard/clusterview"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
	"github.com/dsguard/dsguard/vap"
	"github.com/dsguard/dsguard/vapsync"
)

// The admission modes (docs/modes.md).
const (
	// modeWebhook: the webhook enforces every rule.
	modeWebhook = "webhook"
	// modeVAPAndWebhook: generated ValidatingAdmissionPolicies enforce the
	// node-independent rules inside the API server; the webhook enforces the
	// node-aware rules only.
	modeVAPAndWebhook = "vap+webhook"
	// modeVAP: only the generated policies; no webhook is registered.
	modeVAP = "vap"
)

// modeOptions are serve's flags for the admission mode.
type modeOptions struct {
	mode               string
	excludedNamespaces []string
}

func (m *modeOptions) bindFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&m.mode, "mode", modeWebhook, "webhook: the webhook enforces every rule; vap+webhook: generated ValidatingAdmissionPolicies "+
		"enforce the node-independent rules and the webhook the node-aware ones; vap: only the generated policies (see docs/modes.md)")
	f.StringSliceVar(&m.excludedNamespaces, "excluded-namespaces", nil,
		"vap modes: namespaces the generated policies never judge, besides --namespace (the chart's webhook.excludedNamespaces)")
}

// setUp wires what a mode needs beyond the webhook: the policy sync, and
// in vap+webhook mode a webhook that leaves the generated rules to the API
// server (so a finding is never reported twice).
func (m *modeOptions) setUp(o *serveOptions, mgr ctrl.Manager, source *clusterview.PolicySource) error {
	switch m.mode {
	case modeWebhook:
		return nil
	case modeVAPAndWebhook:
		source.Adjust = func(cfg *policy.Config) {
			for _, r := range rules.Builtin().Rules() {
				// control-plane-toleration stays in the webhook too: the
				// generated policy judges placements against model nodes,
				// the webhook against the live tainted nodes, whose skipped
				// names it reports (docs/modes.md).
				if vap.Renders(r.ID) && r.ID != "control-plane-toleration" {
					// Off in the webhook, and no weakness: the
					// generated policy enforces the configured action.
					cfg.Rules.Options(r.ID).Delegated = true
				}
			}
		}
	case modeVAP:
	default:
		return fmt.Errorf("unknown --mode %q (want %s, %s or %s)", m.mode, modeWebhook, modeVAPAndWebhook, modeVAP)
	}
	return mgr.Add(&vapsync.Syncer{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetCache(),
		Namespace: o.namespace, Name: o.policyName, Key: o.policyKey,
		Options: vap.Options{Namespace: o.namespace, ExcludedNamespaces: m.excludedNamespaces},
		Log:     ctrl.Log.WithName("vap"),
	})
}
