package rules

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
)

const maxUnavailableID = "max-unavailable"

// MaxUnavailableParams are the max-unavailable parameters.
type MaxUnavailableParams struct {
	// MaxPercent caps a percentage maxUnavailable.
	MaxPercent int `yaml:"maxPercent"`
	// MaxCount caps an absolute maxUnavailable; 0 means no absolute cap.
	MaxCount int `yaml:"maxCount"`
}

func defaultMaxUnavailableParams() MaxUnavailableParams {
	return MaxUnavailableParams{MaxPercent: 25}
}

// Loosened implements policy.ParamLoosener: a higher cap lets a rollout
// take more nodes' agent away at once.
func (p *MaxUnavailableParams) Loosened(old any) []string {
	o, ok := old.(*MaxUnavailableParams)
	if !ok {
		return nil
	}
	var out []string
	if p.MaxPercent > o.MaxPercent {
		out = append(out, fmt.Sprintf("maxPercent %d → %d: a rollout may leave more nodes without the agent at once", o.MaxPercent, p.MaxPercent))
	}
	if o.MaxCount > 0 && (p.MaxCount == 0 || p.MaxCount > o.MaxCount) {
		out = append(out, fmt.Sprintf("maxCount %d → %s: a rollout may leave more nodes without the agent at once", o.MaxCount, countCap(p.MaxCount)))
	}
	return out
}

// countCap is maxCount as a person reads it.
func countCap(n int) string {
	if n == 0 {
		return "0 (no cap)"
	}
	return strconv.Itoa(n)
}

// Validate implements policy.ParamValidator.
func (p *MaxUnavailableParams) Validate(fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p.MaxPercent < 0 || p.MaxPercent > 100 {
		errs = append(errs, field.Invalid(fp.Child("maxPercent"), p.MaxPercent, "must be between 0 and 100"))
	}
	if p.MaxCount < 0 {
		errs = append(errs, field.Invalid(fp.Child("maxCount"), p.MaxCount, "must be 0 (no cap) or more"))
	}
	return errs
}

var maxUnavailableRule = policy.NewRule(policy.Rule{
	ID:    maxUnavailableID,
	Title: "Rolling updates take down only a small share of nodes at once",
	Why: "maxUnavailable is how many nodes may run without the agent while a rollout is under way. " +
		"50% means half the fleet is blind at once: no logs, no metrics, no network policy, for as long " +
		"as the new Pods take to become ready. Unset, it defaults to 1.",
	Remediation:   "Lower spec.updateStrategy.rollingUpdate.maxUnavailable to the cap (for example 1 or \"10%\").",
	DefaultAction: policy.ActionWarn,
	Exemptible:    true,
	Params: []policy.ParamDoc{
		{Name: "maxPercent", Type: "integer 0-100", Default: "25",
			Description: "Largest percentage allowed for a percentage maxUnavailable."},
		{Name: "maxCount", Type: "integer", Default: "0 (no cap)",
			Description: "Largest absolute maxUnavailable allowed."},
	},
	CEL:     maxUnavailableCEL,
	CELGaps: celform.Gaps("the message gives the percentage only, not how many of the live nodes go blind"),
}, defaultMaxUnavailableParams, checkMaxUnavailable)

func checkMaxUnavailable(ds *appsv1.DaemonSet, env *policy.Env, p *MaxUnavailableParams) []policy.Finding {
	if !isRollingUpdate(ds) {
		return nil
	}
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil {
		// The API server defaults maxUnavailable to 1, which no cap
		// (0 = none, else at least 1) rejects.
		return nil
	}
	n, isPercent, err := parseIntOrPercent(ru.MaxUnavailable)
	if err != nil {
		return []policy.Finding{{
			Field:       rollingUpdatePath.Child("maxUnavailable"),
			Message:     fmt.Sprintf("maxUnavailable %s %v", quoteIntOrString(ru.MaxUnavailable), err),
			Remediation: "set maxUnavailable to a positive integer such as 1 or a percentage such as \"10%\".",
		}}
	}
	if isPercent {
		if n <= p.MaxPercent {
			return nil
		}
		msg := fmt.Sprintf("maxUnavailable %d%% is above the %d%% cap: a rollout may blind %d%% of the nodes at once",
			n, p.MaxPercent, n)
		if cov := env.Coverage(ds); cov != nil && cov.Eligible > 0 {
			// The controller scales a percentage of desiredNumberScheduled,
			// rounding up, with this very function; the value parsed above.
			blind, _ := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, cov.Eligible, true)
			msg = fmt.Sprintf("maxUnavailable %d%% is above the %d%% cap: %d%% of %s = %s without this agent at once",
				n, p.MaxPercent, n, plural(cov.Eligible, "node"), plural(blind, "node"))
		}
		return []policy.Finding{{
			Field:       rollingUpdatePath.Child("maxUnavailable"),
			Message:     msg,
			Remediation: fmt.Sprintf("set maxUnavailable to at most \"%d%%\" or to a small number such as 1.", p.MaxPercent),
		}}
	}
	if p.MaxCount == 0 || n <= p.MaxCount {
		return nil
	}
	return []policy.Finding{{
		Field: rollingUpdatePath.Child("maxUnavailable"),
		Message: fmt.Sprintf("maxUnavailable %d is above the cap of %d: a rollout may blind %d nodes at once",
			n, p.MaxCount, n),
		Remediation: fmt.Sprintf("set maxUnavailable to at most %d.", p.MaxCount),
	}}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// maxUnavailableCEL is the rule's CEL form.
func maxUnavailableCEL(in policy.CELInput) []policy.CELCheck {
	p := celform.Params[MaxUnavailableParams](in.Config, maxUnavailableID)
	var out []policy.CELCheck
	v := func(o string) string { return o + ".spec.updateStrategy.rollingUpdate.maxUnavailable" }
	percent := func(o string) string {
		present, _, _ := celform.RollingValue(o, "maxUnavailable")
		return fmt.Sprintf("(%s && type(%s) == string && int(string(%s).replace('%%', '')) > %d)", present, v(o), v(o), p.MaxPercent)
	}
	out = append(out, celform.WholeObject(policy.ActionDeny, percent, fmt.Sprintf(
		"'[max-unavailable] spec.updateStrategy.rollingUpdate.maxUnavailable: maxUnavailable ' + string(%[1]s) + ' is above the %[2]d%% cap: a rollout may blind ' + string(%[1]s) + ' of the nodes at once; "+
			"fix: set maxUnavailable to at most \"%[2]d%%\" or to a small number such as 1.'", v("object"), p.MaxPercent)))
	if p.MaxCount > 0 {
		count := func(o string) string {
			present, _, _ := celform.RollingValue(o, "maxUnavailable")
			return fmt.Sprintf("(%s && type(%s) == int && %s > %d)", present, v(o), v(o), p.MaxCount)
		}
		out = append(out, celform.WholeObject(policy.ActionDeny, count, fmt.Sprintf(
			"'[max-unavailable] spec.updateStrategy.rollingUpdate.maxUnavailable: maxUnavailable ' + string(%[1]s) + ' is above the cap of %[2]d: a rollout may blind ' + string(%[1]s) + ' nodes at once; "+
				"fix: set maxUnavailable to at most %[2]d.'", v("object"), p.MaxCount)))
	}
	// Both findings sit at the same field: ratchet them as one.
	if len(out) == 2 {
		a, b := out[0], out[1]
		both := func(o string) string { return fmt.Sprintf("(%s || %s)", a.Violated(o), b.Violated(o)) }
		merged := celform.WholeObject(policy.ActionDeny, both, fmt.Sprintf("(%s ? %s : %s)", a.Violated("object"), a.Message, b.Message))
		out = []policy.CELCheck{merged}
	}
	return out
}
