package testobj

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CloudNodes and BenchDaemonSets are what the benchmarks judge: a cluster shaped like a large cloud
// cluster: node pools of zone × instance type, a few tainted pools (GPU,
// infrastructure, Windows), three control-plane nodes, and a sprinkling of
// cordoned and not-ready nodes. Each node carries the 10 labels a cloud
// node typically has, plus its hostname. The target is 200 µs per DaemonSet at 5,000 nodes.

// BenchSizes are the cluster sizes the benchmarks run at.
var BenchSizes = []int{100, 1000, 5000}

type benchPool struct {
	name, instanceType, arch, os string
	zones                        []string
	taints                       []corev1.Taint
	// share is the pool's part of the worker nodes, in thousandths.
	share int
}

var allZones = []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}

// benchPools make 15 untainted pools (3 zones × 5 instance types) and 5
// tainted ones: 20 pool classes before Cordoned and not-ready nodes.
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

// CloudNodes returns n nodes as a node informer decodes them: every string
// its own allocation. Three are control-plane nodes; every 250th worker is
// cordoned and every 1,000th not ready.
func CloudNodes(n int) []*corev1.Node {
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
		l[ControlPlaneKey] = ""
		l["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
		add(l, []corev1.Taint{{Key: ControlPlaneKey, Effect: corev1.TaintEffectNoSchedule}})
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

// NamedDaemonSet is a DaemonSet with a name for a benchmark's label.
type NamedDaemonSet struct {
	Name string
	DS   *appsv1.DaemonSet
}

// BenchDaemonSets are the DaemonSets the benchmarks judge.
func BenchDaemonSets() []NamedDaemonSet {
	return []NamedDaemonSet{
		// A node agent: Linux only, tolerates the control plane, skips the
		// tainted GPU and infra pools.
		{"agent", DS(
			WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux"}),
			WithTolerations(corev1.Toleration{Key: ControlPlaneKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))},
		// A GPU device plugin: one pool, every other node a selector skip.
		{"gpu-plugin", DS(
			WithNodeSelector(map[string]string{"cloud.example.com/node-pool": "gpu"}),
			WithTolerations(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}))},
		// Selection by hostname: every node is decided on its own.
		{"per-node", DS(
			WithRequiredNodeAffinity(NodeTerm(
				NodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
				NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, "ip-10-0-0-9", "ip-10-0-0-10"))),
			WithTolerations(corev1.Toleration{Key: ControlPlaneKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))},
	}
}
