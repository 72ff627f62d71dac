package vap

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
)

// GateName names the policies that apply the exemption gate
// (exemptions.allowedGroups), in their names (dsguard-exemption-gate-deny,
// -warn) and in RuleLabel. It is no rule: the gate refuses a request by who
// makes it, whatever the rules and their actions.
const GateName = "exemption-gate"

// GateSuffixes are the endings of the gate's policy names after NamePrefix
// and GateName: deny outside the fail-open namespaces, warn in them.
var GateSuffixes = []string{"deny", "warn"}

// gateMessageKeys is how many written annotations the gate's message sorts
// and names; past it the message names the first and counts the rest
// (sorting in CEL costs the square of the list's length).
const gateMessageKeys = 32

// writtenVar holds the gated annotations the request adds or changes.
const writtenVar = "gatedAnnotationsWritten"

// renderGate renders the webhook's exemption gate
// (policy.Policy.RefuseAnnotationChanges): with exemptions.allowedGroups
// set, a CREATE or UPDATE that adds or changes an exempt.dsguard.io/* or
// coverage.dsguard.io/intended annotation, by a requester in none of those
// groups and not on the break-glass list, is refused; in the fail-open
// namespaces it is only warned about, as the webhook only warns there.
// Like the webhook's, it ignores enforcement, namespaceEnforcement, rule
// actions and ratcheting: an annotation stored under a softer setting
// would be trusted as unchanged once the setting is enforced. Removing an
// annotation is always allowed.
func renderGate(cfg *policy.Config, opts Options) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	groups := cfg.Exemptions.AllowedGroups
	if len(groups) == 0 {
		return nil, nil
	}
	conds := bypassCondition(cfg)
	conds = append(conds, admissionregistrationv1.MatchCondition{
		Name:       "requester-not-in-allowed-groups",
		Expression: fmt.Sprintf("!(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in %s))", celform.LitList(groups)),
	})
	const (
		intended = policy.IntendedCoverageAnnotation
		prefix   = policy.ExemptionAnnotationPrefix
	)
	// An annotation is written when the old object lacks it or holds
	// another value (policy's annotationWritten).
	written := fmt.Sprintf("has(object.metadata.annotations) ? object.metadata.annotations.filter(k, (k == %s || k.startsWith(%s)) && "+
		"(oldObject == null || !has(oldObject.metadata.annotations) || !(k in oldObject.metadata.annotations) || "+
		"oldObject.metadata.annotations[k] != object.metadata.annotations[k])) : []", celform.Lit(intended), celform.Lit(prefix))
	variables := []admissionregistrationv1.Variable{{Name: writtenVar, Expression: written}}

	// The webhook's message, sorted as it sorts the keys, on one line (a
	// message with a line break is refused by the API server). Keys are
	// sorted by rank (the number of keys before each), bound once (see
	// celform.ContainerCheck); past gateMessageKeys the first key and a count.
	allowed := strings.Join(groups, ", ")
	what := fmt.Sprintf("[variables.%s].map(w, size(w) == 1 ? 'annotation ' + w[0] : size(w) <= %d ? "+
		"'annotations ' + [w.map(k, size(w.filter(j, j < k)))].map(r, w.transformList(i, x, w[r.indexOf(i)]))[0].join(', ') : "+
		"'annotations ' + w.min() + ' and ' + string(size(w) - 1) + ' more')[0]", writtenVar, gateMessageKeys)
	user := "(has(request.userInfo.username) ? request.userInfo.username : '')"
	message := func(verb, note string) string {
		parts := []string{celform.Lit("dsguard " + verb + " the change to "), what,
			celform.Lit(": only members of " + allowed + " may add or change exemption and intended-coverage annotations (exemptions.allowedGroups), and "),
			user, celform.Lit(" is not one")}
		if note != "" {
			parts = append(parts, note)
		}
		parts = append(parts, celform.Lit("; fix: ask a member of "+allowed+" to apply it, or leave the annotation as it was; removing it is always allowed."))
		return strings.Join(parts, " + ")
	}
	// The static message stands in when the expression cannot be evaluated.
	validation := func(verb, messageExpression string) []admissionregistrationv1.Validation {
		forbidden := metav1.StatusReasonForbidden
		return []admissionregistrationv1.Validation{{
			Expression:        fmt.Sprintf("size(variables.%s) == 0", writtenVar),
			MessageExpression: messageExpression,
			Message: "dsguard " + verb + " the change to an exemption or intended-coverage annotation: only members of " + allowed +
				" may add or change them (exemptions.allowedGroups); fix: ask a member of " + allowed + " to apply it, or leave the annotation as it was; removing it is always allowed.",
			Reason: &forbidden,
		}}
	}
	annotations := map[string]string{NotExpressedAnnotation: strings.Join(notExpressed(GateName), "; ")}
	labels := map[string]string{ManagedByLabel: ManagedByValue, RuleLabel: GateName}
	spec := func(failure admissionregistrationv1.FailurePolicyType, nsSel *metav1.LabelSelector, verb, note string) admissionregistrationv1.ValidatingAdmissionPolicySpec {
		return admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    &failure,
			MatchConstraints: daemonSetWrites(nsSel, nil),
			MatchConditions:  slices.Clone(conds),
			Variables:        slices.Clone(variables),
			Validations:      validation(verb, message(verb, note)),
		}
	}

	never := excludedNamespaces(opts)
	var failOpen []string
	for _, ns := range opts.FailOpenNamespaces {
		if !slices.Contains(never, ns) && !slices.Contains(failOpen, ns) {
			failOpen = append(failOpen, ns)
		}
	}
	denySel := &metav1.LabelSelector{}
	addNamespaceReq(denySel, metav1.LabelSelectorOpNotIn, append(slices.Clone(never), failOpen...))
	p, b := generated(NamePrefix+GateName+"-deny", labels, annotations,
		spec(opts.FailurePolicy, denySel, "refuses", ""), admissionregistrationv1.Deny)
	policies := []admissionregistrationv1.ValidatingAdmissionPolicy{p}
	bindings := []admissionregistrationv1.ValidatingAdmissionPolicyBinding{b}
	if len(failOpen) > 0 {
		warnSel := &metav1.LabelSelector{}
		addNamespaceReq(warnSel, metav1.LabelSelectorOpIn, failOpen)
		p, b := generated(NamePrefix+GateName+"-warn", labels, annotations, spec(admissionregistrationv1.Ignore, warnSel,
			"would refuse", celform.Lit("; admitted: namespace ")+" + request.namespace + "+celform.Lit(" fails open, where dsguard only warns")),
			admissionregistrationv1.Warn)
		policies, bindings = append(policies, p), append(bindings, b)
	}
	return policies, bindings
}
