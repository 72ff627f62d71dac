package coverage

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestInvestigateGap(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "monitoring", UID: "ds-uid"}}
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid", Controller: ptr.To(true)}}
	pod := func(name, node string, mutate func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "monitoring", OwnerReferences: owner},
			Spec:       corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			}},
		}
		if mutate != nil {
			mutate(&p)
		}
		return p
	}
	unready := func(p *corev1.Pod) {
		p.Status.Conditions[1].Status = corev1.ConditionFalse
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", Ready: false}}
	}
	pending := func(p *corev1.Pod) {
		// Unbound: the node comes from the controller's matchFields pin.
		p.Spec.NodeName = ""
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n3"}}}}}}}}
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/5 nodes are available: 1 Insufficient cpu."}}
	}
	crashing := func(p *corev1.Pod) {
		unready(p)
		p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s restarting failed container"}
	}
	imagePull := func(p *corev1.Pod) {
		unready(p)
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}
	}
	foreign := func(p *corev1.Pod) { p.OwnerReferences = nil }
	old := func(p *corev1.Pod) {
		p.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		unready(p)
	}

	pods := []corev1.Pod{
		pod("agent-1", "n1", nil),
		pod("agent-2", "n2", unready),
		pod("agent-3", "", pending),
		pod("agent-4", "n4", crashing),
		pod("agent-5", "n5", imagePull),
		pod("other-6", "n6", foreign), // not this DaemonSet's: n6 has no daemon Pod
		pod("agent-7a", "n7", old),
		pod("agent-7b", "n7", nil), // a ready replacement on the same node
	}
	got := InvestigateGap(ds, []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"}, pods)
	want := []NodeDiagnosis{
		{Node: "n2", Pod: "agent-2", State: "NotReady", Reason: "readiness failing for container agent"},
		{Node: "n3", Pod: "agent-3", State: "Pending", Reason: "Unschedulable: 0/5 nodes are available: 1 Insufficient cpu."},
		{Node: "n4", Pod: "agent-4", State: "Waiting", Reason: "container agent: CrashLoopBackOff: back-off 5m0s restarting failed container"},
		{Node: "n5", Pod: "agent-5", State: "Waiting", Reason: "container agent: ImagePullBackOff"},
		{Node: "n6", State: "NoPod", Reason: "no daemon Pod on this node yet"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("diagnoses:\n got %+v\nwant %+v", got, want)
	}
}

func TestEligibleNodes(t *testing.T) {
	nodes := NewNodeSnapshot([]*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "cp-1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "w-2"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "w-1"}},
	})
	cov := Predict(&appsv1.DaemonSet{}, nodes)
	if got := EligibleNodes(&cov, nodes); !reflect.DeepEqual(got, []string{"w-1", "w-2"}) {
		t.Errorf("eligible = %v, want [w-1 w-2]", got)
	}
}

// TestEligibleCache_SameSkipsSameList: a skip set asked again gets the list
// made for it, without making it again, as long as it is among the last
// four asked; another set never gets it.
func TestEligibleCache_SameSkipsSameList(t *testing.T) {
	var c eligibleCache
	builds := 0
	ask := func(set uint64) []string {
		return c.list([]uint64{set, 0}, func() []string {
			builds++
			return []string{fmt.Sprint(set)}
		})
	}
	for _, step := range []struct {
		set   uint64
		built bool
	}{
		{1, true}, {1, false}, {2, true}, {3, true}, {4, true}, {1, false}, // 1 is the most recent again
		{5, true}, // 2, the least recent, goes
		{2, true}, {4, false}, {5, false}, {1, false},
	} {
		before := builds
		got := ask(step.set)
		if len(got) != 1 || got[0] != fmt.Sprint(step.set) {
			t.Fatalf("skip set %d: list %v", step.set, got)
		}
		if built := builds > before; built != step.built {
			t.Errorf("skip set %d: made again %v, want %v", step.set, built, step.built)
		}
	}
}

// TestEligibleNodes_SharedBetweenDaemonSetsAlike: two DaemonSets that skip
// the same nodes of a snapshot get one list; one that skips others its own.
func TestEligibleNodes_SharedBetweenDaemonSetsAlike(t *testing.T) {
	snap := NewNodeSnapshot([]*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "cp-1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{"pool": "gpu"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "w-1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "w-2"}},
	})
	ds := func(name string, selector map[string]string) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name}}
		d.Spec.Template.Spec.NodeSelector = selector
		return d
	}
	eligible := func(d *appsv1.DaemonSet) []string {
		cov := Predict(d, snap)
		return EligibleNodes(&cov, snap)
	}
	a, b, gpu := eligible(ds("a", nil)), eligible(ds("b", nil)), eligible(ds("gpu", map[string]string{"pool": "gpu"}))
	if !slices.Equal(a, []string{"gpu-1", "w-1", "w-2"}) || !slices.Equal(gpu, []string{"gpu-1"}) {
		t.Fatalf("eligible: %v and %v", a, gpu)
	}
	if &a[0] != &b[0] {
		t.Error("two DaemonSets that skip alike got two lists")
	}
	if cap(a) != len(a) {
		t.Errorf("the shared list has room to append into (cap %d, len %d)", cap(a), len(a))
	}
}
