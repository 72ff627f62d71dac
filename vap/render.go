package vap

import (
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
	"github.com/dsguard/dsguard/policy/rules"
)

// Labels and annotations on every generated object.
const (
	// ManagedByLabel marks the objects dsguard generates, so that a sync can
	// find and delete the ones a new policy no longer needs.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is ManagedByLabel's value.
	ManagedByValue = "dsguard"
	// RuleLabel names the rule a policy enforces.
	RuleLabel = "dsguard.io/rule"
	// NotExpressedAnnotation lists what the policy cannot check that the
	// webhook does.
	NotExpressedAnnotation = "dsguard.io/not-expressed"
	// NamePrefix starts every generated object's name.
	NamePrefix = "dsguard-"
)

// Options are the parts of the installation that the policy document does
// not hold.
type Options struct {
	// Namespace is dsguard's own namespace; its DaemonSets are never judged,
	// as by the webhook.
	Namespace string
	// ExcludedNamespaces are never judged either (the chart's
	// webhook.excludedNamespaces).
	ExcludedNamespaces []string
	// Today is the day exemption expiries are judged against (CEL has no
	// clock); zero means the current UTC day.
	Today time.Time
	// FailurePolicy applies to the deny policies when a CEL expression
	// cannot be evaluated; warn and audit policies always ignore errors.
	// Empty means Fail, the webhook's default.
	FailurePolicy admissionregistrationv1.FailurePolicyType
	// FailOpenNamespaces are the namespaces where the webhook only warns
	// (dsguard serve's --fail-open-namespaces): there the exemption gate
	// warns instead of refusing, as the webhook's does. The rules follow the
	// policy's namespaceEnforcement, which by default caps the same
	// namespaces at warn.
	FailOpenNamespaces []string
	// GranterRole is the ClusterRole that lets its subjects grant exemptions
	// (exemptions.grantedByRBAC), named in the gate's refusals as the
	// webhook names it (dsguard serve's --exemption-granter-clusterrole).
	GranterRole string
}

// Result is the rendered policy set.
type Result struct {
	Policies []admissionregistrationv1.ValidatingAdmissionPolicy
	Bindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// NotExpressed lists, per rule ID, what the generated policies do not
	// check that the webhook does. Rules that are not rendered at all
	// (node-aware or off) appear here too.
	NotExpressed map[string][]string
	// Today is the day exemption expiries were judged against.
	Today string
}

// Render turns a policy document into ValidatingAdmissionPolicies and
// bindings: per rendered rule, one policy per action it takes somewhere
// (deny, warn, audit), each matching exactly the namespaces where the
// webhook would take that action.
func Render(cfg *policy.Config, opts Options) (*Result, error) {
	if errs := policy.ValidateConfig(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("invalid policy: %v", errs.ToAggregate())
	}
	if opts.Today.IsZero() {
		opts.Today = time.Now().UTC()
	}
	if opts.FailurePolicy == "" {
		opts.FailurePolicy = admissionregistrationv1.Fail
	}
	today := opts.Today.UTC().Format(time.DateOnly)
	res := &Result{NotExpressed: map[string][]string{}, Today: today}
	catalogue := rules.Builtin().Rules()
	for _, r := range catalogue {
		res.NotExpressed[r.ID] = notExpressed(r.ID)
		action := celform.RuleAction(cfg, r.ID)
		if action == policy.ActionOff || r.CEL == nil {
			continue
		}
		checks := r.CEL(policy.CELInput{Config: cfg, Today: today, Catalogue: catalogue})
		for _, t := range namespaceTiers(cfg, action) {
			for _, u := range units(r.ID, t, checks, *cfg.Ratcheting) {
				p, b := build(cfg, opts, r, t, u, today)
				res.Policies = append(res.Policies, p)
				res.Bindings = append(res.Bindings, b)
			}
		}
	}
	res.NotExpressed[GateName] = notExpressed(GateName)
	policies, bindings := renderGate(cfg, opts)
	res.Policies = append(res.Policies, policies...)
	res.Bindings = append(res.Bindings, bindings...)
	return res, nil
}

// Renders reports whether a rule has a generated policy: every rule with a
// CEL form (policy.Rule.CEL), that is every rule that does not need the
// live node set.
func Renders(id string) bool {
	r, ok := rules.Builtin().Get(id)
	return ok && r.CEL != nil
}

// unit is one generated policy: checks of one rule in one namespace tier,
// enforced with one action.
type unit struct {
	name   string
	action admissionregistrationv1.ValidationAction
	deny   bool
	// variables are named CEL expressions the validations refer to as
	// variables.<name>, each evaluated once per request.
	variables [][2]string
	// validations are (expression, messageExpression) pairs.
	validations [][2]string
}

// units groups a rule's checks in one namespace tier by the action they
// take there. A deny becomes two policies: one that denies what the update
// introduces, and one that warns about what the webhook softens on UPDATE
// (an unchanged spec, a DaemonSet being deleted, and, with ratcheting, a
// finding the old object already had at the same field).
func units(rule string, t tier, checks []policy.CELCheck, ratcheting bool) []unit {
	var out []unit
	for _, eff := range []policy.Action{policy.ActionDeny, policy.ActionWarn, policy.ActionAudit} {
		var group []policy.CELCheck
		for _, c := range checks {
			if t.action.Weaker(c.Cap) == eff {
				group = append(group, c)
			}
		}
		if len(group) == 0 {
			continue
		}
		name := NamePrefix + rule + "-" + string(t.action)
		if eff != t.action {
			name += "-" + string(eff)
		}
		if eff != policy.ActionDeny {
			u := unit{name: name, action: validationAction(eff)}
			for _, c := range group {
				u.addVariables(c.Variables)
				u.validations = append(u.validations, [2]string{"!" + c.Violated("object"), c.Message})
			}
			out = append(out, u)
			continue
		}
		deny := unit{name: name, action: admissionregistrationv1.Deny, deny: true}
		softened := unit{name: name + "-ratcheted", action: admissionregistrationv1.Warn}
		for i, c := range group {
			deny.addVariables(c.Variables)
			softened.addVariables(c.Variables)
			finding, fresh := fmt.Sprintf("finding%d", i), fmt.Sprintf("introduced%d", i)
			vars := [][2]string{{finding, c.Violated("object")}}
			introduced := "variables." + finding
			if ratcheting {
				// A finding the old object had under an exemption
				// annotation for the rule counts as introduced (see the
				// webhook's ratchet).
				vars = append(vars, [2]string{fresh, fmt.Sprintf("oldObject != null && (%s || %s)", oldExempted(rule), c.Introduced)})
				introduced = "variables." + fresh
			}
			deny.variables = append(deny.variables, vars...)
			softened.variables = append(softened.variables, vars...)
			denies := fmt.Sprintf("variables.%s && (oldObject == null || !has(object.metadata.deletionTimestamp) && object.spec != oldObject.spec && %s)",
				finding, introduced)
			denyMessage := c.Message
			if ratcheting && c.IntroducedMessage != "" {
				// With ratcheting an update is denied for what it
				// introduces, which need not be the first finding.
				denyMessage = fmt.Sprintf("(oldObject != null && %s) ? %s : %s", oldExempted(rule), c.Message, c.IntroducedMessage)
			}
			deny.validations = append(deny.validations, [2]string{"!(" + denies + ")", denyMessage})
			softened.validations = append(softened.validations, [2]string{
				fmt.Sprintf("!variables.%s || oldObject == null || (%s)", finding, denies),
				c.Message + " + ' (not denied on this update: ' + (has(object.metadata.deletionTimestamp) ? 'the DaemonSet is being deleted' : " +
					"object.spec == oldObject.spec ? 'spec unchanged by this update' : 'already present before this update') + ')'",
			})
		}
		out = append(out, deny, softened)
	}
	return out
}

// oldExempted is a CEL condition: the old object carries an exemption
// annotation for rule, valid or not.
func oldExempted(rule string) string {
	return fmt.Sprintf("(has(oldObject.metadata.annotations) && '%s' in oldObject.metadata.annotations)", policy.ExemptionAnnotationPrefix+rule)
}

// addVariables adds the variables a unit does not have yet.
func (u *unit) addVariables(vars [][2]string) {
	for _, v := range vars {
		if !slices.ContainsFunc(u.variables, func(have [2]string) bool { return have[0] == v[0] }) {
			u.variables = append(u.variables, v)
		}
	}
}

func validationAction(a policy.Action) admissionregistrationv1.ValidationAction {
	switch a {
	case policy.ActionDeny:
		return admissionregistrationv1.Deny
	case policy.ActionWarn:
		return admissionregistrationv1.Warn
	}
	return admissionregistrationv1.Audit
}

func build(cfg *policy.Config, opts Options, r *policy.Rule, t tier, u unit, today string) (
	admissionregistrationv1.ValidatingAdmissionPolicy, admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	labels := map[string]string{ManagedByLabel: ManagedByValue, RuleLabel: r.ID}
	failure := admissionregistrationv1.Ignore
	if u.deny {
		failure = opts.FailurePolicy
	}
	scope := celform.RuleScope(cfg, r.ID)

	nsSel := &metav1.LabelSelector{}
	addReq := func(op metav1.LabelSelectorOperator, values []string) { addNamespaceReq(nsSel, op, values) }
	addReq(metav1.LabelSelectorOpNotIn, excludedNamespaces(opts))

	conds := bypassCondition(cfg)
	cond := func(name, expr string) {
		conds = append(conds, admissionregistrationv1.MatchCondition{Name: name, Expression: expr})
	}
	if inc := scope.Namespaces.Include; len(inc) > 0 {
		if allLiteral(inc) {
			addReq(metav1.LabelSelectorOpIn, inc)
		} else {
			cond("namespace-in-scope", celform.NsMatchesAny(inc))
		}
	}
	if exc := scope.Namespaces.Exclude; len(exc) > 0 {
		if allLiteral(exc) {
			addReq(metav1.LabelSelectorOpNotIn, exc)
		} else {
			cond("namespace-not-excluded", "!"+celform.NsMatchesAny(exc))
		}
	}
	addReq(metav1.LabelSelectorOpIn, t.in)
	addReq(metav1.LabelSelectorOpNotIn, t.notIn)
	if t.cel != "" {
		cond("namespace-enforcement-"+string(t.action), t.cel)
	}
	var objSel *metav1.LabelSelector
	if scope.Selector != nil {
		objSel = &metav1.LabelSelector{MatchLabels: scope.Selector.MatchLabels}
		for _, e := range scope.Selector.MatchExpressions {
			objSel.MatchExpressions = append(objSel.MatchExpressions, metav1.LabelSelectorRequirement{
				Key: e.Key, Operator: metav1.LabelSelectorOperator(e.Operator), Values: e.Values})
		}
		// An objectSelector matches an UPDATE when the old or the new labels
		// match; the webhook judges the new ones only.
		cond("labels-in-scope", labelSelectorCEL(scope.Selector))
	}
	if r.Exemptible && celform.ExemptionsAllowed(cfg, r.ID) {
		key := celform.Lit(policy.ExemptionAnnotationPrefix + r.ID)
		cond("not-exempted", fmt.Sprintf("!(has(object.metadata.annotations) && %[1]s in object.metadata.annotations && %[2]s)",
			key, celform.ExemptionValid("object.metadata.annotations["+key+"]", today, celform.GateOf(cfg, opts.Today, fmt.Sprint(celform.RuleAction(cfg, r.ID) == policy.ActionDeny)))))
	}

	var variables []admissionregistrationv1.Variable
	for _, v := range u.variables {
		variables = append(variables, admissionregistrationv1.Variable{Name: v[0], Expression: v[1]})
	}
	vs := make([]admissionregistrationv1.Validation, len(u.validations))
	forbidden := metav1.StatusReasonForbidden
	for i, v := range u.validations {
		vs[i] = admissionregistrationv1.Validation{
			Expression:        v[0],
			MessageExpression: v[1],
			Message:           fmt.Sprintf("[%s] %s", r.ID, r.Title),
			Reason:            &forbidden,
		}
	}
	annotations := map[string]string{}
	if gaps := notExpressed(r.ID); len(gaps) > 0 {
		annotations[NotExpressedAnnotation] = strings.Join(gaps, "; ")
	}
	p, b := generated(u.name, labels, annotations, admissionregistrationv1.ValidatingAdmissionPolicySpec{
		FailurePolicy:    &failure,
		MatchConstraints: daemonSetWrites(nsSel, objSel),
		MatchConditions:  conds,
		Variables:        variables,
		Validations:      vs,
	}, u.action)
	return p, b
}

// excludedNamespaces are the namespaces no generated policy judges:
// dsguard's own and the excluded ones, as for the webhook.
func excludedNamespaces(opts Options) []string {
	notIn := append([]string{}, opts.ExcludedNamespaces...)
	if opts.Namespace != "" {
		notIn = append([]string{opts.Namespace}, notIn...)
	}
	return notIn
}

// addNamespaceReq adds a requirement on the namespace's name to sel, unless
// values is empty.
func addNamespaceReq(sel *metav1.LabelSelector, op metav1.LabelSelectorOperator, values []string) {
	if len(values) > 0 {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: corev1.LabelMetadataName, Operator: op, Values: values})
	}
}

// bypassCondition is the break-glass match condition (bypass.users and
// bypass.groups skip every generated policy), none without a bypass.
func bypassCondition(cfg *policy.Config) []admissionregistrationv1.MatchCondition {
	if len(cfg.Bypass.Users)+len(cfg.Bypass.Groups) == 0 {
		return nil
	}
	return []admissionregistrationv1.MatchCondition{{Name: "not-bypassed", Expression: fmt.Sprintf(
		"!(has(request.userInfo.username) && request.userInfo.username in %s || (has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in %s)))",
		celform.LitList(cfg.Bypass.Users), celform.LitList(cfg.Bypass.Groups))}}
}

// daemonSetWrites matches CREATE and UPDATE of apps/v1 DaemonSets (not their
// status) in the namespaces and objects the selectors pick. It spells out
// what the API server would default (empty selectors, every scope), so that
// the policy reads back as rendered and any other difference is a change
// made outside dsguard (vapsync restores it).
func daemonSetWrites(nsSel, objSel *metav1.LabelSelector) *admissionregistrationv1.MatchResources {
	equivalent := admissionregistrationv1.Equivalent
	all := admissionregistrationv1.AllScopes
	if nsSel == nil {
		nsSel = &metav1.LabelSelector{}
	}
	if objSel == nil {
		objSel = &metav1.LabelSelector{}
	}
	return &admissionregistrationv1.MatchResources{
		NamespaceSelector: nsSel,
		ObjectSelector:    objSel,
		MatchPolicy:       &equivalent,
		ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"daemonsets"}, Scope: &all,
				},
			},
		}},
	}
}

// generated is a generated policy and its binding, of the same name.
func generated(name string, labels, annotations map[string]string, spec admissionregistrationv1.ValidatingAdmissionPolicySpec,
	action admissionregistrationv1.ValidationAction) (admissionregistrationv1.ValidatingAdmissionPolicy, admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	p := admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec:       spec,
	}
	b := admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{action},
		},
	}
	return p, b
}

func allLiteral(globs []string) bool {
	for _, g := range globs {
		if !celform.IsLiteralGlob(g) {
			return false
		}
	}
	return true
}

// NameSuffixes are the endings a generated policy's name can have after
// NamePrefix and the rule ID: per namespace tier's action, the policy of
// each effective action (and a deny's ratcheted twin).
var NameSuffixes = []string{"deny", "deny-ratcheted", "deny-warn", "deny-audit", "warn", "warn-audit", "audit"}

// nameActions binds a generated name's ending to the action its binding
// carries, first match wins: a deny's ratcheted twin warns, a deny tier's
// softer policies take their effective action. Only a Deny policy may fail
// closed; the others ignore errors. The static confinement pins every
// generated policy and binding to this table, so dsguard's ServiceAccount
// cannot turn a warning into a refusal by rebinding it.
var nameActions = []struct {
	suffix string
	action admissionregistrationv1.ValidationAction
}{
	{"-ratcheted", admissionregistrationv1.Warn},
	{"-deny", admissionregistrationv1.Deny},
	{"-warn", admissionregistrationv1.Warn},
	{"-audit", admissionregistrationv1.Audit},
}

// NameAction is the action the binding of the generated policy name
// carries; false for a name no generated policy has.
func NameAction(name string) (admissionregistrationv1.ValidationAction, bool) {
	if !strings.HasPrefix(name, NamePrefix) {
		return "", false
	}
	for _, na := range nameActions {
		if strings.HasSuffix(name, na.suffix) {
			return na.action, true
		}
	}
	return "", false
}

// PossibleNames lists every name a generated policy or binding can have,
// for RBAC by resourceNames (the chart lists the same names; a test keeps
// them in step).
func PossibleNames() []string {
	var out []string
	for _, s := range GateSuffixes {
		out = append(out, NamePrefix+GateName+"-"+s)
	}
	for _, r := range rules.Builtin().Rules() {
		if r.CEL == nil {
			continue
		}
		for _, s := range NameSuffixes {
			out = append(out, NamePrefix+r.ID+"-"+s)
		}
	}
	return out
}
