package coverage

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/dsguard/dsguard/internal/testobj"
)

// Expected skip groups.

func skipNodeName(nodes ...string) Skip { return Skip{Kind: SkipNodeName}.WithNodes(nodes...) }
func skipSelector(nodes ...string) Skip { return Skip{Kind: SkipSelector}.WithNodes(nodes...) }
func skipOSArch(nodes ...string) Skip   { return Skip{Kind: SkipOSArch}.WithNodes(nodes...) }

func skipTaint(t corev1.Taint, nodes ...string) Skip {
	return Skip{Kind: SkipTaint, Taint: t}.WithNodes(nodes...)
}

// skipLifecycle is a skip for a taint of the built-in lifecycle catalogue.
func skipLifecycle(t corev1.Taint, nodes ...string) Skip {
	reason, _ := builtinLifecycle.Reason(t.Key)
	return Skip{Kind: SkipTaint, Taint: t, Transient: true, Lifecycle: reason}.WithNodes(nodes...)
}

// named returns c with every skip naming its nodes outright, so that two
// predictions compare by what they say, not by how they hold the names.
func named(c Coverage) Coverage {
	skips := c.Skips
	c.Skips = nil
	for _, s := range skips {
		c.Skips = append(c.Skips, s.WithNodes(s.Nodes()...))
	}
	return c
}

// sameCoverage reports whether two predictions say the same: total, eligible
// and the skip groups in order, with the same nodes.
func sameCoverage(a, b Coverage) bool { return reflect.DeepEqual(named(a), named(b)) }

// assertCoverage compares a prediction exactly: total, eligible and the skip
// groups in order.
func assertCoverage(t *testing.T, got Coverage, total, eligible int, skips []Skip) {
	t.Helper()
	if !sameCoverage(got, Coverage{Total: total, Eligible: eligible, Skips: skips}) {
		t.Errorf("got %s\nwant %s", describeCoverage(got), describeCoverage(Coverage{Total: total, Eligible: eligible, Skips: skips}))
	}
}

func describeCoverage(c Coverage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "total %d, eligible %d, %d skip groups", c.Total, c.Eligible, len(c.Skips))
	for _, s := range c.Skips {
		fmt.Fprintf(&b, "\n    %s taint=%q lifecycle=%v %q %v", s.Kind, s.Taint.ToString(), s.Transient, s.Lifecycle, s.Nodes())
	}
	return b.String()
}

func TestPredictCoverage(t *testing.T) {
	const (
		pool = "cloud.example.com/node-pool"
		zone = corev1.LabelTopologyZone
		cpus = "example.com/cpus"
	)
	gpuTaint := testobj.TaintOf("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)
	cpTaintNS := testobj.NoSchedule(cpKey)
	// Three workers of one pool (one class), a GPU pool, a tainted control plane.
	workers := testobj.PoolNodes("w", 3, testobj.NodeLabels(pool, "general"))
	gpus := testobj.PoolNodes("gpu", 2, testobj.NodeLabels(pool, "gpu"), testobj.NodeTaints(gpuTaint))
	cp := testobj.ControlPlaneNode("cp-1")
	cluster := []any{workers, gpus, cp}
	// Nodes in three zones, one without a zone label.
	zoned := []any{
		testobj.Node("a-1", testobj.NodeLabels(zone, "zone-a", cpus, "4")),
		testobj.Node("b-1", testobj.NodeLabels(zone, "zone-b", cpus, "16")),
		testobj.Node("c-1", testobj.NodeLabels(zone, "zone-c", cpus, "64")),
		testobj.Node("x-1", testobj.NodeLabels(cpus, "many")),
	}
	// A mixed fleet: Linux amd64 and arm64 workers, Windows workers.
	mixed := []any{
		testobj.PoolNodes("amd", 2),
		testobj.PoolNodes("arm", 2, testobj.NodeLabels(corev1.LabelArchStable, "arm64")),
		testobj.PoolNodes("win", 3, testobj.NodeLabels(corev1.LabelOSStable, "windows")),
		testobj.Node("win-gpu-1", testobj.NodeLabels(corev1.LabelOSStable, "windows", pool, "gpu")),
		testobj.Node("gpu-lin-1", testobj.NodeLabels(pool, "gpu")),
	}
	noTolerations := testobj.WithTolerations()
	tolerate := func(key string, effect corev1.TaintEffect) func(*appsv1.DaemonSet) {
		return testobj.WithTolerations(corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect})
	}
	// byName is a term per name: a node field selector takes exactly one value.
	byName := func(names ...string) func(*appsv1.DaemonSet) {
		terms := make([]corev1.NodeSelectorTerm, len(names))
		for i, name := range names {
			terms[i] = corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				testobj.NodeReq("metadata.name", corev1.NodeSelectorOpIn, name),
			}}
		}
		return testobj.WithRequiredNodeAffinity(terms...)
	}
	nodeLife := func(name string, ts ...corev1.Taint) *corev1.Node {
		return testobj.Node(name, testobj.NodeTaints(ts...))
	}

	tests := []struct {
		name     string
		ds       *appsv1.DaemonSet
		nodes    []any
		eligible int
		skips    []Skip
	}{
		{name: "tolerates everything", ds: testobj.DS(), nodes: cluster, eligible: 6},
		{name: "no nodes", ds: testobj.DS(), nodes: nil, eligible: 0},
		{name: "no tolerations: taint groups, largest first", ds: testobj.DS(noTolerations), nodes: cluster, eligible: 3,
			skips: []Skip{skipTaint(gpuTaint, "gpu-1", "gpu-2"), skipTaint(cpTaintNS, "cp-1")}},

		// nodeName
		{name: "nodeName pins to an existing node", ds: testobj.DS(testobj.WithNodeName("w-2")), nodes: cluster, eligible: 1,
			skips: []Skip{skipNodeName("cp-1", "gpu-1", "gpu-2", "w-1", "w-3")}},
		{name: "nodeName names no node", ds: testobj.DS(testobj.WithNodeName("gone-1")), nodes: cluster, eligible: 0,
			skips: []Skip{skipNodeName("cp-1", "gpu-1", "gpu-2", "w-1", "w-2", "w-3")}},
		{name: "nodeName pins to a node whose taint is not tolerated", ds: testobj.DS(noTolerations, testobj.WithNodeName("gpu-2")),
			nodes: cluster, eligible: 0,
			skips: []Skip{skipNodeName("cp-1", "gpu-1", "w-1", "w-2", "w-3"), skipTaint(gpuTaint, "gpu-2")}},
		{name: "nodeName pins but the selector excludes the node",
			ds:    testobj.DS(testobj.WithNodeName("w-1"), testobj.WithNodeSelector(map[string]string{pool: "gpu"})),
			nodes: cluster, eligible: 0,
			skips: []Skip{skipNodeName("cp-1", "gpu-1", "gpu-2", "w-2", "w-3"), skipSelector("w-1")}},

		// nodeSelector
		{name: "nodeSelector picks a pool", ds: testobj.DS(testobj.WithNodeSelector(map[string]string{pool: "gpu"})), nodes: cluster,
			eligible: 2, skips: []Skip{skipSelector("cp-1", "w-1", "w-2", "w-3")}},
		{name: "nodeSelector with an empty value", ds: testobj.DS(testobj.WithNodeSelector(map[string]string{cpKey: ""})), nodes: cluster,
			eligible: 1, skips: []Skip{skipSelector("gpu-1", "gpu-2", "w-1", "w-2", "w-3")}},
		{name: "nodeSelector keys are ANDed", ds: testobj.DS(testobj.WithNodeSelector(map[string]string{pool: "gpu", cpKey: ""})),
			nodes: cluster, eligible: 0, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2", "w-1", "w-2", "w-3")}},
		{name: "selector mismatch wins over an untolerated taint",
			ds:    testobj.DS(noTolerations, testobj.WithNodeSelector(map[string]string{pool: "general"})),
			nodes: cluster, eligible: 3, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2")}},

		// Required node affinity operators.
		{name: "affinity In", ds: testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(zone, corev1.NodeSelectorOpIn, "zone-a", "zone-b")))),
			nodes: zoned, eligible: 2, skips: []Skip{skipSelector("c-1", "x-1")}},
		{name: "affinity NotIn matches nodes without the label",
			ds:    testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(zone, corev1.NodeSelectorOpNotIn, "zone-a")))),
			nodes: zoned, eligible: 3, skips: []Skip{skipSelector("a-1")}},
		{name: "affinity Exists", ds: testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(zone, corev1.NodeSelectorOpExists)))),
			nodes: zoned, eligible: 3, skips: []Skip{skipSelector("x-1")}},
		{name: "affinity DoesNotExist", ds: testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(zone, corev1.NodeSelectorOpDoesNotExist)))),
			nodes: zoned, eligible: 1, skips: []Skip{skipSelector("a-1", "b-1", "c-1")}},
		{name: "affinity Gt compares integers; a non-integer label does not match",
			ds:    testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(cpus, corev1.NodeSelectorOpGt, "8")))),
			nodes: zoned, eligible: 2, skips: []Skip{skipSelector("a-1", "x-1")}},
		{name: "affinity Lt", ds: testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(cpus, corev1.NodeSelectorOpLt, "32")))),
			nodes: zoned, eligible: 2, skips: []Skip{skipSelector("c-1", "x-1")}},
		{name: "affinity Gt with a malformed value matches nothing",
			ds:    testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(cpus, corev1.NodeSelectorOpGt, "eight")))),
			nodes: zoned, eligible: 0, skips: []Skip{skipSelector("a-1", "b-1", "c-1", "x-1")}},
		{name: "expressions of a term are ANDed",
			ds: testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(
				testobj.NodeReq(zone, corev1.NodeSelectorOpIn, "zone-b", "zone-c"),
				testobj.NodeReq(cpus, corev1.NodeSelectorOpLt, "32")))),
			nodes: zoned, eligible: 1, skips: []Skip{skipSelector("a-1", "c-1", "x-1")}},
		{name: "terms are ORed",
			ds: testobj.DS(testobj.WithRequiredNodeAffinity(
				testobj.NodeTerm(testobj.NodeReq(zone, corev1.NodeSelectorOpIn, "zone-a")),
				testobj.NodeTerm(testobj.NodeReq(cpus, corev1.NodeSelectorOpGt, "32")),
				testobj.NodeTerm(testobj.NodeReq(zone, corev1.NodeSelectorOpDoesNotExist)))),
			nodes: zoned, eligible: 3, skips: []Skip{skipSelector("b-1")}},
		{name: "nodeSelector and affinity are ANDed",
			ds: testobj.DS(testobj.WithNodeSelector(map[string]string{zone: "zone-b"}),
				testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(cpus, corev1.NodeSelectorOpExists)))),
			nodes: zoned, eligible: 1, skips: []Skip{skipSelector("a-1", "c-1", "x-1")}},
		{name: "an empty term matches no node", ds: testobj.DS(testobj.WithRequiredNodeAffinity(corev1.NodeSelectorTerm{})),
			nodes: zoned, eligible: 0, skips: []Skip{skipSelector("a-1", "b-1", "c-1", "x-1")}},
		{name: "no terms at all match no node", ds: testobj.DS(testobj.WithRequiredNodeAffinity()),
			nodes: zoned, eligible: 0, skips: []Skip{skipSelector("a-1", "b-1", "c-1", "x-1")}},
		{name: "an empty term ORed with another leaves the other",
			ds:    testobj.DS(testobj.WithRequiredNodeAffinity(corev1.NodeSelectorTerm{}, testobj.NodeTerm(testobj.NodeReq(zone, corev1.NodeSelectorOpIn, "zone-c")))),
			nodes: zoned, eligible: 1, skips: []Skip{skipSelector("a-1", "b-1", "x-1")}},
		{name: "preferred affinity never excludes",
			ds: testobj.DS(func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
						{Weight: 1, Preference: testobj.NodeTerm(testobj.NodeReq(zone, corev1.NodeSelectorOpIn, "zone-a"))},
					},
				}}
			}),
			nodes: zoned, eligible: 4},

		// Node identity: every node decided on its own, though workers share a class.
		{name: "matchFields metadata.name", ds: testobj.DS(byName("w-1", "w-3", "gone")),
			nodes: cluster, eligible: 2, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2", "w-2")}},
		{name: "matchFields NotIn metadata.name",
			ds: testobj.DS(testobj.WithRequiredNodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				testobj.NodeReq("metadata.name", corev1.NodeSelectorOpNotIn, "w-2")}})),
			nodes: cluster, eligible: 5, skips: []Skip{skipSelector("w-2")}},
		{name: "matchFields with two values matches no node (a field selector takes one value)",
			ds: testobj.DS(testobj.WithRequiredNodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				testobj.NodeReq("metadata.name", corev1.NodeSelectorOpIn, "w-1", "w-2")}})),
			nodes: cluster, eligible: 0, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2", "w-1", "w-2", "w-3")}},
		{name: "matchFields on a tainted node", ds: testobj.DS(noTolerations, byName("w-1", "gpu-2")),
			nodes: cluster, eligible: 1,
			skips: []Skip{skipSelector("cp-1", "gpu-1", "w-2", "w-3"), skipTaint(gpuTaint, "gpu-2")}},
		{name: "hostname nodeSelector", ds: testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelHostname: "w-2"})),
			nodes: cluster, eligible: 1, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2", "w-1", "w-3")}},
		{name: "hostname affinity In",
			ds:    testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpIn, "w-1", "w-3")))),
			nodes: cluster, eligible: 2, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2", "w-2")}},
		{name: "hostname affinity NotIn",
			ds:    testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, "w-1", "w-3")))),
			nodes: cluster, eligible: 4, skips: []Skip{skipSelector("w-1", "w-3")}},
		{name: "hostname label, not the node name, is matched",
			ds: testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelHostname: "ip-10-0-0-2"})),
			nodes: []any{
				testobj.Node("ip-10-0-0-1.ec2.internal", testobj.NodeLabels(corev1.LabelHostname, "ip-10-0-0-1")),
				testobj.Node("ip-10-0-0-2.ec2.internal", testobj.NodeLabels(corev1.LabelHostname, "ip-10-0-0-2")),
				testobj.Node("ip-10-0-0-2", testobj.WithoutNodeLabel(corev1.LabelHostname)),
			},
			eligible: 1, skips: []Skip{skipSelector("ip-10-0-0-1.ec2.internal", "ip-10-0-0-2")}},
		{name: "a node without a hostname label, in the class of nodes with one",
			ds:       testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpDoesNotExist)))),
			nodes:    []any{workers, testobj.Node("w-4", testobj.WithoutNodeLabel(corev1.LabelHostname), testobj.NodeLabels(pool, "general"))},
			eligible: 1, skips: []Skip{skipSelector("w-1", "w-2", "w-3")}},
		{name: "an empty hostname label is not a missing one",
			ds:       testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelHostname: ""})),
			nodes:    []any{workers, testobj.Node("w-4", testobj.NodeLabels(corev1.LabelHostname, "", pool, "general"))},
			eligible: 1, skips: []Skip{skipSelector("w-1", "w-2", "w-3")}},
		{name: "hostname term ORed with a pool term",
			ds: testobj.DS(noTolerations, testobj.WithRequiredNodeAffinity(
				testobj.NodeTerm(testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpIn, "w-2")),
				testobj.NodeTerm(testobj.NodeReq(pool, corev1.NodeSelectorOpIn, "gpu")))),
			nodes: cluster, eligible: 1,
			skips: []Skip{skipSelector("cp-1", "w-1", "w-3"), skipTaint(gpuTaint, "gpu-1", "gpu-2")}},

		// Taints and the template's tolerations.
		{name: "NoSchedule and NoExecute exclude, PreferNoSchedule never does",
			ds: testobj.DS(noTolerations),
			nodes: []any{
				nodeLife("ns-1", testobj.NoSchedule("example.com/a")),
				nodeLife("ne-1", testobj.NoExecute("example.com/b")),
				nodeLife("pns-1", testobj.TaintOf("example.com/c", "", corev1.TaintEffectPreferNoSchedule)),
				nodeLife("plain-1"),
			},
			eligible: 2,
			// Groups of one size are ordered by their reason.
			skips: []Skip{skipTaint(testobj.NoSchedule("example.com/a"), "ns-1"), skipTaint(testobj.NoExecute("example.com/b"), "ne-1")}},
		{name: "only PreferNoSchedule taints", ds: testobj.DS(noTolerations),
			nodes: []any{testobj.PoolNodes("p", 3, testobj.NodeTaints(
				testobj.TaintOf(cpKey, "", corev1.TaintEffectPreferNoSchedule),
				testobj.TaintOf(corev1.TaintNodeNetworkUnavailable, "", corev1.TaintEffectPreferNoSchedule)))},
			eligible: 3},
		{name: "the first untolerated taint is reported",
			ds: testobj.DS(tolerate("example.com/a", "")),
			nodes: []any{nodeLife("n-1",
				testobj.TaintOf("example.com/z", "", corev1.TaintEffectPreferNoSchedule),
				testobj.NoSchedule("example.com/a"), testobj.NoExecute("example.com/b"), testobj.NoSchedule("example.com/c"))},
			eligible: 0, skips: []Skip{skipTaint(testobj.NoExecute("example.com/b"), "n-1")}},
		{name: "toleration for NoExecute does not cover NoSchedule",
			ds: testobj.DS(tolerate(cpKey, corev1.TaintEffectNoExecute)), nodes: []any{cp}, eligible: 0,
			skips: []Skip{skipTaint(cpTaintNS, "cp-1")}},
		{name: "Equal toleration needs the value",
			ds: testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual,
				Value: "absent", Effect: corev1.TaintEffectNoSchedule})),
			nodes: []any{gpus}, eligible: 0, skips: []Skip{skipTaint(gpuTaint, "gpu-1", "gpu-2")}},
		{name: "Equal toleration with the value, operator defaulted",
			ds:    testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: "nvidia.com/gpu", Value: "present"})),
			nodes: []any{gpus}, eligible: 2},
		{name: "empty key Exists tolerates every taint", ds: testobj.DS(), nodes: []any{
			nodeLife("n-1", testobj.NoExecute("a"), testobj.NoSchedule("b"), testobj.NoSchedule(cpKey))}, eligible: 1},

		// Tolerations the controller adds.
		{name: "controller tolerates not-ready and unreachable NoExecute",
			ds: testobj.DS(noTolerations),
			nodes: []any{
				nodeLife("nr-1", testobj.NoExecute(corev1.TaintNodeNotReady)),
				nodeLife("ur-1", testobj.NoExecute(corev1.TaintNodeUnreachable)),
			},
			eligible: 2},
		{name: "not-ready and unreachable NoSchedule are not tolerated, and lifecycle taints",
			ds: testobj.DS(noTolerations),
			nodes: []any{
				nodeLife("nr-1", testobj.NoSchedule(corev1.TaintNodeNotReady)),
				nodeLife("nr-2", testobj.NoSchedule(corev1.TaintNodeNotReady)),
				nodeLife("ur-1", testobj.NoSchedule(corev1.TaintNodeUnreachable)),
			},
			eligible: 0,
			skips: []Skip{skipLifecycle(testobj.NoSchedule(corev1.TaintNodeNotReady), "nr-1", "nr-2"),
				skipLifecycle(testobj.NoSchedule(corev1.TaintNodeUnreachable), "ur-1")}},
		{name: "controller tolerates pressure and unschedulable NoSchedule",
			ds: testobj.DS(noTolerations),
			nodes: []any{
				nodeLife("disk-1", testobj.NoSchedule(corev1.TaintNodeDiskPressure)),
				nodeLife("mem-1", testobj.NoSchedule(corev1.TaintNodeMemoryPressure)),
				nodeLife("pid-1", testobj.NoSchedule(corev1.TaintNodePIDPressure)),
				nodeLife("cordon-1", testobj.NoSchedule(corev1.TaintNodeUnschedulable)),
			},
			eligible: 4},
		{name: "pressure taints with NoExecute are not tolerated",
			ds: testobj.DS(noTolerations),
			nodes: []any{
				nodeLife("disk-1", testobj.NoExecute(corev1.TaintNodeDiskPressure)),
				nodeLife("mem-1", testobj.NoExecute(corev1.TaintNodeMemoryPressure)),
				nodeLife("cordon-1", testobj.NoExecute(corev1.TaintNodeUnschedulable)),
			},
			eligible: 0,
			skips: []Skip{
				skipTaint(testobj.NoExecute(corev1.TaintNodeDiskPressure), "disk-1"),
				skipTaint(testobj.NoExecute(corev1.TaintNodeMemoryPressure), "mem-1"),
				skipTaint(testobj.NoExecute(corev1.TaintNodeUnschedulable), "cordon-1"),
			}},
		{name: "network-unavailable is not tolerated without hostNetwork, and a lifecycle taint",
			ds: testobj.DS(noTolerations), nodes: []any{nodeLife("net-1", testobj.NoSchedule(corev1.TaintNodeNetworkUnavailable))},
			eligible: 0, skips: []Skip{skipLifecycle(testobj.NoSchedule(corev1.TaintNodeNetworkUnavailable), "net-1")}},
		{name: "network-unavailable NoSchedule is tolerated with hostNetwork",
			ds: testobj.DS(noTolerations, testobj.WithHostNetwork), nodes: []any{nodeLife("net-1", testobj.NoSchedule(corev1.TaintNodeNetworkUnavailable))},
			eligible: 1},
		{name: "network-unavailable NoExecute is not tolerated even with hostNetwork",
			ds: testobj.DS(noTolerations, testobj.WithHostNetwork), nodes: []any{nodeLife("net-1", testobj.NoExecute(corev1.TaintNodeNetworkUnavailable))},
			eligible: 0, skips: []Skip{skipLifecycle(testobj.NoExecute(corev1.TaintNodeNetworkUnavailable), "net-1")}},
		{name: "hostNetwork tolerates nothing else",
			ds: testobj.DS(noTolerations, testobj.WithHostNetwork), nodes: cluster, eligible: 3,
			skips: []Skip{skipTaint(gpuTaint, "gpu-1", "gpu-2"), skipTaint(cpTaintNS, "cp-1")}},
		{name: "spec.unschedulable (cordon) has no effect",
			ds: testobj.DS(noTolerations), nodes: []any{testobj.PoolNodes("c", 2, testobj.Cordoned), testobj.Node("w-1")}, eligible: 3},

		// Lifecycle taints are flagged, others not.
		{name: "lifecycle taints are flagged",
			ds: testobj.DS(noTolerations),
			nodes: []any{
				nodeLife("init-1", testobj.NoSchedule("node.cloudprovider.kubernetes.io/uninitialized")),
				nodeLife("scale-1", testobj.NoSchedule("ToBeDeletedByClusterAutoscaler")),
				nodeLife("scale-2", testobj.TaintOf("ToBeDeletedByClusterAutoscaler", "1764430000", corev1.TaintEffectNoSchedule)),
				nodeLife("nr-1", testobj.NoSchedule(corev1.TaintNodeNotReady)),
				nodeLife("ur-1", testobj.NoSchedule(corev1.TaintNodeUnreachable)),
				nodeLife("ok-1"),
				cp,
			},
			eligible: 1,
			skips: []Skip{
				skipLifecycle(testobj.NoSchedule("ToBeDeletedByClusterAutoscaler"), "scale-1"),
				skipLifecycle(testobj.TaintOf("ToBeDeletedByClusterAutoscaler", "1764430000", corev1.TaintEffectNoSchedule), "scale-2"),
				skipTaint(cpTaintNS, "cp-1"),
				skipLifecycle(testobj.NoSchedule("node.cloudprovider.kubernetes.io/uninitialized"), "init-1"),
				skipLifecycle(testobj.NoSchedule(corev1.TaintNodeNotReady), "nr-1"),
				skipLifecycle(testobj.NoSchedule(corev1.TaintNodeUnreachable), "ur-1"),
			}},

		// Operating system and architecture.
		{name: "nodeSelector on the OS alone: os-arch skips",
			ds: testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux"})), nodes: mixed, eligible: 5,
			skips: []Skip{skipOSArch("win-1", "win-2", "win-3", "win-gpu-1")}},
		{name: "nodeSelector on the architecture alone: os-arch skips",
			ds: testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelArchStable: "amd64"})), nodes: mixed, eligible: 7,
			skips: []Skip{skipOSArch("arm-1", "arm-2")}},
		{name: "beta OS label",
			ds: testobj.DS(testobj.WithNodeSelector(map[string]string{"beta.kubernetes.io/os": "linux"})),
			nodes: []any{
				testobj.Node("lin-1", testobj.NodeLabels("beta.kubernetes.io/os", "linux")),
				testobj.Node("win-1", testobj.NodeLabels("beta.kubernetes.io/os", "windows")),
			},
			eligible: 1, skips: []Skip{skipOSArch("win-1")}},
		{name: "affinity term with only kubernetes.io/os",
			ds:    testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux")))),
			nodes: mixed, eligible: 5, skips: []Skip{skipOSArch("win-1", "win-2", "win-3", "win-gpu-1")}},
		{name: "affinity term on OS and architecture",
			ds: testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(
				testobj.NodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpNotIn, "windows"),
				testobj.NodeReq(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")))),
			nodes: mixed, eligible: 2, skips: []Skip{skipOSArch("amd-1", "amd-2", "gpu-lin-1", "win-1", "win-2", "win-3", "win-gpu-1")}},
		{name: "OS and a pool: only nodes of the pool are os-arch skips",
			ds: testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux", pool: "gpu"})), nodes: mixed, eligible: 1,
			skips: []Skip{skipSelector("amd-1", "amd-2", "arm-1", "arm-2", "win-1", "win-2", "win-3"), skipOSArch("win-gpu-1")}},
		{name: "affinity on OS and a pool in one term",
			ds: testobj.DS(testobj.WithRequiredNodeAffinity(testobj.NodeTerm(
				testobj.NodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
				testobj.NodeReq(pool, corev1.NodeSelectorOpIn, "gpu")))),
			nodes: mixed, eligible: 1,
			skips: []Skip{skipSelector("amd-1", "amd-2", "arm-1", "arm-2", "win-1", "win-2", "win-3"), skipOSArch("win-gpu-1")}},
		{name: "an OS-only term ORed with a pool term: every other-OS node is an os-arch skip",
			ds: testobj.DS(testobj.WithRequiredNodeAffinity(
				testobj.NodeTerm(testobj.NodeReq(pool, corev1.NodeSelectorOpIn, "gpu")),
				testobj.NodeTerm(testobj.NodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux")))),
			nodes: mixed, eligible: 6, skips: []Skip{skipOSArch("win-1", "win-2", "win-3")}},
		{name: "an empty term ORed with an OS-only term",
			ds: testobj.DS(testobj.WithRequiredNodeAffinity(corev1.NodeSelectorTerm{},
				testobj.NodeTerm(testobj.NodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux")))),
			nodes: mixed, eligible: 5, skips: []Skip{skipOSArch("win-1", "win-2", "win-3", "win-gpu-1")}},
		{name: "a node without an OS label is an os-arch skip",
			ds:       testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux"})),
			nodes:    []any{testobj.Node("bare-1", testobj.WithoutNodeLabel(corev1.LabelOSStable)), testobj.Node("lin-1")},
			eligible: 1, skips: []Skip{skipOSArch("bare-1")}},
		{name: "OS matches but an untolerated taint excludes",
			ds: testobj.DS(noTolerations, testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "windows"})),
			nodes: []any{mixed, testobj.Node("win-t-1", testobj.NodeLabels(corev1.LabelOSStable, "windows"),
				testobj.NodeTaints(testobj.TaintOf("os", "windows", corev1.TaintEffectNoSchedule)))},
			eligible: 4,
			skips: []Skip{skipOSArch("amd-1", "amd-2", "arm-1", "arm-2", "gpu-lin-1"),
				skipTaint(testobj.TaintOf("os", "windows", corev1.TaintEffectNoSchedule), "win-t-1")}},
		{name: "OS selection together with hostname selection",
			ds:    testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux", corev1.LabelHostname: "win-2"})),
			nodes: mixed, eligible: 0,
			skips: []Skip{skipSelector("amd-1", "amd-2", "arm-1", "arm-2", "gpu-lin-1", "win-1", "win-3", "win-gpu-1"),
				skipOSArch("win-2")}},

		// Grouping and order.
		{name: "groups: largest first, ties by reason, names sorted across classes",
			ds: testobj.DS(noTolerations, testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(zone, corev1.NodeSelectorOpNotIn, "zone-x")))),
			nodes: []any{
				testobj.PoolNodes("a", 12, testobj.NodeTaints(testobj.NoSchedule("t-a"))),
				testobj.Node("b-10", testobj.NodeTaints(testobj.NoSchedule("t-b")), testobj.NodeLabels(pool, "one")),
				testobj.Node("b-9", testobj.NodeTaints(testobj.NoSchedule("t-b")), testobj.NodeLabels(pool, "two")),
				testobj.Node("b-1", testobj.NodeTaints(testobj.NoSchedule("t-b")), testobj.NodeLabels(pool, "three")),
				testobj.PoolNodes("x", 3, testobj.NodeLabels(zone, "zone-x")),
				testobj.PoolNodes("c", 3, testobj.NodeTaints(testobj.NoSchedule("t-c"))),
				testobj.PoolNodes("ok", 2),
			},
			eligible: 2,
			skips: []Skip{
				skipTaint(testobj.NoSchedule("t-a"), "a-1", "a-10", "a-11", "a-12", "a-2", "a-3", "a-4", "a-5", "a-6", "a-7", "a-8", "a-9"),
				skipSelector("x-1", "x-2", "x-3"),
				skipTaint(testobj.NoSchedule("t-b"), "b-1", "b-10", "b-9"),
				skipTaint(testobj.NoSchedule("t-c"), "c-1", "c-2", "c-3"),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := snapshotOf(tt.nodes...)
			got := Predict(tt.ds, nodes)
			assertCoverage(t, got, nodes.Len(), tt.eligible, tt.skips)
			if got.Eligible+got.Skipped() != got.Total {
				t.Errorf("eligible %d + skipped %d != total %d", got.Eligible, got.Skipped(), got.Total)
			}
		})
	}
}

// TestPredictCoverage_PerNodeMatchesPerClass checks the class shortcut
// against deciding every node on its own (a snapshot of one-node classes).
func TestPredictCoverage_PerNodeMatchesPerClass(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 60 {
		n := testobj.Node(fmt.Sprintf("n-%02d", i), testobj.NodeLabels("pool", fmt.Sprint(i%4)))
		switch i % 5 {
		case 1:
			n.Spec.Taints = []corev1.Taint{testobj.NoSchedule("dedicated")}
		case 2:
			n.Spec.Taints = []corev1.Taint{testobj.NoSchedule(corev1.TaintNodeNotReady)}
		case 3:
			n.Labels[corev1.LabelOSStable] = "windows"
		}
		nodes = append(nodes, n)
	}
	// A PreferNoSchedule taint of its own, which never excludes, makes every
	// node a class of its own.
	uniqueNodes := make([]*corev1.Node, len(nodes))
	for i, n := range nodes {
		c := n.DeepCopy()
		c.Spec.Taints = append(c.Spec.Taints, corev1.Taint{Key: "unique", Value: fmt.Sprint(i), Effect: corev1.TaintEffectPreferNoSchedule})
		uniqueNodes[i] = c
	}
	unique := NewNodeSnapshot(uniqueNodes)
	shared := nodes
	classes := NewNodeSnapshot(shared)
	if unique.Classes() != len(nodes) || classes.Classes() >= 20 {
		t.Fatalf("classes: %d unique, %d shared", unique.Classes(), classes.Classes())
	}
	for _, ds := range []*appsv1.DaemonSet{
		testobj.DS(),
		testobj.DS(testobj.WithTolerations()),
		testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux", "pool": "1"})),
		testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq("pool", corev1.NodeSelectorOpIn, "0", "2")))),
		testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, "n-01")))),
	} {
		a, b := Predict(ds, unique), Predict(ds, classes)
		if !sameCoverage(a, b) {
			t.Errorf("per node: %s\nper class: %s", describeCoverage(a), describeCoverage(b))
		}
	}
}

func TestPredictCoverage_DoesNotChangeItsInputs(t *testing.T) {
	nodes := snapshotOf(testobj.PoolNodes("w", 3), testobj.ControlPlaneNode("cp-1"))
	ds := testobj.DS(testobj.WithTolerations(), testobj.WithHostNetwork,
		testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(corev1.LabelHostname, corev1.NodeSelectorOpIn, "w-1", "cp-1"))))
	before := ds.DeepCopy()
	first := Predict(ds, nodes)
	if !reflect.DeepEqual(ds, before) {
		t.Errorf("Predict changed the DaemonSet")
	}
	// The snapshot keeps no per-member state from the last prediction.
	if second := Predict(testobj.DS(testobj.WithTolerations()), nodes); second.Eligible != 3 {
		t.Errorf("after a per-node prediction: %s", describeCoverage(second))
	}
	if again := Predict(ds, nodes); !sameCoverage(first, again) {
		t.Errorf("second prediction differs:\n%s\n%s", describeCoverage(first), describeCoverage(again))
	}
}

func TestCoverage_Skipped(t *testing.T) {
	c := Coverage{Total: 10, Eligible: 4, Skips: []Skip{
		skipTaint(testobj.NoSchedule("a"), "n-1", "n-2", "n-3"),
		skipOSArch("w-1", "w-2"),
		skipSelector("s-1"),
	}}
	for _, tt := range []struct {
		kinds []SkipKind
		want  int
	}{
		{nil, 6},
		{[]SkipKind{SkipTaint}, 3},
		{[]SkipKind{SkipOSArch, SkipSelector}, 3},
		{[]SkipKind{SkipNodeName}, 0},
	} {
		if got := c.Skipped(tt.kinds...); got != tt.want {
			t.Errorf("Skipped(%v) = %d, want %d", tt.kinds, got, tt.want)
		}
	}
}

func TestSkip_Describe(t *testing.T) {
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("n-%d", i+1)
		}
		return out
	}
	tests := []struct {
		skip  Skip
		limit int
		want  string
	}{
		{skipTaint(testobj.TaintOf("dedicated", "infra", corev1.TaintEffectNoSchedule), "n-1"), 5,
			"taint dedicated=infra:NoSchedule not tolerated (n-1)"},
		{skipTaint(testobj.NoExecute("example.com/maintenance"), names(5)...), 5,
			"taint example.com/maintenance:NoExecute not tolerated (n-1, n-2, n-3, n-4, n-5)"},
		{skipTaint(testobj.NoSchedule(cpKey), names(6)...), 5,
			"taint " + cpTaint + " not tolerated (n-1, n-2, n-3, n-4, n-5 and 1 more)"},
		{skipSelector(names(100)...), 2, "nodeSelector or node affinity does not match (n-1, n-2 and 98 more)"},
		{skipOSArch(names(3)...), 3, "operating system or architecture not selected (n-1, n-2, n-3)"},
		{skipNodeName(names(3)...), 1, "spec.template.spec.nodeName names another node (n-1 and 2 more)"},
	}
	for _, tt := range tests {
		if got := tt.skip.Describe(tt.limit); got != tt.want {
			t.Errorf("Describe(%d) = %q, want %q", tt.limit, got, tt.want)
		}
	}
}

// TestNodeSnapshot_HighCardinalityLabelsArePerNode: a label with a value of
// its own on (nearly) every node, like an instance ID, does not split the
// classes; a DaemonSet selecting on it is judged node by node, correctly.
func TestNodeSnapshot_HighCardinalityLabelsArePerNode(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 200 {
		nodes = append(nodes, testobj.Node(fmt.Sprintf("n-%03d", i),
			testobj.NodeLabels("pool", fmt.Sprint(i%4), "example.com/instance-id", fmt.Sprintf("i-%05d", i))))
	}
	snap := NewNodeSnapshot(nodes)
	if snap.Classes() != 4 {
		t.Fatalf("classes = %d, want 4 (one per pool): the instance ID must not split them", snap.Classes())
	}
	ds := testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(testobj.NodeTerm(
		testobj.NodeReq("example.com/instance-id", corev1.NodeSelectorOpIn, "i-00007", "i-00100"))))
	cov := Predict(ds, snap)
	if cov.Eligible != 2 || cov.Skipped(SkipSelector) != 198 {
		t.Errorf("selecting two instance IDs: eligible %d, selector-skipped %d; want 2 and 198", cov.Eligible, cov.Skipped(SkipSelector))
	}
	// A label with few values stays part of the class key.
	few := NewNodeSnapshot(nodes[:40])
	if few.isPerNodeKey("pool") || !few.isPerNodeKey(corev1.LabelHostname) {
		t.Error("pool must stay a class label; the hostname is always per-node")
	}
}
