package vap

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

func TestConfinement(t *testing.T) {
	for _, bad := range []string{"", "dsguard", "system:serviceaccount:ns", "system:serviceaccount:ns:sa:x", "system:serviceaccount:ns:sa' || true || '", "system:node:n1"} {
		if _, _, err := Confinement(bad); err == nil {
			t.Errorf("Confinement(%q): want an error, not a policy", bad)
		}
	}
	const user = "system:serviceaccount:dsguard-system:dsguard"
	policy, binding, err := Confinement(user)
	if err != nil {
		t.Fatal(err)
	}
	// The API server loads static objects only under its reserved suffix, and
	// a static binding only of a static policy.
	if !strings.HasSuffix(policy.Name, ".static.k8s.io") || binding.Name != policy.Name || binding.Spec.PolicyName != policy.Name {
		t.Errorf("names: policy %q, binding %q of %q; want one name ending in .static.k8s.io", policy.Name, binding.Name, binding.Spec.PolicyName)
	}
	if got := policy.Spec.MatchConditions[0].Expression; got != "request.userInfo.username == '"+user+"'" {
		t.Errorf("match condition %q does not name %s alone", got, user)
	}
	names := policy.Spec.Variables[0].Expression
	for _, n := range PossibleNames() {
		if !strings.Contains(names, "'"+n+"'") {
			t.Errorf("the generated name %s is missing from the allowed names", n)
		}
	}
	if strings.Count(names, "'") != 2*len(PossibleNames()) {
		t.Errorf("the allowed names hold more than the generated ones: %s", names)
	}
	if !slices.ContainsFunc(policy.Spec.Validations, func(v admissionregistrationv1.Validation) bool { return strings.Contains(v.Expression, "paramRef") }) {
		t.Error("no validation refuses a binding with parameters")
	}
}
