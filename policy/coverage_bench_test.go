package policy

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The coverage benchmarks run against a cluster shaped like a large cloud
// cluster: node pools of zone × instance type, a few tainted pools (GPU,
// infrastructure, Windows), three control-plane nodes, and a sprinkling of
// cordoned and not-ready nodes. Each node carries the 10 labels a cloud
// node typically has, plus its hostname. The target is 200 µs per DaemonSet at 5,000 nodes.

var benchSizes = []int{100, 1000, 5000}

type benchPool struct {
	name, instanceType, arch, os string
	zones                        []string
	taints                       []corev1.Taint
	// share is the pool's part of the worker nodes, in thousandths.
	share int
}

var allZones = []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}

// benchPools make 15 untainted pools (3 zones × 5 instance types) and 5
// tainted ones: 20 pool classes before cordoned and not-ready nodes.
var benchPools = []benchPool{
	{name: "general", instanceType: "m6i.2xlarge", arch: "amd64", os: "linux", zones: allZones, share: 300},
	{name: "general", instanceType: "m6i.4xlarge", arch: "amd64", os: "linux", zones: allZones, share: 200},
	{name: "compute", instanceType: "c6i.4xlarge", arch: "amd64", os: "linux", zones: allZones, share: 150},
	{name: "memory", instanceType: "r6i.4xlarge", arch: "amd64", os: "linux", zones: allZones, share: 100},
	{name: "arm", instanceType: "m7g.4xlarge", arch: "arm64", os: "linux", zones: allZones, share: 120},
	{name: "gpu", instanceType: "g5.2xlarge", arch: "amd64", os: "linux", zones: allZones[:2], share: 60,
		taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
	{name: "infra", instanceType: "m6i.xlarge", arch: "amd64", os: "linux", zones: allZones[:1], share: 40,
		taints: []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}},
	{name: "windows", instanceType: "m6i.2xlarge", arch: "amd64", os: "windows", zones: allZones[2:], share: 30,
		taints: []corev1.Taint{{Key: "os", Value: "windows", Effect: corev1.TaintEffectNoSchedule}}},
}

// benchNodes returns n nodes as a node informer decodes them: every string
// its own allocation. Three are control-plane nodes; every 250th worker is
// cordoned and every 1,000th not ready.
func benchNodes(n int) []*corev1.Node {
	nodes := make([]*corev1.Node, 0, n)
	ip := 0
	add := func(labels map[string]string, taints []corev1.Taint) *corev1.Node {
		ip++
		name := fmt.Sprintf("ip-10-%d-%d-%d.eu-west-1.compute.internal", ip>>16&255, ip>>8&255, ip&255)
		l := make(map[string]string, len(labels)+1)
		for k, v := range labels {
			l[strings.Clone(k)] = strings.Clone(v)
		}
		l[corev1.LabelHostname] = strings.Clone(name[:strings.IndexByte(name, '.')])
		ts := make([]corev1.Taint, len(taints))
		for i, t := range taints {
			ts[i] = corev1.Taint{Key: strings.Clone(t.Key), Value: strings.Clone(t.Value), Effect: t.Effect}
		}
		node := &corev1.Node{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{
				Name:            name,
				UID:             types.UID(fmt.Sprintf("%08x-1c2d-4e5f-8a9b-%012x", ip, ip*7919)),
				ResourceVersion: strconv.Itoa(48_000_000 + ip*13),
				Labels:          l,
			},
			Spec: corev1.NodeSpec{Taints: ts},
		}
		nodes = append(nodes, node)
		return node
	}
	poolLabels := func(p benchPool, zone string) map[string]string {
		return map[string]string{
			corev1.LabelOSStable:                     p.os,
			corev1.LabelArchStable:                   p.arch,
			"beta.kubernetes.io/os":                  p.os,
			"beta.kubernetes.io/arch":                p.arch,
			corev1.LabelInstanceTypeStable:           p.instanceType,
			"beta.kubernetes.io/instance-type":       p.instanceType,
			corev1.LabelTopologyRegion:               "eu-west-1",
			corev1.LabelTopologyZone:                 zone,
			"failure-domain.beta.kubernetes.io/zone": zone,
			"cloud.example.com/node-pool":            p.name,
		}
	}
	cp := benchPool{name: "control-plane", instanceType: "m6i.2xlarge", arch: "amd64", os: "linux"}
	for i := 0; i < 3 && i < n; i++ {
		l := poolLabels(cp, allZones[i])
		l[cpKey] = ""
		l["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
		add(l, []corev1.Taint{{Key: cpKey, Effect: corev1.TaintEffectNoSchedule}})
	}
	workers := n - len(nodes)
	worker := 0
	for pi, p := range benchPools {
		count := workers * p.share / 1000
		if pi == len(benchPools)-1 {
			count = workers - worker // the rest
		}
		for i := range count {
			worker++
			zone := p.zones[i%len(p.zones)]
			taints := p.taints
			switch {
			case worker%1000 == 500:
				taints = append([]corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}}, taints...)
			case worker%250 == 100:
				taints = append([]corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}, taints...)
			}
			node := add(poolLabels(p, zone), taints)
			if worker%250 == 100 {
				node.Spec.Unschedulable = true
			}
		}
	}
	return nodes
}

// benchDaemonSets are the DaemonSets the benchmarks judge.
func benchDaemonSets() []struct {
	name string
	ds   *appsv1.DaemonSet
} {
	return []struct {
		name string
		ds   *appsv1.DaemonSet
	}{
		// A node agent: Linux only, tolerates the control plane, skips the
		// tainted GPU and infra pools.
		{"agent", newDS(
			withNodeSelector(map[string]string{corev1.LabelOSStable: "linux"}),
			withTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))},
		// A GPU device plugin: one pool, every other node a selector skip.
		{"gpu-plugin", newDS(
			withNodeSelector(map[string]string{"cloud.example.com/node-pool": "gpu"}),
			withTolerations(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}))},
		// Selection by hostname: every node is decided on its own.
		{"per-node", newDS(
			withRequiredNodeAffinity(nodeTerm(
				nodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
				nodeReq(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, "ip-10-0-0-9", "ip-10-0-0-10"))),
			withTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))},
	}
}

func TestBenchNodes(t *testing.T) {
	for _, n := range benchSizes {
		nodes := benchNodes(n)
		s := NewNodeSnapshot(nodes)
		if len(nodes) != n || s.Len() != n {
			t.Fatalf("benchNodes(%d) made %d nodes", n, len(nodes))
		}
		t.Logf("%d nodes: %d classes", n, s.Classes())
		if s.Classes() < 20 || s.Classes() > 50 {
			t.Errorf("%d nodes: %d classes, want a realistic 20-50", n, s.Classes())
		}
		for _, b := range benchDaemonSets() {
			// The class shortcut and per-node decisions agree.
			perClass := PredictCoverage(b.ds, s)
			if perClass.Eligible == 0 || perClass.Eligible == n {
				t.Errorf("%s on %d nodes: %s", b.name, n, describeCoverage(perClass))
			}
		}
	}
}

func BenchmarkPredictCoverage(b *testing.B) {
	for _, n := range benchSizes {
		nodes := NewNodeSnapshot(benchNodes(n))
		for _, c := range benchDaemonSets() {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					PredictCoverage(c.ds, nodes)
				}
			})
		}
	}
	// Worst case for the classes: a per-node label makes every node its own class.
	n := benchSizes[len(benchSizes)-1]
	unique := benchNodes(n)
	for i, node := range unique {
		node.Labels["example.com/node-id"] = strconv.Itoa(i)
	}
	nodes := NewNodeSnapshot(unique)
	b.Run(fmt.Sprintf("nodes=%d/agent-no-shared-classes", n), func(b *testing.B) {
		ds := benchDaemonSets()[0].ds
		b.ReportAllocs()
		for b.Loop() {
			PredictCoverage(ds, nodes)
		}
	})
}

// BenchmarkEvaluateWithNodes is one admission verdict under the default
// policy with the live nodes: the prediction plus every rule.
func BenchmarkEvaluateWithNodes(b *testing.B) {
	for _, n := range benchSizes {
		nodes := NewNodeSnapshot(benchNodes(n))
		for _, c := range benchDaemonSets() {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, c.name), func(b *testing.B) {
				env := Env{Policy: Rules().Default(), Now: testNow, Nodes: nodes}
				b.ReportAllocs()
				for b.Loop() {
					Evaluate(c.ds, env)
				}
			})
		}
	}
}

// BenchmarkCoverageSnapshotRebuild is the NodeSnapshot rebuild after a node change.
func BenchmarkCoverageSnapshotRebuild(b *testing.B) {
	for _, n := range benchSizes {
		nodes := benchNodes(n)
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				NewNodeSnapshot(nodes)
			}
		})
	}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCoverageHeapPerNode measures the heap the webhook holds per node
// at 5,000 nodes, reported as B/node: "stripped-cache" is the node objects
// the informer cache keeps after the StripNode transform, "snapshot" the
// NodeSnapshot built from them (it shares the name and hostname strings with
// the cache, so this is what it adds). It measures memory, not time: ns/op is
// suppressed.
func BenchmarkCoverageHeapPerNode(b *testing.B) {
	const n = 5000
	strip := func(full []*corev1.Node) []*corev1.Node {
		cached := make([]*corev1.Node, len(full))
		for i, node := range full {
			cached[i] = StripNode(node)
		}
		return cached
	}
	b.Run("stripped-cache", func(b *testing.B) {
		var perNode float64
		for b.Loop() {
			before := heapInUse()
			cached := strip(benchNodes(n))
			after := heapInUse()
			runtime.KeepAlive(cached)
			perNode += float64(int64(after)-int64(before)) / n
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(perNode/float64(b.N), "B/node")
	})
	b.Run("snapshot", func(b *testing.B) {
		cached := strip(benchNodes(n))
		var perNode float64
		var classes int
		for b.Loop() {
			before := heapInUse()
			snap := NewNodeSnapshot(cached)
			after := heapInUse()
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
