package clusterview

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
