package clusterview

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
)

func TestStripNode_IsTheTransformOfTheStore(t *testing.T) {
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
	got, err := nodeStore{}.Transformer()(full)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: full.Labels},
		Spec:       corev1.NodeSpec{Taints: full.Spec.Taints, Unschedulable: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stripped node = %+v, want %+v", got, want)
	}
	if other, _ := stripNode("not a node"); other != "not a node" {
		t.Error("objects that are not Nodes must pass through unchanged")
	}
}

func testNode(name string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1",
		Labels: map[string]string{corev1.LabelHostname: name, "pool": "a"}},
		Spec: corev1.NodeSpec{Taints: taints}}
}

var drain = corev1.Taint{Key: "drain", Effect: corev1.TaintEffectNoSchedule}

// change is a NodeChange as a test compares it: the names and the drain
// taint before and after.
type change struct {
	old, new string // node names, "" for none
	oldDrain bool
	newDrain bool
	newPool  string
}

func changeOf(c NodeChange) change {
	var out change
	if c.Old != nil {
		out.old, out.oldDrain = c.Old.Name, slices.Contains(c.Old.Spec.Taints, drain)
	}
	if c.New != nil {
		out.new, out.newDrain, out.newPool = c.New.Name, slices.Contains(c.New.Spec.Taints, drain), c.New.Labels["pool"]
	}
	return out
}

// TestNodeView_AppliesWhatTheReflectorHandsOver: the store builds the view
// from the first list, applies each relevant change (the handlers see the
// node before and after it, rebuilt from the set), drops the changes no
// prediction reads without publishing a snapshot, and on a relist applies
// exactly what differs.
func TestNodeView_AppliesWhatTheReflectorHandsOver(t *testing.T) {
	v := &NodeView{Log: logr.Discard()}
	s := nodeStore{v}
	var changes []change
	remove := v.OnChange(func(c NodeChange) {
		if c.Old != nil && c.Old.Labels[corev1.LabelHostname] != c.Old.Name {
			t.Errorf("the node before the change lost its hostname: %+v", c.Old)
		}
		changes = append(changes, changeOf(c))
	})
	step := func(what string, err error, want ...change) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(changes, want) {
			t.Fatalf("%s: handlers saw %+v, want %+v", what, changes, want)
		}
		changes = nil
	}

	if err := s.Update(testNode("early")); err != nil || v.ReadyCheck(nil) == nil {
		t.Fatalf("before the first list: err %v, ready %v; want no error and not ready", err, v.ReadyCheck(nil) == nil)
	}
	step("first list", s.Replace([]any{testNode("w-2"), testNode("w-1"), testNode("w-5")}, "10"))
	if err := v.ReadyCheck(nil); err != nil {
		t.Fatalf("not ready after the first list: %v", err)
	}
	first := v.Snapshot()
	if got := first.Names(); !slices.Equal(got, []string{"w-1", "w-2", "w-5"}) {
		t.Fatalf("nodes of the first list = %v", got)
	}

	heartbeat := testNode("w-1")
	heartbeat.ResourceVersion = "11"
	heartbeat.Annotations = map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}
	heartbeat.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	step("heartbeat", s.Update(heartbeat))
	timed := testNode("w-1", drain)
	step("drain taint", s.Update(timed), change{old: "w-1", new: "w-1", newDrain: true, newPool: "a"})
	timed = timed.DeepCopy()
	timed.Spec.Taints[0].TimeAdded = &metav1.Time{}
	step("the taint's TimeAdded", s.Update(timed))
	if v.Snapshot() == first || first.HasTaint("drain", "", corev1.TaintEffectNoSchedule) {
		t.Fatal("the taint was not published, or changed the snapshot held before it")
	}
	afterTaint := v.Snapshot()
	step("heartbeat after the taint", s.Update(testNode("w-1", drain)))
	if v.Snapshot() != afterTaint {
		t.Fatal("an update that changes nothing published a snapshot")
	}
	step("add", s.Add(testNode("w-3")), change{new: "w-3", newPool: "a"})
	step("delete", s.Delete(testNode("w-2")), change{old: "w-2"})
	step("delete of a node the view never had", s.Delete(toolscache.DeletedFinalStateUnknown{Key: "w-9", Obj: testNode("w-9")}))

	moved := testNode("w-3")
	moved.Labels["pool"] = "b"
	step("relist", s.Replace([]any{testNode("w-1", drain), moved, testNode("w-4")}, "20"),
		change{old: "w-3", new: "w-3", newPool: "b"}, change{new: "w-4", newPool: "a"}, change{old: "w-5"})
	if got := v.Snapshot().Names(); !slices.Equal(got, []string{"w-1", "w-3", "w-4"}) {
		t.Fatalf("nodes after the relist = %v", got)
	}
	relisted := v.Snapshot()
	step("relist with no difference", s.Replace([]any{testNode("w-4"), moved, testNode("w-1", drain)}, "30"))
	if v.Snapshot() != relisted {
		t.Fatal("a relist that changes nothing published a snapshot")
	}

	remove()
	step("after the handler's removal", s.Add(testNode("w-6")))
	if err := s.Add("not a node"); err == nil {
		t.Error("an object that is not a Node was accepted")
	}
}

// TestNodeView_RunsItsReflector: Start lists and watches the nodes through
// the lister-watcher, is ready once the first list is applied, starts the
// freshness clock, hands the handlers the relevant changes only, and stops
// when its context ends.
func TestNodeView_RunsItsReflector(t *testing.T) {
	source := fcache.NewFakeControllerSource()
	defer source.Shutdown()
	for i := range 3 {
		source.Add(testNode(fmt.Sprintf("w-%d", i)))
	}
	v := &NodeView{Nodes: source, Log: logr.Discard()}
	seen := make(chan change, 10)
	v.OnChange(func(c NodeChange) { seen <- changeOf(c) })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- v.Start(ctx) }()
	<-v.builtChan()
	if err := v.ReadyCheck(nil); err != nil || v.Snapshot().Len() != 3 {
		t.Fatalf("after the first list: ready %v, snapshot %v", err, v.Snapshot().Names())
	}

	heartbeat := testNode("w-1")
	heartbeat.Annotations = map[string]string{"a": "b"}
	source.Modify(heartbeat)
	source.Modify(testNode("w-1", drain))
	source.Delete(testNode("w-2"))
	// Changes arrive in order: had the heartbeat been published, it would
	// come first.
	for _, want := range []change{{old: "w-1", new: "w-1", newDrain: true, newPool: "a"}, {old: "w-2"}} {
		if got := <-seen; got != want {
			t.Fatalf("handler saw %+v, want %+v", got, want)
		}
	}
	if got := v.Snapshot().Names(); !slices.Equal(got, []string{"w-0", "w-1"}) {
		t.Errorf("nodes after the changes = %v", got)
	}
	// Start starts the clock just after the first list closes builtChan, on
	// its own goroutine: poll, within a bound, instead of racing it.
	for deadline := time.Now().Add(5 * time.Second); v.Age() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the freshness clock did not start with the view within 5s")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v", err)
	}
}

// TestNodeView_WatchErrorBreaksFreshness: a failed list or watch stops the
// probe from counting as contact until the next event.
func TestNodeView_WatchErrorBreaksFreshness(t *testing.T) {
	v := &NodeView{Log: logr.Discard()}
	r := toolscache.NewReflectorWithOptions(fcache.NewFakeControllerSource(), &corev1.Node{}, nodeStore{v}, toolscache.ReflectorOptions{})
	v.watchError(t.Context(), r, errors.New("connection refused"))
	if !v.broken.Load() {
		t.Error("a watch error did not mark the view as out of touch")
	}
}
