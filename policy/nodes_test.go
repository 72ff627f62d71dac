package policy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestNewNodeSnapshot_Classes(t *testing.T) {
	const pool = "cloud.example.com/node-pool"
	a, b := noSchedule("example.com/a"), noExecute("example.com/b")
	tests := []struct {
		name    string
		nodes   []any
		classes int
	}{
		{name: "no nodes", nodes: nil, classes: 0},
		{name: "nodes differing only in hostname share a class", nodes: []any{poolNodes("w", 50)}, classes: 1},
		{name: "a node without a hostname label joins them",
			nodes: []any{poolNodes("w", 3), newNode("w-4", withoutNodeLabel(corev1.LabelHostname))}, classes: 1},
		{name: "a different label value is another class",
			nodes: []any{poolNodes("w", 3), newNode("gpu-1", nodeLabels(pool, "gpu"))}, classes: 2},
		{name: "an extra label is another class",
			nodes: []any{newNode("w-1"), newNode("w-2", nodeLabels("extra", ""))}, classes: 2},
		{name: "a missing label is another class than an empty one",
			nodes: []any{newNode("w-1", nodeLabels("extra", "")), newNode("w-2")}, classes: 2},
		{name: "same taints share a class",
			nodes: []any{poolNodes("t", 4, nodeTaints(a, b))}, classes: 1},
		{name: "different taint order is another class",
			nodes: []any{newNode("t-1", nodeTaints(a, b)), newNode("t-2", nodeTaints(b, a))}, classes: 2},
		{name: "taint value and effect count",
			nodes: []any{
				newNode("t-1", nodeTaints(taintOf("k", "v1", corev1.TaintEffectNoSchedule))),
				newNode("t-2", nodeTaints(taintOf("k", "v2", corev1.TaintEffectNoSchedule))),
				newNode("t-3", nodeTaints(taintOf("k", "v1", corev1.TaintEffectNoExecute))),
				newNode("t-4", nodeTaints(taintOf("k", "v1", corev1.TaintEffectNoSchedule))),
			}, classes: 3},
		{name: "a tainted node is another class", nodes: []any{newNode("w-1"), newNode("w-2", nodeTaints(a))}, classes: 2},
		{name: "labels and taints are not confused",
			nodes: []any{
				newNode("x-1", nodeLabels("example.com/a", "")),
				newNode("x-2", nodeTaints(taintOf("example.com/a", "", ""))),
			}, classes: 2},
		{name: "cordon is not part of the class", nodes: []any{newNode("w-1"), newNode("w-2", cordoned)}, classes: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snapshotOf(tt.nodes...)
			if got := s.Classes(); got != tt.classes {
				t.Errorf("Classes() = %d, want %d", got, tt.classes)
			}
			if got, want := s.Len(), len(flattenNodes(tt.nodes)); got != want {
				t.Errorf("Len() = %d, want %d", got, want)
			}
		})
	}
}

func TestNodeSnapshot_HasTaint(t *testing.T) {
	s := snapshotOf(
		poolNodes("w", 3),
		controlPlaneNode("cp-1"),
		newNode("gpu-1", nodeTaints(
			taintOf("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule),
			taintOf("example.com/soft", "", corev1.TaintEffectPreferNoSchedule))),
	)
	tests := []struct {
		key, value string
		effect     corev1.TaintEffect
		want       bool
	}{
		{cpKey, "", corev1.TaintEffectNoSchedule, true},
		{cpKey, "", corev1.TaintEffectNoExecute, false},
		{cpKey, "x", corev1.TaintEffectNoSchedule, false},
		{"nvidia.com/gpu", "", corev1.TaintEffectNoSchedule, true},
		{"nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule, true},
		{"nvidia.com/gpu", "absent", corev1.TaintEffectNoSchedule, false},
		{"example.com/soft", "", corev1.TaintEffectPreferNoSchedule, true},
		{"node-role.kubernetes.io/master", "", corev1.TaintEffectNoSchedule, false},
	}
	for _, tt := range tests {
		if got := s.HasTaint(tt.key, tt.value, tt.effect); got != tt.want {
			t.Errorf("HasTaint(%q, %q, %s) = %v, want %v", tt.key, tt.value, tt.effect, got, tt.want)
		}
	}
	if snapshotOf().HasTaint(cpKey, "", corev1.TaintEffectNoSchedule) {
		t.Errorf("an empty snapshot has a taint")
	}
}

// The snapshot is immutable: changing the nodes it was built from, as an
// informer cache replaces them, does not change it.
func TestNewNodeSnapshot_CopiesLabelsAndTaints(t *testing.T) {
	nodes := []*corev1.Node{newNode("w-1", nodeTaints(noSchedule("example.com/a"))), newNode("w-2", nodeTaints(noSchedule("example.com/a")))}
	s := NewNodeSnapshot(nodes)
	for _, n := range nodes {
		n.Labels[corev1.LabelOSStable] = "windows"
		n.Spec.Taints[0].Key = "example.com/changed"
	}
	if !s.HasTaint("example.com/a", "", corev1.TaintEffectNoSchedule) || s.HasTaint("example.com/changed", "", corev1.TaintEffectNoSchedule) {
		t.Errorf("the snapshot shares taints with its input")
	}
	cov := PredictCoverage(newDS(withTolerations(), withNodeSelector(map[string]string{corev1.LabelOSStable: "linux"})), s)
	assertCoverage(t, cov, 2, 0, []Skip{skipTaint(noSchedule("example.com/a"), "w-1", "w-2")})
}
