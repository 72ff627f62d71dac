package vap

import (
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestVAPMode_APolicyThatCannotVanish plays someone who may edit the policy
// ConfigMap and wants the generated policies to fall back to the built-in
// defaults: they delete the ConfigMap, restart the replica, then write an
// invalid document. A dsguard in vap mode keeps rendering the last good
// policy (privileged: deny) each time, never the defaults (privileged: warn).
func TestVAPMode_APolicyThatCannotVanish(t *testing.T) {
	ctx := t.Context()
	defer func() {
		deleteGeneratedPolicies(t)
		setWebhookPolicy(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  privileged: {action: warn}\n")
	}()
	present := func(name string) bool {
		return cluster.Kubectl(ctx, "", "get", "validatingadmissionpolicy", name, "-o", "name").Err == nil
	}
	waitFor := func(p *framework.Process, what string, cond func() bool) {
		t.Helper()
		framework.Eventually(t, 30*time.Second, 200*time.Millisecond, cond, func() string { return what + "; dsguard log:\n" + p.Log() })
	}
	// keepsLastGood waits until p says it renders the last good policy,
	// then checks, for a few seconds of syncs, that the strict tier stays.
	keepsLastGood := func(p *framework.Process, step string) {
		t.Helper()
		waitFor(p, step+": dsguard renders the last good policy", func() bool {
			return strings.Contains(p.Log(), "rendering the last good policy")
		})
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
			if !present("dsguard-privileged-deny") {
				t.Fatalf("%s: the generated policies fell back to the defaults (dsguard-privileged-deny was pruned); log:\n%s", step, p.Log())
			}
		}
	}

	setWebhookPolicy(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  privileged: {action: deny}\n")
	p := startDsguard(t, "vap")
	// Under the defaults privileged only warns: no deny tier is generated.
	waitFor(p, "the strict policy is generated", func() bool { return present("dsguard-privileged-deny") })

	if r := cluster.Kubectl(ctx, "", "delete", "configmap", "dsguard-policy", "-n", framework.Namespace); r.Err != nil {
		t.Fatal(r.Error())
	}
	keepsLastGood(p, "ConfigMap deleted")

	p.Stop()
	p = startDsguard(t, "vap")
	defer func() { p.Stop() }()
	keepsLastGood(p, "ConfigMap deleted, replica restarted")

	invalid := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dsguard-policy\n  namespace: " + framework.Namespace +
		"\ndata:\n  policy.yaml: |\n    apiVersion: dsguard.io/v1alpha1\n    kind: PolicyConfig\n    enforcement: maybe\n"
	// The suite's own dsguard refuses the invalid document at admission;
	// with no webhook in the way (vap mode has none), it is stored.
	removeWebhookConfiguration(t)
	defer restoreWebhookConfiguration(t, savedWebhooks)
	if r := cluster.Kubectl(ctx, invalid, "create", "-f", "-"); r.Err != nil {
		t.Fatal(r.Error())
	}
	p.Stop()
	p = startDsguard(t, "vap")
	keepsLastGood(p, "ConfigMap invalid, replica restarted")
}
