package security

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// gatedPolicy lets only platform-team write exemptions and intended
// coverage (not RBAC: TestExemptionGate_GrantedByRBAC covers the default),
// and lets them take effect only in team-b; team-a only warns, so that a
// DaemonSet skipping the control plane can be stored there for the audit.
var gatedPolicy = policyConfigMap(`exemptions:
  grantedByRBAC: false
  allowedGroups: [platform-team]
  allowedNamespaces: [team-b]
namespaceEnforcement:
  - namespaces: [team-a]
    enforcement: warn
`)

// authorsRBAC lets the tenants and platform-team groups write DaemonSets in
// team-a and team-b, so that kubectl can act as their members.
const authorsRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: gate-daemonset-author
rules:
  - apiGroups: [apps]
    resources: [daemonsets]
    verbs: [get, list, watch, create, update, patch, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: gate-daemonset-authors
  namespace: team-a
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gate-daemonset-author}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: tenants}
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: platform-team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: gate-daemonset-authors
  namespace: team-b
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gate-daemonset-author}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: tenants}
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: platform-team}
`

// Who acts: mallory is a tenant, pat is in platform-team.
var (
	mallory = []string{"--as=mallory", "--as-group=tenants", "--as-group=system:authenticated"}
	pat     = []string{"--as=pat", "--as-group=platform-team", "--as-group=system:authenticated"}
)

// as runs kubectl as a user (one of mallory, pat).
func as(t *testing.T, user []string, stdin string, args ...string) framework.Result {
	t.Helper()
	return kubectl(t, stdin, append(append([]string{}, user...), args...)...)
}

// TestExemptionGate_TwoStepSelfExemption replays the two-step self-exemption
// past exemptions.allowedGroups through the API server, as a tenant
// (mallory) and a platform-team member (pat): step 1 (add an exemption to a
// compliant DaemonSet) is refused when mallory takes it, also under
// --dry-run=server; step 2 (drop the tolerations, leave the exemption) is
// exempted only when pat took step 1. The same for intended coverage, a
// CREATE that carries one, a removal (allowed) and a renewal (pat only).
// Then the audit: an intended coverage the namespace gate voids hides no gap.
func TestExemptionGate_TwoStepSelfExemption(t *testing.T) {
	chartPolicy := chartPolicyManifest(t)
	if r := kubectl(t, authorsRBAC, "apply", "-f", "-"); r.ExitCode != 0 {
		t.Fatal(r.Error())
	}
	defer kubectl(t, authorsRBAC, "delete", "--ignore-not-found", "-f", "-")
	if r := kubectl(t, gatedPolicy, "apply", "-f", "-"); r.ExitCode != 0 {
		t.Fatal(r.Error())
	}
	defer restoreChartPolicy(t, chartPolicy)
	for _, ns := range []string{"team-a", "team-b"} {
		defer kubectl(t, "", "delete", "daemonset", "-n", ns, "-l", "gate-test=true", "--ignore-not-found")
	}

	expires := time.Now().UTC().AddDate(0, 0, 30).Format(time.DateOnly)
	const cpt = "exempt.dsguard.io/control-plane-toleration"
	grant := cpt + "=migration OPS-1; expires=" + expires
	renewal := cpt + "=migration OPS-1, second phase; expires=" + time.Now().UTC().AddDate(0, 0, 60).Format(time.DateOnly)
	refusedFor := func(key, user string) []string {
		return []string{"denied the request", "dsguard refuses the change to annotation " + key,
			"only members of platform-team may add or change exemption and intended-coverage annotations (exemptions.allowedGroups), and " + user + " is not one",
			"fix: ask a member of platform-team to apply it"}
	}
	create := func(t *testing.T, name, ns string, annotations map[string]string) {
		t.Helper()
		ds := compliant(t, name, ns)
		ds.Labels["gate-test"] = "true"
		ds.Annotations = annotations
		if r := as(t, pat, toYAML(t, ds), "create", "-f", "-"); r.ExitCode != 0 {
			t.Fatalf("creating %s/%s as pat: %s", ns, name, r.Stderr)
		}
	}
	dropTolerations := []string{"patch", "daemonset", "--type=json", "-p", `[{"op":"remove","path":"/spec/template/spec/tolerations"}]`}

	// The ConfigMap takes effect when dsguard's informer sees it; its
	// namespace gate shows it (not the group gate: the test must also fail,
	// rather than wait, when the refusal is gone).
	probe := compliant(t, "gate-probe", "team-a")
	probe.Annotations = map[string]string{"coverage.dsguard.io/intended": "probe"}
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := as(t, pat, toYAML(t, probe), "create", "--dry-run=server", "-f", "-")
		if r.ExitCode == 0 && strings.Contains(r.Stderr, "only in namespaces team-b") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gated policy did not take effect:\n%s", r.Stderr)
		}
		time.Sleep(500 * time.Millisecond)
	}

	t.Run("step 1 by a tenant is refused, so step 2 is denied", func(t *testing.T) {
		create(t, "two-step-tenant", "team-b", nil)
		framework.ExpectAdmission(t, "mallory adds the exemption (dry run)",
			as(t, mallory, "", "annotate", "daemonset", "-n", "team-b", "two-step-tenant", grant, "--dry-run=server"), false, refusedFor(cpt, "mallory")...)
		framework.ExpectAdmission(t, "mallory adds the exemption",
			as(t, mallory, "", "annotate", "daemonset", "-n", "team-b", "two-step-tenant", grant), false, refusedFor(cpt, "mallory")...)
		framework.ExpectAdmission(t, "mallory drops the tolerations",
			as(t, mallory, "", append(dropTolerations, "-n", "team-b", "two-step-tenant")...), false, "[control-plane-toleration]")
	})

	t.Run("step 1 by platform-team, step 2 by a tenant is exempted", func(t *testing.T) {
		create(t, "two-step-granted", "team-b", nil)
		framework.ExpectAdmission(t, "pat adds the exemption", as(t, pat, "", "annotate", "daemonset", "-n", "team-b", "two-step-granted", grant), true)
		framework.ExpectAdmission(t, "mallory drops the tolerations, leaving the exemption",
			as(t, mallory, "", append(dropTolerations, "-n", "team-b", "two-step-granted")...), true)
		framework.ExpectAdmission(t, "mallory renews it", as(t, mallory, "", "annotate", "--overwrite", "daemonset", "-n", "team-b", "two-step-granted", renewal),
			false, refusedFor(cpt, "mallory")...)
		framework.ExpectAdmission(t, "pat renews it", as(t, pat, "", "annotate", "--overwrite", "daemonset", "-n", "team-b", "two-step-granted", renewal), true)
		framework.ExpectAdmission(t, "mallory removes it (allowed; the deny it lifted stays for the next spec change)",
			as(t, mallory, "", "annotate", "daemonset", "-n", "team-b", "two-step-granted", cpt+"-"), true)
	})

	t.Run("intended coverage: the same gate", func(t *testing.T) {
		const key = "coverage.dsguard.io/intended"
		create(t, "intended-tenant", "team-b", nil)
		framework.ExpectAdmission(t, "mallory adds intended coverage",
			as(t, mallory, "", "annotate", "daemonset", "-n", "team-b", "intended-tenant", key+"=GPU nodes only"), false, refusedFor(key, "mallory")...)
		framework.ExpectAdmission(t, "pat adds intended coverage",
			as(t, pat, "", "annotate", "daemonset", "-n", "team-b", "intended-tenant", key+"=GPU nodes only"), true)
		framework.ExpectAdmission(t, "mallory changes the spec, leaving it",
			as(t, mallory, "", "set", "image", "daemonset/intended-tenant", "-n", "team-b", "node-exporter=quay.io/prometheus/node-exporter:v1.9.0"), true)
		framework.ExpectAdmission(t, "mallory changes it",
			as(t, mallory, "", "annotate", "--overwrite", "daemonset", "-n", "team-b", "intended-tenant", key+"=every node"), false, refusedFor(key, "mallory")...)
	})

	t.Run("a CREATE that carries an exemption by a tenant is refused", func(t *testing.T) {
		ds := compliant(t, "created-exempt", "team-b")
		ds.Labels["gate-test"] = "true"
		ds.Annotations = map[string]string{cpt: "migration OPS-1; expires=" + expires}
		framework.ExpectAdmission(t, "mallory creates it (dry run)", as(t, mallory, toYAML(t, ds), "create", "--dry-run=server", "-f", "-"), false, refusedFor(cpt, "mallory")...)
		framework.ExpectAdmission(t, "mallory creates it", as(t, mallory, toYAML(t, ds), "create", "-f", "-"), false, refusedFor(cpt, "mallory")...)
		framework.ExpectAdmission(t, "pat creates it", as(t, pat, toYAML(t, ds), "create", "-f", "-"), true)
	})

	t.Run("the audit lists only the annotations that take effect", func(t *testing.T) {
		// team-a is outside exemptions.allowedNamespaces: pat's intended
		// coverage there is void, and the DaemonSet's skipped control
		// plane (admitted with a warning: team-a only warns) stays a gap.
		voided := compliant(t, "intended-voided", "team-a")
		voided.Labels["gate-test"] = "true"
		voided.Annotations = map[string]string{"coverage.dsguard.io/intended": "not on the control plane"}
		voided.Spec.Template.Spec.Tolerations = nil
		framework.ExpectAdmission(t, "pat creates it in team-a", as(t, pat, toYAML(t, voided), "create", "-f", "-"), true,
			"intended-coverage annotation is void: the policy allows exemptions only in namespaces team-b")
		create(t, "intended-granted", "team-b", map[string]string{"coverage.dsguard.io/intended": "every node; declared for the audit"})

		type item struct {
			Namespace, Name, Intended string
			HasGap, GroupsNotChecked  bool
			Predicted                 struct{ Skipped int }
			Findings                  []struct{ Rule, Message string }
		}
		items := map[string]item{}
		for _, ns := range []string{"team-a", "team-b"} {
			r := cluster.RunDsguard(t.Context(), "audit", "-n", ns, "-o", "json")
			if r.ExitCode != 0 {
				t.Fatalf("dsguard audit -n %s: %s", ns, r.Error())
			}
			var report struct{ Items []item }
			if err := json.Unmarshal([]byte(r.Stdout), &report); err != nil {
				t.Fatalf("dsguard audit -o json: %v\n%s", err, r.Stdout)
			}
			for _, it := range report.Items {
				items[it.Namespace+"/"+it.Name] = it
			}
		}
		v, ok := items["team-a/intended-voided"]
		if !ok {
			t.Fatalf("the audit does not list team-a/intended-voided: %v", items)
		}
		if v.Intended != "" || v.Predicted.Skipped != 1 || !v.HasGap {
			t.Errorf("team-a/intended-voided: intended %q, skipped %d, hasGap %v; want no intended coverage and the skipped "+
				"control plane a gap", v.Intended, v.Predicted.Skipped, v.HasGap)
		}
		voidedFinding := false
		for _, f := range v.Findings {
			voidedFinding = voidedFinding || f.Rule == "invalid-annotation" && strings.Contains(f.Message, "intended-coverage annotation is void")
		}
		if !voidedFinding {
			t.Errorf("team-a/intended-voided: want an invalid-annotation finding saying the intended coverage is void: %+v", v.Findings)
		}
		g := items["team-b/intended-granted"]
		if g.Intended != "every node; declared for the audit" || !g.GroupsNotChecked {
			t.Errorf("team-b/intended-granted: intended %q, groupsNotChecked %v; want it listed, with the group gate said unchecked",
				g.Intended, g.GroupsNotChecked)
		}
	})
}
