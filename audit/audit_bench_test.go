package audit

import (
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy/rules"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkAudit measures one audit pass of `dsguard audit -A` after the API
// reads: 500 DaemonSets on 1,000 nodes (20 pools, a tainted control plane),
// rendered as the wide table. Target: well under 2 seconds.
func BenchmarkAudit(b *testing.B) {
	var nodes []*corev1.Node
	for i := range 1000 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i), Labels: map[string]string{
			"kubernetes.io/hostname": fmt.Sprintf("node-%04d", i), "kubernetes.io/os": "linux",
			"pool": fmt.Sprintf("pool-%d", i%20), "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3),
		}}}
		if i < 3 {
			n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
		}
		if i%20 == 7 {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
		}
		nodes = append(nodes, n)
	}
	var dss []*appsv1.DaemonSet
	for i := range 500 {
		ds := auditDS(fmt.Sprintf("agent-%03d", i), 950, 950-int32(i%3))
		ds.Namespace = fmt.Sprintf("team-%02d", i%40)
		if i%2 == 0 {
			ds.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		if i%10 == 0 {
			ds.Spec.Template.Spec.NodeSelector = map[string]string{"pool": fmt.Sprintf("pool-%d", i%20)}
		}
		dss = append(dss, ds)
	}
	pol := rules.Builtin().Default()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		snap := coverage.NewNodeSnapshot(nodes)
		entries := Run(Input{DaemonSets: dss, Nodes: snap, Policy: pol, Now: now, Window: 5 * time.Minute})
		if err := WriteTable(io.Discard, entries, true, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuditorMemory is what the auditor remembers between passes at
// 5,000 and 65,000 nodes: 1,000 DaemonSets that skip a tainted pool of 15 %
// of the nodes, observed once each. It reports the heap the auditor's memory
// keeps per DaemonSet, after a garbage collection, and the time of one
// observation after a node of an untainted pool joined the largest tainted
// class (its pool label and taint changed): the Event path, which compares
// the class's new version with its old one.
func BenchmarkAuditorMemory(b *testing.B) {
	for _, size := range []int{5000, 65000} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			nodes := make([]*corev1.Node, size)
			for i := range nodes {
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", i), Labels: map[string]string{
					"kubernetes.io/hostname": fmt.Sprintf("node-%05d", i), "kubernetes.io/os": "linux",
					"pool": fmt.Sprintf("pool-%d", i%20)}}}
				if i%20 < 3 {
					n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "batch", Effect: corev1.TaintEffectNoSchedule}}
				}
				nodes[i] = n
			}
			set := coverage.NewNodeSet(nodes)
			pol := rules.Builtin().Default()
			const daemonSets = 1000
			entries := func(snap *coverage.NodeSnapshot) []Entry {
				var dss []*appsv1.DaemonSet
				for i := range daemonSets {
					ds := auditDS(fmt.Sprintf("agent-%04d", i), int32(size*85/100), int32(size*85/100))
					ds.Namespace = fmt.Sprintf("team-%02d", i%40)
					dss = append(dss, ds)
				}
				return Run(Input{DaemonSets: dss, Nodes: snap, Policy: pol, Now: time.Now()})
			}
			a := &Auditor{Recorder: &events.FakeRecorder{}, seen: map[types.NamespacedName]*auditMemory{}}
			before := testobj.LiveHeap()
			first := entries(set.Snapshot())
			for i := range first {
				a.observe(b.Context(), &first[i], set.Snapshot(), true)
			}
			first = nil
			retained := float64(testobj.LiveHeap()-before) / daemonSets
			remembered := make(map[types.NamespacedName][]coverage.Skip, len(a.seen))
			for k, m := range a.seen {
				remembered[k] = m.gaps
			}

			moved := nodes[3].DeepCopy() // pool-3, untainted
			moved.Labels["pool"] = "pool-0"
			moved.Spec.Taints = nodes[0].Spec.Taints
			set.Apply(moved)
			second := entries(set.Snapshot())
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				for k, gaps := range remembered {
					a.seen[k].gaps = gaps
				}
				b.StartTimer()
				for i := range second {
					a.observe(b.Context(), &second[i], set.Snapshot(), false)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/daemonSets, "ns/observe")
			b.ReportMetric(retained, "retained-B/daemonset")
			runtime.KeepAlive(a)
		})
	}
}

// BenchmarkDaemonSetGauges is the heap the per-DaemonSet gauges keep for
// 1,000 audited DaemonSets, each skipping nodes for a taint, per DaemonSet
// after a garbage collection, and the time of one scrape of them.
func BenchmarkDaemonSetGauges(b *testing.B) {
	nodes := coverage.NewNodeSnapshot([]*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "cp-1"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"}},
	})
	const daemonSets = 1000
	var dss []*appsv1.DaemonSet
	for i := range daemonSets {
		ds := auditDS(fmt.Sprintf("agent-%04d", i), 1, 1)
		ds.Namespace = fmt.Sprintf("team-%02d", i%40)
		dss = append(dss, ds)
	}
	entries := Run(Input{DaemonSets: dss, Nodes: nodes, Policy: rules.Builtin().Default(), Now: time.Now()})
	reg := prometheus.NewRegistry()
	a := &Auditor{Metrics: NewMetrics(reg)}
	before := testobj.LiveHeap()
	for i := range entries {
		a.record(&entries[i])
	}
	retained := float64(testobj.LiveHeap()-before) / daemonSets
	b.ResetTimer()
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(retained, "retained-B/daemonset")
	runtime.KeepAlive(a)
	runtime.KeepAlive(entries)
}

// BenchmarkEventSinkSeries is the heap an Event sink keeps per series
// remembered, for 5,000 DaemonSets with one Event each (a burst of creates),
// after the Events were sent, and the time of one Event recorded.
func BenchmarkEventSinkSeries(b *testing.B) {
	const daemonSets = 5000
	dss := make([]*appsv1.DaemonSet, daemonSets)
	for i := range dss {
		dss[i] = auditDS(fmt.Sprintf("agent-%04d", i), 1, 1)
		dss[i].Namespace = fmt.Sprintf("team-%02d", i%40)
		dss[i].UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
		dss[i].ResourceVersion = fmt.Sprint(1000 + i)
	}
	s := NewEventSink(nil, clientgoscheme.Scheme, "dsguard", logr.Discard())
	before := testobj.LiveHeap()
	for _, ds := range dss {
		s.Eventf(ds, nil, "Warning", "CoverageReduced", "Audit", "%s", "1 node newly skipped")
		<-s.queue // as if sent
	}
	retained := float64(testobj.LiveHeap()-before) / daemonSets
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		s.Eventf(dss[i%daemonSets], nil, "Warning", "CoverageReduced", "Audit", "%s", "1 node newly skipped")
		select {
		case <-s.queue:
		default:
		}
	}
	b.ReportMetric(retained, "retained-B/series")
	runtime.KeepAlive(s)
}
