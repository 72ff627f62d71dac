package manifest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"
)

// fillers make randfill's objects ones the API server could return: a
// Quantity and a Time are written in their canonical forms, so that the
// comparison is between the two decoders, not of odd values' round trips.
var fillers = []any{
	func(q *resource.Quantity, c randfill.Continue) {
		*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
	},
	func(t *metav1.Time, c randfill.Continue) {
		*t = metav1.NewTime(time.Unix(c.Int63n(1<<32), 0).UTC())
	},
	func(f *metav1.FieldsV1, c randfill.Continue) {
		*f = *metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)
	},
}

// TestDecodeNodeAndPod_AsEncodingJSON: what the wire forms keep of random
// Nodes and Pods is what encoding/json decodes of the same bytes, field for
// field; only what they leave out on purpose differs.
func TestDecodeNodeAndPod_AsEncodingJSON(t *testing.T) {
	f := randfill.NewWithSeed(1).NilChance(0.2).NumElements(0, 3).Funcs(fillers...)
	for i := range 300 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var node corev1.Node
			f.Fill(&node)
			data, err := json.Marshal(&node)
			if err != nil {
				t.Fatal(err)
			}
			var want corev1.Node
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			want.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
			want.ManagedFields, want.Finalizers, want.DeletionGracePeriodSeconds, want.Generation, want.SelfLink = nil, nil, nil, 0, ""
			kept := corev1.NodeStatus{Capacity: want.Status.Capacity, Allocatable: want.Status.Allocatable}
			for _, c := range want.Status.Conditions {
				kept.Conditions = append(kept.Conditions, corev1.NodeCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
			}
			kept.NodeInfo.OperatingSystem, kept.NodeInfo.Architecture = want.Status.NodeInfo.OperatingSystem, want.Status.NodeInfo.Architecture
			kept.NodeInfo.KubeletVersion = want.Status.NodeInfo.KubeletVersion
			want.Status = kept
			got, _, err := decodeNode(data)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, &want) {
				t.Errorf("Node differs (encoding/json, then decodeNode):\n%s", jsonDiff(&want, got))
			}

			var pod corev1.Pod
			f.Fill(&pod)
			if data, err = json.Marshal(&pod); err != nil {
				t.Fatal(err)
			}
			var wantPod corev1.Pod
			if err := json.Unmarshal(data, &wantPod); err != nil {
				t.Fatal(err)
			}
			wantPod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
			wantPod.ManagedFields, wantPod.Finalizers, wantPod.DeletionGracePeriodSeconds, wantPod.Generation, wantPod.SelfLink = nil, nil, nil, 0, ""
			wantPod.Spec.EphemeralContainers = nil
			for _, cs := range [][]corev1.Container{wantPod.Spec.InitContainers, wantPod.Spec.Containers} {
				for j, c := range cs {
					cs[j] = corev1.Container{Name: c.Name, Image: c.Image, Ports: c.Ports, Resources: c.Resources, ResizePolicy: c.ResizePolicy, RestartPolicy: c.RestartPolicy}
				}
			}
			gotPod, _, err := decodePod(data)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(gotPod, &wantPod) {
				t.Errorf("Pod differs (encoding/json, then decodePod):\n%s", jsonDiff(&wantPod, gotPod))
			}
		})
	}
}

func jsonDiff(want, got any) string {
	w, _ := json.Marshal(want)
	g, _ := json.Marshal(got)
	return string(w) + "\n" + string(g)
}
