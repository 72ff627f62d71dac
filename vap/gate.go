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
// (policy.Policy.RefuseAnnotationChanges): with exemptions.grantedByRBAC
// or exemptions.allowedGroups, a CREATE or UPDATE that adds or changes an
// exempt.dsguard.io/* or coverage.dsguard.io/intended annotation, by a
// requester in none of those groups, not allowed by the authorizer to
// grant exemptions and not on the break-glass list, is refused, and so is
// such a write through daemonsets/status by anyone; in the fail-open
// namespaces it is only warned about, as the webhook only warns there.
// Like the webhook's, it ignores enforcement, namespaceEnforcement, rule
// actions and ratcheting: an annotation stored under a softer setting
// would be trusted as unchanged once the setting is enforced. Removing an
// annotation is always allowed.
func renderGate(cfg *policy.Config, opts Options) ([]admissionregistrationv1.ValidatingAdmissionPolicy, []admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	groups := cfg.Exemptions.AllowedGroups
	rbac := cfg.Exemptions.GrantedByRBAC == nil || *cfg.Exemptions.GrantedByRBAC
	if !rbac && len(groups) == 0 {
		return nil, nil
	}
	const status = "(has(request.subResource) && request.subResource == 'status')"
	// Who may grant: a member of the groups or, with grantedByRBAC, whoever
	// the authorizer allows (policy.Policy.mayGrant); through
	// daemonsets/status nobody. Asked in the validation, after the
	// annotations written, so that the authorizer is asked only of a
	// request that writes one, as the webhook asks it.
	var may []string
	if len(groups) > 0 {
		may = append(may, fmt.Sprintf("(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in %s))", celform.LitList(groups)))
	}
	if rbac {
		may = append(may, fmt.Sprintf("authorizer.group(%s).resource(%s).namespace(%s).name(request.namespace).check(%s).allowed()",
			celform.Lit(policy.GrantGroup), celform.Lit(policy.GrantResource), celform.Lit(opts.Namespace), celform.Lit(policy.GrantVerb)))
	}
	conds := bypassCondition(cfg)
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

	// The webhook's messages, sorted as it sorts the keys, on one line (a
	// message with a line break is refused by the API server). Keys are
	// sorted by rank (the number of keys before each), bound once (see
	// celform.ContainerCheck); past gateMessageKeys the first key and a count.
	what := fmt.Sprintf("[variables.%s].map(w, size(w) == 1 ? 'annotation ' + w[0] : size(w) <= %d ? "+
		"'annotations ' + [w.map(k, size(w.filter(j, j < k)))].map(r, w.transformList(i, x, w[r.indexOf(i)]))[0].join(', ') : "+
		"'annotations ' + w.min() + ' and ' + string(size(w) - 1) + ' more')[0]", writtenVar, gateMessageKeys)
	user := "(has(request.userInfo.username) ? request.userInfo.username : '')"
	who, fields, ask := celform.Lit("only members of "+strings.Join(groups, ", ")), "exemptions.allowedGroups", "a member of "+strings.Join(groups, ", ")
	whoStatic := "only members of " + strings.Join(groups, ", ")
	ofThem := ""
	if rbac {
		// policy.GrantorsPhrase, with the request's namespace in it.
		const marker = "\x00"
		parts := strings.SplitN(policy.GrantorsPhrase(opts.Namespace, marker, opts.GranterRole), fmt.Sprintf("%q", marker), 2)
		who = celform.Lit("only "+parts[0]+`"`) + " + request.namespace + " + celform.Lit(`"`+parts[1])
		whoStatic = "only those RBAC allows"
		fields, ask, ofThem = "exemptions.grantedByRBAC", "one of them", " of them"
		if len(groups) > 0 {
			who += " + " + celform.Lit(" and members of "+strings.Join(groups, ", "))
			fields += ", exemptions.allowedGroups"
		}
	}
	message := func(verb, note string) string {
		parts := []string{celform.Lit("dsguard " + verb + " the change to "), what, celform.Lit(": "), who,
			celform.Lit(" may add or change exemption and intended-coverage annotations (" + fields + "), and "),
			user, celform.Lit(" is not one" + ofThem)}
		if note != "" {
			parts = append(parts, note)
		}
		parts = append(parts, celform.Lit("; fix: ask "+ask+" to apply it, or leave the annotation as it was; removing it is always allowed."))
		return strings.Join(parts, " + ")
	}
	// webhook.DaemonSetHandler's refusal of a write through daemonsets/status.
	statusMessage := func(verb, note string) string {
		parts := []string{celform.Lit("dsguard " + verb + " the change to "), what,
			celform.Lit(" through the status subresource: exemption and intended-coverage annotations are written by an update of " +
				"the DaemonSet itself, where dsguard checks who may grant them; daemonsets/status is for the DaemonSet controller's counters")}
		if note != "" {
			parts = append(parts, note)
		}
		parts = append(parts, celform.Lit("; fix: have someone who may grant exemptions run kubectl annotate daemonset "), "object.metadata.name",
			celform.Lit(" ... (no --subresource), or leave the annotation as it was; removing it is always allowed."))
		return strings.Join(parts, " + ")
	}
	// The static message stands in when the expression cannot be evaluated.
	validation := func(verb, note string) []admissionregistrationv1.Validation {
		forbidden := metav1.StatusReasonForbidden
		return []admissionregistrationv1.Validation{{
			Expression:        fmt.Sprintf("size(variables.%s) == 0 || !%s && (%s)", writtenVar, status, strings.Join(may, " || ")),
			MessageExpression: status + " ? " + statusMessage(verb, note) + " : " + message(verb, note),
			Message: "dsguard " + verb + " the change to an exemption or intended-coverage annotation: " + whoStatic +
				" may add or change them (" + fields + "), never through daemonsets/status; fix: ask " + ask +
				" to apply it, or leave the annotation as it was; removing it is always allowed.",
			Reason: &forbidden,
		}}
	}
	annotations := map[string]string{NotExpressedAnnotation: strings.Join(notExpressed(GateName), "; ")}
	labels := map[string]string{ManagedByLabel: ManagedByValue, RuleLabel: GateName}
	spec := func(failure admissionregistrationv1.FailurePolicyType, nsSel *metav1.LabelSelector, verb, note string) admissionregistrationv1.ValidatingAdmissionPolicySpec {
		match := daemonSetWrites(nsSel, nil)
		rule := &match.ResourceRules[0].Rule
		rule.Resources = append(rule.Resources, "daemonsets/status")
		return admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    &failure,
			MatchConstraints: match,
			MatchConditions:  slices.Clone(conds),
			Variables:        slices.Clone(variables),
			Validations:      validation(verb, note),
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
