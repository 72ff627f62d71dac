package rules

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/policy"
)

const resourceFitID = "resource-fit"

var resourceFitRule = policy.NewRule(policy.Rule{
	ID:    resourceFitID,
	Title: "The agent's Pod lands on the nodes it covers",
	Why: "The DaemonSet controller makes a Pod for every node the DaemonSet covers and pins it there; " +
		"kube-scheduler then admits it only if it fits: the node's pods limit, its free cpu, memory, " +
		"ephemeral-storage and extended resources, free host ports, and no required anti-affinity " +
		"against the Pods already there. A Pod that does not fit stays Pending on that node for as long " +
		"as the node is full, and desiredNumberScheduled still counts it, so the gap looks like a slow " +
		"rollout. dsguard follows kube-scheduler v1.37.2's filters and its preemption on that one node: " +
		"a Pod of higher priority evicts lower-priority Pods to make room (unless its preemptionPolicy " +
		"is Never), so it lands. On an update the DaemonSet's own old Pod is counted as gone. Not " +
		"predicted: PodDisruptionBudgets that protect victims, volume limits, dynamic resource " +
		"allocation and topology spread.",
	Remediation: "Lower the Pod's requests, give it a PriorityClass above the workloads it must displace, " +
		"or move the host port or anti-affinity that collides.",
	DefaultAction: policy.ActionDeny,
	NeedsNodes:    true,
	NeedsFit:      true,
	NotRendered:   "it needs the nodes' allocatable and the Pods bound to them: the webhook judges it by its fit view (fit.enabled), dsguard check by --nodes with a cluster dump; in vap mode nothing does",
	Exemptible:    true,
}, nil, checkResourceFit)

// fitGroupsNamed is how many groups of nodes a message describes.
const fitGroupsNamed = 3

func checkResourceFit(ds *appsv1.DaemonSet, env *policy.Env, _ *policy.NoParams) []policy.Finding {
	r := env.FitReport(ds)
	if r == nil {
		return nil
	}
	if r.Error != "" {
		return []policy.Finding{{
			Field:       podSpecPath.Child("priorityClassName"),
			Message:     "no Pod of it can be created: " + r.Error,
			Remediation: "name a PriorityClass the cluster has (kubectl get priorityclasses), or create it first.",
		}}
	}
	covered := r.Covered()
	landing := r.Lands()
	if covered == 0 || landing == covered {
		return nil
	}
	var groups []fit.Summary
	for _, s := range r.Summarize() {
		if s.Kind == fit.DoesNotFit || s.Kind == fit.NeverFits {
			groups = append(groups, s)
		}
	}
	f := policy.Finding{Field: podSpecPath, Details: fitDetails(env, groups)}
	describe := describeFitGroups(env, groups)
	switch {
	case landing == 0 && covered == 1:
		f.Message = "cannot land on the one node it covers: " + describe
	case landing == 0:
		f.Message = fmt.Sprintf("lands on none of the %d nodes it covers: %s", covered, describe)
	default:
		f.Action = policy.ActionWarn
		f.Message = fmt.Sprintf("stays Pending on %s it covers: %s", ofNodes(covered-landing, covered), describe)
	}
	return []policy.Finding{f}
}

// describeFitGroups says why, group by group: "does not fit on 14 nodes
// (infra-1, ... and 9 more): memory 97% requested (memory: asks 2Gi, at most 1536Mi
// free)".
func describeFitGroups(env *policy.Env, groups []fit.Summary) string {
	var parts []string
	for i, g := range groups {
		if i == fitGroupsNamed {
			parts = append(parts, fmt.Sprintf("and %d more reasons", len(groups)-i))
			break
		}
		verb := "does not fit on"
		if g.Kind == fit.NeverFits {
			verb = "never fits on"
		}
		parts = append(parts, fmt.Sprintf("%s %s%s: %s", verb, plural(len(g.Nodes), "node"), namedNodes(env, g.Nodes), g.Why))
	}
	return strings.Join(parts, "; ")
}

// fitDetails is one line per group, with every node named, when the
// message had to cut a list short (and names may be shown): the terminal
// and the JSON output carry them.
func fitDetails(env *policy.Env, groups []fit.Summary) []string {
	if env.HideNodeNames || !slices.ContainsFunc(groups, func(g fit.Summary) bool { return len(g.Nodes) > nodesNamed }) && len(groups) <= fitGroupsNamed {
		return nil
	}
	out := make([]string, len(groups))
	for i, g := range groups {
		out[i] = fmt.Sprintf("%s on %s: %s", g.Kind, strings.Join(g.Nodes, ", "), g.Why)
	}
	return out
}

// namedNodes is " (infra-1, infra-2 and 12 more)", or nothing when node
// names are hidden.
func namedNodes(env *policy.Env, names []string) string {
	if env.HideNodeNames || len(names) == 0 {
		return ""
	}
	if len(names) > nodesNamed {
		return fmt.Sprintf(" (%s and %d more)", strings.Join(names[:nodesNamed], ", "), len(names)-nodesNamed)
	}
	return " (" + strings.Join(names, ", ") + ")"
}
