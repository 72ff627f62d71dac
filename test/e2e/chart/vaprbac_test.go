package chart

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
	"github.com/dsguard/dsguard/vap"
)

// The release whose ServiceAccount the static confinement names (TestMain).
const (
	vapNamespace = "dsguard-vaprbac"
	vapFullname  = "vaprbac-dsguard"
	vapUser      = "system:serviceaccount:" + vapNamespace + ":" + vapFullname
)

// TestVAPMode_ServiceAccountWritesOnlyItsOwnPolicies installs the chart in
// vap mode and tries, as dsguard's ServiceAccount, what a compromised
// replica would: delete or rewrite a policy it did not generate, or create
// one under another name, without its label, or a binding of another policy.
// RBAC refuses the first by name; the static policy `dsguard vap
// --static-confinement` prints, which this package's API server loads from
// its static manifests directory (TestMain), refuses the rest. A policy
// dsguard does generate passes both.
func TestVAPMode_ServiceAccountWritesOnlyItsOwnPolicies(t *testing.T) {
	const ns, release, fullname = vapNamespace, "vaprbac", vapFullname
	mustKubectl(t, "", "create", "namespace", ns)
	h := helms()[1]
	if r := helm(t, h, "install", release, "charts/dsguard", "--namespace", ns, "--set", "mode=vap"); r.Err != nil {
		t.Fatal(r.Error())
	}
	t.Cleanup(func() {
		uninstall(t, h, release, ns)
		kubectl(t, "", "delete", "namespace", ns, "--wait=false")
	})
	as := []string{"--as=" + vapUser, "--as-group=system:serviceaccounts", "--as-group=system:serviceaccounts:" + ns}
	asSA := func(stdin string, args ...string) framework.Result { return kubectl(t, stdin, append(args, as...)...) }

	const foreign = "someone-elses-policy"
	mustKubectl(t, policyYAML(foreign, false), "apply", "-f", "-")
	t.Cleanup(func() { kubectl(t, "", "delete", "validatingadmissionpolicy", foreign, "--ignore-not-found") })

	const refusedByPolicy = "ValidatingAdmissionPolicy '" + vap.ConfinementName + "' with binding '" + vap.ConfinementName + "' denied request"
	// The static policy is loaded at the API server's start; the first
	// refusal shows it applies.
	var last framework.Result
	eventually(t, 30*time.Second, func() bool {
		last = asSA(policyYAML("not-generated", true), "create", "--dry-run=server", "-f", "-")
		return last.ExitCode != 0 && strings.Contains(last.Stderr, refusedByPolicy)
	}, func() string { return last.Stderr })

	const (
		warnName   = "dsguard-privileged-warn"
		denyName   = "dsguard-privileged-deny"
		pinned     = "judges CREATE and UPDATE of apps/v1 daemonsets"
		actionPin  = "carries the action its name says"
		closedPin  = "only a generated deny policy may fail closed"
		daemonsets = "resources: [daemonsets]"
	)
	generatedPolicy := policyYAML(warnName, true)
	changed := func(old, new string) string {
		if !strings.Contains(generatedPolicy, old) {
			t.Fatalf("the test's policy has no %q", old)
		}
		return strings.Replace(generatedPolicy, old, new, 1)
	}
	create := []string{"create", "--dry-run=server", "-f", "-"}
	for _, c := range []struct {
		name, stdin string
		args        []string
		want        string // "" admitted, else a fragment of the refusal
	}{
		// A generated name repointed: the policy may judge DaemonSet
		// writes alone, so the token cannot refuse writes of anything else.
		{"repoint a generated policy at Secrets", changed("apiGroups: [apps]\n        apiVersions: [v1]\n        "+daemonsets,
			"apiGroups: [\"\"]\n        apiVersions: [v1]\n        resources: [secrets]"), create, pinned},
		{"a generated policy on every resource", changed(daemonsets, "resources: ['*']"), create, pinned},
		{"a generated policy on DaemonSet deletes", changed("operations: [CREATE, UPDATE]", "operations: [CREATE, UPDATE, DELETE]"), create, pinned},
		{"a second resource rule", changed(daemonsets, daemonsets+
			"\n        operations: [CREATE, UPDATE]\n      - apiGroups: [\"\"]\n        apiVersions: [v1]\n        resources: [pods]"), create, pinned},
		{"a namespace selector on another label", changed("matchConstraints:\n", "matchConstraints:\n    namespaceSelector: {matchLabels: {team: a}}\n"), create, pinned},
		{"parameters", changed("spec:\n", "spec:\n  paramKind: {apiVersion: apps/v1, kind: DaemonSet}\n"), create, pinned},
		{"a warning policy that fails closed", changed("failurePolicy: Ignore", "failurePolicy: Fail"), create, closedPin},
		{"a warning rebound as a refusal", strings.Replace(binding(warnName, warnName), "[Warn]", "[Deny]", 1), create, actionPin},
		{"a binding narrowed by its own matchResources", binding(warnName, warnName) + "  matchResources: {objectSelector: {matchLabels: {none: none}}}\n", create, actionPin},
		{"a deny policy that fails closed", strings.Replace(policyYAML(denyName, true), "failurePolicy: Ignore", "failurePolicy: Fail", 1), create, ""},
		{"a deny binding", strings.Replace(binding(denyName, denyName), "[Warn]", "[Deny]", 1), create, ""},
		{"delete a foreign policy", "", []string{"delete", "validatingadmissionpolicy", foreign, "--dry-run=server"}, "forbidden"},
		{"delete a generated policy of another name", "", []string{"delete", "validatingadmissionpolicy", "dsguard-privileged-warnx", "--dry-run=server"}, "forbidden"},
		{"rewrite a foreign policy", policyYAML(foreign, true), []string{"replace", "--dry-run=server", "-f", "-"}, "forbidden"},
		{"create a policy of another name", policyYAML("not-generated", true), []string{"create", "--dry-run=server", "-f", "-"}, "may write no ValidatingAdmissionPolicy or binding but the ones it generates"},
		{"create a generated name without the label", policyYAML("dsguard-privileged-warn", false), []string{"create", "--dry-run=server", "-f", "-"}, "must carry app.kubernetes.io/managed-by: dsguard"},
		{"bind another policy under a generated name", binding("dsguard-privileged-warn", foreign), []string{"create", "--dry-run=server", "-f", "-"}, "binds the generated policy of its own name"},
		{"create a policy it generates", policyYAML("dsguard-privileged-warn", true), []string{"create", "--dry-run=server", "-f", "-"}, ""},
		{"create its binding", binding("dsguard-privileged-warn", "dsguard-privileged-warn"), []string{"create", "--dry-run=server", "-f", "-"}, ""},
	} {
		r := asSA(c.stdin, c.args...)
		switch {
		case c.want == "" && r.ExitCode != 0:
			t.Errorf("%s: want admitted, got:\n%s", c.name, r.Stderr)
		case c.want != "" && (r.ExitCode == 0 || !strings.Contains(strings.ToLower(r.Stderr), strings.ToLower(c.want))):
			t.Errorf("%s: want refused (%q), got exit %d:\n%s%s", c.name, c.want, r.ExitCode, r.Stdout, r.Stderr)
		}
	}

	// dsguard itself as the ServiceAccount, in vap mode: under the chart's
	// RBAC and the static confinement it applies every policy it
	// generates, each reads back as rendered, and one that someone else
	// changed (a match condition that never matches, which server-side
	// apply would keep) is restored at the next sync.
	t.Run("dsguard serve as the ServiceAccount", func(t *testing.T) {
		dir, _ := servingCertDir(t)
		const policyCM = "dsguard-policy"
		mustKubectl(t, "", "get", "configmap", policyCM, "-n", ns)
		kubeconfig := impersonatingKubeconfigFor(t, dir, vapUser, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns})
		// Registered before dsguard starts, so run after it stopped: the
		// generated policies deny DaemonSets in every namespace, and a sync
		// still running would apply them again.
		cluster.DeleteOnCleanup(t, "validatingadmissionpolicybinding,validatingadmissionpolicy", "-l", "app.kubernetes.io/managed-by=dsguard")
		webhookPort, healthPort := freePort(t), freePort(t)
		p, _ := cluster.StartDsguardFor(t, vapUser, healthPort, "serve", "--kubeconfig", kubeconfig, "--namespace", ns, "--mode", "vap",
			"--policy-configmap", policyCM, "--host", "127.0.0.1", "--port", strconv.Itoa(webhookPort), "--cert-dir", dir,
			"--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(healthPort), "--metrics-bind-address", "0",
			"--leader-elect=false", "--shutdown-timeout", "5s", "--zap-log-level", "debug")
		const gate = "dsguard-exemption-gate-deny"
		eventually(t, 60*time.Second, func() bool {
			return strings.Contains(p.Log(), "generated ValidatingAdmissionPolicies applied")
		}, func() string { return "dsguard applying its generated policies as " + vapUser + "; log:\n" + p.Log() })
		generated := strings.Fields(mustKubectl(t, "", "get", "validatingadmissionpolicies", "-l", "app.kubernetes.io/managed-by=dsguard", "-o", "name"))
		if !slices.Contains(generated, "validatingadmissionpolicy.admissionregistration.k8s.io/"+gate) || len(generated) < 5 {
			t.Fatalf("generated policies %v; want the exemption gate and the default policy's rules", generated)
		}
		for _, bad := range []string{"forbidden", "denied request", "restoring"} {
			if strings.Contains(strings.ToLower(p.Log()), bad) {
				t.Fatalf("dsguard's log says %q before anyone changed a policy:\n%s", bad, p.Log())
			}
		}

		// The patch's answer is the object as stored; read afterwards, a
		// sync still running from dsguard's start may have restored it.
		const conditionsPath = "jsonpath={.spec.matchConditions[*].name}"
		if stored := mustKubectl(t, "", "patch", "validatingadmissionpolicy", gate, "--type=merge",
			"-p", `{"spec":{"matchConditions":[{"name":"tampered","expression":"false"}]}}`, "-o", conditionsPath); !strings.Contains(stored, "tampered") {
			t.Fatalf("the patch did not take: match conditions %q", stored)
		}
		conditions := func() string {
			return kubectl(t, "", "get", "validatingadmissionpolicy", gate, "-o", conditionsPath).Stdout
		}
		// A change of the policy ConfigMap starts a sync at once (else the
		// next runs within 10 minutes).
		mustKubectl(t, "", "annotate", "configmap", policyCM, "-n", ns, "--overwrite", "test.dsguard.io/sync="+strconv.FormatInt(time.Now().UnixNano(), 10))
		eventually(t, 60*time.Second, func() bool {
			return !strings.Contains(conditions(), "tampered") && strings.Contains(p.Log(), "restoring a generated object changed outside dsguard")
		}, func() string {
			return "the changed policy restored: match conditions " + conditions() + "; log:\n" + p.Log()
		})
		if strings.Contains(strings.ToLower(p.Log()), "forbidden") || strings.Contains(p.Log(), "denied request") {
			t.Errorf("the restore hit a refusal as %s:\n%s", vapUser, p.Log())
		}
	})
}

// policyYAML is a minimal ValidatingAdmissionPolicy named name, labelled as
// dsguard's when managed.
func policyYAML(name string, managed bool) string {
	labels := ""
	if managed {
		labels = "\n  labels: {app.kubernetes.io/managed-by: dsguard}"
	}
	return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: ` + name + labels + `
spec:
  failurePolicy: Ignore
  matchConstraints:
    resourceRules:
      - apiGroups: [apps]
        apiVersions: [v1]
        resources: [daemonsets]
        operations: [CREATE, UPDATE]
  validations:
    - expression: "true"
`
}

// binding is a ValidatingAdmissionPolicyBinding named name of policy,
// labelled as dsguard's.
func binding(name, policy string) string {
	return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: ` + name + `
  labels: {app.kubernetes.io/managed-by: dsguard}
spec:
  policyName: ` + policy + `
  validationActions: [Warn]
`
}
