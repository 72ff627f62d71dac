package policy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Expected skip groups.

func skipNodeName(nodes ...string) Skip { return Skip{Kind: SkipNodeName, Nodes: nodes} }
func skipSelector(nodes ...string) Skip { return Skip{Kind: SkipSelector, Nodes: nodes} }
func skipOSArch(nodes ...string) Skip   { return Skip{Kind: SkipOSArch, Nodes: nodes} }

func skipTaint(t corev1.Taint, nodes ...string) Skip {
	return Skip{Kind: SkipTaint, Taint: t, Nodes: nodes}
}

func skipTransient(t corev1.Taint, nodes ...string) Skip {
	return Skip{Kind: SkipTaint, Taint: t, Transient: true, Nodes: nodes}
}

// assertCoverage compares a prediction exactly: total, eligible and the skip
// groups in order.
func assertCoverage(t *testing.T, got Coverage, total, eligible int, skips []Skip) {
	t.Helper()
	if got.Total != total || got.Eligible != eligible || !reflect.DeepEqual(got.Skips, skips) {
		t.Errorf("got %s\nwant %s", describeCoverage(got), describeCoverage(Coverage{Total: total, Eligible: eligible, Skips: skips}))
	}
}

func describeCoverage(c Coverage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "total %d, eligible %d, %d skip groups", c.Total, c.Eligible, len(c.Skips))
	for _, s := range c.Skips {
		fmt.Fprintf(&b, "\n    %s taint=%q transient=%v %v", s.Kind, taintString(s.Taint), s.Transient, s.Nodes)
	}
	return b.String()
}

func TestPredictCoverage(t *testing.T) {
	const (
		pool = "cloud.example.com/node-pool"
		zone = corev1.LabelTopologyZone
		cpus = "example.com/cpus"
	)
	gpuTaint := taintOf("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)
	cpTaintNS := noSchedule(cpKey)
	// Three workers of one pool (one class), a GPU pool, a tainted control plane.
	workers := poolNodes("w", 3, nodeLabels(pool, "general"))
	gpus := poolNodes("gpu", 2, nodeLabels(pool, "gpu"), nodeTaints(gpuTaint))
	cp := controlPlaneNode("cp-1")
	cluster := []any{workers, gpus, cp}
	// Nodes in three zones, one without a zone label.
	zoned := []any{
		newNode("a-1", nodeLabels(zone, "zone-a", cpus, "4")),
		newNode("b-1", nodeLabels(zone, "zone-b", cpus, "16")),
		newNode("c-1", nodeLabels(zone, "zone-c", cpus, "64")),
		newNode("x-1", nodeLabels(cpus, "many")),
	}
	// A mixed fleet: Linux amd64 and arm64 workers, Windows workers.
	mixed := []any{
		poolNodes("amd", 2),
		poolNodes("arm", 2, nodeLabels(corev1.LabelArchStable, "arm64")),
		poolNodes("win", 3, nodeLabels(corev1.LabelOSStable, "windows")),
		newNode("win-gpu-1", nodeLabels(corev1.LabelOSStable, "windows", pool, "gpu")),
		newNode("gpu-lin-1", nodeLabels(pool, "gpu")),
	}
	noTolerations := withTolerations()
	tolerate := func(key string, effect corev1.TaintEffect) func(*appsv1.DaemonSet) {
		return withTolerations(corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect})
	}
	// byName is a term per name: a node field selector takes exactly one value.
	byName := func(names ...string) func(*appsv1.DaemonSet) {
		terms := make([]corev1.NodeSelectorTerm, len(names))
		for i, name := range names {
			terms[i] = corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				nodeReq("metadata.name", corev1.NodeSelectorOpIn, name),
			}}
		}
		return withRequiredNodeAffinity(terms...)
	}
	nodeLife := func(name string, ts ...corev1.Taint) *corev1.Node { return newNode(name, nodeTaints(ts...)) }

	tests := []struct {
		name     string
		ds       *appsv1.DaemonSet
		nodes    []any
		eligible int
		skips    []Skip
	}{
		{name: "tolerates everything", ds: newDS(), nodes: cluster, eligible: 6},
		{name: "no nodes", ds: newDS(), nodes: nil, eligible: 0},
		{name: "no tolerations: taint groups, largest first", ds: newDS(noTolerations), nodes: cluster, eligible: 3,
			skips: []Skip{skipTaint(gpuTaint, "gpu-1", "gpu-2"), skipTaint(cpTaintNS, "cp-1")}},

		// nodeName
		{name: "nodeName pins to an existing node", ds: newDS(withNodeName("w-2")), nodes: cluster, eligible: 1,
			skips: []Skip{skipNodeName("cp-1", "gpu-1", "gpu-2", "w-1", "w-3")}},
		{name: "nodeName names no node", ds: newDS(withNodeName("gone-1")), nodes: cluster, eligible: 0,
			skips: []Skip{skipNodeName("cp-1", "gpu-1", "gpu-2", "w-1", "w-2", "w-3")}},
		{name: "nodeName pins to a node whose taint is not tolerated", ds: newDS(noTolerations, withNodeName("gpu-2")),
			nodes: cluster, eligible: 0,
			skips: []Skip{skipNodeName("cp-1", "gpu-1", "w-1", "w-2", "w-3"), skipTaint(gpuTaint, "gpu-2")}},
		{name: "nodeName pins but the selector excludes the node",
			ds:    newDS(withNodeName("w-1"), withNodeSelector(map[string]string{pool: "gpu"})),
			nodes: cluster, eligible: 0,
			skips: []Skip{skipNodeName("cp-1", "gpu-1", "gpu-2", "w-2", "w-3"), skipSelector("w-1")}},

		// nodeSelector
		{name: "nodeSelector picks a pool", ds: newDS(withNodeSelector(map[string]string{pool: "gpu"})), nodes: cluster,
			eligible: 2, skips: []Skip{skipSelector("cp-1", "w-1", "w-2", "w-3")}},
		{name: "nodeSelector with an empty value", ds: newDS(withNodeSelector(map[string]string{cpKey: ""})), nodes: cluster,
			eligible: 1, skips: []Skip{skipSelector("gpu-1", "gpu-2", "w-1", "w-2", "w-3")}},
		{name: "nodeSelector keys are ANDed", ds: newDS(withNodeSelector(map[string]string{pool: "gpu", cpKey: ""})),
			nodes: cluster, eligible: 0, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2", "w-1", "w-2", "w-3")}},
		{name: "selector mismatch wins over an untolerated taint",
			ds:    newDS(noTolerations, withNodeSelector(map[string]string{pool: "general"})),
			nodes: cluster, eligible: 3, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2")}},

		// Required node affinity operators.
		{name: "affinity In", ds: newDS(withRequiredNodeAffinity(nodeTerm(nodeReq(zone, corev1.NodeSelectorOpIn, "zone-a", "zone-b")))),
			nodes: zoned, eligible: 2, skips: []Skip{skipSelector("c-1", "x-1")}},
		{name: "affinity NotIn matches nodes without the label",
			ds:    newDS(withRequiredNodeAffinity(nodeTerm(nodeReq(zone, corev1.NodeSelectorOpNotIn, "zone-a")))),
			nodes: zoned, eligible: 3, skips: []Skip{skipSelector("a-1")}},
		{name: "affinity Exists", ds: newDS(withRequiredNodeAffinity(nodeTerm(nodeReq(zone, corev1.NodeSelectorOpExists)))),
			nodes: zoned, eligible: 3, skips: []Skip{skipSelector("x-1")}},
		{name: "affinity DoesNotExist", ds: newDS(withRequiredNodeAffinity(nodeTerm(nodeReq(zone, corev1.NodeSelectorOpDoesNotExist)))),
			nodes: zoned, eligible: 1, skips: []Skip{skipSelector("a-1", "b-1", "c-1")}},
		{name: "affinity Gt compares integers; a non-integer label does not match",
			ds:    newDS(withRequiredNodeAffinity(nodeTerm(nodeReq(cpus, corev1.NodeSelectorOpGt, "8")))),
			nodes: zoned, eligible: 2, skips: []Skip{skipSelector("a-1", "x-1")}},
		{name: "affinity Lt", ds: newDS(withRequiredNodeAffinity(nodeTerm(nodeReq(cpus, corev1.NodeSelectorOpLt, "32")))),
			nodes: zoned, eligible: 2, skips: []Skip{skipSelector("c-1", "x-1")}},
		{name: "affinity Gt with a malformed value matches nothing",
			ds:    newDS(withRequiredNodeAffinity(nodeTerm(nodeReq(cpus, corev1.NodeSelectorOpGt, "eight")))),
			nodes: zoned, eligible: 0, skips: []Skip{skipSelector("a-1", "b-1", "c-1", "x-1")}},
		{name: "expressions of a term are ANDed",
			ds: newDS(withRequiredNodeAffinity(nodeTerm(
				nodeReq(zone, corev1.NodeSelectorOpIn, "zone-b", "zone-c"),
				nodeReq(cpus, corev1.NodeSelectorOpLt, "32")))),
			nodes: zoned, eligible: 1, skips: []Skip{skipSelector("a-1", "c-1", "x-1")}},
		{name: "terms are ORed",
			ds: newDS(withRequiredNodeAffinity(
				nodeTerm(nodeReq(zone, corev1.NodeSelectorOpIn, "zone-a")),
				nodeTerm(nodeReq(cpus, corev1.NodeSelectorOpGt, "32")),
				nodeTerm(nodeReq(zone, corev1.NodeSelectorOpDoesNotExist)))),
			nodes: zoned, eligible: 3, skips: []Skip{skipSelector("b-1")}},
		{name: "nodeSelector and affinity are ANDed",
			ds: newDS(withNodeSelector(map[string]string{zone: "zone-b"}),
				withRequiredNodeAffinity(nodeTerm(nodeReq(cpus, corev1.NodeSelectorOpExists)))),
			nodes: zoned, eligible: 1, skips: []Skip{skipSelector("a-1", "c-1", "x-1")}},
		{name: "an empty term matches no node", ds: newDS(withRequiredNodeAffinity(corev1.NodeSelectorTerm{})),
			nodes: zoned, eligible: 0, skips: []Skip{skipSelector("a-1", "b-1", "c-1", "x-1")}},
		{name: "no terms at all match no node", ds: newDS(withRequiredNodeAffinity()),
			nodes: zoned, eligible: 0, skips: []Skip{skipSelector("a-1", "b-1", "c-1", "x-1")}},
		{name: "an empty term ORed with another leaves the other",
			ds:    newDS(withRequiredNodeAffinity(corev1.NodeSelectorTerm{}, nodeTerm(nodeReq(zone, corev1.NodeSelectorOpIn, "zone-c")))),
			nodes: zoned, eligible: 1, skips: []Skip{skipSelector("a-1", "b-1", "x-1")}},
		{name: "preferred affinity never excludes",
			ds: newDS(func(ds *appsv1.DaemonSet) {
				ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
						{Weight: 1, Preference: nodeTerm(nodeReq(zone, corev1.NodeSelectorOpIn, "zone-a"))},
					},
				}}
			}),
			nodes: zoned, eligible: 4},

		// Node identity: every node decided on its own, though workers share a class.
		{name: "matchFields metadata.name", ds: newDS(byName("w-1", "w-3", "gone")),
			nodes: cluster, eligible: 2, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2", "w-2")}},
		{name: "matchFields NotIn metadata.name",
			ds: newDS(withRequiredNodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				nodeReq("metadata.name", corev1.NodeSelectorOpNotIn, "w-2")}})),
			nodes: cluster, eligible: 5, skips: []Skip{skipSelector("w-2")}},
		{name: "matchFields with two values matches no node (a field selector takes one value)",
			ds: newDS(withRequiredNodeAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				nodeReq("metadata.name", corev1.NodeSelectorOpIn, "w-1", "w-2")}})),
			nodes: cluster, eligible: 0, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2", "w-1", "w-2", "w-3")}},
		{name: "matchFields on a tainted node", ds: newDS(noTolerations, byName("w-1", "gpu-2")),
			nodes: cluster, eligible: 1,
			skips: []Skip{skipSelector("cp-1", "gpu-1", "w-2", "w-3"), skipTaint(gpuTaint, "gpu-2")}},
		{name: "hostname nodeSelector", ds: newDS(withNodeSelector(map[string]string{corev1.LabelHostname: "w-2"})),
			nodes: cluster, eligible: 1, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2", "w-1", "w-3")}},
		{name: "hostname affinity In",
			ds:    newDS(withRequiredNodeAffinity(nodeTerm(nodeReq(corev1.LabelHostname, corev1.NodeSelectorOpIn, "w-1", "w-3")))),
			nodes: cluster, eligible: 2, skips: []Skip{skipSelector("cp-1", "gpu-1", "gpu-2", "w-2")}},
		{name: "hostname affinity NotIn",
			ds:    newDS(withRequiredNodeAffinity(nodeTerm(nodeReq(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, "w-1", "w-3")))),
			nodes: cluster, eligible: 4, skips: []Skip{skipSelector("w-1", "w-3")}},
		{name: "hostname label, not the node name, is matched",
			ds: newDS(withNodeSelector(map[string]string{corev1.LabelHostname: "ip-10-0-0-2"})),
			nodes: []any{
				newNode("ip-10-0-0-1.ec2.internal", nodeLabels(corev1.LabelHostname, "ip-10-0-0-1")),
				newNode("ip-10-0-0-2.ec2.internal", nodeLabels(corev1.LabelHostname, "ip-10-0-0-2")),
				newNode("ip-10-0-0-2", withoutNodeLabel(corev1.LabelHostname)),
			},
			eligible: 1, skips: []Skip{skipSelector("ip-10-0-0-1.ec2.internal", "ip-10-0-0-2")}},
		{name: "a node without a hostname label, in the class of nodes with one",
			ds:       newDS(withRequiredNodeAffinity(nodeTerm(nodeReq(corev1.LabelHostname, corev1.NodeSelectorOpDoesNotExist)))),
			nodes:    []any{workers, newNode("w-4", withoutNodeLabel(corev1.LabelHostname), nodeLabels(pool, "general"))},
			eligible: 1, skips: []Skip{skipSelector("w-1", "w-2", "w-3")}},
		{name: "an empty hostname label is not a missing one",
			ds:       newDS(withNodeSelector(map[string]string{corev1.LabelHostname: ""})),
			nodes:    []any{workers, newNode("w-4", nodeLabels(corev1.LabelHostname, "", pool, "general"))},
			eligible: 1, skips: []Skip{skipSelector("w-1", "w-2", "w-3")}},
		{name: "hostname term ORed with a pool term",
			ds: newDS(noTolerations, withRequiredNodeAffinity(
				nodeTerm(nodeReq(corev1.LabelHostname, corev1.NodeSelectorOpIn, "w-2")),
				nodeTerm(nodeReq(pool, corev1.NodeSelectorOpIn, "gpu")))),
			nodes: cluster, eligible: 1,
			skips: []Skip{skipSelector("cp-1", "w-1", "w-3"), skipTaint(gpuTaint, "gpu-1", "gpu-2")}},

		// Taints and the template's tolerations.
		{name: "NoSchedule and NoExecute exclude, PreferNoSchedule never does",
			ds: newDS(noTolerations),
			nodes: []any{
				nodeLife("ns-1", noSchedule("example.com/a")),
				nodeLife("ne-1", noExecute("example.com/b")),
				nodeLife("pns-1", taintOf("example.com/c", "", corev1.TaintEffectPreferNoSchedule)),
				nodeLife("plain-1"),
			},
			eligible: 2,
			// Groups of one size are ordered by their reason.
			skips: []Skip{skipTaint(noSchedule("example.com/a"), "ns-1"), skipTaint(noExecute("example.com/b"), "ne-1")}},
		{name: "only PreferNoSchedule taints", ds: newDS(noTolerations),
			nodes: []any{poolNodes("p", 3, nodeTaints(
				taintOf(cpKey, "", corev1.TaintEffectPreferNoSchedule),
				taintOf(corev1.TaintNodeNetworkUnavailable, "", corev1.TaintEffectPreferNoSchedule)))},
			eligible: 3},
		{name: "the first untolerated taint is reported",
			ds: newDS(tolerate("example.com/a", "")),
			nodes: []any{nodeLife("n-1",
				taintOf("example.com/z", "", corev1.TaintEffectPreferNoSchedule),
				noSchedule("example.com/a"), noExecute("example.com/b"), noSchedule("example.com/c"))},
			eligible: 0, skips: []Skip{skipTaint(noExecute("example.com/b"), "n-1")}},
		{name: "toleration for NoExecute does not cover NoSchedule",
			ds: newDS(tolerate(cpKey, corev1.TaintEffectNoExecute)), nodes: []any{cp}, eligible: 0,
			skips: []Skip{skipTaint(cpTaintNS, "cp-1")}},
		{name: "Equal toleration needs the value",
			ds: newDS(withTolerations(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual,
				Value: "absent", Effect: corev1.TaintEffectNoSchedule})),
			nodes: []any{gpus}, eligible: 0, skips: []Skip{skipTaint(gpuTaint, "gpu-1", "gpu-2")}},
		{name: "Equal toleration with the value, operator defaulted",
			ds:    newDS(withTolerations(corev1.Toleration{Key: "nvidia.com/gpu", Value: "present"})),
			nodes: []any{gpus}, eligible: 2},
		{name: "empty key Exists tolerates every taint", ds: newDS(), nodes: []any{
			nodeLife("n-1", noExecute("a"), noSchedule("b"), noSchedule(cpKey))}, eligible: 1},

		// Tolerations the controller adds.
		{name: "controller tolerates not-ready and unreachable NoExecute",
			ds: newDS(noTolerations),
			nodes: []any{
				nodeLife("nr-1", noExecute(corev1.TaintNodeNotReady)),
				nodeLife("ur-1", noExecute(corev1.TaintNodeUnreachable)),
			},
			eligible: 2},
		{name: "not-ready and unreachable NoSchedule are not tolerated, and transient",
			ds: newDS(noTolerations),
			nodes: []any{
				nodeLife("nr-1", noSchedule(corev1.TaintNodeNotReady)),
				nodeLife("nr-2", noSchedule(corev1.TaintNodeNotReady)),
				nodeLife("ur-1", noSchedule(corev1.TaintNodeUnreachable)),
			},
			eligible: 0,
			skips: []Skip{skipTransient(noSchedule(corev1.TaintNodeNotReady), "nr-1", "nr-2"),
				skipTransient(noSchedule(corev1.TaintNodeUnreachable), "ur-1")}},
		{name: "controller tolerates pressure and unschedulable NoSchedule",
			ds: newDS(noTolerations),
			nodes: []any{
				nodeLife("disk-1", noSchedule(corev1.TaintNodeDiskPressure)),
				nodeLife("mem-1", noSchedule(corev1.TaintNodeMemoryPressure)),
				nodeLife("pid-1", noSchedule(corev1.TaintNodePIDPressure)),
				nodeLife("cordon-1", noSchedule(corev1.TaintNodeUnschedulable)),
			},
			eligible: 4},
		{name: "pressure taints with NoExecute are not tolerated",
			ds: newDS(noTolerations),
			nodes: []any{
				nodeLife("disk-1", noExecute(corev1.TaintNodeDiskPressure)),
				nodeLife("mem-1", noExecute(corev1.TaintNodeMemoryPressure)),
				nodeLife("cordon-1", noExecute(corev1.TaintNodeUnschedulable)),
			},
			eligible: 0,
			skips: []Skip{
				skipTaint(noExecute(corev1.TaintNodeDiskPressure), "disk-1"),
				skipTaint(noExecute(corev1.TaintNodeMemoryPressure), "mem-1"),
				skipTaint(noExecute(corev1.TaintNodeUnschedulable), "cordon-1"),
			}},
		{name: "network-unavailable is not tolerated without hostNetwork",
			ds: newDS(noTolerations), nodes: []any{nodeLife("net-1", noSchedule(corev1.TaintNodeNetworkUnavailable))},
			eligible: 0, skips: []Skip{skipTaint(noSchedule(corev1.TaintNodeNetworkUnavailable), "net-1")}},
		{name: "network-unavailable NoSchedule is tolerated with hostNetwork",
			ds: newDS(noTolerations, withHostNetwork), nodes: []any{nodeLife("net-1", noSchedule(corev1.TaintNodeNetworkUnavailable))},
			eligible: 1},
		{name: "network-unavailable NoExecute is not tolerated even with hostNetwork",
			ds: newDS(noTolerations, withHostNetwork), nodes: []any{nodeLife("net-1", noExecute(corev1.TaintNodeNetworkUnavailable))},
			eligible: 0, skips: []Skip{skipTaint(noExecute(corev1.TaintNodeNetworkUnavailable), "net-1")}},
		{name: "hostNetwork tolerates nothing else",
			ds: newDS(noTolerations, withHostNetwork), nodes: cluster, eligible: 3,
			skips: []Skip{skipTaint(gpuTaint, "gpu-1", "gpu-2"), skipTaint(cpTaintNS, "cp-1")}},
		{name: "spec.unschedulable (cordon) has no effect",
			ds: newDS(noTolerations), nodes: []any{poolNodes("c", 2, cordoned), newNode("w-1")}, eligible: 3},

		// Transient taints are flagged, others not.
		{name: "transient taints are flagged",
			ds: newDS(noTolerations),
			nodes: []any{
				nodeLife("init-1", noSchedule("node.cloudprovider.kubernetes.io/uninitialized")),
				nodeLife("scale-1", noSchedule("ToBeDeletedByClusterAutoscaler")),
				nodeLife("scale-2", taintOf("ToBeDeletedByClusterAutoscaler", "1764430000", corev1.TaintEffectNoSchedule)),
				nodeLife("nr-1", noSchedule(corev1.TaintNodeNotReady)),
				nodeLife("ur-1", noSchedule(corev1.TaintNodeUnreachable)),
				nodeLife("ok-1"),
				cp,
			},
			eligible: 1,
			skips: []Skip{
				skipTransient(noSchedule("ToBeDeletedByClusterAutoscaler"), "scale-1"),
				skipTransient(taintOf("ToBeDeletedByClusterAutoscaler", "1764430000", corev1.TaintEffectNoSchedule), "scale-2"),
				skipTaint(cpTaintNS, "cp-1"),
				skipTransient(noSchedule("node.cloudprovider.kubernetes.io/uninitialized"), "init-1"),
				skipTransient(noSchedule(corev1.TaintNodeNotReady), "nr-1"),
				skipTransient(noSchedule(corev1.TaintNodeUnreachable), "ur-1"),
			}},

		// Operating system and architecture.
		{name: "nodeSelector on the OS alone: os-arch skips",
			ds: newDS(withNodeSelector(map[string]string{corev1.LabelOSStable: "linux"})), nodes: mixed, eligible: 5,
			skips: []Skip{skipOSArch("win-1", "win-2", "win-3", "win-gpu-1")}},
		{name: "nodeSelector on the architecture alone: os-arch skips",
			ds: newDS(withNodeSelector(map[string]string{corev1.LabelArchStable: "amd64"})), nodes: mixed, eligible: 7,
			skips: []Skip{skipOSArch("arm-1", "arm-2")}},
		{name: "beta OS label",
			ds: newDS(withNodeSelector(map[string]string{"beta.kubernetes.io/os": "linux"})),
			nodes: []any{
				newNode("lin-1", nodeLabels("beta.kubernetes.io/os", "linux")),
				newNode("win-1", nodeLabels("beta.kubernetes.io/os", "windows")),
			},
			eligible: 1, skips: []Skip{skipOSArch("win-1")}},
		{name: "affinity term with only kubernetes.io/os",
			ds:    newDS(withRequiredNodeAffinity(nodeTerm(nodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux")))),
			nodes: mixed, eligible: 5, skips: []Skip{skipOSArch("win-1", "win-2", "win-3", "win-gpu-1")}},
		{name: "affinity term on OS and architecture",
			ds: newDS(withRequiredNodeAffinity(nodeTerm(
				nodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpNotIn, "windows"),
				nodeReq(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64")))),
			nodes: mixed, eligible: 2, skips: []Skip{skipOSArch("amd-1", "amd-2", "gpu-lin-1", "win-1", "win-2", "win-3", "win-gpu-1")}},
		{name: "OS and a pool: only nodes of the pool are os-arch skips",
			ds: newDS(withNodeSelector(map[string]string{corev1.LabelOSStable: "linux", pool: "gpu"})), nodes: mixed, eligible: 1,
			skips: []Skip{skipSelector("amd-1", "amd-2", "arm-1", "arm-2", "win-1", "win-2", "win-3"), skipOSArch("win-gpu-1")}},
		{name: "affinity on OS and a pool in one term",
			ds: newDS(withRequiredNodeAffinity(nodeTerm(
				nodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
				nodeReq(pool, corev1.NodeSelectorOpIn, "gpu")))),
			nodes: mixed, eligible: 1,
			skips: []Skip{skipSelector("amd-1", "amd-2", "arm-1", "arm-2", "win-1", "win-2", "win-3"), skipOSArch("win-gpu-1")}},
		{name: "an OS-only term ORed with a pool term: every other-OS node is an os-arch skip",
			ds: newDS(withRequiredNodeAffinity(
				nodeTerm(nodeReq(pool, corev1.NodeSelectorOpIn, "gpu")),
				nodeTerm(nodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux")))),
			nodes: mixed, eligible: 6, skips: []Skip{skipOSArch("win-1", "win-2", "win-3")}},
		{name: "an empty term ORed with an OS-only term",
			ds: newDS(withRequiredNodeAffinity(corev1.NodeSelectorTerm{},
				nodeTerm(nodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux")))),
			nodes: mixed, eligible: 5, skips: []Skip{skipOSArch("win-1", "win-2", "win-3", "win-gpu-1")}},
		{name: "a node without an OS label is an os-arch skip",
			ds:       newDS(withNodeSelector(map[string]string{corev1.LabelOSStable: "linux"})),
			nodes:    []any{newNode("bare-1", withoutNodeLabel(corev1.LabelOSStable)), newNode("lin-1")},
			eligible: 1, skips: []Skip{skipOSArch("bare-1")}},
		{name: "OS matches but an untolerated taint excludes",
			ds: newDS(noTolerations, withNodeSelector(map[string]string{corev1.LabelOSStable: "windows"})),
			nodes: []any{mixed, newNode("win-t-1", nodeLabels(corev1.LabelOSStable, "windows"),
				nodeTaints(taintOf("os", "windows", corev1.TaintEffectNoSchedule)))},
			eligible: 4,
			skips: []Skip{skipOSArch("amd-1", "amd-2", "arm-1", "arm-2", "gpu-lin-1"),
				skipTaint(taintOf("os", "windows", corev1.TaintEffectNoSchedule), "win-t-1")}},
		{name: "OS selection together with hostname selection",
			ds:    newDS(withNodeSelector(map[string]string{corev1.LabelOSStable: "linux", corev1.LabelHostname: "win-2"})),
			nodes: mixed, eligible: 0,
			skips: []Skip{skipSelector("amd-1", "amd-2", "arm-1", "arm-2", "gpu-lin-1", "win-1", "win-3", "win-gpu-1"),
				skipOSArch("win-2")}},

		// Grouping and order.
		{name: "groups: largest first, ties by reason, names sorted across classes",
			ds: newDS(noTolerations, withRequiredNodeAffinity(nodeTerm(nodeReq(zone, corev1.NodeSelectorOpNotIn, "zone-x")))),
			nodes: []any{
				poolNodes("a", 12, nodeTaints(noSchedule("t-a"))),
				newNode("b-10", nodeTaints(noSchedule("t-b")), nodeLabels(pool, "one")),
				newNode("b-9", nodeTaints(noSchedule("t-b")), nodeLabels(pool, "two")),
				newNode("b-1", nodeTaints(noSchedule("t-b")), nodeLabels(pool, "three")),
				poolNodes("x", 3, nodeLabels(zone, "zone-x")),
				poolNodes("c", 3, nodeTaints(noSchedule("t-c"))),
				poolNodes("ok", 2),
			},
			eligible: 2,
			skips: []Skip{
				skipTaint(noSchedule("t-a"), "a-1", "a-10", "a-11", "a-12", "a-2", "a-3", "a-4", "a-5", "a-6", "a-7", "a-8", "a-9"),
				skipSelector("x-1", "x-2", "x-3"),
				skipTaint(noSchedule("t-b"), "b-1", "b-10", "b-9"),
				skipTaint(noSchedule("t-c"), "c-1", "c-2", "c-3"),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := snapshotOf(tt.nodes...)
			got := PredictCoverage(tt.ds, nodes)
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
		n := newNode(fmt.Sprintf("n-%02d", i), nodeLabels("pool", fmt.Sprint(i%4)))
		switch i % 5 {
		case 1:
			n.Spec.Taints = []corev1.Taint{noSchedule("dedicated")}
		case 2:
			n.Spec.Taints = []corev1.Taint{noSchedule(corev1.TaintNodeNotReady)}
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
		newDS(),
		newDS(withTolerations()),
		newDS(withTolerations(), withNodeSelector(map[string]string{corev1.LabelOSStable: "linux", "pool": "1"})),
		newDS(withTolerations(), withRequiredNodeAffinity(nodeTerm(nodeReq("pool", corev1.NodeSelectorOpIn, "0", "2")))),
		newDS(withTolerations(), withRequiredNodeAffinity(nodeTerm(nodeReq(corev1.LabelHostname, corev1.NodeSelectorOpNotIn, "n-01")))),
	} {
		a, b := PredictCoverage(ds, unique), PredictCoverage(ds, classes)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("per node: %s\nper class: %s", describeCoverage(a), describeCoverage(b))
		}
	}
}

func TestPredictCoverage_DoesNotChangeItsInputs(t *testing.T) {
	nodes := snapshotOf(poolNodes("w", 3), controlPlaneNode("cp-1"))
	ds := newDS(withTolerations(), withHostNetwork,
		withRequiredNodeAffinity(nodeTerm(nodeReq(corev1.LabelHostname, corev1.NodeSelectorOpIn, "w-1", "cp-1"))))
	before := ds.DeepCopy()
	first := PredictCoverage(ds, nodes)
	if !reflect.DeepEqual(ds, before) {
		t.Errorf("PredictCoverage changed the DaemonSet")
	}
	// The snapshot keeps no per-member state from the last prediction.
	if second := PredictCoverage(newDS(withTolerations()), nodes); second.Eligible != 3 {
		t.Errorf("after a per-node prediction: %s", describeCoverage(second))
	}
	if again := PredictCoverage(ds, nodes); !reflect.DeepEqual(first, again) {
		t.Errorf("second prediction differs:\n%s\n%s", describeCoverage(first), describeCoverage(again))
	}
}

func TestCoverage_Skipped(t *testing.T) {
	c := Coverage{Total: 10, Eligible: 4, Skips: []Skip{
		skipTaint(noSchedule("a"), "n-1", "n-2", "n-3"),
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
		{skipTaint(taintOf("dedicated", "infra", corev1.TaintEffectNoSchedule), "n-1"), 5,
			"taint dedicated=infra:NoSchedule not tolerated (n-1)"},
		{skipTaint(noExecute("example.com/maintenance"), names(5)...), 5,
			"taint example.com/maintenance:NoExecute not tolerated (n-1, n-2, n-3, n-4, n-5)"},
		{skipTaint(noSchedule(cpKey), names(6)...), 5,
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
		nodes = append(nodes, newNode(fmt.Sprintf("n-%03d", i),
			nodeLabels("pool", fmt.Sprint(i%4), "example.com/instance-id", fmt.Sprintf("i-%05d", i))))
	}
	snap := NewNodeSnapshot(nodes)
	if snap.Classes() != 4 {
		t.Fatalf("classes = %d, want 4 (one per pool): the instance ID must not split them", snap.Classes())
	}
	ds := newDS(withTolerations(), withRequiredNodeAffinity(nodeTerm(
		nodeReq("example.com/instance-id", corev1.NodeSelectorOpIn, "i-00007", "i-00100"))))
	cov := PredictCoverage(ds, snap)
	if cov.Eligible != 2 || cov.Skipped(SkipSelector) != 198 {
		t.Errorf("selecting two instance IDs: eligible %d, selector-skipped %d; want 2 and 198", cov.Eligible, cov.Skipped(SkipSelector))
	}
	// A label with few values stays part of the class key.
	few := NewNodeSnapshot(nodes[:40])
	if few.isPerNodeKey("pool") || !few.isPerNodeKey(corev1.LabelHostname) {
		t.Error("pool must stay a class label; the hostname is always per-node")
	}
}
