package rules

import (
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
)

const nodeChangeID = "node-change"

// NodeChangeParams are the node-change parameters.
type NodeChangeParams struct {
	// Critical names, as namespace/name globs, the agents no node may lose:
	// their findings take the rule's action. Every other DaemonSet's only
	// warns, so that action deny refuses just the changes that take these
	// away.
	Critical []string `yaml:"critical"`
}

// Validate implements policy.ParamValidator.
func (p *NodeChangeParams) Validate(fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, g := range p.Critical {
		if _, err := path.Match(g, ""); err != nil || strings.Count(g, "/") != 1 {
			errs = append(errs, field.Invalid(fp.Child("critical").Index(i), g, "want a namespace/name glob, such as kube-system/cilium or */istio-cni-*"))
		}
	}
	return errs
}

var nodeChangeRule = policy.NewRule(policy.Rule{
	ID:    nodeChangeID,
	Title: "A change to a node's taints or labels does not take an agent away",
	Why: "A taint or label added to a node, or a label removed, decides which DaemonSets qualify for it, and " +
		"nobody is told: an untolerated NoSchedule taint leaves the agent's Pod running until it is restarted, " +
		"evicted or updated, and then it never comes back; an untolerated NoExecute taint evicts it at once; a " +
		"label its nodeSelector or node affinity no longer matches deletes it at once. The node then runs without " +
		"its CNI, CSI node plugin or log agent until somebody notices. Scope the rule (scope.namespaces, " +
		"scope.selector) and list the agents no node may lose under critical with action deny.",
	Remediation: "Give the agent a toleration for the taint (or a nodeSelector or affinity that still matches the " +
		"node) before changing the node, or change only nodes the agent may leave.",
	DefaultAction: policy.ActionWarn,
	OnNodeChange:  true,
	Exemptible:    true,
	Params: []policy.ParamDoc{
		{Name: "critical", Type: "list of namespace/name globs", Default: "[*/*]",
			Description: "The agents no node may lose (e.g. kube-system/cilium, */istio-cni-node): their findings take the rule's " +
				"action, so that action deny refuses a node change that takes one of them away; every other DaemonSet's " +
				"finding only warns. The default names every DaemonSet."},
	},
	NotRendered: "it judges a change to a Node, which the generated policies (they match DaemonSets) never see; " +
		"the webhook's Node entry does, in every mode but vap",
}, func() NodeChangeParams { return NodeChangeParams{Critical: []string{"*/*"}} }, checkNodeChange)

// checkNodeChange says what the node change under review does to ds, as
// the DaemonSet controller will act on it; a node the agent gains is no
// finding.
func checkNodeChange(ds *appsv1.DaemonSet, env *policy.Env, p *NodeChangeParams) []policy.Finding {
	c := env.NodeChange
	namespace := policy.NamespaceOf(ds)
	hasPod := c.WithPod[types.NamespacedName{Namespace: namespace, Name: ds.Name}]
	im := coverage.ImpactOf(ds, c.Before, c.After, hasPod)
	if !im.Loses() {
		return nil
	}
	f := podSpecPath
	if im.Decision.Kind == coverage.SkipTaint {
		f = tolerationsPath
	}
	action := policy.ActionWarn
	if policy.MatchAnyGlob(p.Critical, namespace+"/"+ds.Name) {
		action = "" // the rule's own
	}
	return []policy.Finding{{Field: f, Action: action, Message: im.Why(c.Before.Name)}}
}
