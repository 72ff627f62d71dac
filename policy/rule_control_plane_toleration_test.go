package policy

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	cpKey   = "node-role.kubernetes.io/control-plane"
	cpTaint = cpKey + ":NoSchedule"
)

func TestCheckControlPlaneToleration(t *testing.T) {
	const tolerationsField = "spec.template.spec.tolerations"
	// missing is the deny naming the untolerated taints, in policy order.
	missing := func(taints string, absent ...string) []wantFinding {
		return []wantFinding{{field: tolerationsField,
			prefix: "no toleration for " + taints + ": ",
			msg:    []string{"skips every node with that taint", "unseen in desiredNumberScheduled"},
			absent: absent}}
	}
	missingCP := missing(cpTaint)
	defaults := defaultControlPlaneTolerationParams()
	infra := ControlPlaneTolerationParams{Taints: []TaintConfig{
		{Key: cpKey, Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.example.com/maintenance", Effect: corev1.TaintEffectNoExecute},
	}}
	withValue := ControlPlaneTolerationParams{Taints: []TaintConfig{
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule},
	}}
	only := func(key string, effect corev1.TaintEffect) ControlPlaneTolerationParams {
		return ControlPlaneTolerationParams{Taints: []TaintConfig{{Key: key, Effect: effect}}}
	}

	const pool = "cloud.example.com/node-pool"
	archAndOS := nodeTerm(
		nodeReq(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64", "arm64"),
		nodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpNotIn, "windows"),
	)
	betaArchAndOS := nodeTerm(
		nodeReq("beta.kubernetes.io/arch", corev1.NodeSelectorOpIn, "amd64"),
		nodeReq("beta.kubernetes.io/os", corev1.NodeSelectorOpIn, "linux"),
	)
	linuxOnly := nodeTerm(nodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"))
	gpuPool := nodeTerm(nodeReq(pool, corev1.NodeSelectorOpIn, "gpu"))
	infraPool := nodeTerm(nodeReq(pool, corev1.NodeSelectorOpIn, "infra"))
	byName := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
		nodeReq("metadata.name", corev1.NodeSelectorOpIn, "node-1"),
	}}
	onControlPlane := nodeTerm(nodeReq(cpKey, corev1.NodeSelectorOpExists))
	preferredPool := func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: gpuPool}},
		}}
	}

	tests := []struct {
		name   string
		ds     *appsv1.DaemonSet
		params ControlPlaneTolerationParams
		want   []wantFinding
	}{
		{name: "empty key and Exists tolerates everything", ds: newDS(), params: infra},
		{name: "no tolerations", ds: newDS(withTolerations()), params: defaults, want: missingCP},
		{name: "empty key Exists limited to NoSchedule",
			ds:     newDS(withTolerations(corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
			params: defaults},
		{name: "empty key Exists limited to NoExecute does not cover NoSchedule",
			ds:     newDS(withTolerations(corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})),
			params: defaults, want: missingCP},
		{name: "Exists with key, empty effect matches every effect",
			ds:     newDS(withTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists})),
			params: defaults},
		{name: "Exists with key and effect",
			ds:     newDS(withTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
			params: defaults},
		{name: "Exists with another key",
			ds:     newDS(withTolerations(corev1.Toleration{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists})),
			params: defaults, want: missingCP},
		{name: "NoExecute toleration does not cover the NoSchedule taint",
			ds:     newDS(withTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})),
			params: defaults, want: missingCP},
		{name: "PreferNoSchedule toleration does not cover NoSchedule",
			ds:     newDS(withTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule})),
			params: defaults, want: missingCP},
		{name: "Equal without value matches a taint without value",
			ds:     newDS(withTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule})),
			params: defaults},
		{name: "operator unset defaults to Equal",
			ds:     newDS(withTolerations(corev1.Toleration{Key: cpKey, Effect: corev1.TaintEffectNoSchedule})),
			params: defaults},
		{name: "operator unset (Equal) with a value the taint does not have",
			ds:     newDS(withTolerations(corev1.Toleration{Key: cpKey, Value: "true", Effect: corev1.TaintEffectNoSchedule})),
			params: defaults, want: missingCP},
		{name: "Equal with the taint's value",
			ds: newDS(withTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra",
				Effect: corev1.TaintEffectNoSchedule})),
			params: withValue},
		{name: "Equal without value does not match a taint with a value",
			ds:     newDS(withTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule})),
			params: withValue, want: missing("dedicated=infra:NoSchedule")},
		{name: "Equal with another value",
			ds: newDS(withTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch",
				Effect: corev1.TaintEffectNoSchedule})),
			params: withValue, want: missing("dedicated=infra:NoSchedule")},
		{name: "Exists with key ignores the taint's value",
			ds:     newDS(withTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists})),
			params: withValue},
		{name: "Gt is behind a disabled feature gate and tolerates nothing",
			ds:     newDS(withTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpGt, Value: "1"})),
			params: withValue, want: missing("dedicated=infra:NoSchedule")},
		{name: "several taints: only the missing ones are named",
			ds:     newDS(withTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists})),
			params: infra, want: missing("dedicated=infra:NoSchedule, node.example.com/maintenance:NoExecute", cpKey)},

		// Tolerations the DaemonSet controller adds to every daemon Pod.
		{name: "controller tolerates unschedulable:NoSchedule",
			ds: newDS(withTolerations()), params: only(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)},
		{name: "controller tolerates not-ready:NoExecute",
			ds: newDS(withTolerations()), params: only(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)},
		{name: "controller tolerates unreachable:NoExecute",
			ds: newDS(withTolerations()), params: only(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)},
		{name: "controller tolerates disk-pressure:NoSchedule",
			ds: newDS(withTolerations()), params: only(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule)},
		{name: "controller tolerates memory-pressure:NoSchedule",
			ds: newDS(withTolerations()), params: only(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule)},
		{name: "controller tolerates pid-pressure:NoSchedule",
			ds: newDS(withTolerations()), params: only(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule)},
		{name: "controller tolerates unschedulable with any value",
			ds: newDS(withTolerations()), params: ControlPlaneTolerationParams{Taints: []TaintConfig{
				{Key: corev1.TaintNodeUnschedulable, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}},
		{name: "controller's not-ready toleration is NoExecute only",
			ds: newDS(withTolerations()), params: only(corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule),
			want: missing(corev1.TaintNodeNotReady + ":NoSchedule")},
		{name: "controller's unschedulable toleration is NoSchedule only",
			ds: newDS(withTolerations()), params: only(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoExecute),
			want: missing(corev1.TaintNodeUnschedulable + ":NoExecute")},
		{name: "network-unavailable is not tolerated without hostNetwork",
			ds: newDS(withTolerations()), params: only(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule),
			want: missing(corev1.TaintNodeNetworkUnavailable + ":NoSchedule")},
		{name: "controller tolerates network-unavailable:NoSchedule under hostNetwork",
			ds: newDS(withTolerations(), withHostNetwork), params: only(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)},
		{name: "controller's network-unavailable toleration is NoSchedule only",
			ds: newDS(withTolerations(), withHostNetwork), params: only(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoExecute),
			want: missing(corev1.TaintNodeNetworkUnavailable + ":NoExecute")},
		{name: "controller tolerations do not cover the control-plane taint",
			ds: newDS(withTolerations(), withHostNetwork), params: ControlPlaneTolerationParams{Taints: []TaintConfig{
				{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
				{Key: cpKey, Effect: corev1.TaintEffectNoSchedule},
				{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule},
			}},
			want: missing(cpTaint, corev1.TaintNodeUnschedulable, corev1.TaintNodeNetworkUnavailable)},

		// Narrowing by OS or architecture is normal and keeps the rule on.
		{name: "nodeSelector on kubernetes.io/os alone is still checked",
			ds:     newDS(withTolerations(), withNodeSelector(map[string]string{corev1.LabelOSStable: "linux"})),
			params: defaults, want: missingCP},
		{name: "nodeSelector on os and arch is still checked",
			ds:     newDS(withTolerations(), withNodeSelector(map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"})),
			params: defaults, want: missingCP},
		{name: "nodeSelector on beta.kubernetes.io/os is still checked",
			ds:     newDS(withTolerations(), withNodeSelector(map[string]string{"beta.kubernetes.io/os": "linux"})),
			params: defaults, want: missingCP},
		{name: "nodeSelector on beta.kubernetes.io/arch is still checked",
			ds:     newDS(withTolerations(), withNodeSelector(map[string]string{"beta.kubernetes.io/arch": "amd64"})),
			params: defaults, want: missingCP},
		{name: "nodeSelector gpu=true narrows placement",
			ds:     newDS(withTolerations(), withNodeSelector(map[string]string{corev1.LabelOSStable: "linux", "gpu": "true"})),
			params: defaults},
		{name: "required affinity on arch and os alone is still checked",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(archAndOS)), params: defaults, want: missingCP},
		{name: "required affinity on the beta arch and os labels is still checked",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(betaArchAndOS)), params: defaults, want: missingCP},
		{name: "required affinity on a node pool narrows placement",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(gpuPool)), params: defaults},
		{name: "a term on os and a node pool narrows placement",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(nodeTerm(
				nodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
				nodeReq(pool, corev1.NodeSelectorOpIn, "gpu")))),
			params: defaults},
		{name: "required affinity on metadata.name narrows placement",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(byName)), params: defaults},
		{name: "preferred affinity does not narrow placement",
			ds: newDS(withTolerations(), preferredPool), params: defaults, want: missingCP},
		{name: "nodeSelector narrows even when the affinity is neutral",
			ds:     newDS(withTolerations(), withNodeSelector(map[string]string{"gpu": "true"}), withRequiredNodeAffinity(linuxOnly)),
			params: defaults},
		{name: "affinity narrows even when the nodeSelector is neutral",
			ds:     newDS(withTolerations(), withNodeSelector(map[string]string{corev1.LabelOSStable: "linux"}), withRequiredNodeAffinity(gpuPool)),
			params: defaults},

		// Steering clear of the tainted nodes is deliberate narrowing;
		// aiming at them is not.
		{name: "affinity DoesNotExist on the taint key deliberately avoids those nodes",
			ds:     newDS(withTolerations(), withRequiredNodeAffinity(nodeTerm(nodeReq(cpKey, corev1.NodeSelectorOpDoesNotExist)))),
			params: defaults},
		{name: "affinity NotIn on the taint key deliberately avoids those nodes",
			ds:     newDS(withTolerations(), withRequiredNodeAffinity(nodeTerm(nodeReq(cpKey, corev1.NodeSelectorOpNotIn, "")))),
			params: defaults},
		{name: "affinity In on the taint key aims at those nodes and is checked",
			ds:     newDS(withTolerations(), withRequiredNodeAffinity(nodeTerm(nodeReq(cpKey, corev1.NodeSelectorOpIn, "")))),
			params: defaults, want: missingCP},
		// An empty term matches no node, so it adds no reach to a pool term.
		{name: "a pool term ORed with an empty term narrows placement",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(gpuPool, corev1.NodeSelectorTerm{})), params: defaults},

		// Required node affinity terms are ORed: one term that only names
		// OS or architecture reaches every node of that OS.
		{name: "ORed terms, one of them only on os, are still checked",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(gpuPool, linuxOnly)), params: defaults, want: missingCP},
		{name: "ORed terms, the first only on os, are still checked",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(linuxOnly, gpuPool)), params: defaults, want: missingCP},
		{name: "ORed terms, one of them only on beta os and arch, are still checked",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(gpuPool, betaArchAndOS)), params: defaults, want: missingCP},
		{name: "ORed terms that all narrow narrow placement",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(gpuPool, infraPool)), params: defaults},
		{name: "ORed terms on a node pool and a node name narrow placement",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(gpuPool, byName)), params: defaults},

		// Selecting on the taint's own key aims at the tainted nodes, so
		// the toleration matters all the more.
		{name: "nodeSelector on the control-plane label without toleration",
			ds:     newDS(withTolerations(), withNodeSelector(map[string]string{cpKey: ""})),
			params: defaults, want: missingCP},
		{name: "nodeSelector on the control-plane label and os without toleration",
			ds:     newDS(withTolerations(), withNodeSelector(map[string]string{cpKey: "", corev1.LabelOSStable: "linux"})),
			params: defaults, want: missingCP},
		{name: "nodeSelector on the control-plane label with toleration",
			ds: newDS(withNodeSelector(map[string]string{cpKey: ""}),
				withTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
			params: defaults},
		{name: "nodeSelector on the control-plane label and another label narrows placement",
			ds:     newDS(withTolerations(), withNodeSelector(map[string]string{cpKey: "", "gpu": "true"})),
			params: defaults},
		{name: "required affinity on the control-plane label without toleration",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(onControlPlane)), params: defaults, want: missingCP},
		{name: "ORed terms on the control-plane label and a node pool",
			ds: newDS(withTolerations(), withRequiredNodeAffinity(gpuPool, onControlPlane)), params: defaults, want: missingCP},
		{name: "the taint's own key is neutral for that taint only",
			ds:     newDS(withTolerations(), withNodeSelector(map[string]string{cpKey: ""})),
			params: infra, want: missing(cpTaint, "dedicated", "maintenance")},

		{name: "template nodeName pins the DaemonSet to one node",
			ds:     newDS(withTolerations(), func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "node-1" }),
			params: defaults},
		{name: "intended coverage records the gap as audit",
			ds:     newDS(withTolerations(), withAnnotation(IntendedCoverageAnnotation, "workers only; the control plane is managed")),
			params: defaults,
			want: []wantFinding{{field: tolerationsField, action: ActionAudit,
				prefix: "skips nodes tainted " + cpTaint + ", as intended: workers only; the control plane is managed"}}},
		{name: "intended coverage without a reason is ignored",
			ds:     newDS(withTolerations(), withAnnotation(IntendedCoverageAnnotation, "  ")),
			params: defaults, want: missingCP},
		{name: "no taints configured", ds: newDS(withTolerations()), params: ControlPlaneTolerationParams{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkControlPlaneToleration(tt.ds, testEnv(), &tt.params), tt.want)
		})
	}
}

func TestCheckControlPlaneToleration_Remediation(t *testing.T) {
	p := ControlPlaneTolerationParams{Taints: []TaintConfig{
		{Key: cpKey, Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute},
	}}
	ds := newDS(withTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}))
	fs := checkControlPlaneToleration(ds, testEnv(), &p)
	if len(fs) != 1 {
		t.Fatalf("got %d findings, want 1:\n%s", len(fs), describeFindings(fs))
	}
	want := "add to spec.template.spec.tolerations: {key: " + cpKey + ", operator: Exists, effect: NoSchedule}"
	if fs[0].Remediation != want {
		t.Errorf("remediation %q, want %q", fs[0].Remediation, want)
	}
	if strings.Contains(fs[0].Remediation, "dedicated") {
		t.Errorf("remediation names a tolerated taint: %q", fs[0].Remediation)
	}

	t.Run("taints the controller tolerates are not suggested", func(t *testing.T) {
		p := ControlPlaneTolerationParams{Taints: []TaintConfig{
			{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
			{Key: cpKey, Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule},
		}}
		fs := checkControlPlaneToleration(newDS(withTolerations(), withHostNetwork), testEnv(), &p)
		if len(fs) != 1 {
			t.Fatalf("got %d findings, want 1:\n%s", len(fs), describeFindings(fs))
		}
		if fs[0].Remediation != want {
			t.Errorf("remediation %q, want %q", fs[0].Remediation, want)
		}
	})
}

func TestControlPlaneTolerationParams_Validate(t *testing.T) {
	fp := field.NewPath("rules", controlPlaneTolerationID, "parameters")
	tests := []struct {
		name   string
		taints []TaintConfig
		want   []fieldErr
	}{
		{name: "defaults", taints: defaultControlPlaneTolerationParams().Taints},
		{name: "NoExecute with value", taints: []TaintConfig{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute}}},
		{name: "empty key", taints: []TaintConfig{{Effect: corev1.TaintEffectNoSchedule}},
			want: []fieldErr{{field: fp.String() + ".taints[0].key", typ: field.ErrorTypeRequired}}},
		{name: "invalid key", taints: []TaintConfig{{Key: "not a key!", Effect: corev1.TaintEffectNoSchedule}},
			want: []fieldErr{{field: fp.String() + ".taints[0].key", typ: field.ErrorTypeInvalid}}},
		{name: "PreferNoSchedule", taints: []TaintConfig{{Key: cpKey, Effect: corev1.TaintEffectPreferNoSchedule}},
			want: []fieldErr{{field: fp.String() + ".taints[0].effect", typ: field.ErrorTypeInvalid, detail: "PreferNoSchedule never keeps"}}},
		{name: "bad effect", taints: []TaintConfig{{Key: cpKey, Effect: "NoScheduleX"}},
			want: []fieldErr{{field: fp.String() + ".taints[0].effect", typ: field.ErrorTypeNotSupported}}},
		{name: "empty effect", taints: []TaintConfig{{Key: cpKey}},
			want: []fieldErr{{field: fp.String() + ".taints[0].effect", typ: field.ErrorTypeNotSupported}}},
		{name: "every problem at once", taints: []TaintConfig{
			{Key: cpKey, Effect: corev1.TaintEffectNoSchedule},
			{Effect: "bad"},
		}, want: []fieldErr{
			{field: fp.String() + ".taints[1].key", typ: field.ErrorTypeRequired},
			{field: fp.String() + ".taints[1].effect", typ: field.ErrorTypeNotSupported},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ControlPlaneTolerationParams{Taints: tt.taints}
			assertFieldErrors(t, p.validate(fp), tt.want)
		})
	}

	t.Run("Compile reports it", func(t *testing.T) {
		cfg := Rules().DefaultConfig()
		RuleConfigOf[ControlPlaneTolerationParams](cfg, controlPlaneTolerationID).Parameters.Taints = []TaintConfig{{Key: cpKey, Effect: corev1.TaintEffectPreferNoSchedule}}
		compileErr(t, cfg, "rules.control-plane-toleration.parameters.taints[0].effect")
	})
}

func TestCheckControlPlaneToleration_Nodes(t *testing.T) {
	const tolerationsField = "spec.template.spec.tolerations"
	workers := poolNodes("w", 3)
	dedicated := ControlPlaneTolerationParams{Taints: []TaintConfig{
		{Key: cpKey, Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute},
	}}
	tests := []struct {
		name   string
		ds     *appsv1.DaemonSet
		nodes  *NodeSnapshot
		params ControlPlaneTolerationParams
		want   []wantFinding
	}{
		{name: "names the skipped node",
			ds: newDS(withTolerations()), nodes: snapshotOf(controlPlaneNode("cp-1"), workers),
			want: []wantFinding{{field: tolerationsField,
				prefix: "no toleration for " + cpTaint + ": skips cp-1 (1 of 4 nodes), unseen in desiredNumberScheduled"}}},
		{name: "names at most five",
			ds:    newDS(withTolerations()),
			nodes: snapshotOf(poolNodes("cp", 7, nodeLabels(cpKey, ""), nodeTaints(noSchedule(cpKey))), workers),
			want: []wantFinding{{field: tolerationsField,
				prefix: "no toleration for " + cpTaint + ": skips cp-1, cp-2, cp-3, cp-4, cp-5 and 2 more (7 of 10 nodes), unseen"}}},
		{name: "no node carries the taint: warn",
			ds: newDS(withTolerations()), nodes: snapshotOf(workers),
			want: []wantFinding{{field: tolerationsField, action: ActionWarn,
				prefix: "no toleration for " + cpTaint + ": no node carries it today, but such nodes would be skipped"}}},
		{name: "no nodes at all: warn",
			ds: newDS(withTolerations()), nodes: snapshotOf(),
			want: []wantFinding{{field: tolerationsField, action: ActionWarn, msg: []string{"no node carries it today"}}}},
		{name: "a PreferNoSchedule control-plane taint is not the configured one: warn",
			ds:    newDS(withTolerations()),
			nodes: snapshotOf(workers, newNode("cp-1", nodeTaints(taintOf(cpKey, "", corev1.TaintEffectPreferNoSchedule)))),
			want:  []wantFinding{{field: tolerationsField, action: ActionWarn, msg: []string{"no node carries it today"}}}},
		{name: "one of two taints present: deny, naming the nodes of that one",
			ds: newDS(withTolerations()), params: dedicated,
			nodes: snapshotOf(controlPlaneNode("cp-1"), controlPlaneNode("cp-2"), workers),
			want: []wantFinding{{field: tolerationsField,
				prefix: "no toleration for " + cpTaint + ", dedicated=infra:NoExecute: skips cp-1, cp-2 (2 of 5 nodes)"}}},
		{name: "a taint with another value does not count",
			ds: newDS(withTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists})), params: dedicated,
			nodes: snapshotOf(workers, newNode("infra-1", nodeTaints(taintOf("dedicated", "gpu", corev1.TaintEffectNoExecute)))),
			want: []wantFinding{{field: tolerationsField, action: ActionWarn,
				prefix: "no toleration for dedicated=infra:NoExecute: no node carries it today"}}},
		{name: "the configured taint with any value when none is configured",
			ds:     newDS(withTolerations()),
			params: ControlPlaneTolerationParams{Taints: []TaintConfig{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}},
			nodes:  snapshotOf(workers, newNode("infra-1", nodeTaints(taintOf("dedicated", "infra", corev1.TaintEffectNoSchedule)))),
			want: []wantFinding{{field: tolerationsField,
				prefix: "no toleration for dedicated:NoSchedule: skips infra-1 (1 of 4 nodes)"}}},
		{name: "intended: audit",
			ds:    newDS(withTolerations(), withAnnotation(IntendedCoverageAnnotation, "managed control plane")),
			nodes: snapshotOf(controlPlaneNode("cp-1"), workers),
			want: []wantFinding{{field: tolerationsField, action: ActionAudit,
				prefix: "skips nodes tainted " + cpTaint + ", as intended: managed control plane"}}},
		{name: "tolerated: nothing", ds: newDS(), nodes: snapshotOf(controlPlaneNode("cp-1"), workers)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := tt.params
			if params.Taints == nil {
				params = defaultControlPlaneTolerationParams()
			}
			assertFindings(t, checkControlPlaneToleration(tt.ds, nodeEnv(tt.nodes), &params), tt.want)
		})
	}

	t.Run("Evaluate: deny with the taint present, warn without", func(t *testing.T) {
		ds := newDS(withTolerations())
		present := findingsOf(Evaluate(ds, Env{Policy: Rules().Default(), Now: testNow, Nodes: snapshotOf(controlPlaneNode("cp-1"), workers)}), controlPlaneTolerationID)
		absent := findingsOf(Evaluate(ds, Env{Policy: Rules().Default(), Now: testNow, Nodes: snapshotOf(workers)}), controlPlaneTolerationID)
		if len(present) != 1 || present[0].Action != ActionDeny {
			t.Errorf("taint present:\n%s", describeFindings(present))
		}
		if len(absent) != 1 || absent[0].Action != ActionWarn {
			t.Errorf("taint absent:\n%s", describeFindings(absent))
		}
	})
}
