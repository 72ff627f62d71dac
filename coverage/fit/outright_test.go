package fit

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPredictDaemonSet_OutrightFitIsThePodByPodOutcome: on random clusters
// (Pods of other DaemonSets and of the agent itself, nominated Pods, host
// ports, anti-affinity, an extended resource, tight pods limits), the
// report with the sums checked first equals the report predicted Pod by
// Pod on every node.
func TestPredictDaemonSet_OutrightFitIsThePodByPodOutcome(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	q := func(v int64, f resource.Format) resource.Quantity { return *resource.NewQuantity(v, f) }
	fits, everywhere := 0, 0
	for scenario := range 400 {
		// One scenario in three has room on most nodes, and half of those
		// nothing nominated: there the cluster's least free room may
		// decide at once.
		roomy := scenario%3 == 1
		b := NewBuilder()
		var names []string
		for i := range 20 {
			name := fmt.Sprintf("n%d", i)
			names = append(names, name)
			alloc := corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(1000+r.IntN(3000)), resource.DecimalSI),
				corev1.ResourceMemory: q(int64(1+r.IntN(8))<<30, resource.BinarySI), corev1.ResourcePods: q(int64(2+r.IntN(6)), resource.DecimalSI)}
			if roomy {
				alloc[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(5000+r.IntN(6000)), resource.DecimalSI)
				alloc[corev1.ResourcePods] = q(int64(4+r.IntN(8)), resource.DecimalSI)
			}
			if r.IntN(3) == 0 {
				alloc["example.com/dongle"] = q(int64(r.IntN(3)), resource.DecimalSI)
			}
			b.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprintf("z%d", i%3)}},
				Status: corev1.NodeStatus{Allocatable: alloc}})
			for j := range r.IntN(5) {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("p-%d-%d", i, j),
					Labels: map[string]string{"app": fmt.Sprintf("a%d", r.IntN(3))}},
					Spec: corev1.PodSpec{NodeName: name, Priority: new(int32(r.IntN(3) * 100)), Containers: []corev1.Container{{Name: "c",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: *resource.NewMilliQuantity(int64(r.IntN(1500)), resource.DecimalSI)}}}}},
					Status: corev1.PodStatus{Phase: corev1.PodRunning}}
				switch r.IntN(8) {
				case 0: // the agent's own old Pod
					p.Namespace = "infra"
					p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u", Controller: new(true)}}
				case 1:
					p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 9100}}
				case 2: // in one scenario of four: it turns the sums off everywhere
					if scenario%4 != 0 {
						break
					}
					p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						TopologyKey: corev1.LabelTopologyZone, Namespaces: []string{"infra"},
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}}}
				case 3: // nominated, not bound
					if roomy && scenario%2 == 1 {
						break
					}
					p.Spec.NodeName, p.Status.NominatedNodeName, p.Status.Phase = "", name, corev1.PodPending
				}
				if err := b.AddPod(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		c := b.Build()
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "agent"}}
		ds.Spec.Template.Labels = map[string]string{"app": "agent"}
		req := corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(r.IntN(2000)), resource.DecimalSI)}
		if r.IntN(4) == 0 {
			req["example.com/dongle"] = q(1, resource.DecimalSI)
		}
		ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: req}}}
		if r.IntN(4) == 0 {
			ds.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}
		}
		outright := c.PredictDaemonSet(ds, names)
		fits += outright.Count(Fits)
		if ds.Spec.Template.Spec.Containers[0].Ports == nil && c.room.holds(new(ResourcesOf(req))) {
			everywhere++
		}
		slowPathOnly = true
		byPod := c.PredictDaemonSet(ds, names)
		slowPathOnly = false
		if !reflect.DeepEqual(outright, byPod) {
			t.Fatalf("scenario %d (seed %d): the reports differ:\noutright: %+v\npod by pod: %+v", scenario, seed, outright, byPod)
		}
	}
	if fits < 500 {
		t.Errorf("only %d nodes fit in 400 scenarios: the sums were hardly tried", fits)
	}
	if everywhere < 5 {
		t.Errorf("the least free room decided only %d scenarios of 400: it was hardly tried", everywhere)
	}
}
