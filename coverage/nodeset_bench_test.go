package coverage

import (
	"fmt"
	"maps"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/internal/testobj"
)

// scaleSizes are the fleets of the scale benchmarks: the upstream limit of
// 5,000 nodes and GKE's 65,000.
var scaleSizes = []int{5000, 65000}

// BenchmarkNodeSetApply is one relevant node change applied to the snapshot
// (a taint added to, then lifted from, a worker: the node leaves its class
// for another and comes back), against rebuilding the whole snapshot, which
// is what each change cost before. Target at 65,000 nodes: ≤ 50 ms.
func BenchmarkNodeSetApply(b *testing.B) {
	for _, n := range scaleSizes {
		nodes := testobj.CloudNodes(n)
		b.Run(fmt.Sprintf("nodes=%d/taint-add-or-lift", n), func(b *testing.B) {
			set := NewNodeSet(nodes)
			plain := nodes[len(nodes)/2].DeepCopy()
			tainted := plain.DeepCopy()
			tainted.Spec.Taints = append(tainted.Spec.Taints, corev1.Taint{Key: "example.com/drain", Effect: corev1.TaintEffectNoSchedule})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				node := plain
				if i%2 == 0 {
					node = tainted
				}
				i++
				if _, _, changed := set.Apply(node); !changed {
					b.Fatal("the change was not applied")
				}
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/node-added-and-deleted", n), func(b *testing.B) {
			set := NewNodeSet(nodes)
			extra := nodes[len(nodes)/2].DeepCopy()
			extra.Name = "ip-10-255-255-255.eu-west-1.compute.internal"
			extra.Labels[corev1.LabelHostname] = "ip-10-255-255-255"
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					set.Apply(extra)
				} else {
					set.Remove(extra.Name)
				}
				i++
			}
		})
		// A snapshot's label index is built by the first prediction by
		// nodeSelector after each change: a cost per relevant change on
		// top of applying it.
		b.Run(fmt.Sprintf("nodes=%d/label-index", n), func(b *testing.B) {
			snap := NewNodeSnapshot(nodes)
			b.ReportAllocs()
			for b.Loop() {
				buildLabelIndex(snap.classes)
			}
			b.ReportMetric(float64(snap.Classes()), "classes")
		})
		b.Run(fmt.Sprintf("nodes=%d/full-rebuild", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				NewNodeSnapshot(nodes)
			}
		})
	}
}

// BenchmarkPredictAtScale is one prediction at 5,000 and 65,000 nodes,
// including DaemonSets that select nodes by hostname (answered from the
// per-class index) or by node name. Target: ≤ 200 µs for any DaemonSet.
// cpu-ns/op is the process's CPU time per prediction (garbage collection
// included), which a loaded machine inflates far less than ns/op.
func BenchmarkPredictAtScale(b *testing.B) {
	for _, n := range scaleSizes {
		nodes := NewNodeSnapshot(testobj.CloudNodes(n))
		cases := testobj.BenchDaemonSets()
		one := nodes.Names()[n/2]
		cases = append(cases,
			testobj.NamedDaemonSet{Name: "one-hostname", DS: testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelHostname: one[:len(one)-len(".eu-west-1.compute.internal")]}))},
			testobj.NamedDaemonSet{Name: "matchFields-name", DS: testobj.DS(testobj.WithRequiredNodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{one}}}}))},
		)
		for _, c := range cases {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, c.Name), func(b *testing.B) {
				b.ReportAllocs()
				testobj.ReportCPUPerOp(b, func() { Predict(c.DS, nodes) })
			})
		}
	}
}

// BenchmarkNodeSetHeap reports the heap of a NodeSet (snapshot, classes,
// per-node index and the name → class map), per node and per class, without
// the node names and per-node values, which it shares with the nodes it was
// built from (clusterview's BenchmarkNodeViewHeap measures all a running
// dsguard holds for its nodes). The per-class
// share comes from a second fleet of the same size with ten times the
// classes (one extra label per ten nodes). It measures memory: ns/op is
// suppressed.
func BenchmarkNodeSetHeap(b *testing.B) {
	for _, n := range scaleSizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			shared := testobj.CloudNodes(n)
			split := testobj.CloudNodes(n)
			for i, node := range split {
				node.Labels["example.com/rack"] = fmt.Sprint(i / 10 % 200)
			}
			var perNode, perClass, classes float64
			for b.Loop() {
				h1, c1 := nodeSetHeap(shared)
				h2, c2 := nodeSetHeap(split)
				pc := float64(h2-h1) / float64(c2-c1)
				perClass += pc
				perNode += (float64(h1) - pc*float64(c1)) / float64(n)
				classes += float64(c1)
			}
			runtime.KeepAlive(shared)
			runtime.KeepAlive(split)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(perNode/float64(b.N), "B/node")
			b.ReportMetric(perClass/float64(b.N), "B/class")
			b.ReportMetric(classes/float64(b.N), "classes")
		})
	}
}

func nodeSetHeap(nodes []*corev1.Node) (int64, int) {
	before := testobj.LiveHeap()
	set := NewNodeSet(nodes)
	after := testobj.LiveHeap()
	runtime.KeepAlive(set)
	return int64(after) - int64(before), set.Snapshot().Classes()
}

// BenchmarkDecide is what the auditor pays per DaemonSet for each
// relevant node change: the node's placement before and after, compared, to
// decide whether the DaemonSet needs a new audit.
func BenchmarkDecide(b *testing.B) {
	node := testobj.CloudNodes(100)[50]
	tainted := node.DeepCopy()
	tainted.Spec.Taints = append(tainted.Spec.Taints, corev1.Taint{Key: "example.com/drain", Effect: corev1.TaintEffectNoSchedule})
	ds := testobj.BenchDaemonSets()[0].DS
	b.ReportAllocs()
	for b.Loop() {
		if Decide(ds, node) == Decide(ds, tainted) {
			b.Fatal("a taint the DaemonSet does not tolerate must change its placement")
		}
	}
}

// BenchmarkNodeSetHolds is what an update that changes nothing a prediction
// reads (a heartbeat, a condition, an annotation: most Node updates) costs
// the node view: NodeSet.Holds, the comparison with what the set holds.
// "stripped-pair" is the comparison it replaces, of the update with the
// informer cache's copy of the node (labels, taints, cordon), for reference.
func BenchmarkNodeSetHolds(b *testing.B) {
	for _, n := range scaleSizes {
		nodes := testobj.CloudNodes(n)
		set := NewNodeSet(nodes)
		cached := StripNode(nodes[n/2])
		update := nodes[n/2].DeepCopy()
		update.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
		update.ResourceVersion += "1"
		b.Run(fmt.Sprintf("nodes=%d/holds", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !set.Holds(update) {
					b.Fatal("an annotation counted as a change")
				}
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/stripped-pair", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if cached.Spec.Unschedulable != update.Spec.Unschedulable || !maps.Equal(cached.Labels, update.Labels) ||
					!sameTaints(cached.Spec.Taints, update.Spec.Taints) {
					b.Fatal("an annotation counted as a change")
				}
			}
		})
	}
}
