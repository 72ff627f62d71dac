package rules

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/policy"
)

const placementSizeID = "placement-size"

var placementSizeRule = policy.NewRule(policy.Rule{
	ID:    placementSizeID,
	Title: "The placement is small enough to judge",
	Why: "dsguard predicts a DaemonSet's nodes by testing its required node affinity against every node (or " +
		"class of alike nodes) on every request, dry-runs included. An affinity of thousands of terms fits in " +
		"the API server's size limits and would cost seconds of CPU per request, past the webhook's timeout, " +
		"and would slow everyone else's requests down. So the placement is bounded: at most " +
		fmt.Sprint(policy.MaxAffinityTerms) + " node selector terms and " + fmt.Sprint(policy.MaxAffinityValues) +
		" values, and with live nodes at most " + fmt.Sprint(policy.MaxPredictionWork) + " requirement checks " +
		"(requirements × nodes, or classes of alike nodes, examined). Beyond that dsguard predicts nothing " +
		"and this rule denies at once; control-plane-toleration then treats the placement as aiming at every " +
		"node, so size is never a way around it.",
	Remediation:   "Select nodes with a few labels (a node pool or role label) instead of listing them one by one.",
	DefaultAction: policy.ActionDeny,
	Exemptible:    false,
}, nil, checkPlacementSize)

var nodeAffinityPath = podSpecPath.Child("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")

func checkPlacementSize(ds *appsv1.DaemonSet, env *policy.Env, _ *policy.NoParams) []policy.Finding {
	why := env.PlacementTooLarge(ds)
	if why == "" {
		return nil
	}
	return []policy.Finding{{Field: nodeAffinityPath, Message: why}}
}
