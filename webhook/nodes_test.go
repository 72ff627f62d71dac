package webhook

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
)

func TestStripNode_KeepsOnlyWhatThePredictionReads(t *testing.T) {
	full := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "worker-1", UID: "u1", ResourceVersion: "42",
			Labels:        map[string]string{"kubernetes.io/hostname": "worker-1", "pool": "a"},
			Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.NodeSpec{
			PodCIDR:       "10.0.0.0/24",
			Taints:        []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}},
			Unschedulable: true,
		},
		Status: corev1.NodeStatus{
			Images:     []corev1.ContainerImage{{Names: []string{"registry/image:v1"}, SizeBytes: 1 << 30}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	got, err := StripNode(full)
	if err != nil {
		t.Fatal(err)
	}
	n := got.(*corev1.Node)
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-1", UID: "u1", ResourceVersion: "42", Labels: full.Labels},
		Spec:       corev1.NodeSpec{Taints: full.Spec.Taints, Unschedulable: true},
	}
	if !reflect.DeepEqual(n, want) {
		t.Errorf("stripped node = %+v, want %+v", n, want)
	}
	if other, _ := StripNode("not a node"); other != "not a node" {
		t.Error("objects that are not Nodes must pass through unchanged")
	}
}

func TestCountedGaps_IgnoreTransientTaintsAndSelectors(t *testing.T) {
	cov := &coverage.Coverage{Total: 6, Eligible: 1, Skips: []coverage.Skip{
		{Kind: coverage.SkipTaint, Taint: corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}, Nodes: []string{"infra-1", "infra-2"}},
		{Kind: coverage.SkipTaint, Taint: corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}, Transient: true, Nodes: []string{"joining-1"}},
		{Kind: coverage.SkipSelector, Nodes: []string{"gpu-1"}},
		{Kind: coverage.SkipOSArch, Nodes: []string{"win-1"}},
	}}
	got := countedGaps(cov)
	if len(got) != 2 || got["infra-1"] == "" || got["infra-2"] == "" {
		t.Fatalf("counted gaps = %v, want infra-1 and infra-2 only", got)
	}
	added := newlySkipped(map[string]string{"infra-1": "x"}, got)
	if !reflect.DeepEqual(added, []string{"infra-2"}) {
		t.Errorf("newly skipped = %v, want [infra-2]", added)
	}
	if d := describeNewlySkipped(added, got); d != "infra-2 (taint dedicated=infra:NoSchedule not tolerated)" {
		t.Errorf("description = %q", d)
	}
	if len(newlySkipped(got, map[string]string{"infra-1": "x"})) != 0 {
		t.Error("fewer skipped nodes is not a reduction of coverage")
	}
}
