package policy_test

import (
	"strings"
	"testing"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

func TestWeakenings(t *testing.T) {
	const header = "apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"
	tests := []struct {
		name     string
		old, new string // documents after the header
		reason   string // "": no weakening at all
		detail   string // a part of the one Detail
	}{
		// Each kind of weakening, alone.
		{"a warn rule turned off", "", "rules:\n  readiness-probe: {action: \"off\"}\n",
			policy.WeakeningRuleLowered, "rules.readiness-probe.action warn → off"},
		{"a deny rule turned off", "", "rules:\n  surge-host-port: {action: \"off\"}\n",
			"deny-rule-lowered", "rules.surge-host-port.action deny → off"},
		{"deny to warn", "", "rules:\n  node-coverage: {action: warn}\n",
			"deny-rule-lowered", "rules.node-coverage.action deny → warn"},
		{"warn to audit", "", "rules:\n  privileged: {action: audit}\n",
			policy.WeakeningRuleLowered, "rules.privileged.action warn → audit"},
		{"enforcement lowered", "", "enforcement: warn\n",
			"enforcement", "enforcement enforce → warn"},
		{"enforcement lowered further", "enforcement: warn\n", "enforcement: audit\n",
			"enforcement", "enforcement warn → audit"},
		{"a namespace capped", "", "namespaceEnforcement: [{namespaces: [kube-system], enforcement: warn}, {namespaces: [\"legacy-*\"], enforcement: audit}]\n",
			"namespace-lowered", "caps namespace legacy- at audit, was deny"},
		{"a namespace capped lower", "", "namespaceEnforcement: [{namespaces: [kube-system], enforcement: audit}]\n",
			"namespace-lowered", "caps namespace kube-system at audit, was warn"},
		{"namespaces included narrowed", "rules:\n  surge-host-port: {scope: {namespaces: {include: [\"team-*\"]}}}\n",
			"rules:\n  surge-host-port: {scope: {namespaces: {include: [team-a]}}}\n",
			policy.WeakeningScopeNarrowed, "rules.surge-host-port.scope.namespaces include [team-*] → [team-a]"},
		{"a namespace excluded", "", "rules:\n  surge-host-port: {scope: {namespaces: {exclude: [legacy]}}}\n",
			policy.WeakeningScopeNarrowed, "namespace legacy (for one) are no longer checked"},
		{"a selector added", "", "rules:\n  node-coverage: {scope: {selector: {matchLabels: {tier: agent}}}}\n",
			policy.WeakeningScopeNarrowed, "rules.node-coverage.scope.selector requires tier=agent"},
		{"a selector's values narrowed", "rules:\n  node-coverage: {scope: {selector: {matchExpressions: [{key: tier, operator: In, values: [a, b]}]}}}\n",
			"rules:\n  node-coverage: {scope: {selector: {matchExpressions: [{key: tier, operator: In, values: [a]}]}}}\n",
			policy.WeakeningScopeNarrowed, "requires tier=a"},
		{"a bypass user added", "", "bypass: {users: [alice]}\n",
			policy.WeakeningBypassAdded, "bypass.users adds alice"},
		{"a bypass group added", "bypass: {groups: [oncall]}\n", "bypass: {groups: [oncall, sre]}\n",
			policy.WeakeningBypassAdded, "bypass.groups adds sre"},
		{"exemptions last longer", "", "exemptions: {maxExemptionDays: 200}\n",
			policy.WeakeningExemptionsWidened, "exemptions.maxExemptionDays 90 → 200"},
		{"anyone may grant exemptions", "", "exemptions: {grantedByRBAC: false}\n",
			policy.WeakeningExemptionsWidened, "anyone who may edit a DaemonSet may now exempt it"},
		{"a group may grant exemptions", "exemptions: {grantedByRBAC: false, allowedGroups: [sre]}\n",
			"exemptions: {grantedByRBAC: false, allowedGroups: [sre, devs]}\n",
			policy.WeakeningExemptionsWidened, "exemptions.allowedGroups adds devs"},
		{"RBAC may grant exemptions beside a group", "exemptions: {grantedByRBAC: false, allowedGroups: [sre]}\n",
			"exemptions: {allowedGroups: [sre]}\n",
			policy.WeakeningExemptionsWidened, "exemptions.grantedByRBAC false → true"},
		{"exemptions in more namespaces", "exemptions: {allowedNamespaces: [team-a]}\n", "exemptions: {allowedNamespaces: [\"team-*\"]}\n",
			policy.WeakeningExemptionsWidened, "now take effect in namespace team- too"},
		{"exemptions in every namespace", "exemptions: {allowedNamespaces: [team-a]}\n", "exemptions: {}\n",
			policy.WeakeningExemptionsWidened, "now take effect everywhere"},
		{"a rule's exemptions allowed again", "rules:\n  node-coverage: {allowExemptions: false}\n", "",
			policy.WeakeningExemptionsWidened, "rules.node-coverage.allowExemptions false → true"},
		{"ratcheting on", "ratcheting: false\n", "ratcheting: true\n",
			policy.WeakeningRatcheting, "ratcheting false → true"},
		{"a lifecycle taint added", "", "lifecycleTaints: [example.com/warming]\n",
			policy.WeakeningLifecycleTaints, "lifecycleTaints adds example.com/warming"},
		{"a lifecycle prefix added over a key", "lifecycleTaints: [example.com/warming]\n", "lifecycleTaints: [\"example.com/*\"]\n",
			policy.WeakeningLifecycleTaints, "lifecycleTaints adds example.com/*"},
		{"a taint to tolerate dropped", "rules:\n  control-plane-toleration: {parameters: {taints: [{key: a, effect: NoSchedule}, {key: b, effect: NoSchedule}]}}\n",
			"rules:\n  control-plane-toleration: {parameters: {taints: [{key: b, effect: NoSchedule}]}}\n",
			"rule-parameters-voided", "rules.control-plane-toleration.parameters.taints drops a:NoSchedule"},
		{"every taint to tolerate dropped", "", "rules:\n  control-plane-toleration: {parameters: {taints: []}}\n",
			"rule-parameters-voided", "rules.control-plane-toleration.parameters."},
		{"maxPercent raised", "", "rules:\n  max-unavailable: {parameters: {maxPercent: 50}}\n",
			"rule-parameters-voided", "rules.max-unavailable.parameters.maxPercent 25 → 50"},
		{"maxCount dropped", "rules:\n  max-unavailable: {parameters: {maxCount: 3}}\n", "",
			"rule-parameters-voided", "rules.max-unavailable.parameters.maxCount 3 → 0 (no cap)"},
		{"a writable host path allowed", "", "rules:\n  host-path-read-only: {parameters: {allowWritable: [/var/lib/agent]}}\n",
			"rule-parameters-voided", "rules.host-path-read-only.parameters.allowWritable adds /var/lib/agent"},

		// Nothing lowered.
		{"the same policy", "enforcement: warn\nbypass: {users: [alice]}\n", "enforcement: warn\nbypass: {users: [alice]}\n", "", ""},
		{"reordered and reformatted",
			"# staged\nbypass:\n  groups: [sre, oncall]\nrules:\n  surge-host-port: {action: warn}\n  privileged: {action: audit}\nenforcement: warn\n",
			"enforcement: warn\nrules:\n  privileged:\n    action: audit\n  surge-host-port:\n    action: warn\nbypass: {groups: [oncall, sre]}\n", "", ""},
		{"warn to deny", "rules:\n  privileged: {action: warn}\n", "rules:\n  privileged: {action: deny}\n", "", ""},
		{"a rule turned on", "rules:\n  surge-host-port: {action: \"off\"}\n", "", "", ""},
		{"enforcement raised", "enforcement: audit\n", "enforcement: warn\n", "", ""},
		{"a namespace cap removed", "", "namespaceEnforcement: []\n", "", ""},
		{"a namespace capped where enforcement already was", "enforcement: warn\n", "enforcement: warn\nnamespaceEnforcement: [{namespaces: [\"*\"], enforcement: warn}]\n", "", ""},
		{"a bypass removed", "bypass: {users: [alice], groups: [sre]}\n", "bypass: {users: [alice]}\n", "", ""},
		{"a scope widened", "rules:\n  surge-host-port: {scope: {namespaces: {include: [team-a], exclude: [legacy]}}}\n", "", "", ""},
		{"a selector dropped", "rules:\n  node-coverage: {scope: {selector: {matchLabels: {tier: agent}}}}\n", "", "", ""},
		{"exemptions shortened and narrowed", "", "exemptions: {maxExemptionDays: 30, allowedNamespaces: [team-a]}\n", "", ""},
		{"ratcheting off", "", "ratcheting: false\n", "", ""},
		{"a lifecycle key under a prefix it had", "lifecycleTaints: [\"example.com/*\"]\n", "lifecycleTaints: [\"example.com/*\", example.com/warming]\n", "", ""},
		{"a taint to tolerate added", "", "rules:\n  control-plane-toleration: {parameters: {taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}, {key: b, effect: NoSchedule}]}}\n", "", ""},
		{"caps tightened", "rules:\n  max-unavailable: {parameters: {maxPercent: 50, maxCount: 5}}\n", "rules:\n  max-unavailable: {parameters: {maxPercent: 10, maxCount: 2}}\n", "", ""},
		{"a writable path below one allowed", "rules:\n  host-path-read-only: {parameters: {allowWritable: [/var/lib]}}\n",
			"rules:\n  host-path-read-only: {parameters: {allowWritable: [/var/lib, /var/lib/agent]}}\n", "", ""},
		{"a rule that was off, changed while off", "rules:\n  surge-host-port: {action: \"off\"}\n",
			"rules:\n  surge-host-port: {action: \"off\", scope: {namespaces: {exclude: [legacy]}}}\n", "", ""},
	}
	reg := rules.Builtin()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parse := func(doc string) *policy.Config {
				t.Helper()
				cfg, err := reg.ParseConfig([]byte(header + doc))
				if err != nil {
					t.Fatal(err)
				}
				return cfg
			}
			got := policy.Weakenings(parse(tt.old), parse(tt.new))
			if tt.reason == "" {
				if len(got) != 0 {
					t.Fatalf("Weakenings = %v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Reason != tt.reason || !strings.Contains(got[0].Detail, tt.detail) {
				t.Fatalf("Weakenings = %v, want one %s containing %q", got, tt.reason, tt.detail)
			}
			if !strings.Contains(strings.Join(policy.WeakeningReasons, " "), tt.reason) {
				t.Errorf("reason %s is not in WeakeningReasons", tt.reason)
			}
		})
	}
	if got := policy.Weakenings(nil, reg.DefaultConfig()); got != nil {
		t.Errorf("Weakenings(nil, built-in) = %v, want none: no old policy, nothing to weaken", got)
	}
}
