package coverage

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/internal/testobj"
)

func TestNewNodeSnapshot_Classes(t *testing.T) {
	const pool = "cloud.example.com/node-pool"
	a, b := testobj.NoSchedule("example.com/a"), testobj.NoExecute("example.com/b")
	tests := []struct {
		name    string
		nodes   []any
		classes int
	}{
		{name: "no nodes", nodes: nil, classes: 0},
		{name: "nodes differing only in hostname share a class", nodes: []any{testobj.PoolNodes("w", 50)}, classes: 1},
		{name: "a node without a hostname label joins them",
			nodes: []any{testobj.PoolNodes("w", 3), testobj.Node("w-4", testobj.WithoutNodeLabel(corev1.LabelHostname))}, classes: 1},
		{name: "a different label value is another class",
			nodes: []any{testobj.PoolNodes("w", 3), testobj.Node("gpu-1", testobj.NodeLabels(pool, "gpu"))}, classes: 2},
		{name: "an extra label is another class",
			nodes: []any{testobj.Node("w-1"), testobj.Node("w-2", testobj.NodeLabels("extra", ""))}, classes: 2},
		{name: "a missing label is another class than an empty one",
			nodes: []any{testobj.Node("w-1", testobj.NodeLabels("extra", "")), testobj.Node("w-2")}, classes: 2},
		{name: "same taints share a class",
			nodes: []any{testobj.PoolNodes("t", 4, testobj.NodeTaints(a, b))}, classes: 1},
		{name: "different taint order is another class",
			nodes: []any{testobj.Node("t-1", testobj.NodeTaints(a, b)), testobj.Node("t-2", testobj.NodeTaints(b, a))}, classes: 2},
		{name: "taint value and effect count",
			nodes: []any{
				testobj.Node("t-1", testobj.NodeTaints(testobj.TaintOf("k", "v1", corev1.TaintEffectNoSchedule))),
				testobj.Node("t-2", testobj.NodeTaints(testobj.TaintOf("k", "v2", corev1.TaintEffectNoSchedule))),
				testobj.Node("t-3", testobj.NodeTaints(testobj.TaintOf("k", "v1", corev1.TaintEffectNoExecute))),
				testobj.Node("t-4", testobj.NodeTaints(testobj.TaintOf("k", "v1", corev1.TaintEffectNoSchedule))),
			}, classes: 3},
		{name: "a tainted node is another class", nodes: []any{testobj.Node("w-1"), testobj.Node("w-2", testobj.NodeTaints(a))}, classes: 2},
		{name: "labels and taints are not confused",
			nodes: []any{
				testobj.Node("x-1", testobj.NodeLabels("example.com/a", "")),
				testobj.Node("x-2", testobj.NodeTaints(testobj.TaintOf("example.com/a", "", ""))),
			}, classes: 2},
		{name: "cordon is not part of the class", nodes: []any{testobj.Node("w-1"), testobj.Node("w-2", testobj.Cordoned)}, classes: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snapshotOf(tt.nodes...)
			if got := s.Classes(); got != tt.classes {
				t.Errorf("Classes() = %d, want %d", got, tt.classes)
			}
			if got, want := s.Len(), len(testobj.Nodes(tt.nodes...)); got != want {
				t.Errorf("Len() = %d, want %d", got, want)
			}
		})
	}
}

func TestNodeSnapshot_HasTaint(t *testing.T) {
	s := snapshotOf(
		testobj.PoolNodes("w", 3),
		testobj.ControlPlaneNode("cp-1"),
		testobj.Node("gpu-1", testobj.NodeTaints(
			testobj.TaintOf("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule),
			testobj.TaintOf("example.com/soft", "", corev1.TaintEffectPreferNoSchedule))),
	)
	tests := []struct {
		key, value string
		effect     corev1.TaintEffect
		want       bool
	}{
		{cpKey, "", corev1.TaintEffectNoSchedule, true},
		{cpKey, "", corev1.TaintEffectNoExecute, false},
		{cpKey, "x", corev1.TaintEffectNoSchedule, false},
		{"nvidia.com/gpu", "", corev1.TaintEffectNoSchedule, true},
		{"nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule, true},
		{"nvidia.com/gpu", "absent", corev1.TaintEffectNoSchedule, false},
		{"example.com/soft", "", corev1.TaintEffectPreferNoSchedule, true},
		{"node-role.kubernetes.io/master", "", corev1.TaintEffectNoSchedule, false},
	}
	for _, tt := range tests {
		if got := s.HasTaint(tt.key, tt.value, tt.effect); got != tt.want {
			t.Errorf("HasTaint(%q, %q, %s) = %v, want %v", tt.key, tt.value, tt.effect, got, tt.want)
		}
	}
	if snapshotOf().HasTaint(cpKey, "", corev1.TaintEffectNoSchedule) {
		t.Errorf("an empty snapshot has a taint")
	}
}

// The snapshot is immutable: changing the nodes it was built from, as an
// informer cache replaces them, does not change it.
func TestNewNodeSnapshot_CopiesLabelsAndTaints(t *testing.T) {
	nodes := []*corev1.Node{testobj.Node("w-1", testobj.NodeTaints(testobj.NoSchedule("example.com/a"))), testobj.Node("w-2", testobj.NodeTaints(testobj.NoSchedule("example.com/a")))}
	s := NewNodeSnapshot(nodes)
	for _, n := range nodes {
		n.Labels[corev1.LabelOSStable] = "windows"
		n.Spec.Taints[0].Key = "example.com/changed"
	}
	if !s.HasTaint("example.com/a", "", corev1.TaintEffectNoSchedule) || s.HasTaint("example.com/changed", "", corev1.TaintEffectNoSchedule) {
		t.Errorf("the snapshot shares taints with its input")
	}
	cov := Predict(testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux"})), s)
	assertCoverage(t, cov, 2, 0, []Skip{skipTaint(testobj.NoSchedule("example.com/a"), "w-1", "w-2")})
}

// snapshotOf builds a snapshot of nodes given as *corev1.Node,
// []*corev1.Node or []any of those.
func snapshotOf(nodes ...any) *NodeSnapshot { return NewNodeSnapshot(testobj.Nodes(nodes...)) }

const (
	cpKey   = testobj.ControlPlaneKey
	cpTaint = cpKey + ":NoSchedule"
)

// TestStripNode: the stripped node keeps what the prediction reads and
// nothing else, and nodes decoded apart share one copy of each label key
// and of shared values.
func TestStripNode(t *testing.T) {
	const doc = `{"metadata": {"name": "%s", "uid": "u-%s", "resourceVersion": "7", "annotations": {"a": "b"},
		"labels": {"topology.kubernetes.io/zone": "eu-west-1a", "kubernetes.io/hostname": "%s"}},
		"spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoSchedule"}]},
		"status": {"nodeInfo": {"kubeletVersion": "v1.37.2"}}}`
	decode := func(name string) *corev1.Node {
		n := &corev1.Node{}
		if err := json.Unmarshal(fmt.Appendf(nil, doc, name, name, name), n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b := StripNode(decode("n-1")), StripNode(decode("n-2"))
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n-1",
			Labels: map[string]string{corev1.LabelTopologyZone: "eu-west-1a", corev1.LabelHostname: "n-1"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
	}
	if !reflect.DeepEqual(a, want) {
		t.Fatalf("stripped:\n%+v\nwant\n%+v", a, want)
	}
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	for k := range a.Labels {
		var kb string
		for k2 := range b.Labels {
			if k2 == k {
				kb = k2
			}
		}
		if !same(k, kb) {
			t.Errorf("key %s is held twice", k)
		}
	}
	if !same(a.Labels[corev1.LabelTopologyZone], b.Labels[corev1.LabelTopologyZone]) {
		t.Errorf("the zone's value is held twice")
	}
}

// A snapshot of records that share one label map per pool, the hostname
// held apart, is the snapshot of the nodes themselves.
func TestNewNodeSnapshotOf_SharedRecordsAreTheNodes(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 120 {
		name := fmt.Sprintf("node-%03d", i)
		labels := map[string]string{corev1.LabelHostname: name, "pool": fmt.Sprint("pool-", i%3),
			"zone": fmt.Sprint("zone-", i%2), "instance-id": fmt.Sprintf("i-%04d", i)}
		if i%7 == 0 {
			labels[corev1.LabelHostname] = name + ".internal"
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if i%3 == 2 {
			n.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		}
		nodes = append(nodes, n)
	}
	shared := map[string]map[string]string{}
	records := make([]NodeRecord, len(nodes))
	for i, n := range nodes {
		labels := maps.Clone(n.Labels)
		delete(labels, corev1.LabelHostname)
		key := fmt.Sprint(labels)
		if shared[key] == nil {
			shared[key] = labels
		}
		records[i] = NodeRecord{Name: n.Name, Labels: shared[key], Hostname: n.Labels[corev1.LabelHostname], Taints: n.Spec.Taints}
	}
	want, got := NewNodeSnapshot(nodes), NewNodeSnapshotOf(records)
	if got.Classes() != want.Classes() || !slices.Equal(got.Names(), want.Names()) {
		t.Fatalf("%d classes of %d names, want %d of %d", got.Classes(), len(got.Names()), want.Classes(), len(want.Names()))
	}
	for _, n := range nodes {
		if g := got.Node(n.Name); g == nil || !maps.Equal(g.Labels, n.Labels) || !slices.Equal(g.Spec.Taints, n.Spec.Taints) {
			t.Errorf("Node(%s) = %v, want the labels %v and taints %v", n.Name, g, n.Labels, n.Spec.Taints)
		}
	}
	seen := 0
	for n := range got.All() {
		if w := want.Node(n.Name); w == nil || !maps.Equal(w.Labels, n.Labels) {
			t.Errorf("All yields %s with %v, want %v", n.Name, n.Labels, w)
		}
		seen++
	}
	if seen != len(nodes) || got.Node("absent") != nil {
		t.Errorf("All yields %d nodes, want %d; Node(absent) = %v", seen, len(nodes), got.Node("absent"))
	}
}
