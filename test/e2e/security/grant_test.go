package security

import (
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/test/e2e/framework"
)

// grantRBAC: tenants may write DaemonSets in team-a and team-b and, as a
// wildcard tenant Role gives it, patch their status; gina may grant
// exemptions everywhere, by a RoleBinding in dsguard's namespace to the
// chart's exemption-granter ClusterRole, and nina in team-a only, by a Role
// there that names it.
var grantRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: grant-daemonset-author
rules:
  - apiGroups: [apps]
    resources: [daemonsets, daemonsets/status]
    verbs: [get, list, watch, create, update, patch, delete]
` + tenantAuthors("team-a") + tenantAuthors("team-b") + `---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: grant-exemption-granters, namespace: ` + framework.Namespace + `}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: dsguard-exemption-granter}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: gina}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: grant-exemptions-team-a, namespace: ` + framework.Namespace + `}
rules:
  - apiGroups: [dsguard.io]
    resources: [exemptions]
    resourceNames: [team-a]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: grant-exemptions-team-a, namespace: ` + framework.Namespace + `}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: grant-exemptions-team-a}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: nina}]
`

// Who acts besides mallory: gina and nina may grant (above), and are
// tenants too, so that they may edit the DaemonSets.
var (
	gina = []string{"--as=gina", "--as-group=tenants", "--as-group=system:authenticated"}
	nina = []string{"--as=nina", "--as-group=tenants", "--as-group=system:authenticated"}
)

// TestExemptionGate_GrantedByRBAC: under the chart's default policy, with
// no exemptions.allowedGroups, a tenant who may edit a DaemonSet may not
// exempt it; whoever RBAC lets create exemptions.dsguard.io in dsguard's
// namespace may (everywhere, or in the namespaces its resourceNames name);
// and nobody may write an exemption through daemonsets/status, whose
// updates the API server stores with the new metadata: before, a tenant
// with status rights (a wildcard Role) could self-exempt there and the next
// ordinary update trusted the exemption as unchanged.
func TestExemptionGate_GrantedByRBAC(t *testing.T) {
	rbac := chartGranterRole(t) + "---\n" + grantRBAC
	if r := kubectl(t, rbac, "apply", "-f", "-"); r.ExitCode != 0 {
		t.Fatal(r.Error())
	}
	defer kubectl(t, rbac, "delete", "--ignore-not-found", "-f", "-")
	for _, ns := range []string{"team-a", "team-b"} {
		defer kubectl(t, "", "delete", "daemonset", "-n", ns, "-l", "grant-test=true", "--ignore-not-found")
	}
	const cpt = "exempt.dsguard.io/control-plane-toleration"
	grant := cpt + "=migration OPS-2; expires=" + time.Now().UTC().AddDate(0, 0, 30).Format(time.DateOnly)
	create := func(t *testing.T, name, ns string) {
		t.Helper()
		ds := compliant(t, name, ns)
		ds.Labels["grant-test"] = "true"
		if r := kubectl(t, toYAML(t, ds), "create", "-f", "-"); r.ExitCode != 0 {
			t.Fatalf("creating %s/%s: %s", ns, name, r.Stderr)
		}
	}
	refusedIn := func(ns, user string) []string {
		return []string{"denied the request", "dsguard refuses the change to annotation " + cpt,
			`only cluster admins and whoever RBAC allows to create exemptions.dsguard.io named "` + ns + `" in namespace ` + framework.Namespace,
			"(exemptions.grantedByRBAC), and " + user + " is not one of them", "fix: ask one of them to apply it"}
	}
	annotation := func(t *testing.T, ns, name string) string {
		t.Helper()
		r := kubectl(t, "", "get", "daemonset", "-n", ns, name, "-o", `jsonpath={.metadata.annotations.exempt\.dsguard\.io/control-plane-toleration}`)
		if r.ExitCode != 0 {
			t.Fatal(r.Error())
		}
		return r.Stdout
	}
	statusPatch := func(key, value string) []string {
		return []string{"patch", "--subresource=status", "--type=merge", "-p", `{"metadata":{"annotations":{"` + key + `":"` + value + `"}}}`}
	}
	dropTolerations := []string{"patch", "--type=json", "-p", `[{"op":"remove","path":"/spec/template/spec/tolerations"}]`}

	t.Run("a tenant may not exempt their DaemonSet, so dropping the tolerations stays denied", func(t *testing.T) {
		create(t, "grant-tenant", "team-b")
		framework.ExpectAdmission(t, "mallory adds the exemption",
			as(t, mallory, "", "annotate", "daemonset", "-n", "team-b", "grant-tenant", grant), false, refusedIn("team-b", "mallory")...)
		framework.ExpectAdmission(t, "mallory drops the tolerations",
			as(t, mallory, "", append(dropTolerations, "daemonset", "-n", "team-b", "grant-tenant")...), false, "[control-plane-toleration]")
	})

	t.Run("whoever RBAC lets grant may, where it lets them", func(t *testing.T) {
		create(t, "grant-gina", "team-b")
		framework.ExpectAdmission(t, "gina adds the exemption", as(t, gina, "", "annotate", "daemonset", "-n", "team-b", "grant-gina", grant), true)
		framework.ExpectAdmission(t, "mallory drops the tolerations, leaving it",
			as(t, mallory, "", append(dropTolerations, "daemonset", "-n", "team-b", "grant-gina")...), true)
		create(t, "grant-nina", "team-a")
		framework.ExpectAdmission(t, "nina adds it in team-a", as(t, nina, "", "annotate", "daemonset", "-n", "team-a", "grant-nina", grant), true)
		create(t, "grant-nina", "team-b")
		framework.ExpectAdmission(t, "nina adds it in team-b", as(t, nina, "", "annotate", "daemonset", "-n", "team-b", "grant-nina", grant),
			false, refusedIn("team-b", "nina")...)
		create(t, "grant-admin", "team-b")
		framework.ExpectAdmission(t, "a cluster admin adds it", kubectl(t, "", "annotate", "daemonset", "-n", "team-b", "grant-admin", grant), true)
	})

	t.Run("nobody writes an exemption through daemonsets/status", func(t *testing.T) {
		create(t, "grant-status", "team-b")
		key, value, _ := strings.Cut(grant, "=")
		for _, who := range []struct {
			name string
			as   []string
		}{{"mallory", mallory}, {"gina", gina}, {"a cluster admin", nil}} {
			framework.ExpectAdmission(t, who.name+" patches the exemption in through status",
				as(t, who.as, "", append(statusPatch(key, value), "daemonset", "-n", "team-b", "grant-status")...), false,
				"denied the request", "dsguard refuses the change to annotation "+cpt+" through the status subresource",
				"fix: have someone who may grant exemptions run kubectl annotate daemonset grant-status")
		}
		if got := annotation(t, "team-b", "grant-status"); got != "" {
			t.Fatalf("the exemption was stored through status: %q", got)
		}
		framework.ExpectAdmission(t, "mallory drops the tolerations",
			as(t, mallory, "", append(dropTolerations, "daemonset", "-n", "team-b", "grant-status")...), false, "[control-plane-toleration]")
		// The entry's matchConditions let every other status write
		// through, unjudged: the controller's counters never wait for
		// dsguard.
		framework.ExpectAdmission(t, "mallory writes another annotation through status",
			as(t, mallory, "", append(statusPatch("example.com/owner", "team-b"), "daemonset", "-n", "team-b", "grant-status")...), true)
		framework.ExpectAdmission(t, "status counters",
			kubectl(t, "", "patch", "daemonset", "-n", "team-b", "grant-status", "--subresource=status", "--type=merge",
				"-p", `{"status":{"desiredNumberScheduled":3}}`), true)
	})
}

// chartGranterRole is the chart's exemption-granter ClusterRole, rendered.
func chartGranterRole(t *testing.T) string {
	t.Helper()
	r := cluster.Helm(t.Context(), "template", "dsguard", "charts/dsguard", "--namespace", framework.Namespace,
		"--show-only", "templates/clusterrole.yaml")
	if r.Err != nil {
		t.Fatal(r.Error())
	}
	for _, doc := range strings.Split(r.Stdout, "\n---\n") {
		if strings.Contains(doc, "kind: ClusterRole\n") && strings.Contains(doc, "name: dsguard-exemption-granter\n") {
			return doc + "\n"
		}
	}
	t.Fatalf("the chart renders no ClusterRole dsguard-exemption-granter:\n%s", r.Stdout)
	return ""
}

// tenantAuthors binds the tenants group to grant-daemonset-author in ns.
func tenantAuthors(ns string) string {
	return "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n" +
		"metadata: {name: grant-daemonset-authors, namespace: " + ns + "}\n" +
		"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: grant-daemonset-author}\n" +
		"subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: tenants}]\n"
}
