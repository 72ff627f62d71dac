package rules

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/internal/testobj"
	"github.com/dsguard/dsguard/policy"
)

const (
	tolerationsField = "spec.template.spec.tolerations"
	podSpecField     = "spec.template.spec"
	gpuTaintString   = "nvidia.com/gpu=present:NoSchedule"
	poolLabel        = "cloud.example.com/node-pool"
)

var gpuTaint = testobj.TaintOf("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)

// coverageCluster has 7 nodes: a tainted control-plane node, three workers,
// two GPU nodes tainted for GPU work only, and a Windows worker.
func coverageCluster() *coverage.NodeSnapshot {
	return snapshotOf(
		testobj.ControlPlaneNode("cp-1"),
		testobj.PoolNodes("w", 3, testobj.NodeLabels(poolLabel, "general")),
		testobj.PoolNodes("gpu", 2, testobj.NodeLabels(poolLabel, "gpu"), testobj.NodeTaints(gpuTaint)),
		testobj.Node("win-1", testobj.NodeLabels(corev1.LabelOSStable, "windows", poolLabel, "windows")),
	)
}

var (
	linuxOnly   = testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux"})
	tolerateCP  = testobj.WithTolerations(corev1.Toleration{Key: cpKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	tolerateGPU = testobj.WithTolerations(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists})
	onGPUPool   = testobj.WithNodeSelector(map[string]string{poolLabel: "gpu"})
)

func TestCheckNodeCoverage(t *testing.T) {
	cluster := coverageCluster()
	withTransient := snapshotOf(
		testobj.PoolNodes("w", 2),
		testobj.Node("joining-1", testobj.NodeTaints(testobj.NoSchedule(corev1.TaintNodeNotReady))),
		testobj.Node("joining-2", testobj.NodeLabels(poolLabel, "new"), testobj.NodeTaints(testobj.NoSchedule(corev1.TaintNodeNotReady))),
		testobj.Node("init-1", testobj.NodeTaints(testobj.NoSchedule("node.cloudprovider.kubernetes.io/uninitialized"))),
		testobj.Node("gone-1", testobj.NodeTaints(testobj.NoSchedule(corev1.TaintNodeUnreachable))),
		testobj.Node("scale-1", testobj.NodeTaints(testobj.NoSchedule("ToBeDeletedByClusterAutoscaler"))),
	)
	// An autoscaled fleet: Karpenter adds nodes (the "new" pool), Cilium and a
	// NodeReadinessRule's agent get ready there, nodes are drained away.
	fleet := []any{
		testobj.PoolNodes("w", 2),
		testobj.Node("new-1", testobj.NodeLabels(poolLabel, "new"), testobj.NodeTaints(testobj.NoExecute("karpenter.sh/unregistered"))),
		testobj.Node("new-2", testobj.NodeLabels(poolLabel, "new"), testobj.NodeTaints(testobj.TaintOf("node.cilium.io/agent-not-ready", "true", corev1.TaintEffectNoExecute))),
		testobj.Node("new-3", testobj.NodeLabels(poolLabel, "new"), testobj.NodeTaints(testobj.NoSchedule("readiness.k8s.io/NetworkReady"))),
		testobj.Node("old-1", testobj.NodeTaints(testobj.NoSchedule("karpenter.sh/disrupted"))),
		testobj.Node("down-1", testobj.NodeTaints(testobj.NoExecute(corev1.TaintNodeOutOfService))),
	}
	withFleet := snapshotOf(fleet...)
	withFleetAndGPU := snapshotOf(append(fleet, testobj.Node("gpu-1", testobj.NodeTaints(gpuTaint)))...)
	bigGPUPool := snapshotOf(testobj.PoolNodes("w", 2), testobj.PoolNodes("gpu", 8, testobj.NodeLabels(poolLabel, "gpu"), testobj.NodeTaints(gpuTaint)))
	defaults := defaultNodeCoverageParams()
	noDeny := NodeCoverageParams{DenyAtZero: false}
	gpuGap := "taint " + gpuTaintString + " not tolerated (gpu-1, gpu-2)"
	zeroGPU := "runs on no node: its selectors pick 2 nodes, and every one has an untolerated taint: " + gpuGap
	partialGPU := wantFinding{field: tolerationsField, action: policy.ActionWarn, prefix: "skips 2 of 7 nodes: " + gpuGap}

	tests := []struct {
		name   string
		ds     *appsv1.DaemonSet
		nodes  *coverage.NodeSnapshot
		params NodeCoverageParams
		want   []wantFinding
	}{
		{name: "covers every node", ds: testobj.DS(), nodes: cluster, params: defaults},
		{name: "partial gap warns, naming nodes and taint", ds: testobj.DS(tolerateCP), nodes: cluster, params: defaults,
			want: []wantFinding{partialGPU}},
		{name: "OS skips are left out of the gap", ds: testobj.DS(tolerateCP, linuxOnly), nodes: cluster, params: defaults,
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: "skips 2 of 7 nodes: " + gpuGap,
				absent: []string{"win-1"}}}},
		{name: "OS and architecture skips alone are no finding", ds: testobj.DS(linuxOnly), nodes: cluster, params: defaults},
		{name: "a Windows agent skipping Linux nodes is no finding",
			ds:    testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "windows"})),
			nodes: cluster, params: defaults},
		{name: "more than five nodes: and N more", ds: testobj.DS(testobj.WithTolerations()), nodes: bigGPUPool, params: defaults,
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn,
				prefix: "skips 8 of 10 nodes: taint " + gpuTaintString + " not tolerated (gpu-1, gpu-2, gpu-3, gpu-4, gpu-5 and 3 more)"}}},
		{name: "intended gap is recorded as audit",
			ds:    testobj.DS(tolerateCP, testobj.WithAnnotation(policy.IntendedCoverageAnnotation, "GPU nodes run their own agent")),
			nodes: cluster, params: defaults,
			want: []wantFinding{{field: tolerationsField, action: policy.ActionAudit,
				prefix: "skips 2 of 7 nodes, as intended (GPU nodes run their own agent): " + gpuGap}}},
		{name: "intended annotation without a reason is ignored",
			ds:    testobj.DS(tolerateCP, testobj.WithAnnotation(policy.IntendedCoverageAnnotation, " ")),
			nodes: cluster, params: defaults, want: []wantFinding{partialGPU}},

		// Running on no node at all.
		{name: "zero coverage, every selected node tainted: deny", ds: testobj.DS(tolerateCP, onGPUPool), nodes: cluster,
			params: defaults, want: []wantFinding{{field: tolerationsField, prefix: zeroGPU}}},
		{name: "zero coverage with denyAtZero false: warn", ds: testobj.DS(tolerateCP, onGPUPool), nodes: cluster,
			params: noDeny, want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: zeroGPU}}},
		{name: "zero coverage is not excused by the intended annotation",
			ds:    testobj.DS(tolerateCP, onGPUPool, testobj.WithAnnotation(policy.IntendedCoverageAnnotation, "GPU nodes only")),
			nodes: cluster, params: defaults, want: []wantFinding{{field: tolerationsField, prefix: zeroGPU}}},
		{name: "zero coverage of the control plane is reported though control-plane-toleration reports it too",
			ds:    testobj.DS(testobj.WithTolerations(), testobj.WithNodeSelector(map[string]string{cpKey: ""})),
			nodes: cluster, params: defaults,
			want: []wantFinding{{field: tolerationsField,
				prefix: "runs on no node: its selectors pick 1 node, and every one has an untolerated taint: taint " + cpTaint + " not tolerated (cp-1)"}}},
		{name: "selector matching no node only warns", ds: testobj.DS(testobj.WithNodeSelector(map[string]string{poolLabel: "fpga"})),
			nodes: cluster, params: defaults,
			want: []wantFinding{{field: podSpecField, action: policy.ActionWarn,
				prefix: "runs on no node today: no node of 7 matches its nodeSelector, node affinity or nodeName"}}},
		{name: "nodeName of a missing node only warns", ds: testobj.DS(testobj.WithNodeName("gone-1")), nodes: cluster, params: defaults,
			want: []wantFinding{{field: podSpecField, action: policy.ActionWarn, prefix: "runs on no node today: no node of 7 matches"}}},

		// Lifecycle taints.
		{name: "lifecycle taints only: no finding", ds: testobj.DS(testobj.WithTolerations()), nodes: withTransient, params: defaults},
		{name: "only nodes under lifecycle taints selected: no finding", ds: testobj.DS(testobj.WithTolerations(),
			testobj.WithNodeSelector(map[string]string{poolLabel: "new"})), nodes: withTransient, params: defaults},
		{name: "an autoscaled fleet's lifecycle taints only: no finding", ds: testobj.DS(testobj.WithTolerations()), nodes: withFleet, params: defaults},
		{name: "only a fleet's joining nodes selected: no deny", ds: testobj.DS(testobj.WithTolerations(),
			testobj.WithNodeSelector(map[string]string{poolLabel: "new"})), nodes: withFleet, params: defaults},
		{name: "a fleet's lifecycle taints are left out of a real gap", ds: testobj.DS(testobj.WithTolerations()), nodes: withFleetAndGPU, params: defaults,
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn,
				prefix: "skips 1 of 8 nodes: taint " + gpuTaintString + " not tolerated (gpu-1)", absent: []string{"new-", "old-1", "down-1"}}}},
		{name: "lifecycle taints are left out of a real gap",
			ds:     testobj.DS(testobj.WithTolerations()),
			nodes:  snapshotOf(testobj.PoolNodes("w", 2), testobj.Node("joining-1", testobj.NodeTaints(testobj.NoSchedule(corev1.TaintNodeNotReady))), testobj.Node("gpu-1", testobj.NodeTaints(gpuTaint))),
			params: defaults,
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn,
				prefix: "skips 1 of 4 nodes: taint " + gpuTaintString + " not tolerated (gpu-1)", absent: []string{"joining", "not-ready"}}}},

		// De-duplication with control-plane-toleration (in the default policy).
		{name: "a control-plane gap is left to control-plane-toleration", ds: testobj.DS(testobj.WithTolerations(), tolerateGPU),
			nodes: cluster, params: defaults},
		{name: "other gaps are still reported, without the control plane", ds: testobj.DS(testobj.WithTolerations()),
			nodes: cluster, params: defaults,
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: "skips 2 of 7 nodes: " + gpuGap,
				absent: []string{"cp-1", cpKey}}}},
		{name: "an exclusion (NotIn) still reaches the control plane: control-plane-toleration reports it, not node-coverage",
			ds: testobj.DS(testobj.WithTolerations(), tolerateGPU, testobj.WithRequiredNodeAffinity(
				testobj.NodeTerm(testobj.NodeReq(poolLabel, corev1.NodeSelectorOpNotIn, "windows")))),
			nodes: cluster, params: defaults},

		{name: "empty node set: no finding", ds: testobj.DS(testobj.WithTolerations(), onGPUPool), nodes: snapshotOf(), params: defaults},
		{name: "a single node", ds: testobj.DS(testobj.WithTolerations()), nodes: snapshotOf(testobj.Node("gpu-1", testobj.NodeTaints(gpuTaint))),
			params: defaults,
			want:   []wantFinding{{field: tolerationsField, prefix: "runs on no node: its selectors pick 1 node, and every one"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, checkNodeCoverage(tt.ds, nodeEnv(tt.nodes), &tt.params), tt.want)
		})
	}

	t.Run("no nodes known: no finding", func(t *testing.T) {
		if fs := checkNodeCoverage(testobj.DS(testobj.WithTolerations(), onGPUPool), testEnv(), &defaults); len(fs) > 0 {
			t.Errorf("got\n%s", describeFindings(fs))
		}
	})
}

// evalNodeCoverage evaluates ds under cfg (nil: the defaults) against nodes
// and returns the findings of one rule.
func evalRule(t *testing.T, cfg *policy.Config, ds *appsv1.DaemonSet, nodes *coverage.NodeSnapshot, ruleID string) []policy.Finding {
	t.Helper()
	env := policy.Env{Policy: Builtin().Default(), Now: testobj.Now, Nodes: nodes}
	if cfg != nil {
		p, err := policy.Compile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		env.Policy = p
	}
	return findingsOf(policy.Evaluate(ds, env), ruleID)
}

func TestEvaluate_NodeCoverage(t *testing.T) {
	cluster := coverageCluster()
	withCP := "skips 3 of 7 nodes: taint " + gpuTaintString + " not tolerated (gpu-1, gpu-2); taint " + cpTaint + " not tolerated (cp-1)"
	onlyGPU := "skips 2 of 7 nodes: taint " + gpuTaintString + " not tolerated (gpu-1, gpu-2)"
	config := func(change func(*policy.Config)) *policy.Config {
		c := Builtin().DefaultConfig()
		change(c)
		return c
	}
	tests := []struct {
		name  string
		cfg   *policy.Config
		ds    *appsv1.DaemonSet
		nodes *coverage.NodeSnapshot
		want  []wantFinding
	}{
		{name: "partial gap: warn", ds: testobj.DS(testobj.WithTolerations()),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: onlyGPU}}},
		{name: "control-plane-toleration off: the control-plane gap is node-coverage's",
			cfg: config(func(c *policy.Config) {
				policy.RuleConfigOf[ControlPlaneTolerationParams](c, controlPlaneTolerationID).Action = policy.ActionOff
			}),
			ds: testobj.DS(testobj.WithTolerations()), want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: withCP}}},
		{name: "control-plane-toleration at audit still reports it",
			cfg: config(func(c *policy.Config) {
				policy.RuleConfigOf[ControlPlaneTolerationParams](c, controlPlaneTolerationID).Action = policy.ActionAudit
			}),
			ds: testobj.DS(testobj.WithTolerations()), want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: onlyGPU}}},
		{name: "control-plane-toleration out of scope by namespace",
			cfg: config(func(c *policy.Config) {
				policy.RuleConfigOf[ControlPlaneTolerationParams](c, controlPlaneTolerationID).Scope.Namespaces.Exclude = []string{"mon*"}
			}),
			ds: testobj.DS(testobj.WithTolerations()), want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: withCP}}},
		{name: "control-plane-toleration out of scope by label",
			cfg: config(func(c *policy.Config) {
				policy.RuleConfigOf[ControlPlaneTolerationParams](c, controlPlaneTolerationID).Scope.Selector = &policy.LabelSelectorConfig{MatchLabels: map[string]string{"tier": "node"}}
			}),
			ds: testobj.DS(testobj.WithTolerations()), want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: withCP}}},
		{name: "control-plane-toleration in scope by label",
			cfg: config(func(c *policy.Config) {
				policy.RuleConfigOf[ControlPlaneTolerationParams](c, controlPlaneTolerationID).Scope.Selector = &policy.LabelSelectorConfig{MatchLabels: map[string]string{"tier": "node"}}
			}),
			ds:   testobj.DS(testobj.WithTolerations(), func(ds *appsv1.DaemonSet) { ds.Labels["tier"] = "node" }),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: onlyGPU}}},
		{name: "control-plane-toleration scoped to default covers a DaemonSet that names no namespace",
			cfg: config(func(c *policy.Config) {
				policy.RuleConfigOf[ControlPlaneTolerationParams](c, controlPlaneTolerationID).Scope.Namespaces.Include = []string{"default"}
			}),
			ds:   testobj.DS(testobj.WithTolerations(), testobj.WithNamespace("")),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: onlyGPU}}},
		{name: "only the control-plane gap, rule active: nothing from node-coverage", ds: testobj.DS(testobj.WithTolerations(), tolerateGPU)},
		{name: "only the control-plane gap, rule off",
			cfg: config(func(c *policy.Config) {
				policy.RuleConfigOf[ControlPlaneTolerationParams](c, controlPlaneTolerationID).Action = policy.ActionOff
			}),
			ds: testobj.DS(testobj.WithTolerations(), tolerateGPU),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn,
				prefix: "skips 1 of 7 nodes: taint " + cpTaint + " not tolerated (cp-1)"}}},

		{name: "zero coverage: deny", ds: testobj.DS(testobj.WithTolerations(), onGPUPool),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionDeny, prefix: "runs on no node: its selectors pick 2 nodes"}}},
		{name: "zero coverage, denyAtZero false: warn",
			cfg: config(func(c *policy.Config) {
				policy.RuleConfigOf[NodeCoverageParams](c, nodeCoverageID).Parameters.DenyAtZero = false
			}),
			ds:   testobj.DS(testobj.WithTolerations(), onGPUPool),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: "runs on no node: its selectors pick 2 nodes"}}},
		{name: "zero coverage in kube-system: warn", ds: testobj.DS(testobj.WithTolerations(), onGPUPool, testobj.WithNamespace("kube-system")),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: "runs on no node: its selectors pick 2 nodes"}}},
		{name: "zero coverage, rule at warn", cfg: config(func(c *policy.Config) {
			policy.RuleConfigOf[NodeCoverageParams](c, nodeCoverageID).Action = policy.ActionWarn
		}),
			ds:   testobj.DS(testobj.WithTolerations(), onGPUPool),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionWarn, prefix: "runs on no node"}}},
		{name: "zero coverage, exempted: audit",
			ds:   testobj.DS(testobj.WithTolerations(), onGPUPool, testobj.WithAnnotation(policy.ExemptionAnnotationPrefix+nodeCoverageID, "GPU pool migration; expires=2026-07-01")),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionAudit, prefix: "runs on no node"}}},
		{name: "selector matching no node: warn", ds: testobj.DS(testobj.WithNodeSelector(map[string]string{poolLabel: "fpga"})),
			want: []wantFinding{{field: podSpecField, action: policy.ActionWarn, prefix: "runs on no node today"}}},
		{name: "intended: audit",
			ds: testobj.DS(testobj.WithTolerations(), testobj.WithAnnotation(policy.IntendedCoverageAnnotation, "GPU nodes run their own agent")),
			want: []wantFinding{{field: tolerationsField, action: policy.ActionAudit,
				prefix: "skips 2 of 7 nodes, as intended (GPU nodes run their own agent): "}}},
		{name: "empty node set: nothing", ds: testobj.DS(testobj.WithTolerations(), onGPUPool), nodes: snapshotOf()},
		{name: "node-coverage off", cfg: config(func(c *policy.Config) {
			policy.RuleConfigOf[NodeCoverageParams](c, nodeCoverageID).Action = policy.ActionOff
		}),
			ds: testobj.DS(testobj.WithTolerations(), onGPUPool)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := tt.nodes
			if nodes == nil {
				nodes = cluster
			}
			assertFindings(t, evalRule(t, tt.cfg, tt.ds, nodes, nodeCoverageID), tt.want)
		})
	}

	t.Run("without nodes the rule is skipped", func(t *testing.T) {
		if fs := findingsOf(policy.Evaluate(testobj.DS(testobj.WithTolerations(), onGPUPool), policy.Env{Policy: Builtin().Default(), Now: testobj.Now}), nodeCoverageID); len(fs) > 0 {
			t.Errorf("got\n%s", describeFindings(fs))
		}
	})

	t.Run("control-plane-toleration names the node node-coverage leaves out", func(t *testing.T) {
		fs := policy.Evaluate(testobj.DS(testobj.WithTolerations()), policy.Env{Policy: Builtin().Default(), Now: testobj.Now, Nodes: cluster})
		assertFindings(t, findingsOf(fs, controlPlaneTolerationID), []wantFinding{{field: tolerationsField, action: policy.ActionDeny,
			msg: []string{"skips cp-1 (1 of 7 nodes)"}}})
	})
}

func TestEvaluate_MinCoverage(t *testing.T) {
	// DaemonSets below tolerate the control plane and select Linux: they
	// cover cp-1 and w-1..w-3, 4 of the 6 Linux nodes (66.7 %), and skip
	// the GPU nodes (the partial-gap warning) and win-1 (not counted).
	cluster := coverageCluster()
	ds := func(mutators ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
		return testobj.DS(append([]func(*appsv1.DaemonSet){tolerateCP, linuxOnly}, mutators...)...)
	}
	gap := wantFinding{field: tolerationsField, action: policy.ActionWarn, prefix: "skips 2 of 7 nodes: "}
	below := func(action policy.Action, percent, namespace string) wantFinding {
		return wantFinding{field: podSpecField, action: action,
			prefix: "covers 4 of 6 nodes (66%), below the " + percent + " required in namespace " + namespace}
	}
	floors := func(ruleAction policy.Action, mcs ...MinCoverageConfig) *policy.Config {
		c := Builtin().DefaultConfig()
		if ruleAction != "" {
			policy.RuleConfigOf[NodeCoverageParams](c, nodeCoverageID).Action = ruleAction
		}
		policy.RuleConfigOf[NodeCoverageParams](c, nodeCoverageID).Parameters.MinCoverage = mcs
		return c
	}
	tests := []struct {
		name string
		cfg  *policy.Config
		ds   *appsv1.DaemonSet
		want []wantFinding
	}{
		{name: "no floors", cfg: floors(""), ds: ds(), want: []wantFinding{gap}},
		{name: "below the floor: warn by default",
			cfg:  floors("", MinCoverageConfig{Namespaces: []string{"monitoring"}, Percent: 90}),
			ds:   ds(),
			want: []wantFinding{gap, below(policy.ActionWarn, "90%", "monitoring")}},
		{name: "glob", cfg: floors("", MinCoverageConfig{Namespaces: []string{"kube-*", "mon*"}, Percent: 90}),
			ds: ds(), want: []wantFinding{gap, below(policy.ActionWarn, "90%", "monitoring")}},
		{name: "a DaemonSet that names no namespace is in default",
			cfg: floors("", MinCoverageConfig{Namespaces: []string{"default"}, Percent: 90}),
			ds:  ds(testobj.WithNamespace("")), want: []wantFinding{gap, below(policy.ActionWarn, "90%", "default")}},
		{name: "another namespace", cfg: floors("", MinCoverageConfig{Namespaces: []string{"logging"}, Percent: 90}),
			ds: ds(), want: []wantFinding{gap}},
		{name: "action deny", cfg: floors("", MinCoverageConfig{Namespaces: []string{"*"}, Percent: 90, Action: policy.ActionDeny}),
			ds: ds(), want: []wantFinding{below(policy.ActionDeny, "90%", "monitoring"), gap}},
		{name: "action audit", cfg: floors("", MinCoverageConfig{Namespaces: []string{"*"}, Percent: 90, Action: policy.ActionAudit}),
			ds: ds(), want: []wantFinding{gap, below(policy.ActionAudit, "90%", "monitoring")}},
		{name: "the floor's action is capped by the rule's",
			cfg: floors(policy.ActionWarn, MinCoverageConfig{Namespaces: []string{"*"}, Percent: 90, Action: policy.ActionDeny}),
			ds:  ds(), want: []wantFinding{gap, below(policy.ActionWarn, "90%", "monitoring")}},
		{name: "first match wins, even when it passes",
			cfg: floors("",
				MinCoverageConfig{Namespaces: []string{"monitoring"}, Percent: 50},
				MinCoverageConfig{Namespaces: []string{"*"}, Percent: 100, Action: policy.ActionDeny}),
			ds: ds(), want: []wantFinding{gap}},
		{name: "first match wins when it fails",
			cfg: floors("",
				MinCoverageConfig{Namespaces: []string{"logging"}, Percent: 10},
				MinCoverageConfig{Namespaces: []string{"mon*"}, Percent: 80},
				MinCoverageConfig{Namespaces: []string{"*"}, Percent: 90, Action: policy.ActionDeny}),
			ds: ds(), want: []wantFinding{gap, below(policy.ActionWarn, "80%", "monitoring")}},
		{name: "just at the floor (66% of 6 is 3.96 nodes)",
			cfg: floors("", MinCoverageConfig{Namespaces: []string{"*"}, Percent: 66}), ds: ds(), want: []wantFinding{gap}},
		{name: "just below the floor (67% of 6 is 4.02 nodes)",
			cfg: floors("", MinCoverageConfig{Namespaces: []string{"*"}, Percent: 67}), ds: ds(),
			want: []wantFinding{gap, below(policy.ActionWarn, "67%", "monitoring")}},
		{name: "OS and architecture skips are not in the denominator",
			cfg: floors("", MinCoverageConfig{Namespaces: []string{"*"}, Percent: 100}),
			ds:  testobj.DS(linuxOnly)},
		{name: "but selector skips are (win-1 is not in the pool: a selector skip)",
			cfg: floors("", MinCoverageConfig{Namespaces: []string{"*"}, Percent: 100}),
			ds:  testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "linux", poolLabel: "general"})),
			want: []wantFinding{{field: podSpecField, action: policy.ActionWarn,
				prefix: "covers 3 of 7 nodes (42%), below the 100% required in namespace monitoring"}}},
		{name: "intended gaps still count against the floor",
			cfg: floors("", MinCoverageConfig{Namespaces: []string{"*"}, Percent: 90}),
			ds:  ds(testobj.WithAnnotation(policy.IntendedCoverageAnnotation, "GPU nodes run their own agent")),
			want: []wantFinding{below(policy.ActionWarn, "90%", "monitoring"),
				{field: tolerationsField, action: policy.ActionAudit, prefix: "skips 2 of 7 nodes, as intended"}}},
		{name: "no node of its OS: the floor does not apply",
			cfg:  floors("", MinCoverageConfig{Namespaces: []string{"*"}, Percent: 100}),
			ds:   testobj.DS(testobj.WithNodeSelector(map[string]string{corev1.LabelOSStable: "plan9"})),
			want: []wantFinding{{field: podSpecField, action: policy.ActionWarn, prefix: "runs on no node today"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFindings(t, evalRule(t, tt.cfg, tt.ds, cluster, nodeCoverageID), tt.want)
		})
	}

	t.Run("empty node set", func(t *testing.T) {
		cfg := floors("", MinCoverageConfig{Namespaces: []string{"*"}, Percent: 100, Action: policy.ActionDeny})
		if fs := evalRule(t, cfg, ds(), snapshotOf(), nodeCoverageID); len(fs) > 0 {
			t.Errorf("got\n%s", describeFindings(fs))
		}
	})
}

func TestNodeCoverageParams_Validate(t *testing.T) {
	fp := field.NewPath("rules", nodeCoverageID, "parameters")
	mc := func(i int, name string) string {
		return fp.Child("minCoverage").Index(i).Child(name).String()
	}
	ok := MinCoverageConfig{Namespaces: []string{"monitoring"}, Percent: 100}
	tests := []struct {
		name   string
		params NodeCoverageParams
		want   []fieldErr
	}{
		{name: "defaults", params: defaultNodeCoverageParams()},
		{name: "bounds", params: NodeCoverageParams{MinCoverage: []MinCoverageConfig{
			{Namespaces: []string{"*"}, Percent: 1, Action: policy.ActionDeny}, ok}}},
		{name: "every action", params: NodeCoverageParams{MinCoverage: []MinCoverageConfig{
			{Namespaces: []string{"a"}, Percent: 50, Action: policy.ActionWarn},
			{Namespaces: []string{"b"}, Percent: 50, Action: policy.ActionAudit},
			{Namespaces: []string{"c"}, Percent: 50, Action: policy.ActionOff}}}},
		{name: "percent 0", params: NodeCoverageParams{MinCoverage: []MinCoverageConfig{ok, {Namespaces: []string{"x"}}}},
			want: []fieldErr{{field: mc(1, "percent"), typ: field.ErrorTypeInvalid, detail: "between 1 and 100"}}},
		{name: "percent above 100", params: NodeCoverageParams{MinCoverage: []MinCoverageConfig{{Namespaces: []string{"x"}, Percent: 101}}},
			want: []fieldErr{{field: mc(0, "percent"), typ: field.ErrorTypeInvalid, detail: "between 1 and 100"}}},
		{name: "negative percent", params: NodeCoverageParams{MinCoverage: []MinCoverageConfig{{Namespaces: []string{"x"}, Percent: -5}}},
			want: []fieldErr{{field: mc(0, "percent"), typ: field.ErrorTypeInvalid}}},
		{name: "bad action", params: NodeCoverageParams{MinCoverage: []MinCoverageConfig{{Namespaces: []string{"x"}, Percent: 50, Action: "block"}}},
			want: []fieldErr{{field: mc(0, "action"), typ: field.ErrorTypeNotSupported}}},
		{name: "no namespaces", params: NodeCoverageParams{MinCoverage: []MinCoverageConfig{{Percent: 50}}},
			want: []fieldErr{{field: mc(0, "namespaces"), typ: field.ErrorTypeRequired}}},
		{name: "empty and malformed globs", params: NodeCoverageParams{MinCoverage: []MinCoverageConfig{{Namespaces: []string{"", "[a-"}, Percent: 50}}},
			want: []fieldErr{
				{field: mc(0, "namespaces") + "[0]", typ: field.ErrorTypeInvalid, detail: "must not be empty"},
				{field: mc(0, "namespaces") + "[1]", typ: field.ErrorTypeInvalid, detail: "not a valid glob"},
			}},
		{name: "everything wrong", params: NodeCoverageParams{MinCoverage: []MinCoverageConfig{{Percent: 0, Action: "nope"}}},
			want: []fieldErr{
				{field: mc(0, "namespaces"), typ: field.ErrorTypeRequired},
				{field: mc(0, "percent"), typ: field.ErrorTypeInvalid},
				{field: mc(0, "action"), typ: field.ErrorTypeNotSupported},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFieldErrors(t, tt.params.Validate(fp), tt.want)
		})
	}

	t.Run("Compile reports it", func(t *testing.T) {
		cfg := Builtin().DefaultConfig()
		policy.RuleConfigOf[NodeCoverageParams](cfg, nodeCoverageID).Parameters.MinCoverage = []MinCoverageConfig{{Namespaces: []string{"*"}, Percent: 0}}
		compileErr(t, cfg, "rules.node-coverage.parameters.minCoverage[0].percent")
	})

	t.Run("parsed from YAML", func(t *testing.T) {
		cfg, err := Builtin().ParseConfig([]byte(`apiVersion: dsguard.io/v1alpha1
kind: PolicyConfig
rules:
  node-coverage:
    parameters:
      denyAtZero: false
      minCoverage:
        - namespaces: [monitoring, "security-*"]
          percent: 95
          action: deny
`))
		if err != nil {
			t.Fatal(err)
		}
		got := policy.RuleConfigOf[NodeCoverageParams](cfg, nodeCoverageID).Parameters
		if got.DenyAtZero || len(got.MinCoverage) != 1 || got.MinCoverage[0].Percent != 95 ||
			got.MinCoverage[0].Action != policy.ActionDeny || len(got.MinCoverage[0].Namespaces) != 2 {
			t.Errorf("parsed %+v", got)
		}
		if _, err := Builtin().ParseConfig([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\nrules:\n  node-coverage:\n    parameters:\n      minCoverage: [{namespaces: [x], percent: 150}]\n")); err == nil {
			t.Errorf("percent 150 accepted")
		}
	})
}
