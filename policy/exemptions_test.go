package policy_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// TestPolicy_RefuseAnnotationChanges: an exemption or intended-coverage
// annotation that a request adds or changes is refused unless its requester
// may grant exemptions (RBAC, by default, or exemptions.allowedGroups), so
// that one an update leaves unchanged was written by a permitted person. The
// authorizer is asked only when a gated annotation is written.
func TestPolicy_RefuseAnnotationChanges(t *testing.T) {
	const (
		cpt      = policy.ExemptionAnnotationPrefix + "control-plane-toleration"
		intended = policy.IntendedCoverageAnnotation
		grant    = "migrating; expires=2026-04-01"
		gated    = "exemptions: {grantedByRBAC: false, allowedGroups: [platform-team, sre]}\n"
		both     = "exemptions: {allowedGroups: [platform-team, sre]}\n"
		anyone   = "exemptions: {grantedByRBAC: false}\n"
	)
	mallory := policy.Requester{Username: "mallory", Groups: []string{"system:authenticated", "team-a"}}
	pat := policy.Requester{Username: "pat", Groups: []string{"system:authenticated", "sre"}}
	// rbac answers as the authorizer would: gina may grant in the
	// DaemonSet's namespace; an error for errol.
	rbac := func(user string) (bool, error) {
		switch user {
		case "gina":
			return true, nil
		case "errol":
			return false, errors.New("the server is currently unable to handle the request")
		}
		return false, nil
	}
	gina := policy.Requester{Username: "gina", Groups: []string{"system:authenticated"}}
	errol := policy.Requester{Username: "errol"}
	groupsOnly := []string{"platform-team, sre", "exemptions.allowedGroups", "ask a member of platform-team, sre to apply it"}
	byRBAC := []string{`cluster admins and whoever RBAC allows to create exemptions.dsguard.io named "monitoring" in namespace dsguard-system`,
		"exemptions.grantedByRBAC", "is not one of them", "ask one of them to apply it"}
	tests := []struct {
		name        string
		policy      string
		annotations map[string]string
		previous    map[string]string // nil: CREATE
		requester   policy.Requester
		refused     []string // keys
		says        []string // in the message, beside the keys and the requester
		asked       bool     // whether the authorizer is asked
	}{
		{name: "neither RBAC nor allowedGroups: anyone may", policy: anyone, annotations: map[string]string{cpt: grant}, requester: mallory},
		{name: "CREATE with an exemption by an outsider", policy: gated, annotations: map[string]string{cpt: grant},
			requester: mallory, refused: []string{cpt}, says: groupsOnly},
		{name: "CREATE with intended coverage by an outsider", policy: gated, annotations: map[string]string{intended: "GPU nodes only"},
			requester: mallory, refused: []string{intended}, says: groupsOnly},
		{name: "UPDATE that adds an exemption (step 1 of the two-step)", policy: gated, annotations: map[string]string{cpt: grant},
			previous: map[string]string{"team": "a"}, requester: mallory, refused: []string{cpt}, says: groupsOnly},
		{name: "UPDATE that changes (renews) an exemption", policy: gated, annotations: map[string]string{cpt: "migrating; expires=2026-05-01"},
			previous: map[string]string{cpt: grant}, requester: mallory, refused: []string{cpt}, says: groupsOnly},
		{name: "UPDATE that changes only white space", policy: gated, annotations: map[string]string{intended: "GPU nodes only "},
			previous: map[string]string{intended: "GPU nodes only"}, requester: mallory, refused: []string{intended}, says: groupsOnly},
		{name: "UPDATE that leaves them unchanged (step 2 after a permitted step 1)", policy: gated,
			annotations: map[string]string{cpt: grant, intended: "GPU"}, previous: map[string]string{cpt: grant, intended: "GPU"}, requester: mallory},
		{name: "UPDATE that removes them", policy: gated, annotations: map[string]string{"team": "a"},
			previous: map[string]string{cpt: grant, intended: "GPU"}, requester: mallory},
		{name: "an exemption that names no rule is gated too", policy: gated, annotations: map[string]string{policy.ExemptionAnnotationPrefix + "no-such-rule": "x"},
			requester: mallory, refused: []string{policy.ExemptionAnnotationPrefix + "no-such-rule"}, says: groupsOnly},
		{name: "other annotations are not gated", policy: gated, annotations: map[string]string{"example.com/exempt": "x", "dsguard.io/other": "y"},
			requester: mallory},
		{name: "a member of one of the groups", policy: gated, annotations: map[string]string{cpt: grant, intended: "GPU"}, requester: pat},
		{name: "a user named like a group is no member", policy: gated, annotations: map[string]string{cpt: grant},
			requester: policy.Requester{Username: "platform-team"}, refused: []string{cpt}, says: groupsOnly},
		{name: "several, sorted; the unchanged one not named", policy: gated,
			annotations: map[string]string{intended: "GPU", cpt: grant, policy.ExemptionAnnotationPrefix + "privileged": "y"},
			previous:    map[string]string{policy.ExemptionAnnotationPrefix + "privileged": "y"}, requester: mallory,
			refused: []string{intended, cpt}, says: groupsOnly},

		{name: "the default: RBAC refuses an outsider", annotations: map[string]string{cpt: grant}, requester: mallory,
			refused: []string{cpt}, says: byRBAC, asked: true},
		{name: "the default: RBAC lets gina", annotations: map[string]string{cpt: grant}, requester: gina, asked: true},
		{name: "the default: nothing written, nobody asked", annotations: map[string]string{cpt: grant}, previous: map[string]string{cpt: grant},
			requester: mallory},
		{name: "the default: a removal, nobody asked", annotations: map[string]string{}, previous: map[string]string{cpt: grant}, requester: mallory},
		{name: "the authorizer cannot answer: refused, saying why", annotations: map[string]string{intended: "GPU"}, requester: errol,
			refused: []string{intended}, says: append([]string{"dsguard could not ask the API server: the server is currently unable"}, byRBAC...), asked: true},
		{name: "RBAC and groups: a member is not asked", policy: both, annotations: map[string]string{cpt: grant}, requester: pat},
		{name: "RBAC and groups: an outsider", policy: both, annotations: map[string]string{cpt: grant}, requester: mallory, refused: []string{cpt},
			says: append([]string{"and members of platform-team, sre may", "(exemptions.grantedByRBAC, exemptions.allowedGroups)"}, byRBAC...), asked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := rules.Builtin().Parse([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n" + tt.policy))
			if err != nil {
				t.Fatal(err)
			}
			ds := testobj.DS()
			ds.Annotations = tt.annotations
			r := tt.requester
			asked := false
			r.MayGrant = func(namespace string) (bool, error) {
				asked = true
				if namespace != ds.Namespace {
					t.Errorf("the authorizer is asked about namespace %q, the DaemonSet's is %q", namespace, ds.Namespace)
				}
				return rbac(r.Username)
			}
			r.Grantors = func(namespace string) string { return policy.GrantorsPhrase("dsguard-system", namespace, "") }
			got := p.RefuseAnnotationChanges(ds, tt.previous, r)
			if asked != tt.asked {
				t.Errorf("the authorizer asked: %v, want %v", asked, tt.asked)
			}
			if tt.refused == nil {
				if got != nil {
					t.Fatalf("refused %v, want admitted:\n%s", got.Keys, got.Message())
				}
				return
			}
			if got == nil {
				t.Fatalf("admitted, want %v refused", tt.refused)
			}
			if !slices.Equal(got.Keys, tt.refused) {
				t.Errorf("refused %v, want %v", got.Keys, tt.refused)
			}
			msg := got.Message()
			for _, want := range append(append([]string{tt.requester.Username, "removing it is always allowed"}, tt.says...), tt.refused...) {
				if !strings.Contains(msg, want) {
					t.Errorf("message lacks %q:\n%s", want, msg)
				}
			}
		})
	}
}
