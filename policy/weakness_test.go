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

		// Globs that together match every namespace.
		{"every namespace capped by a single ?*", "namespaceEnforcement: [{namespaces: [\"?*\"], enforcement: warn}]\n", nil, []string{"namespace-lowered"}},
		{"every namespace capped by ranges that cover all", "namespaceEnforcement: [{namespaces: [\"[a-m]*\", \"[n-z]*\", \"[0-9]*\"], enforcement: audit}]\n",
			nil, []string{"namespace-lowered"}},
		{"ranges that leave digits out", "namespaceEnforcement: [{namespaces: [\"[a-m]*\", \"[n-z]*\"], enforcement: warn}]\n", nil, nil},

		// Scopes that leave a deny rule nowhere to apply.
		{"a deny rule excluded from every namespace", "rules:\n  control-plane-toleration: {scope: {namespaces: {exclude: [\"*\"]}}}\n", nil, []string{"rule-scoped-away"}},
		{"a deny rule excluded by ranges that cover all", "rules:\n  surge-host-port: {scope: {namespaces: {exclude: [\"[a-z]*\", \"[0-9]*\"]}}}\n", nil, []string{"rule-scoped-away"}},
		{"a deny rule excluded from a few namespaces", "rules:\n  surge-host-port: {scope: {namespaces: {exclude: [\"legacy-*\"]}}}\n", nil, nil},
		{"a deny rule with a selector both requiring and forbidding a label",
			"rules:\n  control-plane-toleration:\n    scope:\n      selector:\n        matchExpressions:\n        - {key: tier, operator: Exists}\n        - {key: tier, operator: DoesNotExist}\n",
			nil, []string{"rule-scoped-away"}},
		{"a deny rule with a selector whose values exclude each other",
			"rules:\n  node-coverage:\n    scope:\n      selector:\n        matchLabels: {tier: a}\n        matchExpressions:\n        - {key: tier, operator: NotIn, values: [a]}\n",
			nil, []string{"rule-scoped-away"}},
		{"a deny rule with two In lists that share no value",
			"rules:\n  surge-host-port:\n    scope:\n      selector:\n        matchExpressions:\n        - {key: tier, operator: In, values: [a, b]}\n        - {key: tier, operator: In, values: [c]}\n",
			nil, []string{"rule-scoped-away"}},
		{"a deny rule with a satisfiable selector",
			"rules:\n  surge-host-port:\n    scope:\n      selector:\n        matchExpressions:\n        - {key: tier, operator: In, values: [a, b]}\n        - {key: tier, operator: NotIn, values: [a]}\n",
			nil, nil},
		{"a warn rule scoped away", "rules:\n  readiness-probe: {scope: {namespaces: {exclude: [\"*\"]}}}\n", nil, nil},

		// Parameters that void a deny rule.
		{"control-plane-toleration with no taints", "rules:\n  control-plane-toleration: {parameters: {taints: []}}\n", nil, []string{"rule-parameters-voided"}},
		{"control-plane-toleration with another taint", "rules:\n  control-plane-toleration: {parameters: {taints: [{key: dedicated, effect: NoSchedule}]}}\n", nil, nil},
		{"node-coverage without denyAtZero", "rules:\n  node-coverage: {parameters: {denyAtZero: false}}\n", nil, []string{"rule-parameters-voided"}},
		{"a voided rule turned off is said once", "rules:\n  control-plane-toleration: {action: \"off\", parameters: {taints: []}}\n", nil, []string{"deny-rule-lowered"}},
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
