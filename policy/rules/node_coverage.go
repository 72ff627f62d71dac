package rules

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
)

const nodeCoverageID = "node-coverage"

// NodeCoverageParams are the node-coverage parameters.
type NodeCoverageParams struct {
	// DenyAtZero makes a DaemonSet that would run on no node at all (because
	// taints exclude every node its selectors pick) a deny; false caps it at warn.
	DenyAtZero bool `yaml:"denyAtZero"`
	// MinCoverage sets a floor on the share of nodes covered, per namespace.
	MinCoverage []MinCoverageConfig `yaml:"minCoverage"`
}

// MinCoverageConfig is a coverage floor for DaemonSets in some namespaces:
// Percent of the nodes (not counting nodes of another OS or architecture)
// the DaemonSet must cover.
type MinCoverageConfig = NamespacePercent

// NamespacePercent is a percentage that applies to DaemonSets in some
// namespaces, with the action to take past it: a coverage floor, a cap on
// a rollout's nodes at once.
type NamespacePercent struct {
	// Namespaces are globs; the first entry that matches applies.
	Namespaces []string `yaml:"namespaces"`
	Percent    int      `yaml:"percent"`
	// Action past the percentage, at most the rule's action (default warn).
	Action policy.Action `yaml:"action"`
}

// firstFor returns the first entry of list whose namespaces match
// namespace, with its action defaulted to warn.
func firstFor(list []NamespacePercent, namespace string) (NamespacePercent, bool) {
	for _, m := range list {
		if policy.MatchAnyGlob(m.Namespaces, namespace) {
			if m.Action == "" {
				m.Action = policy.ActionWarn
			}
			return m, true
		}
	}
	return NamespacePercent{}, false
}

// validateNamespacePercents checks a list of them under fp.
func validateNamespacePercents(list []NamespacePercent, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, m := range list {
		mp := fp.Index(i)
		if len(m.Namespaces) == 0 {
			errs = append(errs, field.Required(mp.Child("namespaces"), "at least one namespace or glob"))
		}
		errs = append(errs, policy.ValidateGlobs(m.Namespaces, mp.Child("namespaces"))...)
		if m.Percent < 1 || m.Percent > 100 {
			errs = append(errs, field.Invalid(mp.Child("percent"), m.Percent, "must be between 1 and 100"))
		}
		if m.Action != "" && !m.Action.Valid() {
			errs = append(errs, field.NotSupported(mp.Child("action"), m.Action, policy.ActionNames()))
		}
	}
	return errs
}

func defaultNodeCoverageParams() NodeCoverageParams { return NodeCoverageParams{DenyAtZero: true} }

// Weaknesses implements policy.ParamWeakener: without denyAtZero, a
// DaemonSet whose tolerations let it run on no node at all is only warned.
func (p *NodeCoverageParams) Weaknesses() []string {
	if !p.DenyAtZero {
		return []string{"denyAtZero is false: a DaemonSet that can run on no node at all is admitted"}
	}
	return nil
}

// Validate implements policy.ParamValidator.
func (p *NodeCoverageParams) Validate(fp *field.Path) field.ErrorList {
	return validateNamespacePercents(p.MinCoverage, fp.Child("minCoverage"))
}

var nodeCoverageRule = policy.NewRule(policy.Rule{
	ID:    nodeCoverageID,
	Title: "The DaemonSet runs on every node it should",
	Why: "dsguard predicts, like the DaemonSet controller, which nodes a DaemonSet will run on and which it " +
		"will skip, and why. A node skipped because of an untolerated taint is invisible in the " +
		"DaemonSet's own status (desiredNumberScheduled leaves it out), so the gap shows only when someone " +
		"needs that node's logs or metrics. A DaemonSet whose selectors pick nodes that all carry such a " +
		"taint runs nowhere at all. Nodes skipped for their operating system or architecture, and for " +
		"lifecycle taints (which a node carries while it joins, bootstraps, waits for an agent, fails, is " +
		"disrupted or shuts down: not-ready, karpenter.sh/unregistered, node.cilium.io/agent-not-ready and the " +
		"others listed under Lifecycle taints), are expected and never reported. The coverage.dsguard.io/intended annotation declares a deliberate " +
		"placement: it turns the warning for skipped nodes into an audit record, but never lowers the deny for " +
		"a DaemonSet that runs on no node, and it obeys the policy's exemption gate (exemptions.allowedGroups " +
		"and allowedNamespaces) like an exemption.",
	Remediation: "Tolerate the taints of the nodes the DaemonSet must cover, or declare the gap with the " +
		"coverage.dsguard.io/intended annotation.",
	DefaultAction: policy.ActionDeny,
	NeedsNodes:    true,
	NotRendered:   "it needs the live node set; in vap+webhook mode the webhook enforces it, in vap mode nothing does",
	Exemptible:    true,
	Params: []policy.ParamDoc{
		{Name: "denyAtZero", Type: "boolean", Default: "true",
			Description: "Deny a DaemonSet that would run on no node because taints exclude every node its selectors pick; " +
				"false warns instead. Skipping only some nodes always warns at most, and a selector that matches no node " +
				"today (a pool scaled to zero) only warns."},
		{Name: "minCoverage", Type: "list of {namespaces, percent, action}", Default: "[]",
			Description: "Coverage floors: in matching namespaces (globs, first match wins), a DaemonSet must cover at " +
				"least percent of the nodes of its OS and architecture; action (default warn) applies below it."},
	},
}, defaultNodeCoverageParams, checkNodeCoverage)

// nodesNamed is how many node names a message lists before "and N more".
const nodesNamed = 5

func checkNodeCoverage(ds *appsv1.DaemonSet, env *policy.Env, p *NodeCoverageParams) []policy.Finding {
	cov := env.Coverage(ds)
	if cov == nil || cov.Total == 0 {
		return nil
	}
	tolerations := podSpecPath.Child("tolerations")
	// A partial gap caused by a taint that another rule already reports
	// (control-plane-toleration) is not reported twice; running on no node
	// at all always is.
	reported := env.ReportedTaints(ds)
	all := cov.Gaps()
	var gaps []coverage.Skip // those not reported elsewhere
	for _, s := range all {
		if !policy.MatchesAnyTaint(reported, s.Taint) {
			gaps = append(gaps, s)
		}
	}
	// Every node the selectors pick is eligible or skipped for a taint.
	selectorMatched := cov.Eligible + cov.Skipped(coverage.SkipTaint)
	reason, _, intended := env.IntendedCoverage(ds)
	var out []policy.Finding
	switch {
	case cov.Eligible == 0 && len(all) > 0:
		f := policy.Finding{
			Field: tolerations,
			Message: fmt.Sprintf("runs on no node: its selectors pick %s, and every one has an untolerated taint: %s",
				plural(selectorMatched, "node"), describeSkips(env, all)),
			Remediation: "tolerate the taints of the nodes this DaemonSet must run on.",
		}
		if !p.DenyAtZero {
			f.Action = policy.ActionWarn
		}
		out = append(out, f)
	case cov.Eligible == 0 && selectorMatched == 0:
		// A GPU pool scaled to zero is normal; say it, never block it.
		out = append(out, policy.Finding{
			Action:      policy.ActionWarn,
			Field:       podSpecPath,
			Message:     fmt.Sprintf("runs on no node today: no node of %d matches its nodeSelector, node affinity or nodeName", cov.Total),
			Remediation: "check the nodeSelector and node affinity against the labels of the nodes it should cover.",
		})
	case len(gaps) > 0 && intended:
		out = append(out, policy.Finding{
			Action:  policy.ActionAudit,
			Field:   tolerations,
			Message: fmt.Sprintf("skips %s, as intended (%s): %s", ofNodes(coverage.NodesIn(gaps), cov.Total), reason, describeSkips(env, gaps)),
		})
	case len(gaps) > 0:
		out = append(out, policy.Finding{
			Action:  policy.ActionWarn,
			Field:   tolerations,
			Message: fmt.Sprintf("skips %s: %s", ofNodes(coverage.NodesIn(gaps), cov.Total), describeSkips(env, gaps)),
			Remediation: "tolerate these taints, or annotate the DaemonSet with coverage.dsguard.io/intended " +
				"saying why it skips these nodes.",
		})
	}
	if f, ok := checkMinCoverage(ds, cov, p); ok {
		out = append(out, f)
	}
	return out
}

func checkMinCoverage(ds *appsv1.DaemonSet, cov *coverage.Coverage, p *NodeCoverageParams) (policy.Finding, bool) {
	namespace := policy.NamespaceOf(ds)
	m, ok := firstFor(p.MinCoverage, namespace)
	// Nodes of another OS or architecture are intended skips.
	relevant := cov.Total - cov.Skipped(coverage.SkipOSArch)
	if !ok || relevant == 0 || cov.Eligible*100 >= m.Percent*relevant {
		return policy.Finding{}, false
	}
	return policy.Finding{
		Action: m.Action,
		Field:  podSpecPath,
		Message: fmt.Sprintf("covers %d of %d nodes (%d%%), below the %d%% required in namespace %s",
			cov.Eligible, relevant, cov.Eligible*100/relevant, m.Percent, namespace),
		Remediation: "widen the nodeSelector or affinity and tolerate the taints of the nodes it must cover.",
	}, true
}

func ofNodes(n, total int) string {
	if total == 1 {
		return fmt.Sprintf("%d of 1 node", n)
	}
	return fmt.Sprintf("%d of %d nodes", n, total)
}

func describeSkips(env *policy.Env, skips []coverage.Skip) string {
	parts := make([]string, len(skips))
	for i, s := range skips {
		parts[i] = env.DescribeSkip(s, nodesNamed)
	}
	return strings.Join(parts, "; ")
}
