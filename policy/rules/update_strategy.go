package rules

import (
	"fmt"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
)

const updateStrategyID = "update-strategy"

var updateStrategyRule = policy.NewRule(policy.Rule{
	ID:    updateStrategyID,
	Title: "Rollouts finish on their own",
	Why: "With updateStrategy OnDelete a template change reaches a node only when someone deletes that " +
		"node's Pod. The rollout never finishes by itself: updatedNumberScheduled stays behind and nodes " +
		"run mixed versions indefinitely.",
	Remediation:   "Use updateStrategy type RollingUpdate with a small maxUnavailable.",
	DefaultAction: policy.ActionWarn,
	Exemptible:    true,
	CEL:           updateStrategyCEL,
	CELGaps:       celform.Gaps(),
}, nil, checkUpdateStrategy)

func checkUpdateStrategy(ds *appsv1.DaemonSet, _ *policy.Env, _ *policy.NoParams) []policy.Finding {
	if ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		return nil
	}
	return []policy.Finding{{
		Field:       updateStrategyPath.Child("type"),
		Message:     "updateStrategy OnDelete: a change reaches a node only when its Pod is deleted by hand",
		Remediation: "set spec.updateStrategy.type: RollingUpdate with maxUnavailable: 1.",
	}}
}

// updateStrategyCEL is the rule's CEL form.
func updateStrategyCEL(policy.CELInput) []policy.CELCheck {
	onDelete := func(o string) string {
		return fmt.Sprintf("(has(%[1]s.spec.updateStrategy) && has(%[1]s.spec.updateStrategy.type) && %[1]s.spec.updateStrategy.type == 'OnDelete')", o)
	}
	return []policy.CELCheck{celform.WholeObject(policy.ActionDeny, onDelete,
		celform.Lit("[update-strategy] spec.updateStrategy.type: updateStrategy OnDelete: a change reaches a node only when its Pod is deleted by hand; fix: set spec.updateStrategy.type: RollingUpdate with maxUnavailable: 1."))}
}
