package e2e

import (
	"strings"
	"testing"
)

// TestExpiredExemption_DoesNotRatchet: a DaemonSet stored under an
// exemption that has since expired does not keep its violation for good as
// "already there": the next change of its spec is denied for it, through
// the real API server. (Stored while the rule only warned, as it would have
// been while the exemption held.)
func TestExpiredExemption_DoesNotRatchet(t *testing.T) {
	cluster.DeleteOnCleanup(t, "daemonset", "-n", "monitoring", "ne-expired")
	exempted := strings.Replace(renamed(t, "node-exporter.yaml", "node-exporter", "ne-expired"), "\n  namespace: monitoring\n",
		"\n  namespace: monitoring\n  annotations:\n    exempt.dsguard.io/control-plane-toleration: \"legacy agent; expires=2000-01-01\"\n", 1)
	if !strings.Contains(exempted, "exempt.dsguard.io/control-plane-toleration") {
		t.Fatal("the exemption annotation was not added to the manifest")
	}
	setPolicy(t, cpWarnPolicy, allowedWithWarning)
	wantAllowed(t, kubectl(t, exempted, "apply", "-f", "-"), "daemonset.apps/ne-expired created", cpWarning,
		"invalid-annotation: exemption from control-plane-toleration expired on 2000-01-01")
	setPolicy(t, defaultPol, deniedByDsguard)

	// A change of the template alone: the violation is as old as the object.
	changed := strings.Replace(exempted, "\n  template:\n    metadata:\n", "\n  template:\n    metadata:\n      annotations:\n        example.com/revision: \"2\"\n", 1)
	if changed == exempted {
		t.Fatal("the template change was not made to the manifest")
	}
	r := kubectl(t, changed, "apply", "-f", "-")
	wantDenied(t, r, dsWebhook, "[control-plane-toleration] spec.template.spec.tolerations")
	if strings.Contains(r.Stderr, "already present before this update") {
		t.Errorf("the violation was ratcheted as already present:\n%s", r.Stderr)
	}
}
