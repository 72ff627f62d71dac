package chart

import (
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

	for _, c := range []struct {
		name, stdin string
		args        []string
		want        string // "" admitted, else a fragment of the refusal
	}{
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
        operations: [CREATE]
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
