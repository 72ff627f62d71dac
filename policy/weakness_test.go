package policy_test

import (
	"strings"
	"testing"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

func TestPolicy_Weaknesses(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		// delegate hands these rules to the generated admission
		// policies, as vap+webhook mode does.
		delegate []string
		want     []string // reasons
	}{
		{"the built-in policy", "", nil, nil},
		{"enforcement audit", "enforcement: audit\n", nil, []string{"enforcement"}},
		{"enforcement warn", "enforcement: warn\n", nil, []string{"enforcement"}},
		{"bypass for every authenticated user", "bypass: {groups: [system:authenticated]}\n", nil, []string{"bypass-broad-group"}},
		{"bypass for every service account", "bypass: {groups: [system:serviceaccounts]}\n", nil, []string{"bypass-broad-group"}},
		{"bypass for a namespace's service accounts", "bypass: {groups: [\"system:serviceaccounts:ci\"]}\n", nil, []string{"bypass-broad-group"}},
		{"bypass for a named break-glass group", "bypass: {groups: [incident-responders]}\n", nil, nil},
		{"bypass for anonymous", "bypass: {users: [system:anonymous]}\n", nil, []string{"bypass-anonymous"}},
		{"a deny rule turned off", "rules:\n  control-plane-toleration: {action: \"off\"}\n", nil, []string{"deny-rule-lowered"}},
		{"a warn rule turned off", "rules:\n  readiness-probe: {action: \"off\"}\n", nil, nil},
		{"every namespace capped at warn", "namespaceEnforcement: [{namespaces: [\"*\"], enforcement: warn}]\n", nil, []string{"namespace-lowered"}},
		{"a few namespaces capped", "namespaceEnforcement: [{namespaces: [\"legacy-*\"], enforcement: warn}]\n", nil, nil},
		{"exemptions for ten years", "exemptions: {maxExemptionDays: 3650}\n", nil, []string{"exemptions-unbounded"}},
		{"deny rules delegated to admission policies", "", []string{"surge-host-port", "privileged"}, nil},
		{"a delegated rule configured at warn", "rules:\n  surge-host-port: {action: warn}\n", []string{"surge-host-port"}, []string{"deny-rule-lowered"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := rules.Builtin().ParseConfig([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n" + tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range tt.delegate {
				cfg.Rules.Options(id).Delegated = true
			}
			p, err := policy.Compile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range tt.delegate {
				if got, _ := p.RuleAction(id); got != policy.ActionOff {
					t.Errorf("delegated rule %s compiled as %s, want off", id, got)
				}
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
