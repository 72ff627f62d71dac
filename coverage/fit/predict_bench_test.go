package fit

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// benchShape is what a benchmark cluster holds besides its nodes.
type benchShape struct {
	podsPerNode int
	// agent, when set, is a DaemonSet (namespace/name) with a Pod on every
	// node, as every node agent of a live cluster has.
	agent string
	// full is a node whose Pods leave no cpu free: the cluster-wide least
	// room then decides nothing, and every covered node is weighed.
	full bool
}

// benchCluster is nodes nodes in three zones, shaped as s says.
func benchCluster(b *testing.B, nodes int, s benchShape) (*Cluster, []string) {
	b.Helper()
	bl := NewBuilder()
	names := make([]string, nodes)
	add := func(pod *corev1.Pod) {
		pod.Status.Phase = corev1.PodRunning
		if err := bl.AddPod(pod); err != nil {
			b.Fatal(err)
		}
	}
	cpu := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
	}
	for i := range nodes {
		name := fmt.Sprintf("node-%05d", i)
		names[i] = name
		bl.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%3),
			"node.kubernetes.io/instance-type": "m6i.2xlarge", "kubernetes.io/os": "linux"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
				corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")}}})
		for j := range s.podsPerNode {
			add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("p-%d-%d", i, j),
				Labels: map[string]string{"app": fmt.Sprintf("w-%d", j)}},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Resources: cpu("500m")}}}})
		}
		if s.agent != "" {
			ns, ds, _ := strings.Cut(s.agent, "/")
			add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%05d", ds, i),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds, Controller: ptr.To(true)}}},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "a", Resources: cpu("100m")}}}})
		}
		if s.full && i == nodes/2 {
			add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "big"},
				Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Resources: cpu("8")}}}})
		}
	}
	return bl.Build(), names
}

// BenchmarkPredictDaemonSet: one DaemonSet's prediction on every node of a
// 5,000-node cluster with 10 Pods per node, as admission makes it; with a
// zone anti-affinity term, the zones' Pods are looked at through the
// domain index, not by comparing every node with every other. Where the
// least room decides nothing, every node is weighed by its sums: with the
// DaemonSet's own Pods on every node (its update, or its audit), and
// without (its create).
func BenchmarkPredictDaemonSet(b *testing.B) {
	for _, shape := range []struct {
		name string
		benchShape
	}{
		{"room decides", benchShape{podsPerNode: 10}},
		{"one node full", benchShape{podsPerNode: 10, full: true}},
		{"one node full, own Pods everywhere", benchShape{podsPerNode: 10, full: true, agent: "infra/agent"}},
	} {
		c, names := benchCluster(b, 5000, shape.benchShape)
		for _, term := range []struct {
			name string
			key  string
		}{{"no anti-affinity", ""}, {"zone anti-affinity", corev1.LabelTopologyZone}, {"hostname anti-affinity", corev1.LabelHostname}} {
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
			b.Run(shape.name+"/"+term.name, func(b *testing.B) {
				for b.Loop() {
					if r := c.PredictDaemonSet(ds, names); r.Covered() != len(names) {
						b.Fatalf("%d outcomes", r.Covered())
					}
				}
			})
		}
	}
}
