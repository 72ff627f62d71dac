package vap

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// gateNamespace holds the DaemonSets of the exemption gate test; kube-system
// is its fail-open namespace.
const gateNamespace = "vap-gate"

// gateDoc lets only platform-team write exemptions and intended coverage
// (not RBAC: the test's last step covers the default, RBAC).
const gateDoc = `apiVersion: dsguard.io/v1alpha1
kind: PolicyConfig
exemptions:
  grantedByRBAC: false
  allowedGroups: [platform-team]
`

// gateRBAC lets the tenants and platform-team groups write DaemonSets in
// the gate's namespaces, so that kubectl can act as their members.
const gateRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: vap-gate-daemonset-author
rules:
  - apiGroups: [apps]
    resources: [daemonsets, daemonsets/status]
    verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: vap-gate-exemption-granter
rules:
  - apiGroups: [dsguard.io]
    resources: [exemptions]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: vap-gate-exemption-granters
  namespace: ` + framework.Namespace + `
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: vap-gate-exemption-granter}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: User, name: gina}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: vap-gate-daemonset-authors
  namespace: ` + gateNamespace + `
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: vap-gate-daemonset-author}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: tenants}
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: platform-team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: vap-gate-daemonset-authors
  namespace: kube-system
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: vap-gate-daemonset-author}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: tenants}
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: platform-team}
`

// Who acts: mallory is a tenant, pat is in platform-team, gina a tenant
// whom RBAC lets grant exemptions.
var (
	gateTenant  = []string{"--as=mallory", "--as-group=tenants", "--as-group=system:authenticated"}
	gateMember  = []string{"--as=pat", "--as-group=platform-team", "--as-group=system:authenticated"}
	gateGranter = []string{"--as=gina", "--as-group=tenants", "--as-group=system:authenticated"}
)

// TestVAPMode_ExemptionGateRefusesTheTwoStepSelfExemption runs dsguard in
// vap mode (the generated policies alone, no webhook configuration) with
// exemptions.allowedGroups set, and replays the two-step self-exemption
// through the API server as a tenant (mallory) and a platform-team member
// (pat): step 1 (add an exemption to a compliant DaemonSet) is refused by
// dsguard-exemption-gate-deny when mallory takes it, also under
// --dry-run=server, so her step 2 (drop the tolerations) is denied by the
// rule; after pat's step 1, mallory's step 2 leaving the exemption unchanged
// is admitted, exempted. The same for intended coverage and a CREATE that
// carries an exemption; in kube-system (fail-open) the gate only warns;
// enforcement: warn does not lower it.
func TestVAPMode_ExemptionGateRefusesTheTwoStepSelfExemption(t *testing.T) {
	ctx := t.Context()
	kubectl := func(t *testing.T, stdin string, args ...string) framework.Result {
		t.Helper()
		return framework.Logged(t, cluster.Kubectl(ctx, stdin, args...))
	}
	as := func(t *testing.T, who []string, stdin string, args ...string) framework.Result {
		t.Helper()
		return kubectl(t, stdin, append(append([]string{}, who...), args...)...)
	}

	// Deferred, not t.Cleanup: the test's context is still live. Run in
	// reverse: dsguard stops before its policies are deleted (else it
	// applies them again), and the webhook and the policy come back last.
	if r := kubectl(t, "", "create", "namespace", gateNamespace); r.Err != nil && !strings.Contains(r.Stderr, "AlreadyExists") {
		t.Fatal(r.Error())
	}
	if r := kubectl(t, gateRBAC, "apply", "-f", "-"); r.Err != nil {
		t.Fatal(r.Error())
	}
	defer kubectl(t, gateRBAC, "delete", "--ignore-not-found", "-f", "-")
	for _, ns := range []string{gateNamespace, "kube-system"} {
		defer kubectl(t, "", "delete", "daemonset", "-n", ns, "-l", "vap-gate-test=true", "--ignore-not-found", "--wait=false")
	}
	policyDoc := func() string {
		return framework.Must(t, cluster.Kubectl(ctx, "", "get", "configmap", "-n", framework.Namespace, "dsguard-policy",
			"-o", `jsonpath={.data.policy\.yaml}`))
	}
	original := policyDoc()
	defer func() {
		if policyDoc() != original {
			setWebhookPolicy(t, original)
		}
	}()
	setWebhookPolicy(t, gateDoc)
	defer restoreWebhookConfiguration(t, savedWebhooks)
	removeWebhookConfiguration(t)
	defer deleteGeneratedPolicies(t)

	// dsguard in vap mode, as the chart runs it (mode=vap), with the
	// default fail-open namespaces.
	p := startDsguard(t, "vap")
	defer p.Stop()
	// The gate's warn policy is awaited where kube-system is judged.
	for _, name := range []string{"dsguard-exemption-gate-deny", "dsguard-control-plane-toleration-deny"} {
		framework.Eventually(t, 30*time.Second, 200*time.Millisecond, func() bool {
			return cluster.Kubectl(ctx, "", "get", "validatingadmissionpolicybinding", name, "-o", "name").Err == nil
		}, func() string { return "no generated policy " + name + "; dsguard log:\n" + p.Log() })
	}

	expires := time.Now().UTC().AddDate(0, 0, 30).Format(time.DateOnly)
	const cpt = "exempt.dsguard.io/control-plane-toleration"
	grant := cpt + "=migration OPS-1; expires=" + expires
	renewal := cpt + "=migration OPS-1, second phase; expires=" + time.Now().UTC().AddDate(0, 0, 60).Format(time.DateOnly)
	refusedFor := func(key string) []string {
		return []string{"ValidatingAdmissionPolicy 'dsguard-exemption-gate-deny'", "denied request",
			"dsguard refuses the change to annotation " + key,
			"only members of platform-team may add or change exemption and intended-coverage annotations (exemptions.allowedGroups), and mallory is not one",
			"fix: ask a member of platform-team to apply it"}
	}
	manifest := func(t *testing.T, name, ns string, annotations map[string]string) string {
		t.Helper()
		ds := framework.ExampleDaemonSet(t, cluster.Root, "node-exporter-tolerations.yaml")
		ds.Name, ds.Namespace = name, ns
		ds.Labels["vap-gate-test"] = "true"
		ds.Annotations = annotations
		data, err := yaml.Marshal(ds)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	create := func(t *testing.T, name, ns string, annotations map[string]string) {
		t.Helper()
		if r := as(t, gateMember, manifest(t, name, ns, annotations), "create", "-f", "-"); r.ExitCode != 0 {
			t.Fatalf("creating %s/%s as pat: %s", ns, name, r.Stderr)
		}
	}
	dropTolerations := []string{"patch", "daemonset", "--type=json", "-p", `[{"op":"remove","path":"/spec/template/spec/tolerations"}]`}

	// The API server loads each generated policy on its own: wait until the
	// gate and the rule answer.
	create(t, "gate-probe", gateNamespace, nil)
	framework.Eventually(t, 30*time.Second, 250*time.Millisecond, func() bool {
		r := cluster.Kubectl(ctx, "", append(gateTenant, "annotate", "daemonset", "-n", gateNamespace, "gate-probe", grant, "--dry-run=server")...)
		return r.ExitCode != 0 && strings.Contains(r.Stderr, "dsguard-exemption-gate-deny")
	}, func() string { return "the gate does not refuse mallory's exemption" })
	framework.Eventually(t, 30*time.Second, 250*time.Millisecond, func() bool {
		r := cluster.Kubectl(ctx, "", append(gateMember, append(dropTolerations, "-n", gateNamespace, "gate-probe", "--dry-run=server")...)...)
		return r.ExitCode != 0 && strings.Contains(r.Stderr, "dsguard-control-plane-toleration-deny")
	}, func() string { return "control-plane-toleration does not deny an untolerated DaemonSet" })

	t.Run("step 1 by a tenant is refused, so step 2 is denied", func(t *testing.T) {
		create(t, "two-step-tenant", gateNamespace, nil)
		framework.ExpectAdmission(t, "mallory adds the exemption (dry run)",
			as(t, gateTenant, "", "annotate", "daemonset", "-n", gateNamespace, "two-step-tenant", grant, "--dry-run=server"), false, refusedFor(cpt)...)
		framework.ExpectAdmission(t, "mallory adds the exemption",
			as(t, gateTenant, "", "annotate", "daemonset", "-n", gateNamespace, "two-step-tenant", grant), false, refusedFor(cpt)...)
		framework.ExpectAdmission(t, "mallory drops the tolerations",
			as(t, gateTenant, "", append(dropTolerations, "-n", gateNamespace, "two-step-tenant")...), false,
			"dsguard-control-plane-toleration-deny", "[control-plane-toleration]")
	})

	t.Run("step 1 by platform-team, step 2 by a tenant is exempted", func(t *testing.T) {
		create(t, "two-step-granted", gateNamespace, nil)
		framework.ExpectAdmission(t, "pat adds the exemption", as(t, gateMember, "", "annotate", "daemonset", "-n", gateNamespace, "two-step-granted", grant), true)
		framework.ExpectAdmission(t, "mallory drops the tolerations, leaving the exemption",
			as(t, gateTenant, "", append(dropTolerations, "-n", gateNamespace, "two-step-granted")...), true)
		framework.ExpectAdmission(t, "mallory renews it", as(t, gateTenant, "", "annotate", "--overwrite", "daemonset", "-n", gateNamespace, "two-step-granted", renewal),
			false, refusedFor(cpt)...)
		framework.ExpectAdmission(t, "pat renews it", as(t, gateMember, "", "annotate", "--overwrite", "daemonset", "-n", gateNamespace, "two-step-granted", renewal), true)
		framework.ExpectAdmission(t, "mallory removes it (allowed; the deny it lifted stays for the next spec change)",
			as(t, gateTenant, "", "annotate", "daemonset", "-n", gateNamespace, "two-step-granted", cpt+"-"), true)
	})

	t.Run("intended coverage: the same gate", func(t *testing.T) {
		const key = "coverage.dsguard.io/intended"
		create(t, "intended-tenant", gateNamespace, nil)
		framework.ExpectAdmission(t, "mallory adds intended coverage",
			as(t, gateTenant, "", "annotate", "daemonset", "-n", gateNamespace, "intended-tenant", key+"=GPU nodes only"), false, refusedFor(key)...)
		framework.ExpectAdmission(t, "pat adds intended coverage",
			as(t, gateMember, "", "annotate", "daemonset", "-n", gateNamespace, "intended-tenant", key+"=GPU nodes only"), true)
		framework.ExpectAdmission(t, "mallory changes the spec, leaving it",
			as(t, gateTenant, "", "set", "image", "daemonset/intended-tenant", "-n", gateNamespace, "node-exporter=quay.io/prometheus/node-exporter:v1.9.0"), true)
		framework.ExpectAdmission(t, "mallory changes it",
			as(t, gateTenant, "", "annotate", "--overwrite", "daemonset", "-n", gateNamespace, "intended-tenant", key+"=every node"), false, refusedFor(key)...)
	})

	t.Run("a CREATE that carries an exemption by a tenant is refused", func(t *testing.T) {
		ds := manifest(t, "created-exempt", gateNamespace, map[string]string{cpt: "migration OPS-1; expires=" + expires})
		framework.ExpectAdmission(t, "mallory creates it (dry run)", as(t, gateTenant, ds, "create", "--dry-run=server", "-f", "-"), false, refusedFor(cpt)...)
		framework.ExpectAdmission(t, "mallory creates it", as(t, gateTenant, ds, "create", "-f", "-"), false, refusedFor(cpt)...)
		framework.ExpectAdmission(t, "pat creates it", as(t, gateMember, ds, "create", "-f", "-"), true)
	})

	t.Run("in a fail-open namespace the gate only warns", func(t *testing.T) {
		create(t, "gate-fail-open", "kube-system", nil)
		var r framework.Result
		framework.Eventually(t, 30*time.Second, 250*time.Millisecond, func() bool {
			r = cluster.Kubectl(ctx, "", append(gateTenant, "annotate", "daemonset", "-n", "kube-system", "gate-fail-open", grant, "--dry-run=server")...)
			return strings.Contains(r.Stderr, "dsguard-exemption-gate-warn")
		}, func() string { return "the gate does not warn in kube-system: " + r.Stderr })
		framework.ExpectAdmission(t, "mallory adds the exemption in kube-system",
			as(t, gateTenant, "", "annotate", "daemonset", "-n", "kube-system", "gate-fail-open", grant), true,
			"Warning: Validation failed for ValidatingAdmissionPolicy 'dsguard-exemption-gate-warn'",
			"dsguard would refuse the change to annotation "+cpt, "and mallory is not one; admitted: namespace kube-system fails open")
	})

	t.Run("enforcement: warn does not lower the gate", func(t *testing.T) {
		setWebhookPolicy(t, gateDoc+"enforcement: warn\n")
		create(t, "staged", gateNamespace, nil)
		// The API server has taken in the new policies once the rule only
		// warns: the deny policy it had is pruned after every new policy
		// and binding is applied (the gate's included), and each kind's
		// changes reach the API server in order.
		var r framework.Result
		framework.Eventually(t, 30*time.Second, 250*time.Millisecond, func() bool {
			r = cluster.Kubectl(ctx, "", append(gateMember, append(dropTolerations, "-n", gateNamespace, "staged", "--dry-run=server")...)...)
			return r.ExitCode == 0 && strings.Contains(r.Stderr, "dsguard-control-plane-toleration-warn")
		}, func() string {
			return "control-plane-toleration does not only warn under enforcement: warn: " + r.Stderr + "\ndsguard log:\n" + p.Log()
		})
		framework.ExpectAdmission(t, "mallory adds the exemption",
			as(t, gateTenant, "", "annotate", "daemonset", "-n", gateNamespace, "staged", grant), false, refusedFor(cpt)...)
	})

	// The default policy: the API server's own authorizer decides who may
	// grant (CEL's authorizer), and nobody writes one through
	// daemonsets/status.
	t.Run("the default: RBAC decides, and never through daemonsets/status", func(t *testing.T) {
		setWebhookPolicy(t, "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n")
		create(t, "rbac-granted", gateNamespace, nil)
		var r framework.Result
		framework.Eventually(t, 30*time.Second, 250*time.Millisecond, func() bool {
			r = cluster.Kubectl(ctx, "", append(gateTenant, "annotate", "daemonset", "-n", gateNamespace, "rbac-granted", grant, "--dry-run=server")...)
			return r.ExitCode != 0 && strings.Contains(r.Stderr, "exemptions.grantedByRBAC")
		}, func() string { return "the gate does not judge by RBAC: " + r.Stderr + "\ndsguard log:\n" + p.Log() })
		framework.ExpectAdmission(t, "mallory adds the exemption", as(t, gateTenant, "", "annotate", "daemonset", "-n", gateNamespace, "rbac-granted", grant),
			false, "ValidatingAdmissionPolicy 'dsguard-exemption-gate-deny'", "dsguard refuses the change to annotation "+cpt,
			`only cluster admins and whoever RBAC allows to create exemptions.dsguard.io named "`+gateNamespace+`" in namespace `+framework.Namespace,
			"and mallory is not one of them", "fix: ask one of them to apply it")
		framework.ExpectAdmission(t, "pat, in platform-team, adds it: groups are no longer named",
			as(t, gateMember, "", "annotate", "daemonset", "-n", gateNamespace, "rbac-granted", grant), false, "dsguard-exemption-gate-deny")
		framework.ExpectAdmission(t, "gina, whom RBAC lets grant, adds it",
			as(t, gateGranter, "", "annotate", "daemonset", "-n", gateNamespace, "rbac-granted", grant), true)
		framework.ExpectAdmission(t, "mallory drops the tolerations, leaving it",
			as(t, gateTenant, "", append(dropTolerations, "-n", gateNamespace, "rbac-granted")...), true)
		create(t, "rbac-status", gateNamespace, nil)
		key, value, _ := strings.Cut(grant, "=")
		framework.ExpectAdmission(t, "gina writes it through daemonsets/status",
			as(t, gateGranter, "", "patch", "daemonset", "-n", gateNamespace, "rbac-status", "--subresource=status", "--type=merge",
				"-p", `{"metadata":{"annotations":{"`+key+`":"`+value+`"}}}`), false,
			"dsguard-exemption-gate-deny", "dsguard refuses the change to annotation "+cpt+" through the status subresource")
		framework.ExpectAdmission(t, "mallory writes another annotation through daemonsets/status",
			as(t, gateTenant, "", "patch", "daemonset", "-n", gateNamespace, "rbac-status", "--subresource=status", "--type=merge",
				"-p", `{"metadata":{"annotations":{"example.com/owner":"team"}}}`), true)
	})
}
