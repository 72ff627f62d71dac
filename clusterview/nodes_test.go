package clusterview

import (
	"context"
	"reflect"
	"runtime"
	"testing"

	"github.com/go-logr/logr"
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

func TestPredictionInputsChanged(t *testing.T) {
	base := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "w-1", ResourceVersion: "1", Labels: map[string]string{"pool": "a"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute}}},
	}
	tests := []struct {
		name   string
		change func(*corev1.Node)
		want   bool
	}{
		{"resourceVersion only (a heartbeat, an annotation, a condition)", func(n *corev1.Node) { n.ResourceVersion = "2" }, false},
		{"taint's TimeAdded", func(n *corev1.Node) { n.Spec.Taints[0].TimeAdded = &metav1.Time{} }, false},
		{"label value", func(n *corev1.Node) { n.Labels["pool"] = "b" }, true},
		{"label added", func(n *corev1.Node) { n.Labels["gpu"] = "true" }, true},
		{"taint effect", func(n *corev1.Node) { n.Spec.Taints[0].Effect = corev1.TaintEffectNoSchedule }, true},
		{"taint removed", func(n *corev1.Node) { n.Spec.Taints = nil }, true},
		{"cordon", func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := base.DeepCopy()
			tt.change(n)
			if got := PredictionInputsChanged(base, n); got != tt.want {
				t.Errorf("PredictionInputsChanged = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestNodeView_AppliesChangesOneByOne: each change replaces the snapshot
// (the old one stays as it was, for requests that hold it) and reaches the
// registered handlers; a change nothing reads does neither.
func TestNodeView_AppliesChangesOneByOne(t *testing.T) {
	node := func(name string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
			Spec: corev1.NodeSpec{Taints: taints}}
	}
	v := &NodeView{Log: logr.Discard()}
	v.apply(nil, node("early")) // before the first build: kept for the build, not applied
	var changes []NodeChange
	remove := v.OnChange(func(c NodeChange) { changes = append(changes, c) })
	v.set = coverage.NewNodeSet([]*corev1.Node{node("w-1"), node("w-2")})
	v.snapshot.Store(v.set.Snapshot())
	before := v.Snapshot()

	drain := corev1.Taint{Key: "drain", Effect: corev1.TaintEffectNoSchedule}
	v.apply(node("w-1"), node("w-1", drain))
	v.apply(node("w-2"), node("w-2"))
	v.apply(nil, node("w-3"))
	v.apply(node("w-2"), nil)
	remove()
	v.apply(nil, node("w-4"))

	if got := before.Len(); got != 2 || before.HasTaint("drain", "", corev1.TaintEffectNoSchedule) {
		t.Errorf("the snapshot held before the changes changed: %d nodes", got)
	}
	after := v.Snapshot()
	if got := after.Names(); !reflect.DeepEqual(got, []string{"w-1", "w-3", "w-4"}) {
		t.Errorf("nodes after the changes = %v", got)
	}
	if !after.HasTaint("drain", "", corev1.TaintEffectNoSchedule) {
		t.Error("the taint on w-1 is not in the snapshot")
	}
	if len(changes) != 3 || changes[0].New.Name != "w-1" || changes[1].Old != nil || changes[2].New != nil {
		t.Errorf("handler saw %d changes, want the taint, the add and the delete (not the no-op, nothing after removal): %+v", len(changes), changes)
	}
}

// TestNodeView_BuildsFromTheInitialList: the first build holds the nodes the
// informer handed over before it, with the changes made to them meanwhile
// (an update, a delete); changes after it are applied one by one.
func TestNodeView_BuildsFromTheInitialList(t *testing.T) {
	node := func(name string, taints ...corev1.Taint) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
			Spec: corev1.NodeSpec{Taints: taints}}
	}
	inf := &slowInformer{}
	v := &NodeView{Cache: &slowCache{informer: inf}, Log: logr.Discard()}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- v.Start(ctx) }()
	for !inf.asked.Load() {
		runtime.Gosched()
	}
	drain := corev1.Taint{Key: "drain", Effect: corev1.TaintEffectNoSchedule}
	inf.handler.OnAdd(node("w-1"), true)
	inf.handler.OnAdd(node("w-2"), true)
	inf.handler.OnAdd(node("w-3"), true)
	inf.handler.OnUpdate(node("w-1"), node("w-1", drain))
	inf.handler.OnDelete(node("w-2"))
	if v.Snapshot() != nil {
		t.Fatal("the view was built before its handler had seen the initial list")
	}
	inf.delivered.Store(true)
	for v.ReadyCheck(nil) != nil {
		select {
		case err := <-done:
			t.Fatalf("Start returned before the view was built: %v", err)
		default:
		}
		runtime.Gosched()
	}
	built := v.Snapshot()
	if got := built.Names(); !reflect.DeepEqual(got, []string{"w-1", "w-3"}) {
		t.Errorf("nodes of the first build = %v, want [w-1 w-3]", got)
	}
	if !built.HasTaint("drain", "", corev1.TaintEffectNoSchedule) {
		t.Error("the update before the build is not in it")
	}
	inf.handler.OnAdd(node("w-4"), false)
	if got := v.Snapshot().Names(); !reflect.DeepEqual(got, []string{"w-1", "w-3", "w-4"}) {
		t.Errorf("nodes after an add = %v, want [w-1 w-3 w-4]", got)
	}
}
