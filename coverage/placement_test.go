package coverage

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func placementNode(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	l := map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux"}
	for k, v := range labels {
		l[k] = v
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Spec: corev1.NodeSpec{Taints: taints}}
}

func TestNewPlacement_GroupsEverySkippedNodeByReason(t *testing.T) {
	nodes := []*corev1.Node{
		placementNode("cp-1", map[string]string{"pool": "system"}, corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}),
		placementNode("gpu-1", map[string]string{"pool": "gpu"}),
		placementNode("gpu-2", map[string]string{"pool": "gpu"}, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}),
		placementNode("spot-1", map[string]string{"pool": "spot"}),
		placementNode("win-1", map[string]string{"pool": "gpu", corev1.LabelOSStable: "windows"}),
	}
	tests := []struct {
		name   string
		spec   corev1.PodSpec
		runsOn string
		skips  []string // "reason: nodes"
	}{
		{
			name:   "taints, transient taints and nodeSelector terms",
			spec:   corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelOSStable: "linux", "pool": "gpu"}},
			runsOn: "gpu-1",
			skips: []string{
				"nodeSelector pool=gpu: cp-1,spot-1",
				"nodeSelector kubernetes.io/os=linux: win-1",
				"taint node.kubernetes.io/not-ready:NoSchedule not tolerated: gpu-2 (transient)",
			},
		},
		{
			name: "node affinity terms",
			spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"spot", "system"}}}},
				}}}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
			runsOn: "gpu-1,gpu-2,win-1",
			skips:  []string{"node affinity pool NotIn [spot, system]: cp-1,spot-1"},
		},
		{
			name:   "nodeName",
			spec:   corev1.PodSpec{NodeName: "spot-1"},
			runsOn: "spot-1",
			skips: []string{
				"spec.template.spec.nodeName is spot-1: cp-1,gpu-1,gpu-2,win-1",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: tt.spec}}}
			snap := NewNodeSnapshot(nodes)
			cov := Predict(ds, snap)
			p := NewPlacement(ds, &cov, snap)
			if got := strings.Join(p.RunsOnNodes, ","); got != tt.runsOn || p.RunsOn != len(p.RunsOnNodes) || p.Nodes != len(nodes) {
				t.Errorf("runs on %s (%d of %d), want %s", got, p.RunsOn, p.Nodes, tt.runsOn)
			}
			var skips []string
			total := 0
			for _, s := range p.Skips {
				line := s.Reason + ": " + strings.Join(s.Nodes, ",")
				if s.Transient {
					line += " (transient)"
				}
				skips = append(skips, line)
				total += s.Count
			}
			if strings.Join(skips, "\n") != strings.Join(tt.skips, "\n") {
				t.Errorf("skips:\n%s\nwant:\n%s", strings.Join(skips, "\n"), strings.Join(tt.skips, "\n"))
			}
			if total != p.Skipped || p.Skipped+p.RunsOn != p.Nodes {
				t.Errorf("counts: %d skipped in groups, Skipped %d, RunsOn %d, Nodes %d", total, p.Skipped, p.RunsOn, p.Nodes)
			}
		})
	}
}
