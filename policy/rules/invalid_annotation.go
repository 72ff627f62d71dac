package rules

import (
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
		"apply, and the findings it was meant to cover stand. An exemption from a rule whose action is deny " +
		"must end: without \"; expires=YYYY-MM-DD\", or with an expiry more than exemptions.maxExemptionDays " +
		"(default 90) away, it is void. When the policy names exemptions.allowedNamespaces, exemptions and " +
		"intended-coverage annotations elsewhere are void; when it names exemptions.allowedGroups, admission " +
		"refuses a request that adds or changes one unless the requesting user is in one of those groups, " +
		"whatever the exempted rule's action (so one an update leaves unchanged was written by a permitted " +
		"person); in the fail-open namespaces it is only void, with a warning. Reasons are shown as one line, " +
		"without control characters or escape sequences, and cut after 256 characters. dsguard check and the " +
		"audit do not know who applies a manifest, so they apply the namespace gate only and say so.",
	Remediation: "Give the annotation a reason and, for a deny rule, an expiry within the policy's limit " +
		"(\"<why>; expires=YYYY-MM-DD\"), renew or remove an expired exemption, check the rule ID after " +
		"exempt.dsguard.io/, and have someone the policy allows add or change it (anyone may remove it).",
	DefaultAction: policy.ActionWarn,
	Exemptible:    false,
}, nil, checkInvalidAnnotation)

func checkInvalidAnnotation(ds *appsv1.DaemonSet, env *policy.Env, _ *policy.NoParams) []policy.Finding {
	var out []policy.Finding
	for key := range ds.Annotations {
		var problem string
		if key == policy.IntendedCoverageAnnotation {
			_, problem, _ = env.IntendedCoverage(ds)
		} else if ruleID, ok := strings.CutPrefix(key, policy.ExemptionAnnotationPrefix); ok {
			_, problem, _ = env.Exemption(ds, ruleID)
		}
		if problem != "" {
			out = append(out, policy.Finding{Field: annotationsPath.Key(key), Message: problem})
		}
	}
	// Map iteration order is random; findings must not be.
	sort.Slice(out, func(i, j int) bool { return out[i].FieldString() < out[j].FieldString() })
	return out
}
