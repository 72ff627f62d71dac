package policy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// TestPolicy_RefuseAnnotationChanges: with exemptions.allowedGroups set, an
// exemption or intended-coverage annotation that a request adds or changes is
// refused unless its requester is in one of the groups, so that one an
// update leaves unchanged was written by a permitted person.
func TestPolicy_RefuseAnnotationChanges(t *testing.T) {
	const (
		cpt      = policy.ExemptionAnnotationPrefix + "control-plane-toleration"
		intended = policy.IntendedCoverageAnnotation
		grant    = "migrating; expires=2026-04-01"
		gated    = "exemptions: {allowedGroups: [platform-team, sre]}\n"
	)
	mallory := policy.Requester{Username: "mallory", Groups: []string{"system:authenticated", "team-a"}}
	pat := policy.Requester{Username: "pat", Groups: []string{"system:authenticated", "sre"}}
	tests := []struct {
		name        string
		policy      string
		annotations map[string]string
		previous    map[string]string // nil: CREATE
		requester   policy.Requester
		refused     []string // keys
	}{
		{name: "no allowedGroups: anyone may", annotations: map[string]string{cpt: grant}, requester: mallory},
		{name: "CREATE with an exemption by an outsider", policy: gated, annotations: map[string]string{cpt: grant},
			requester: mallory, refused: []string{cpt}},
		{name: "CREATE with intended coverage by an outsider", policy: gated, annotations: map[string]string{intended: "GPU nodes only"},
			requester: mallory, refused: []string{intended}},
		{name: "UPDATE that adds an exemption (step 1 of the two-step)", policy: gated, annotations: map[string]string{cpt: grant},
			previous: map[string]string{"team": "a"}, requester: mallory, refused: []string{cpt}},
		{name: "UPDATE that changes (renews) an exemption", policy: gated, annotations: map[string]string{cpt: "migrating; expires=2026-05-01"},
			previous: map[string]string{cpt: grant}, requester: mallory, refused: []string{cpt}},
		{name: "UPDATE that changes only white space", policy: gated, annotations: map[string]string{intended: "GPU nodes only "},
			previous: map[string]string{intended: "GPU nodes only"}, requester: mallory, refused: []string{intended}},
		{name: "UPDATE that leaves them unchanged (step 2 after a permitted step 1)", policy: gated,
			annotations: map[string]string{cpt: grant, intended: "GPU"}, previous: map[string]string{cpt: grant, intended: "GPU"}, requester: mallory},
		{name: "UPDATE that removes them", policy: gated, annotations: map[string]string{"team": "a"},
			previous: map[string]string{cpt: grant, intended: "GPU"}, requester: mallory},
		{name: "an exemption that names no rule is gated too", policy: gated, annotations: map[string]string{policy.ExemptionAnnotationPrefix + "no-such-rule": "x"},
			requester: mallory, refused: []string{policy.ExemptionAnnotationPrefix + "no-such-rule"}},
		{name: "other annotations are not gated", policy: gated, annotations: map[string]string{"example.com/exempt": "x", "dsguard.io/other": "y"},
			requester: mallory},
		{name: "a member of one of the groups", policy: gated, annotations: map[string]string{cpt: grant, intended: "GPU"}, requester: pat},
		{name: "a user named like a group is no member", policy: gated, annotations: map[string]string{cpt: grant},
			requester: policy.Requester{Username: "platform-team"}, refused: []string{cpt}},
		{name: "several, sorted; the unchanged one not named", policy: gated,
			annotations: map[string]string{intended: "GPU", cpt: grant, policy.ExemptionAnnotationPrefix + "privileged": "y"},
			previous:    map[string]string{policy.ExemptionAnnotationPrefix + "privileged": "y"}, requester: mallory,
			refused: []string{intended, cpt}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := rules.Builtin().Parse([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n" + tt.policy))
			if err != nil {
				t.Fatal(err)
			}
			ds := testobj.DS()
			ds.Annotations = tt.annotations
			got := p.RefuseAnnotationChanges(ds, tt.previous, tt.requester)
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
			for _, want := range append([]string{tt.requester.Username, "platform-team, sre", "exemptions.allowedGroups",
				"ask a member of platform-team, sre to apply it", "removing it is always allowed"}, tt.refused...) {
				if !strings.Contains(msg, want) {
					t.Errorf("message lacks %q:\n%s", want, msg)
				}
			}
		})
	}
}
