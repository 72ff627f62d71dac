package vap

import (
	"fmt"
	"os"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/rules"
	"github.com/dsguard/dsguard/test/e2e/framework"
)

// defaultTaints are control-plane-toleration's default taints, the ones
// every test policy keeps.
func defaultTaints() ([]rules.TaintConfig, error) {
	cfg, err := rules.Builtin().ParseConfig([]byte("apiVersion: dsguard.io/v1alpha1\nkind: PolicyConfig\n"))
	if err != nil {
		return nil, fmt.Errorf("the default policy: %w", err)
	}
	return taintsOf(cfg), nil
}

func taintsOf(cfg *policy.Config) []rules.TaintConfig {
	return policy.RuleConfigOf[rules.ControlPlaneTolerationParams](cfg, "control-plane-toleration").Parameters.Taints
}

// suiteNodes are the model nodes of each default taint (amd64 and arm64,
// coverage.ModelTaintedNodes), carrying that taint, and SmallCluster's
// untainted workers. Node names are unique, so every model node after the
// first of its taint is named with a suffix; its hostname label stays the
// model's. No DaemonSet the test judges names those suffixed nodes (see
// requireModelPlacement), so against these nodes a placement reaches a
// tainted node exactly when it reaches a model node.
func suiteNodes() ([]framework.Node, error) {
	taints, err := defaultTaints()
	if err != nil {
		return nil, err
	}
	var out []framework.Node
	for _, t := range taints {
		for i, n := range coverage.ModelTaintedNodes(t.Key, t.Value) {
			name := n.Name
			if i > 0 {
				name = fmt.Sprintf("%s-%d", n.Name, i)
			}
			out = append(out, framework.Node{Name: name, Labels: n.Labels, Taints: []string{t.String()}})
		}
	}
	for _, n := range framework.SmallCluster {
		if len(n.Taints) == 0 {
			out = append(out, n)
		}
	}
	return out, nil
}

// requireModelPlacement fails the test if a subject names a suite node that
// is not a model node, by nodeName or matchFields: against it the webhook
// and the generated policies would judge different nodes.
func requireModelPlacement(t *testing.T, subjects []subject) {
	t.Helper()
	nodes, err := suiteNodes()
	if err != nil {
		t.Fatal(err)
	}
	var renamed []string
	for _, n := range nodes {
		if n.Name != coverage.ModelNodeName && len(n.Taints) > 0 {
			renamed = append(renamed, n.Name)
		}
	}
	for _, s := range subjects {
		for _, name := range namedNodes(s.ds) {
			if slices.Contains(renamed, name) {
				t.Fatalf("%s names node %s, which stands for a model node under another name: the webhook and the generated policies would judge it differently", s.name, name)
			}
		}
	}
}

// namedNodes are the node names a DaemonSet's placement mentions.
func namedNodes(ds *appsv1.DaemonSet) []string {
	spec := &ds.Spec.Template.Spec
	out := []string{spec.NodeName}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, r := range term.MatchFields {
				out = append(out, r.Values...)
			}
		}
	}
	return out
}

// requireSuiteTaints fails the test if a policy document configures other
// taints than the default ones, the only ones the suite's nodes carry.
func requireSuiteTaints(t *testing.T, doc string) {
	t.Helper()
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rules.Builtin().ParseConfig(data)
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	want, err := defaultTaints()
	if err != nil {
		t.Fatal(err)
	}
	if got := taintsOf(cfg); !slices.Equal(got, want) {
		t.Fatalf("%s: control-plane-toleration taints %v; the suite's nodes carry only %v (suiteNodes)", doc, got, want)
	}
}

// modelReachOnly reports whether control-plane-toleration may answer for ds
// in the generated policies and not in the webhook by design: ds leaves a
// default taint untolerated, and its placement reaches a model node that
// carries it (coverage.ModelTaintedNodes, what a generated policy judges)
// but no suite node that does (what the webhook judges). Only a placement
// that names the model node tells them apart.
func modelReachOnly(t *testing.T, ds *appsv1.DaemonSet) bool {
	t.Helper()
	taints, err := defaultTaints()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := suiteNodes()
	if err != nil {
		t.Fatal(err)
	}
	spec := &ds.Spec.Template.Spec
	for _, tc := range taints {
		taint := corev1.Taint{Key: tc.Key, Value: tc.Value, Effect: tc.Effect}
		if coverage.ToleratedByDaemonPod(spec, &taint) {
			continue
		}
		var carrying []*corev1.Node
		for _, n := range nodes {
			if slices.Contains(n.Taints, tc.String()) {
				carrying = append(carrying, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}})
			}
		}
		if coverage.ReachesAny(spec, coverage.ModelTaintedNodes(tc.Key, tc.Value)) && !coverage.ReachesAny(spec, carrying) {
			return true
		}
	}
	return false
}
