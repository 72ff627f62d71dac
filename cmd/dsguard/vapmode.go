//go:build !offline

package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/go-logr/logr"
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
// in vap+webhook mode a webhook that leaves to the API server the rules it
// is known to enforce (so a finding is never reported twice, and never
// dropped while a generated policy failed to apply).
func (m *modeOptions) setUp(o *serveOptions, mgr ctrl.Manager, source *clusterview.PolicySource,
	lastGood *clusterview.LastGoodStore) error {
	var enforced func(map[string]bool)
	switch m.mode {
	case modeWebhook:
		return nil
	case modeVAPAndWebhook:
		d := &delegation{source: source, log: ctrl.Log.WithName("vap")}
		source.Adjust = d.adjust
		enforced = d.set
	case modeVAP:
	default:
		return fmt.Errorf("unknown --mode %q (want %s, %s or %s)", m.mode, modeWebhook, modeVAPAndWebhook, modeVAP)
	}
	return mgr.Add(&vapsync.Syncer{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetCache(),
		Namespace: o.namespace, Name: o.policyName, Key: o.policyKey,
		// The exemption gate warns where the webhook's would (the
		// fail-open namespaces) and refuses everywhere else.
		Options: vap.Options{Namespace: o.namespace, ExcludedNamespaces: m.excludedNamespaces, FailOpenNamespaces: o.failOpen,
			GranterRole: o.granterRole},
		LastGood: func(ctx context.Context) ([]byte, error) {
			doc, _, err := lastGood.Load(ctx)
			return doc, err
		},
		Enforced: enforced,
		Log:      ctrl.Log.WithName("vap"),
	})
}

// delegation is, in vap+webhook mode, the set of rules the webhook leaves to
// the generated policies: only those the sync has applied and read back.
// Until then, and after a sync that failed, the webhook enforces them
// itself.
type delegation struct {
	source *clusterview.PolicySource
	log    logr.Logger
	rules  atomic.Pointer[map[string]bool]
}

// adjust is the policy source's Adjust: it turns the delegated rules off in
// the webhook.
func (d *delegation) adjust(cfg *policy.Config) {
	p := d.rules.Load()
	if p == nil {
		return
	}
	for _, r := range rules.Builtin().Rules() {
		// control-plane-toleration stays in the webhook too: the
		// generated policy judges placements against model nodes, the
		// webhook against the live tainted nodes, whose skipped names it
		// reports (docs/modes.md).
		if (*p)[r.ID] && vap.Renders(r.ID) && r.ID != "control-plane-toleration" {
			// Off in the webhook, and no weakness: the generated policy
			// enforces the configured action.
			cfg.Rules.Options(r.ID).Delegated = true
		}
	}
}

// set records what the API server enforces and, when that changed,
// compiles the active policy again.
func (d *delegation) set(enforced map[string]bool) {
	if old := d.rules.Load(); old != nil && maps.Equal(*old, enforced) {
		return
	}
	d.rules.Store(&enforced)
	d.log.Info("rules the generated ValidatingAdmissionPolicies enforce (the webhook leaves them to the API server)",
		"rules", slices.Sorted(maps.Keys(enforced)))
	if err := d.source.Refresh(); err != nil {
		d.log.Error(err, "recompiling the policy")
	}
}
