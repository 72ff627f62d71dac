package vap

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// TestVAPAndWebhookMode_StaticRulesHoldWhileDsguardIsDown runs a dsguard in
// vap+webhook mode, which applies the generated policies for the policy in
// force and follows its edits (server-side apply, pruning what an edit
// drops). Then nothing answers at the webhook's address any more (as when
// dsguard's Pods are stopped): node-exporter without tolerations is still
// denied, by the API server itself, while a compliant DaemonSet passes the
// unreachable webhook as webhook.failurePolicy says (Ignore: admitted; Fail:
// refused).
func TestVAPAndWebhookMode_StaticRulesHoldWhileDsguardIsDown(t *testing.T) {
	ctx := t.Context()
	j, err := newJudge(cluster.Config())
	if err != nil {
		t.Fatal(err)
	}
	// The probe is judged there (waitUntil); the differential creates it
	// too, and neither may count on the other having run.
	createNamespace(t, "fixtures")
	// Deferred, not t.Cleanup: the test's context is still live.
	defer func() {
		deleteGeneratedPolicies(t)
		restoreWebhookConfiguration(t, savedWebhooks)
		setWebhookPolicy(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  privileged: {action: warn}\n")
	}()

	// A dsguard in vap+webhook mode beside the suite's own.
	p := startDsguard(t, "vap+webhook")
	defer p.Stop()
	waitForPolicy := func(name string, present bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := cluster.Kubectl(ctx, "", "get", "validatingadmissionpolicy", name, "-o", "name")
			if (r.Err == nil) == present {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("ValidatingAdmissionPolicy %s present=%v not reached in 30s; dsguard log:\n%s", name, present, p.Log())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitForPolicy("dsguard-control-plane-toleration-deny", true)
	waitForPolicy("dsguard-privileged-warn", true)

	// Policy edits follow: privileged denies, then is turned off.
	setWebhookPolicy(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  privileged: {action: deny}\n")
	waitForPolicy("dsguard-privileged-deny", true)
	waitForPolicy("dsguard-privileged-deny-ratcheted", true)
	setWebhookPolicy(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  privileged: {action: off}\n")
	// Pruned: no policy for the rule is left (kube-system's warn tier included).
	for _, name := range []string{"dsguard-privileged-deny", "dsguard-privileged-deny-ratcheted", "dsguard-privileged-warn"} {
		waitForPolicy(name, false)
	}
	r := cluster.Kubectl(ctx, "", "get", "validatingadmissionpolicy", "dsguard-control-plane-toleration-deny", "-o", "jsonpath={.metadata.managedFields[*].manager}")
	if r.Err != nil || r.Stdout != "dsguard" {
		t.Errorf("the generated policy's field manager: got %q (%v), want dsguard", r.Stdout, r.Err)
	}

	// The chart in vap+webhook mode, its webhook pointing where nothing answers.
	dead := "https://127.0.0.1:" + strconv.Itoa(freePort(t))
	for _, failure := range []string{"Ignore", "Fail"} {
		h := cluster.Helm(ctx, "template", "dsguard", "charts/dsguard", "--namespace", framework.Namespace,
			"--set", "mode=vap+webhook", "--set", "webhook.url="+dead, "--set", "webhook.failurePolicy="+failure,
			"--show-only", "templates/validatingwebhookconfiguration.yaml")
		if h.Err != nil {
			t.Fatal(h.Error())
		}
		removeWebhookConfiguration(t)
		if a := cluster.Kubectl(ctx, h.Stdout, "create", "-f", "-"); a.Err != nil {
			t.Fatal(a.Error())
		}
		waitUntil(t, j, "the generated policy denies node-exporter", func(v verdict) bool {
			return strings.Contains(v.text, "ValidatingAdmissionPolicy 'dsguard-control-plane-toleration-deny'")
		})
		ne := cluster.Kubectl(ctx, "", "apply", "-f", "examples/node-exporter.yaml")
		if ne.ExitCode == 0 || !strings.Contains(ne.Stderr, "dsguard-control-plane-toleration-deny") ||
			!strings.Contains(ne.Stderr, "no toleration for node-role.kubernetes.io/control-plane:NoSchedule") {
			t.Errorf("failurePolicy %s, dsguard unreachable: node-exporter must be denied by the generated policy; got exit %d\n%s%s",
				failure, ne.ExitCode, ne.Stdout, ne.Stderr)
		} else {
			t.Logf("failurePolicy %s, dsguard unreachable:\n$ kubectl apply -f examples/node-exporter.yaml\n%s", failure, strings.TrimSpace(ne.Stderr))
		}
		ok := cluster.Kubectl(ctx, "", "apply", "--dry-run=server", "-f", "examples/node-exporter-tolerations.yaml")
		switch {
		case failure == "Ignore" && ok.ExitCode != 0:
			t.Errorf("failurePolicy Ignore: a compliant DaemonSet must pass the unreachable webhook: %s", ok.Stderr)
		case failure == "Fail" && (ok.ExitCode == 0 || !strings.Contains(ok.Stderr, "failed calling webhook")):
			t.Errorf("failurePolicy Fail: the unreachable webhook must refuse: exit %d %s", ok.ExitCode, ok.Stderr)
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
