package rules

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/policy"
)

const priorityClassID = "priority-class"

// systemNodeCritical is the built-in class of the highest priority.
const systemNodeCritical = 2000001000

// PriorityClassParams are the priority-class parameters.
type PriorityClassParams struct {
	// MinValue is the least priority a node agent's Pods must have; unset,
	// it is the highest priority of the cluster's Pods that no DaemonSet
	// controls (system classes left out).
	MinValue *int `yaml:"minValue"`
}

// Validate implements policy.ParamValidator.
func (p *PriorityClassParams) Validate(fp *field.Path) field.ErrorList {
	if p.MinValue != nil && (*p.MinValue < 0 || *p.MinValue > systemNodeCritical) {
		return field.ErrorList{field.Invalid(fp.Child("minValue"), *p.MinValue,
			fmt.Sprintf("must be between 0 and %d (system-node-critical)", systemNodeCritical))}
	}
	return nil
}

var priorityClassRule = policy.NewRule(policy.Rule{
	ID:    priorityClassID,
	Title: "The agent's priority lets it preempt the workloads it shares nodes with",
	Why: "A node agent's Pod arrives on nodes that are already full of other work. The scheduler makes room " +
		"only by preempting Pods of lower priority; a DaemonSet without a priorityClassName gets the global " +
		"default (0 without one), so on a full node it stays Pending while the workloads that filled it run on, " +
		"and nothing in the DaemonSet's status says why. The floor is the policy's minValue, or else the " +
		"highest priority of the cluster's Pods that no DaemonSet controls, plus one (the scheduler preempts only " +
		"lower priorities; the built-in system classes, which only control-plane Pods should use, left out).",
	Remediation: "Give the DaemonSet a priorityClassName at or above the floor: system-node-critical for an agent " +
		"the node cannot work without (CNI, CSI node plugins, kube-proxy), or a PriorityClass of your own above " +
		"your workloads'.",
	DefaultAction: policy.ActionWarn,
	NeedsNodes:    true,
	NeedsFit:      true,
	NotRendered:   "it needs the nodes' allocatable and the Pods bound to them: the webhook judges it by its fit view (fit.enabled), dsguard check by --nodes with a cluster dump; in vap mode nothing does",
	Exemptible:    true,
	Params: []policy.ParamDoc{
		{Name: "minValue", Type: "integer", Default: "unset",
			Description: "The least priority value a node agent's Pods must have (0 to 2000001000); unset, one above the " +
				"highest priority of the cluster's Pods that no DaemonSet controls, system classes left out. Scope the rule " +
				"(scope.namespaces, scope.selector) to the agents that must preempt."},
	},
}, nil, checkPriorityClass)

func checkPriorityClass(ds *appsv1.DaemonSet, env *policy.Env, p *PriorityClassParams) []policy.Finding {
	r := env.FitReport(ds)
	if r == nil || r.Error != "" {
		return nil // resource-fit reports a class that does not exist
	}
	// The scheduler preempts only Pods of strictly lower priority: the
	// derived floor is one above the workloads'.
	var floor int32
	var below string
	what := fmt.Sprintf("no priorityClassName: its Pods get priority %d", r.Priority)
	if name := ds.Spec.Template.Spec.PriorityClassName; name != "" {
		what = fmt.Sprintf("priorityClassName %q gives its Pods priority %d", name, r.Priority)
	}
	if p != nil && p.MinValue != nil {
		floor = int32(*p.MinValue)
		below = fmt.Sprintf("%s, below the policy's minValue %d", what, floor)
	} else {
		value, pod, ok := env.Fit.WorkloadPriority()
		if !ok {
			return nil
		}
		floor = value + 1
		if env.HideNodeNames {
			pod = "a Pod"
		}
		below = fmt.Sprintf("%s, not above %d, the priority of %s (the most important Pod no DaemonSet controls)", what, value, pod)
	}
	if r.Priority >= floor {
		return nil
	}
	// The figure to reach comes before the why: a warning line is cut
	// at 256 characters.
	return []policy.Finding{{
		Field: podSpecPath.Child("priorityClassName"),
		Message: fmt.Sprintf("%s: it needs %d or more to preempt such Pods (the scheduler preempts only lower "+
			"priorities), else it stays Pending where they fill a node", below, floor),
		Remediation: fmt.Sprintf("set priorityClassName to system-node-critical if the node cannot work without this agent, "+
			"or to a PriorityClass of value %d or more.", floor),
	}}
}
