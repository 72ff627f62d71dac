package chart

import (
	"slices"
	"strings"
	"testing"

	dswebhook "github.com/dsguard/dsguard/webhook"
)

// TestTemplate_HookArgsAreDsguardFlags fails when a hook passes a subcommand
// or flag that `dsguard hook` does not have: the hook Pods run the dsguard
// image itself, which has no shell.
func TestTemplate_HookArgsAreDsguardFlags(t *testing.T) {
	e := setup(t)
	bin := e.dsguard(t)
	objs := objects(t, e.template(t, e.helms()[0]))
	for _, c := range []struct {
		kind string
		spec []any // path to the Pod spec
	}{
		{"Job", []any{"spec", "template", "spec"}},
		{"Pod", []any{"spec"}},
	} {
		found := find(objs, c.kind)
		if len(found) != 1 {
			t.Fatalf("%d %s rendered, want 1", len(found), c.kind)
		}
		var args []string
		for _, a := range get(found[0], append(c.spec, "containers", 0, "args")...).([]any) {
			args = append(args, a.(string))
		}
		if len(args) < 2 || args[0] != "hook" {
			t.Fatalf("%s args = %v, want hook <step> ...", c.kind, args)
		}
		flags := e.flags(t, bin, "hook", args[1])
		for _, a := range args[2:] {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !strings.HasPrefix(a, "--") || !flags[name] {
				t.Errorf("%s argument %q is not a flag of dsguard hook %s", c.kind, a, args[1])
			}
		}
		if get(found[0], append(c.spec, "containers", 0, "image")...) != "ghcr.io/dsguard/dsguard:0.1.0" {
			t.Errorf("%s does not run the dsguard image", c.kind)
		}
		if get(found[0], append(c.spec, "containers", 0, "securityContext", "readOnlyRootFilesystem")...) != true {
			t.Errorf("%s container lacks the restricted security context", c.kind)
		}
	}
}

// TestTemplate_HooksAreApartFromTheWebhook: hook objects carry Helm's hook
// annotations, and their Pods match neither the Service nor the
// NetworkPolicy, so the API server never sends a review to a hook Pod.
func TestTemplate_HooksAreApartFromTheWebhook(t *testing.T) {
	e := setup(t)
	objs := objects(t, e.template(t, e.helms()[0]))
	selector := get(find(objs, "Service")[0], "spec", "selector").(map[string]any)
	hooks := map[string]int{}
	for _, o := range objs {
		hook, _ := get(o, "metadata", "annotations", "helm.sh/hook").(string)
		if hook == "" {
			continue
		}
		hooks[hook]++
		if !strings.Contains(get(o, "metadata", "annotations", "helm.sh/hook-delete-policy").(string), "before-hook-creation") {
			t.Errorf("%s %v: a failed hook would block the next run", o["kind"], get(o, "metadata", "name"))
		}
		labels := get(o, "metadata", "labels").(map[string]any)
		if o["kind"] == "Job" {
			labels = get(o, "spec", "template", "metadata", "labels").(map[string]any)
		}
		matches := true
		for k, v := range selector {
			matches = matches && labels[k] == v
		}
		if matches {
			t.Errorf("%s %v carries the Service's selector labels %v", o["kind"], get(o, "metadata", "name"), selector)
		}
	}
	if hooks["pre-delete"] != 4 || hooks["test"] != 4 {
		t.Errorf("hook objects = %v, want 4 pre-delete (ServiceAccount, ClusterRole, binding, Job) and 4 test", hooks)
	}

	// The pre-delete ServiceAccount may delete the release's webhook
	// configuration, by name, and nothing else.
	for _, r := range find(objs, "ClusterRole") {
		if get(r, "metadata", "name") != "dsguard-pre-delete" {
			continue
		}
		rules := get(r, "rules").([]any)
		if len(rules) != 1 || get(rules[0], "resourceNames", 0) != "dsguard" || get(rules[0], "verbs", 0) != "delete" ||
			len(get(rules[0], "verbs").([]any)) != 1 {
			t.Errorf("pre-delete ClusterRole rules = %v, want delete of validatingwebhookconfigurations/dsguard only", rules)
		}
	}

	single := objects(t, e.template(t, e.helms()[0], valueCase{values: "single-replica.yaml"}.args()...))
	for _, kind := range []string{"Job", "Pod", "NetworkPolicy"} {
		if n := len(find(single, kind)); n != 0 {
			t.Errorf("single-replica (hooks and NetworkPolicy off): %d %s rendered", n, kind)
		}
	}
}

// TestTemplate_Hardening checks the controls that narrow what a stolen token
// or a neighbouring Pod can do, per value set.
func TestTemplate_Hardening(t *testing.T) {
	e := setup(t)
	h := e.helms()[0]

	t.Run("admission policy", func(t *testing.T) {
		objs := objects(t, e.template(t, h))
		vap := find(objs, "ValidatingAdmissionPolicy")
		binding := find(objs, "ValidatingAdmissionPolicyBinding")
		if len(vap) != 1 || len(binding) != 1 {
			t.Fatalf("default: %d ValidatingAdmissionPolicies and %d bindings, want 1 each", len(vap), len(binding))
		}
		if get(binding[0], "spec", "policyName") != get(vap[0], "metadata", "name") || get(binding[0], "spec", "validationActions", 0) != "Deny" {
			t.Errorf("the binding does not enforce the policy: %v", get(binding[0], "spec"))
		}
		if got := get(vap[0], "spec", "matchConditions", 0, "expression"); got != "request.userInfo.username == 'system:serviceaccount:"+namespace+":dsguard'" {
			t.Errorf("the policy matches %v, want dsguard's ServiceAccount alone", got)
		}
		if get(vap[0], "spec", "failurePolicy") != "Fail" {
			t.Error("the policy must fail closed: an unevaluated change by dsguard's account is refused")
		}
		for _, c := range []string{"self-managed.yaml", "cert-manager.yaml", "webhook-url.yaml"} {
			if n := len(find(objects(t, e.template(t, h, valueCase{values: c}.args()...)), "ValidatingAdmissionPolicy")); n != 0 {
				t.Errorf("%s: %d ValidatingAdmissionPolicies, want none (off, or dsguard writes nothing)", c, n)
			}
		}
	})

	t.Run("serving key mode", func(t *testing.T) {
		for _, c := range []string{"webhook-url.yaml", "cert-manager.yaml"} {
			d := find(objects(t, e.template(t, h, valueCase{values: c}.args()...)), "Deployment")[0]
			if got := get(d, "spec", "template", "spec", "volumes", 0, "secret", "defaultMode"); got != 256.0 {
				t.Errorf("%s: the serving certificate Secret is mounted with mode %v, want 0400 (256)", c, got)
			}
		}
	})

	t.Run("network policy", func(t *testing.T) {
		np := find(objects(t, e.template(t, h)), "NetworkPolicy")
		if len(np) != 1 {
			t.Fatalf("%d NetworkPolicies by default, want 1", len(np))
		}
		var ports []string
		for _, r := range get(np[0], "spec", "ingress").([]any) {
			ports = append(ports, get(r, "ports", 0, "port").(string))
		}
		// The probe port is left to the Pod's own node, which a
		// NetworkPolicy always admits: the kubelet probes from there.
		if !slices.Equal(ports, []string{"webhook", "metrics"}) {
			t.Errorf("ingress ports = %v, want webhook and metrics (the probe port only from the node)", ports)
		}
		np = find(objects(t, e.template(t, h, "--set", "networkPolicy.healthFrom[0].ipBlock.cidr=10.0.0.0/8")), "NetworkPolicy")
		rules := get(np[0], "spec", "ingress").([]any)
		if last := rules[len(rules)-1]; get(last, "ports", 0, "port") != "health" || get(last, "from", 0, "ipBlock", "cidr") != "10.0.0.0/8" {
			t.Errorf("with healthFrom the last ingress rule is %v, want the probe port from 10.0.0.0/8", last)
		}
		if get(np[0], "spec", "policyTypes", 0) != "Ingress" {
			t.Errorf("policyTypes = %v, want Ingress", get(np[0], "spec", "policyTypes"))
		}
	})

	t.Run("fail-open namespaces", func(t *testing.T) {
		objs := objects(t, e.template(t, h))
		hooks := get(find(objs, "ValidatingWebhookConfiguration")[0], "webhooks").([]any)
		var failOpen, excluded []string
		for _, v := range get(hooks[1], "namespaceSelector", "matchExpressions", 0, "values").([]any) {
			failOpen = append(failOpen, v.(string))
		}
		for _, v := range get(hooks[0], "namespaceSelector", "matchExpressions", 0, "values").([]any) {
			excluded = append(excluded, v.(string))
		}
		if !slices.Equal(failOpen, dswebhook.DefaultFailOpenNamespaces) || get(hooks[1], "failurePolicy") != "Ignore" {
			t.Errorf("the fail-open entry covers %v, want dsguard's default list %v with failurePolicy Ignore",
				failOpen, dswebhook.DefaultFailOpenNamespaces)
		}
		for _, ns := range dswebhook.DefaultFailOpenNamespaces {
			if !slices.Contains(excluded, ns) {
				t.Errorf("%s is fail-open but the fail-closed entry still matches it (excludes %v)", ns, excluded)
			}
		}
		args := get(find(objs, "Deployment")[0], "spec", "template", "spec", "containers", 0, "args").([]any)
		if want := "--fail-open-namespaces=" + strings.Join(dswebhook.DefaultFailOpenNamespaces, ","); !slices.Contains(args, any(want)) {
			t.Errorf("args %v lack %s", args, want)
		}
	})

	t.Run("verified scraping", func(t *testing.T) {
		sm := find(objects(t, e.template(t, h, valueCase{values: "fail-open-monitored.yaml"}.args()...)), "ServiceMonitor")
		if len(sm) != 1 {
			t.Fatalf("%d ServiceMonitors, want 1", len(sm))
		}
		tlsConfig := get(sm[0], "spec", "endpoints", 0, "tlsConfig")
		if get(tlsConfig, "insecureSkipVerify") != nil || get(tlsConfig, "serverName") != "dsguard."+namespace+".svc" ||
			get(tlsConfig, "ca", "secret", "name") != "dsguard-ca" || get(tlsConfig, "ca", "secret", "key") != "ca.crt" {
			t.Errorf("tlsConfig = %v, want verification against dsguard-ca's ca.crt for dsguard.%s.svc", tlsConfig, namespace)
		}
	})
}
