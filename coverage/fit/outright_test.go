package fit

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPredictDaemonSet_OutrightFitIsThePodByPodOutcome: on random clusters
// (Pods of other DaemonSets and of the agent itself, nominated Pods, host
// ports, anti-affinity on either side, an extended resource, tight pods
// limits), the report with the sums checked first, the agent's own Pods set
// aside in place and the domain's index asked first equals the report
// predicted Pod by Pod on a copy of every node without them (podByPod).
func TestPredictDaemonSet_OutrightFitIsThePodByPodOutcome(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	q := func(v int64, f resource.Format) resource.Quantity { return *resource.NewQuantity(v, f) }
	fits, preempts, everywhere, terms := 0, 0, 0, 0
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
			hostname := name
			if scenario%5 == 0 {
				// Two nodes to a hostname: a hostname term's domain is
				// then more than the node.
				hostname = fmt.Sprintf("h%d", i/2)
			}
			b.AddNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				corev1.LabelHostname: hostname, corev1.LabelTopologyZone: fmt.Sprintf("z%d", i%3)}},
				Status: corev1.NodeStatus{Allocatable: alloc}})
			for j := range r.IntN(5) {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("p-%d-%d", i, j),
					Labels: map[string]string{"app": fmt.Sprintf("a%d", r.IntN(3))}},
					Spec: corev1.PodSpec{NodeName: name, Priority: new(int32(r.IntN(3) * 100)), Containers: []corev1.Container{{Name: "c",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: *resource.NewMilliQuantity(int64(r.IntN(1500)), resource.DecimalSI)}}}}},
					Status: corev1.PodStatus{Phase: corev1.PodRunning}}
				// Each on its own: the agent's own old Pod, a host port,
				// a term (in one scenario of four: it turns the sums off
				// everywhere), nominated rather than bound.
				if r.IntN(8) == 0 {
					p.Namespace = "infra"
					p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "u", Controller: new(true)}}
				}
				if r.IntN(8) == 0 {
					p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 9100}}
				}
				if scenario%4 == 0 && r.IntN(6) == 0 {
					p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						TopologyKey: []string{corev1.LabelTopologyZone, corev1.LabelHostname}[r.IntN(2)], Namespaces: []string{"infra"},
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}}}
				}
				if r.IntN(8) == 0 && !(roomy && scenario%2 == 1) {
					p.Spec.NodeName, p.Status.NominatedNodeName, p.Status.Phase = "", name, corev1.PodPending
				}
				if err := b.AddPod(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		b.AddPriorityClass(&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Value: 150})
		c := b.Build()
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "agent"}}
		ds.Spec.Template.Labels = map[string]string{"app": "agent"}
		if r.IntN(2) == 0 {
			// It may preempt the Pods below 150, never its own old ones.
			ds.Spec.Template.Spec.PriorityClassName = "agent"
		}
		req := corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(int64(r.IntN(2000)), resource.DecimalSI)}
		if r.IntN(4) == 0 {
			req["example.com/dongle"] = q(1, resource.DecimalSI)
		}
		ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{Requests: req}}}
		if r.IntN(4) == 0 {
			ds.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}
		}
		if r.IntN(4) == 0 {
			// The agent's own term: against the apps' Pods, or its own
			// old Pods on the other nodes of a zone.
			key := []string{corev1.LabelHostname, corev1.LabelTopologyZone}[r.IntN(2)]
			term := corev1.PodAffinityTerm{TopologyKey: key, Namespaces: []string{"apps"},
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("a%d", r.IntN(4))}}}
			if r.IntN(3) == 0 {
				term.Namespaces, term.LabelSelector.MatchLabels = nil, map[string]string{"app": "agent"}
			}
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
			terms++
		}
		outright := c.PredictDaemonSet(ds, names)
		fits += outright.Count(Fits)
		preempts += outright.Count(Preempts)
		if ds.Spec.Template.Spec.Containers[0].Ports == nil && c.room.holds(new(ResourcesOf(req))) {
			everywhere++
		}
		if byPod := podByPod(t, c, ds, names); !reflect.DeepEqual(outright, byPod) {
			t.Fatalf("scenario %d (seed %d): the reports differ:\noutright: %+v\npod by pod: %+v", scenario, seed, outright, byPod)
		}
	}
	if preempts < 100 {
		t.Errorf("only %d nodes were predicted to preempt in 400 scenarios", preempts)
	}
	if fits < 500 {
		t.Errorf("only %d nodes fit in 400 scenarios: the sums were hardly tried", fits)
	}
	if terms < 50 {
		t.Errorf("only %d scenarios of 400 gave the agent an anti-affinity term", terms)
	}
	if everywhere < 5 {
		t.Errorf("the least free room decided only %d scenarios of 400: it was hardly tried", everywhere)
	}
}

// podByPod is the report that Predict makes node by node, on a copy of each
// node without the DaemonSet's own Pods and without what Sort notes of its
// Pods: none of the shortcuts of PredictDaemonSet is in it.
func podByPod(t *testing.T, c *Cluster, ds *appsv1.DaemonSet, names []string) *Report {
	t.Helper()
	cand, err := NewCandidate(ds.Namespace, c.namespaces[ds.Namespace], &ds.Spec.Template, c.priorities, c.namespaces)
	if err != nil {
		t.Fatal(err)
	}
	own := ds.Namespace + "/" + ds.Name
	var outcomes []NodeOutcome
	for name, n := range c.On(names) {
		m := *n
		m.Pods = slices.DeleteFunc(slices.Clone(n.Pods), func(p Pod) bool { return p.Owner == own })
		m.summed = false // nor what Sort notes: every Pod is looked at
		outcomes = append(outcomes, NodeOutcome{Node: name, Outcome: Predict(cand, &m, c.domain)})
	}
	r := NewReport(outcomes)
	r.Priority, r.PreemptNever = cand.Priority, cand.PreemptNever
	return r
}
