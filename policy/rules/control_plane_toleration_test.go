package rules

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

const (
	cpKey   = testobj.ControlPlaneKey
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
	archAndOS := testobj.NodeTerm(
		testobj.NodeReq(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64", "arm64"),
		testobj.NodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpNotIn, "windows"),
	)
	betaArchAndOS := testobj.NodeTerm(
		testobj.NodeReq("beta.kubernetes.io/arch", corev1.NodeSelectorOpIn, "amd64"),
		testobj.NodeReq("beta.kubernetes.io/os", corev1.NodeSelectorOpIn, "linux"),
	)
	linuxOnly := testobj.NodeTerm(testobj.NodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"))
	gpuPool := testobj.NodeTerm(testobj.NodeReq(pool, corev1.NodeSelectorOpIn, "gpu"))
	infraPool := testobj.NodeTerm(testobj.NodeReq(pool, corev1.NodeSelectorOpIn, "infra"))
	byName := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
		testobj.NodeReq("metadata.name", corev1.NodeSelectorOpIn, "node-1"),
	}}
	onControlPlane := testobj.NodeTerm(testobj.NodeReq(cpKey, corev1.NodeSelectorOpExists))
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
		{name: "empty key and Exists tolerates everything", ds: testobj.DS(), params: infra},
		{name: "no tolerations", ds: testobj.DS(testobj.WithTolerations()), params: defaults, want: missingCP},
		{name: "empty key Exists limited to NoSchedule",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
			params: defaults},
		{name: "empty key Exists limited to NoExecute does not cover NoSchedule",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})),
			params: defaults, want: missingCP},
		{name: "Exists with key, empty effect matches every effect",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists})),
			params: defaults},
		{name: "Exists with key and effect",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
			params: defaults},
		{name: "Exists with another key",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists})),
			params: defaults, want: missingCP},
		{name: "NoExecute toleration does not cover the NoSchedule taint",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})),
			params: defaults, want: missingCP},
		{name: "PreferNoSchedule toleration does not cover NoSchedule",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule})),
			params: defaults, want: missingCP},
		{name: "Equal without value matches a taint without value",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule})),
			params: defaults},
		{name: "operator unset defaults to Equal",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: cpKey, Effect: corev1.TaintEffectNoSchedule})),
			params: defaults},
		{name: "operator unset (Equal) with a value the taint does not have",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: cpKey, Value: "true", Effect: corev1.TaintEffectNoSchedule})),
			params: defaults, want: missingCP},
		{name: "Equal with the taint's value",
			ds: testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra",
				Effect: corev1.TaintEffectNoSchedule})),
			params: withValue},
		{name: "Equal without value does not match a taint with a value",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule})),
			params: withValue, want: missing("dedicated=infra:NoSchedule")},
		{name: "Equal with another value",
			ds: testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "batch",
				Effect: corev1.TaintEffectNoSchedule})),
			params: withValue, want: missing("dedicated=infra:NoSchedule")},
		{name: "Exists with key ignores the taint's value",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists})),
			params: withValue},
		{name: "Gt is behind a disabled feature gate and tolerates nothing",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpGt, Value: "1"})),
			params: withValue, want: missing("dedicated=infra:NoSchedule")},
		{name: "several taints: only the missing ones are named",
			ds:     testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists})),
			params: infra, want: missing("dedicated=infra:NoSchedule, node.example.com/maintenance:NoExecute", cpKey)},

		// Tolerations the DaemonSet controller adds to every daemon Pod.
		{name: "controller tolerates unschedulable:NoSchedule",
			ds: testobj.DS(testobj.WithTolerations()), params: only(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)},
		{name: "controller tolerates not-ready:NoExecute",
			ds: testobj.DS(testobj.WithTolerations()), params: only(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)},
		{name: "controller tolerates unreachable:NoExecute",
			ds: testobj.DS(testobj.WithTolerations()), params: only(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)},
		{name: "controller tolerates disk-pressure:NoSchedule",
			ds: testobj.DS(testobj.WithTolerations()), params: only(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule)},
		{name: "controller tolerates memory-pressure:NoSchedule",
			ds: testobj.DS(testobj.WithTolerations()), params: only(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule)},
		{name: "controller tolerates pid-pressure:NoSchedule",
			ds: testobj.DS(testobj.WithTolerations()), params: only(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule)},
		{name: "controller tolerates unschedulable with any value",
			ds: testobj.DS(testobj.WithTolerations()), params: ControlPlaneTolerationParams{Taints: []TaintConfig{
				{Key: corev1.TaintNodeUnschedulable, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}},
		{name: "controller's not-ready toleration is NoExecute only",
			ds: testobj.DS(testobj.WithTolerations()), params: only(corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule),
			want: missing(corev1.TaintNodeNotReady + ":NoSchedule")},
		{name: "controller's unschedulable toleration is NoSchedule only",
			ds: testobj.DS(testobj.WithTolerations()), params: only(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoExecute),
			want: missing(corev1.TaintNodeUnschedulable + ":NoExecute")},
		{name: "network-unavailable is not tolerated without hostNetwork",
			ds: testobj.DS(testobj.WithTolerations()), params: only(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule),
			want: missing(corev1.TaintNodeNetworkUnavailable + ":NoSchedule")},
		{name: "controller tolerates network-unavailable:NoSchedule under hostNetwork",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithHostNetwork), params: only(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)},
		{name: "controller's network-unavailable toleration is NoSchedule only",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithHostNetwork), params: only(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoExecute),
			want: missing(corev1.TaintNodeNetworkUnavailable + ":NoExecute")},
		{name: "controller tolerations do not cover the control-plane taint",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithHostNetwork), params: ControlPlaneTolerationParams{Taints: []TaintConfig{
				{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
				{Key: cpKey, Effect: corev1.TaintEffectNoSchedule},
				{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule},
			}},
			want: missing(cpTaint, corev1.TaintNodeUnschedulable, corev1.TaintNodeNetworkUnavailable)},

		// Narrowing by OS or architecture is normal and keeps the rule on.
		{name: "nodeSelector on kubernetes.io/os alone is still checked",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux"})),
			params: defaults, want: missingCP},
		{name: "nodeSelector on os and arch is still checked",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"})),
			params: defaults, want: missingCP},
		{name: "nodeSelector on beta.kubernetes.io/os is still checked",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{"beta.kubernetes.io/os": "linux"})),
			params: defaults, want: missingCP},
		{name: "nodeSelector on beta.kubernetes.io/arch is still checked",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{"beta.kubernetes.io/arch": "amd64"})),
			params: defaults, want: missingCP},
		{name: "nodeSelector gpu=true narrows placement",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux", "gpu": "true"})),
			params: defaults},
		{name: "required affinity on arch and os alone is still checked",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(archAndOS)), params: defaults, want: missingCP},
		{name: "required affinity on the beta arch and os labels is still checked",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(betaArchAndOS)), params: defaults, want: missingCP},
		{name: "required affinity on a node pool narrows placement",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(gpuPool)), params: defaults},
		{name: "a term on os and a node pool narrows placement",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(testobj.NodeTerm(
				testobj.NodeReq(corev1.LabelOSStable, corev1.NodeSelectorOpIn, "linux"),
				testobj.NodeReq(pool, corev1.NodeSelectorOpIn, "gpu")))),
			params: defaults},
		{name: "required affinity on metadata.name narrows placement",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(byName)), params: defaults},
		{name: "preferred affinity does not narrow placement",
			ds: testobj.DS(testobj.WithTolerations(), preferredPool), params: defaults, want: missingCP},
		{name: "nodeSelector narrows even when the affinity is neutral",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{"gpu": "true"}), testobj.WithRequiredNodeAffinity(linuxOnly)),
			params: defaults},
		{name: "affinity narrows even when the nodeSelector is neutral",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux"}), testobj.WithRequiredNodeAffinity(gpuPool)),
			params: defaults},

		// Steering clear of the tainted nodes is deliberate narrowing;
		// aiming at them is not.
		{name: "affinity DoesNotExist on the taint key deliberately avoids those nodes",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(cpKey, corev1.NodeSelectorOpDoesNotExist)))),
			params: defaults},
		{name: "affinity NotIn on the taint key deliberately avoids those nodes",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(cpKey, corev1.NodeSelectorOpNotIn, "")))),
			params: defaults},
		{name: "affinity In on the taint key aims at those nodes and is checked",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(testobj.NodeTerm(testobj.NodeReq(cpKey, corev1.NodeSelectorOpIn, "")))),
			params: defaults, want: missingCP},
		// An empty term matches no node, so it adds no reach to a pool term.
		{name: "a pool term ORed with an empty term narrows placement",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(gpuPool, corev1.NodeSelectorTerm{})), params: defaults},

		// Required node affinity terms are ORed: one term that only names
		// OS or architecture reaches every node of that OS.
		{name: "ORed terms, one of them only on os, are still checked",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(gpuPool, linuxOnly)), params: defaults, want: missingCP},
		{name: "ORed terms, the first only on os, are still checked",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(linuxOnly, gpuPool)), params: defaults, want: missingCP},
		{name: "ORed terms, one of them only on beta os and arch, are still checked",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(gpuPool, betaArchAndOS)), params: defaults, want: missingCP},
		{name: "ORed terms that all narrow narrow placement",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(gpuPool, infraPool)), params: defaults},
		{name: "ORed terms on a node pool and a node name narrow placement",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(gpuPool, byName)), params: defaults},

		// Selecting on the taint's own key aims at the tainted nodes, so
		// the toleration matters all the more.
		{name: "nodeSelector on the control-plane label without toleration",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{cpKey: ""})),
			params: defaults, want: missingCP},
		{name: "nodeSelector on the control-plane label and os without toleration",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{cpKey: "", corev1.LabelOSStable: "linux"})),
			params: defaults, want: missingCP},
		{name: "nodeSelector on the control-plane label with toleration",
			ds: testobj.DS(testobj.WithNodeSelector(map[string]string{cpKey: ""}),
				testobj.WithTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
			params: defaults},
		{name: "nodeSelector on the control-plane label and another label narrows placement",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{cpKey: "", "gpu": "true"})),
			params: defaults},
		{name: "required affinity on the control-plane label without toleration",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(onControlPlane)), params: defaults, want: missingCP},
		{name: "ORed terms on the control-plane label and a node pool",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithRequiredNodeAffinity(gpuPool, onControlPlane)), params: defaults, want: missingCP},
		{name: "the taint's own key is neutral for that taint only",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{cpKey: ""})),
			params: infra, want: missing(cpTaint, "dedicated", "maintenance")},

		{name: "template nodeName pins the DaemonSet to one node",
			ds:     testobj.DS(testobj.WithTolerations(), func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "node-1" }),
			params: defaults},
		{name: "intended coverage does not lower the rule",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithAnnotation(policy.IntendedCoverageAnnotation, "workers only; the control plane is managed")),
			params: defaults, want: missingCP},
		{name: "intended coverage without a reason is ignored",
			ds:     testobj.DS(testobj.WithTolerations(), testobj.WithAnnotation(policy.IntendedCoverageAnnotation, "  ")),
			params: defaults, want: missingCP},
		{name: "no taints configured", ds: testobj.DS(testobj.WithTolerations()), params: ControlPlaneTolerationParams{}},
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
	ds := testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}))
	// Only the untolerated taint is suggested, not the tolerated "dedicated".
	want := "add to spec.template.spec.tolerations: {key: " + cpKey + ", operator: Exists, effect: NoSchedule}"
	assertRemediation(t, checkControlPlaneToleration(ds, testEnv(), &p), want)

	t.Run("taints the controller tolerates are not suggested", func(t *testing.T) {
		p := ControlPlaneTolerationParams{Taints: []TaintConfig{
			{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
			{Key: cpKey, Effect: corev1.TaintEffectNoSchedule},
			{Key: corev1.TaintNodeNetworkUnavailable, Effect: corev1.TaintEffectNoSchedule},
		}}
		assertRemediation(t, checkControlPlaneToleration(testobj.DS(testobj.WithTolerations(), testobj.WithHostNetwork), testEnv(), &p), want)
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
			assertFieldErrors(t, p.Validate(fp), tt.want)
		})
	}

	t.Run("Compile reports it", func(t *testing.T) {
		cfg := Builtin().DefaultConfig()
		policy.RuleConfigOf[ControlPlaneTolerationParams](cfg, controlPlaneTolerationID).Parameters.Taints = []TaintConfig{{Key: cpKey, Effect: corev1.TaintEffectPreferNoSchedule}}
		compileErr(t, cfg, "rules.control-plane-toleration.parameters.taints[0].effect")
	})
}

func TestCheckControlPlaneToleration_Nodes(t *testing.T) {
	const tolerationsField = "spec.template.spec.tolerations"
	workers := testobj.PoolNodes("w", 3)
	dedicated := ControlPlaneTolerationParams{Taints: []TaintConfig{
		{Key: cpKey, Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute},
	}}
	tests := []struct {
		name   string
		ds     *appsv1.DaemonSet
		nodes  *coverage.NodeSnapshot
		params ControlPlaneTolerationParams
		want   []wantFinding
	}{
		{name: "names the skipped node",
			ds: testobj.DS(testobj.WithTolerations()), nodes: snapshotOf(testobj.ControlPlaneNode("cp-1"), workers),
			want: []wantFinding{{field: tolerationsField,
				prefix: "no toleration for " + cpTaint + ": skips cp-1 (1 of 4 nodes), unseen in desiredNumberScheduled"}}},
		{name: "names at most five",
			ds:    testobj.DS(testobj.WithTolerations()),
			nodes: snapshotOf(testobj.PoolNodes("cp", 7, testobj.NodeLabels(cpKey, ""), testobj.NodeTaints(testobj.NoSchedule(cpKey))), workers),
			want: []wantFinding{{field: tolerationsField,
				prefix: "no toleration for " + cpTaint + ": skips cp-1, cp-2, cp-3, cp-4, cp-5 and 2 more (7 of 10 nodes), unseen"}}},
		{name: "no node carries the taint: warn",
			ds: testobj.DS(testobj.WithTolerations()), nodes: snapshotOf(workers),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn,
				prefix: "no toleration for " + cpTaint + ": no node carries it today, but such nodes would be skipped"}}},
		{name: "no nodes at all: warn",
			ds: testobj.DS(testobj.WithTolerations()), nodes: snapshotOf(),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, msg: []string{"no node carries it today"}}}},
		{name: "a PreferNoSchedule control-plane taint is not the configured one: warn",
			ds:    testobj.DS(testobj.WithTolerations()),
			nodes: snapshotOf(workers, testobj.Node("cp-1", testobj.NodeTaints(testobj.TaintOf(cpKey, "", corev1.TaintEffectPreferNoSchedule)))),
			want:  []wantFinding{{field: tolerationsField, action: policy.ActionWarn, msg: []string{"no node carries it today"}}}},
		{name: "one of two taints present: deny, naming the nodes of that one",
			ds: testobj.DS(testobj.WithTolerations()), params: dedicated,
			nodes: snapshotOf(testobj.ControlPlaneNode("cp-1"), testobj.ControlPlaneNode("cp-2"), workers),
			want: []wantFinding{{field: tolerationsField,
				prefix: "no toleration for " + cpTaint + ", dedicated=infra:NoExecute: skips cp-1, cp-2 (2 of 5 nodes)"}}},
		{name: "a taint with another value does not count",
			ds: testobj.DS(testobj.WithTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists})), params: dedicated,
			nodes: snapshotOf(workers, testobj.Node("infra-1", testobj.NodeTaints(testobj.TaintOf("dedicated", "gpu", corev1.TaintEffectNoExecute)))),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn,
				prefix: "no toleration for dedicated=infra:NoExecute: no node carries it today"}}},
		{name: "the configured taint with any value when none is configured",
			ds:     testobj.DS(testobj.WithTolerations()),
			params: ControlPlaneTolerationParams{Taints: []TaintConfig{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}},
			nodes:  snapshotOf(workers, testobj.Node("infra-1", testobj.NodeTaints(testobj.TaintOf("dedicated", "infra", corev1.TaintEffectNoSchedule)))),
			want: []wantFinding{{field: tolerationsField,
				prefix: "no toleration for dedicated:NoSchedule: skips infra-1 (1 of 4 nodes)"}}},
		{name: "intended: still reported",
			ds:    testobj.DS(testobj.WithTolerations(), testobj.WithAnnotation(policy.IntendedCoverageAnnotation, "managed control plane")),
			nodes: snapshotOf(testobj.ControlPlaneNode("cp-1"), workers),
			want: []wantFinding{{field: tolerationsField,
				prefix: "no toleration for " + cpTaint + ": skips cp-1 (1 of 4 nodes)"}}},
		{name: "tolerated: nothing", ds: testobj.DS(), nodes: snapshotOf(testobj.ControlPlaneNode("cp-1"), workers)},
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
		ds := testobj.DS(testobj.WithTolerations())
		present := findingsOf(policy.Evaluate(ds, policy.Env{Policy: Builtin().Default(), Now: testobj.Now, Nodes: snapshotOf(testobj.ControlPlaneNode("cp-1"), workers)}), controlPlaneTolerationID)
		absent := findingsOf(policy.Evaluate(ds, policy.Env{Policy: Builtin().Default(), Now: testobj.Now, Nodes: snapshotOf(workers)}), controlPlaneTolerationID)
		if len(present) != 1 || present[0].Action != policy.ActionDeny {
			t.Errorf("taint present:\n%s", describeFindings(present))
		}
		if len(absent) != 1 || absent[0].Action != policy.ActionWarn {
			t.Errorf("taint absent:\n%s", describeFindings(absent))
		}
	})
}

// TestNodesSkippedFor: the names of several skips come out merged in order,
// cut at the limit, and counted in full.
func TestNodesSkippedFor(t *testing.T) {
	cp := corev1.Taint{Key: cpKey, Effect: corev1.TaintEffectNoSchedule}
	infra := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	cov := &coverage.Coverage{Total: 9, Eligible: 2, Skips: []coverage.Skip{
		coverage.Skip{Kind: coverage.SkipTaint, Taint: infra}.WithNodes("b-1", "b-3", "b-5"),
		coverage.Skip{Kind: coverage.SkipTaint, Taint: cp}.WithNodes("a-1", "b-2", "c-1"),
		coverage.Skip{Kind: coverage.SkipSelector}.WithNodes("a-0"),
	}}
	taints := []TaintConfig{{Key: cpKey, Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	for _, tt := range []struct {
		limit int
		want  string
	}{
		{2, "a-1,b-1"},
		{4, "a-1,b-1,b-2,b-3"},
		{10, "a-1,b-1,b-2,b-3,b-5,c-1"},
	} {
		names, n := nodesSkippedFor(cov, taints, tt.limit)
		if got := strings.Join(names, ","); got != tt.want || n != 6 {
			t.Errorf("limit %d: %s (%d nodes), want %s (6 nodes)", tt.limit, got, n, tt.want)
		}
	}
}

// TestTaintList: taints are written as Kubernetes writes them (Taint's
// ToString), with or without a value and effect.
func TestTaintList(t *testing.T) {
	taints := []TaintConfig{
		{Key: cpKey, Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute},
		{Key: "bare"},
		{Key: "valued", Value: "v"},
	}
	var want []string
	for _, tc := range taints {
		taint := tc.taint()
		want = append(want, taint.ToString())
		if got := tc.String(); got != taint.ToString() {
			t.Errorf("String() = %q, want %q", got, taint.ToString())
		}
	}
	if got := taintList(taints); got != strings.Join(want, ", ") {
		t.Errorf("taintList = %q, want %q", got, strings.Join(want, ", "))
	}
	if got, want := tolerationHint(taints[:2]), "add to spec.template.spec.tolerations: "+
		"{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}, "+
		"{key: dedicated, operator: Exists, effect: NoExecute}"; got != want {
		t.Errorf("tolerationHint = %q, want %q", got, want)
	}
}
