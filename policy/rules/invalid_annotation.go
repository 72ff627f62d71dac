package rules

import (
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
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
	CEL:           invalidAnnotationCEL,
	CELGaps: []string{
		"one message per request names the first bad annotation and lists the possible causes rather than the one that applies",
		celform.ExpiryGap,
		"an exemption value longer than 4,096 characters is reported as invalid (regular expressions cost in proportion to the string)",
		"exemptions.allowedGroups is applied by the exemption-gate policies, not here: an exemption or intended coverage that someone outside those groups adds or changes is refused by them (in the fail-open namespaces, warned about), not reported as invalid",
	},
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

// invalidAnnotationCEL is the rule's CEL form.
func invalidAnnotationCEL(in policy.CELInput) []policy.CELCheck {
	cfg, today := in.Config, in.Today
	var exemptible, denyRules []string
	for _, r := range in.Catalogue {
		if r.Exemptible && celform.ExemptionsAllowed(cfg, r.ID) {
			exemptible = append(exemptible, r.ID)
		}
		if celform.RuleAction(cfg, r.ID) == policy.ActionDeny {
			denyRules = append(denyRules, r.ID)
		}
	}
	todayTime, _ := time.Parse(time.DateOnly, today)
	const prefix = policy.ExemptionAnnotationPrefix
	annotations := func(o string) string { return o + ".metadata.annotations" }
	bad := func(o, k string) string {
		a := annotations(o)
		return fmt.Sprintf("(%[2]s == %[3]s ? !%[1]s[%[2]s].matches('\\\\S') : "+
			"%[2]s.startsWith(%[4]s) && !(%[2]s.substring(%[5]d) in %[6]s && %[7]s))",
			a, k, celform.Lit(policy.IntendedCoverageAnnotation), celform.Lit(prefix), len(prefix), celform.LitList(exemptible),
			celform.ExemptionValid(a+"["+k+"]", today, celform.GateOf(cfg, todayTime, fmt.Sprintf("%s.substring(%d) in %s", k, len(prefix), celform.LitList(denyRules)))))
	}
	violated := func(o string) string {
		return fmt.Sprintf("(has(%[1]s) && %[1]s.exists(k, %[2]s))", annotations(o), bad(o, "k"))
	}
	introduced := fmt.Sprintf("(has(object.metadata.annotations) && object.metadata.annotations.exists(k, %s && "+
		"!(has(oldObject.metadata.annotations) && k in oldObject.metadata.annotations && %s)))", bad("object", "k"), bad("oldObject", "k"))
	// The first bad key, bound once (see celform.ContainerCheck).
	msg := fmt.Sprintf("[object.metadata.annotations.filter(k, %s)[0]].map(k, ", bad("object", "k")) + fmt.Sprintf("'[invalid-annotation] metadata.annotations[' + %[1]s + ']: ' + (%[1]s == %[2]s ? 'intended-coverage annotation has no reason, so it is ignored' : "+
		"'exemption is ignored: its rule is unknown, cannot be exempted or the policy forbids it, its reason is empty, its expiry is not a date YYYY-MM-DD, or it expired before %[3]s') + "+
		"'; fix: give the annotation a reason (\"<why>; expires=YYYY-MM-DD\"), renew or remove an expired exemption, and check the rule ID after exempt.dsguard.io/.')[0]",
		"k", celform.Lit(policy.IntendedCoverageAnnotation), today)
	return []policy.CELCheck{{Cap: policy.ActionDeny, Violated: violated, Introduced: introduced, Message: msg}}
}
