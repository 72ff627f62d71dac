package check

import (
	"strings"
	"testing"
	"time"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// TestRun_ExemptionGateOffline: check applies the namespace gate (an
// exemption outside exemptions.allowedNamespaces is void and the deny
// stands) and says that it cannot apply the group gate.
func TestRun_ExemptionGateOffline(t *testing.T) {
	expires := time.Now().UTC().AddDate(0, 0, 30).Format(time.DateOnly)
	ds := func(annotations string) string {
		return "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\n  annotations: {" + annotations + "}\n" +
			"spec:\n  selector: {matchLabels: {app: a}}\n  template:\n    metadata: {labels: {app: a}}\n" +
			"    spec:\n      containers: [{name: a, image: example/agent:v1}]\n"
	}
	exempt := `"exempt.dsguard.io/control-plane-toleration": "migrating; expires=` + expires + `"`
	tests := []struct {
		name, policy, namespace, manifest string
		verdict                           Verdict
		note                              bool // "groups not checked offline"
	}{
		{"no gate: the exemption holds", "exemptions: {grantedByRBAC: false}\n", "team-b", ds(exempt), VerdictWarn, false},
		{"the default, RBAC: not checked, and said so", "", "team-b", ds(exempt), VerdictWarn, true},
		{"namespace gate: void outside allowedNamespaces", "exemptions: {grantedByRBAC: false, allowedNamespaces: [platform]}\n", "team-b", ds(exempt), VerdictDeny, false},
		{"namespace gate: holds inside", "exemptions: {grantedByRBAC: false, allowedNamespaces: [platform]}\n", "platform", ds(exempt), VerdictWarn, false},
		{"group gate: not checked, and said so", "exemptions: {grantedByRBAC: false, allowedGroups: [platform-team]}\n", "team-b", ds(exempt), VerdictWarn, true},
		{"group gate, intended coverage: said so", "exemptions: {allowedGroups: [platform-team]}\n", "team-b",
			ds(`"coverage.dsguard.io/intended": "GPU only"`), VerdictDeny, true},
		{"group gate, no such annotation: nothing to say", "exemptions: {allowedGroups: [platform-team]}\n", "team-b", ds(""), VerdictDeny, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := rules.Builtin().Parse([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n" + tt.policy))
			if err != nil {
				t.Fatal(err)
			}
			r, err := Run(Input{Paths: []string{"-"}, Stdin: strings.NewReader(tt.manifest), Namespace: tt.namespace,
				Env: policy.Env{Policy: p, Now: time.Now()}})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Results[0].Verdict(); got != tt.verdict {
				t.Errorf("verdict %s, want %s: %+v", got, tt.verdict, r.Results[0].Findings)
			}
			notes := strings.Join(r.Notes, "\n")
			if got := strings.Contains(notes, "groups not checked offline: 1 DaemonSet carries"); got != tt.note {
				t.Errorf("note said = %v, want %v:\n%s", got, tt.note, notes)
			}
		})
	}
}
