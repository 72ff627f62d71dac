package fit

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// benchCluster is nodes nodes in three zones with podsPerNode Pods each.
func benchCluster(b *testing.B, nodes, podsPerNode int) (*Cluster, []string) {
	b.Helper()
	bl := NewBuilder()
	names := make([]string, nodes)
	for i := range nodes {
		name := fmt.Sprintf("node-%05d", i)
		names[i] = name
		bl.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%3),
			"node.kubernetes.io/instance-type": "m6i.2xlarge", "kubernetes.io/os": "linux"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
				corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}}})
		for j := range podsPerNode {
			if err := bl.AddPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("p-%d-%d", i, j),
				Labels: map[string]string{"app": fmt.Sprintf("w-%d", j)}},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}},
				Status: corev1.PodStatus{Phase: corev1.PodRunning}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	return bl.Build(), names
}

// BenchmarkPredictDaemonSet: one DaemonSet's prediction on every node of a
// 5,000-node cluster with 10 Pods per node, as admission makes it; with a
// zone anti-affinity term, the zones' Pods are looked at through the
// domain index, not by comparing every node with every other.
func BenchmarkPredictDaemonSet(b *testing.B) {
	c, names := benchCluster(b, 5000, 10)
	for _, term := range []struct {
		name string
		key  string
	}{{"no anti-affinity", ""}, {"zone anti-affinity", corev1.LabelTopologyZone}} {
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "agent"}}
		ds.Spec.Template.Labels = map[string]string{"app": "agent"}
		ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}
		if term.key != "" {
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: term.key,
					Namespaces:    []string{"apps"},
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "absent"}}}}}}
		}
		b.Run(term.name, func(b *testing.B) {
			for b.Loop() {
				if r := c.PredictDaemonSet(ds, names); r.Covered() != len(names) {
					b.Fatalf("%d outcomes", r.Covered())
				}
			}
		})
	}
}
