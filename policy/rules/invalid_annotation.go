package rules

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/policy"
)

const invalidAnnotationID = "invalid-annotation"

var annotationsPath = field.NewPath("metadata", "annotations")

var invalidAnnotationRule = policy.NewRule(policy.Rule{
	ID:    invalidAnnotationID,
	Title: "dsguard annotations are well-formed",
	Why: "An exemption or intended-coverage annotation must say why, so the next person knows the gap " +
		"is deliberate. An exemption that is empty, expired, misspelt or forbidden by the policy does not " +
		"apply, and the findings it was meant to cover stand.",
	Remediation: "Give the annotation a reason (\"<why>; expires=YYYY-MM-DD\"), renew or remove an expired " +
		"exemption, and check the rule ID after exempt.dsguard.io/.",
	DefaultAction: policy.ActionWarn,
	Exemptible:    false,
}, nil, checkInvalidAnnotation)

func checkInvalidAnnotation(ds *appsv1.DaemonSet, env *policy.Env, _ *policy.NoParams) []policy.Finding {
	var out []policy.Finding
	for key, value := range ds.Annotations {
		if key == policy.IntendedCoverageAnnotation {
			if _, ok := policy.IntendedCoverage(ds.Annotations); !ok {
				out = append(out, policy.Finding{
					Field:   annotationsPath.Key(key),
					Message: "intended-coverage annotation has no reason, so it is ignored",
				})
			}
			continue
		}
		ruleID, ok := strings.CutPrefix(key, policy.ExemptionAnnotationPrefix)
		if !ok {
			continue
		}
		if problem := exemptionProblem(ruleID, value, env); problem != "" {
			out = append(out, policy.Finding{Field: annotationsPath.Key(key), Message: problem})
		}
	}
	// Map iteration order is random; findings must not be.
	sort.Slice(out, func(i, j int) bool { return out[i].FieldString() < out[j].FieldString() })
	return out
}

func exemptionProblem(ruleID, value string, env *policy.Env) string {
	rule, known := env.Policy.Rule(ruleID)
	switch {
	case !known:
		return fmt.Sprintf("exemption names unknown rule %q, so it exempts nothing", ruleID)
	case !rule.Exemptible:
		return fmt.Sprintf("rule %s cannot be exempted", ruleID)
	case !env.Policy.AllowsExemptions(ruleID):
		return fmt.Sprintf("the policy forbids exemptions from %s, so this one is ignored", ruleID)
	}
	e, err := policy.ParseExemption(value)
	if err != nil {
		return fmt.Sprintf("exemption from %s is ignored: %v", ruleID, err)
	}
	if e.Expired(env.Now) {
		return fmt.Sprintf("exemption from %s expired on %s and no longer applies", ruleID,
			e.Expires.AddDate(0, 0, -1).Format("2006-01-02"))
	}
	return ""
}
