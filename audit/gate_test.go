package audit

import (
	"bytes"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
)

// TestAudit_AnnotationsObeyTheGate: the audit lists only the intended
// coverage and exemptions that take effect. One the namespace gate voids
// silences no gap (so no gap state, report gap, CoverageReduced Event or
// taint alert either, which all read Entry.Intended); the group gate, which
// the audit cannot apply, is said to be unchecked.
func TestAudit_AnnotationsObeyTheGate(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	nodes := coverage.NewNodeSnapshot([]*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "cp-1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}},
	})
	const exemption = "exempt.dsguard.io/privileged"
	tests := []struct {
		name, policy, namespace string
		intended                string // want Entry.Intended
		exempted                bool
		groupsNotChecked        bool
	}{
		{name: "no gate", policy: "exemptions: {grantedByRBAC: false}\n", namespace: "monitoring", intended: "control plane managed by the provider", exempted: true},
		{name: "the default, RBAC, which the audit cannot check", namespace: "monitoring", intended: "control plane managed by the provider",
			exempted: true, groupsNotChecked: true},
		{name: "namespace the gate allows", policy: "exemptions: {grantedByRBAC: false, allowedNamespaces: [platform-*]}\n", namespace: "platform-obs",
			intended: "control plane managed by the provider", exempted: true},
		{name: "namespace the gate voids", policy: "exemptions: {grantedByRBAC: false, allowedNamespaces: [platform-*]}\n", namespace: "team-b"},
		{name: "groups, which the audit cannot check", policy: "exemptions: {allowedGroups: [platform-team]}\n", namespace: "monitoring",
			intended: "control plane managed by the provider", exempted: true, groupsNotChecked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := rules.Builtin().Parse([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n" + tt.policy))
			if err != nil {
				t.Fatal(err)
			}
			ds := auditDS("agent", 1, 1)
			ds.Namespace = tt.namespace
			ds.Annotations = map[string]string{
				policy.IntendedCoverageAnnotation: "control plane managed\nby the provider",
				exemption:                         "the driver needs it; expires=2026-12-31",
			}
			entries := Run(Input{DaemonSets: []*appsv1.DaemonSet{ds}, Nodes: nodes, Policy: p, Now: now})
			e := &entries[0]
			if e.Intended != tt.intended {
				t.Errorf("Intended = %q, want %q", e.Intended, tt.intended)
			}
			if e.Skipped != 1 || e.HasGap() != (tt.intended == "") {
				t.Errorf("skipped %d, HasGap = %v: a voided intended coverage must not hide the gap", e.Skipped, e.HasGap())
			}
			if got := len(e.Exemptions) > 0; got != tt.exempted {
				t.Errorf("exemptions %v, want active = %v", e.Exemptions, tt.exempted)
			}
			if e.GroupsNotChecked != tt.groupsNotChecked {
				t.Errorf("GroupsNotChecked = %v, want %v", e.GroupsNotChecked, tt.groupsNotChecked)
			}
			var table, js bytes.Buffer
			if err := WriteTable(&table, entries, true, false); err != nil {
				t.Fatal(err)
			}
			if err := WriteJSON(&js, entries, true); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(table.String(), "TaintGap"); got == (tt.intended != "") {
				t.Errorf("table state TaintGap shown = %v with intended %q:\n%s", got, tt.intended, table.String())
			}
			if got := strings.Contains(table.String(), "groups not checked offline"); got != tt.groupsNotChecked {
				t.Errorf("table says groups not checked = %v, want %v:\n%s", got, tt.groupsNotChecked, table.String())
			}
			if got := strings.Contains(js.String(), `"groupsNotChecked": true`); got != tt.groupsNotChecked {
				t.Errorf("JSON groupsNotChecked = %v, want %v:\n%s", got, tt.groupsNotChecked, js.String())
			}
		})
	}
}
