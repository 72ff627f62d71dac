package audit

import (
	"fmt"
	"io"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy/rules"
)

// BenchmarkAudit measures one audit pass of `dsguard audit -A` after the API
// reads: 500 DaemonSets on 1,000 nodes (20 pools, a tainted control plane),
// rendered as the wide table. Target: well under 2 seconds.
func BenchmarkAudit(b *testing.B) {
	var nodes []*corev1.Node
	for i := range 1000 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i), Labels: map[string]string{
			"kubernetes.io/hostname": fmt.Sprintf("node-%04d", i), "kubernetes.io/os": "linux",
			"pool": fmt.Sprintf("pool-%d", i%20), "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3),
		}}}
		if i < 3 {
			n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
		}
		if i%20 == 7 {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
		}
		nodes = append(nodes, n)
	}
	var dss []*appsv1.DaemonSet
	for i := range 500 {
		ds := auditDS(fmt.Sprintf("agent-%03d", i), 950, 950-int32(i%3))
		ds.Namespace = fmt.Sprintf("team-%02d", i%40)
		if i%2 == 0 {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		if i%10 == 0 {
			ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": fmt.Sprintf("pool-%d", i%20)}
		}
		dss = append(dss, ds)
	}
	pol := rules.Builtin().Default()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		snap := coverage.NewNodeSnapshot(nodes)
		entries := Run(Input{DaemonSets: dss, Nodes: snap, Policy: pol, Now: now, Window: 5 * time.Minute})
		if err := WriteTable(io.Discard, entries, true); err != nil {
			b.Fatal(err)
		}
	}
}
