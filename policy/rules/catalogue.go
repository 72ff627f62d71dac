package rules

import "github.com/dsguard/dsguard/policy"

// builtin is dsguard's catalogue. It is built explicitly, not by init() side
// effects, so that reading this list tells the whole story; its order is the
// order of the docs and of `dsguard rules`.
var builtin = mustRegistry(
	controlPlaneTolerationRule,
	surgeHostPortRule,
	maxUnavailableRule,
	readinessProbeRule,
	hostPathReadOnlyRule,
	privilegedRule,
	imagePinnedRule,
	updateStrategyRule,
	rolloutImpactRule,
	nodeChangeRule,
	nodeCoverageRule,
	resourceFitRule,
	priorityClassRule,
	hostPortConflictRule,
	antiAffinityConflictRule,
	placementSizeRule,
	invalidAnnotationRule,
)

func mustRegistry(rules ...*policy.Rule) *policy.Registry {
	reg, err := policy.NewRegistry(rules...)
	if err != nil {
		panic(err)
	}
	return reg
}

// Builtin returns dsguard's rule catalogue: parse policies, build the
// default policy and render the docs with it.
func Builtin() *policy.Registry { return builtin }
