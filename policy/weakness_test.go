package policy_test

import (
	"strings"
	"testing"

	"github.com/dsguard/dsguard/policy/rules"
)

func TestPolicy_Weaknesses(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // reasons
	}{
		{"the built-in policy", "", nil},
		{"enforcement audit", "enforcement: audit\n", []string{"enforcement"}},
		{"enforcement warn", "enforcement: warn\n", []string{"enforcement"}},
		{"bypass for every authenticated user", "bypass: {groups: [system:authenticated]}\n", []string{"bypass-broad-group"}},
		{"bypass for every service account", "bypass: {groups: [system:serviceaccounts]}\n", []string{"bypass-broad-group"}},
		{"bypass for a namespace's service accounts", "bypass: {groups: [\"system:serviceaccounts:ci\"]}\n", []string{"bypass-broad-group"}},
		{"bypass for a named break-glass group", "bypass: {groups: [incident-responders]}\n", nil},
		{"bypass for anonymous", "bypass: {users: [system:anonymous]}\n", []string{"bypass-anonymous"}},
		{"a deny rule turned off", "rules:\n  control-plane-toleration: {action: \"off\"}\n", []string{"deny-rule-lowered"}},
		{"a warn rule turned off", "rules:\n  readiness-probe: {action: \"off\"}\n", nil},
		{"every namespace capped at warn", "namespaceEnforcement: [{namespaces: [\"*\"], enforcement: warn}]\n", []string{"namespace-lowered"}},
		{"a few namespaces capped", "namespaceEnforcement: [{namespaces: [\"legacy-*\"], enforcement: warn}]\n", nil},
		{"exemptions for ten years", "exemptions: {maxExemptionDays: 3650}\n", []string{"exemptions-unbounded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := rules.Builtin().Parse([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n" + tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range p.Weaknesses() {
				got = append(got, w.Reason)
				if w.Detail == "" {
					t.Errorf("%s: no detail", w.Reason)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("weaknesses %v, want %v", got, tt.want)
			}
		})
	}
}
