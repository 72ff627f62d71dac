package coverage

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/internal/testobj"
)

func TestBenchNodes(t *testing.T) {
	for _, n := range testobj.BenchSizes {
		nodes := testobj.CloudNodes(n)
		s := NewNodeSnapshot(nodes)
		if len(nodes) != n || s.Len() != n {
			t.Fatalf("CloudNodes(%d) made %d nodes", n, len(nodes))
		}
		t.Logf("%d nodes: %d classes", n, s.Classes())
		if s.Classes() < 20 || s.Classes() > 50 {
			t.Errorf("%d nodes: %d classes, want a realistic 20-50", n, s.Classes())
		}
		for _, b := range testobj.BenchDaemonSets() {
			// The class shortcut and per-node decisions agree.
			perClass := Predict(b.DS, s)
			if perClass.Eligible == 0 || perClass.Eligible == n {
				t.Errorf("%s on %d nodes: %s", b.Name, n, describeCoverage(perClass))
			}
		}
	}
}

func BenchmarkPredictCoverage(b *testing.B) {
	for _, n := range testobj.BenchSizes {
		nodes := NewNodeSnapshot(testobj.CloudNodes(n))
		for _, c := range testobj.BenchDaemonSets() {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, c.Name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					Predict(c.DS, nodes)
				}
			})
		}
	}
	// Worst case for the classes: a per-node label makes every node its own class.
	n := testobj.BenchSizes[len(testobj.BenchSizes)-1]
	unique := testobj.CloudNodes(n)
	for i, node := range unique {
		node.Labels["example.com/node-id"] = strconv.Itoa(i)
	}
	nodes := NewNodeSnapshot(unique)
	b.Run(fmt.Sprintf("nodes=%d/agent-no-shared-classes", n), func(b *testing.B) {
		ds := testobj.BenchDaemonSets()[0].DS
		b.ReportAllocs()
		for b.Loop() {
			Predict(ds, nodes)
		}
	})
}

// BenchmarkCoverageSnapshotRebuild is the NodeSnapshot rebuild after a node change.
func BenchmarkCoverageSnapshotRebuild(b *testing.B) {
	for _, n := range testobj.BenchSizes {
		nodes := testobj.CloudNodes(n)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				NewNodeSnapshot(nodes)
			}
		})
	}
}

// BenchmarkCoverageHeapPerNode measures the heap the webhook holds per node
// at 5,000 nodes, reported as B/node: "stripped-cache" is the node objects
// the informer cache keeps after the StripNode transform, "snapshot" the
// NodeSnapshot built from them (it shares the name and hostname strings with
// the cache, so this is what it adds). The nodes are decoded from JSON one
// by one, as the informer decodes them, so that no two share a string.
// It measures memory, not time: ns/op is suppressed.
func BenchmarkCoverageHeapPerNode(b *testing.B) {
	const n = 5000
	encoded := make([][]byte, n)
	for i, node := range testobj.CloudNodes(n) {
		var err error
		if encoded[i], err = json.Marshal(node); err != nil {
			b.Fatal(err)
		}
	}
	strip := func() []*corev1.Node {
		cached := make([]*corev1.Node, n)
		for i, data := range encoded {
			node := &corev1.Node{}
			if err := json.Unmarshal(data, node); err != nil {
				b.Fatal(err)
			}
			cached[i] = StripNode(node)
		}
		return cached
	}
	b.Run("stripped-cache", func(b *testing.B) {
		var perNode float64
		for b.Loop() {
			before := testobj.LiveHeap()
			cached := strip()
			after := testobj.LiveHeap()
			runtime.KeepAlive(cached)
			perNode += float64(int64(after)-int64(before)) / n
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(perNode/float64(b.N), "B/node")
	})
	b.Run("snapshot", func(b *testing.B) {
		cached := strip()
		var perNode float64
		var classes int
		for b.Loop() {
			before := testobj.LiveHeap()
			snap := NewNodeSnapshot(cached)
			after := testobj.LiveHeap()
			classes = snap.Classes()
			runtime.KeepAlive(snap)
			perNode += float64(int64(after)-int64(before)) / n
		}
		runtime.KeepAlive(cached)
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(perNode/float64(b.N), "B/node")
		b.ReportMetric(float64(classes), "classes")
	})
}
