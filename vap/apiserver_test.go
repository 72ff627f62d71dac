package vap

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The pieces below are the API server's own validating admission policy
// code (k8s.io/apiserver/pkg/admission/plugin/policy/validating), put
// together as its plugin does in compilePolicy, so that unit tests evaluate
// the generated policies exactly as kube-apiserver would, and measure what
// they cost.

var (
	daemonSetGVK = appsv1.SchemeGroupVersion.WithKind("DaemonSet")
	daemonSetGVR = appsv1.SchemeGroupVersion.WithResource("daemonsets")
)

// compiled is one generated policy, compiled, with its binding's action.
type compiled struct {
	policy      *admissionregistrationv1.ValidatingAdmissionPolicy
	action      admissionregistrationv1.ValidationAction
	validator   validating.Validator
	namespaces  labels.Selector
	objects     labels.Selector
	matches     plugincel.ConditionEvaluator // nil without matchConditions
	validations plugincel.ConditionEvaluator
	messages    plugincel.ConditionEvaluator
	// single holds every expression of the policy compiled on its own
	// (with the policy's variables), to measure each one's cost.
	single []singleExpression
}

// singleExpression is one expression of a policy, compiled alone.
type singleExpression struct {
	field     string // e.g. spec.validations[0].messageExpression
	match     bool   // a match condition (its own, smaller budget)
	evaluator plugincel.ConditionEvaluator
}

func compileResult(t testing.TB, res *Result) []compiled {
	t.Helper()
	out := make([]compiled, len(res.Policies))
	for i := range res.Policies {
		p := &res.Policies[i]
		withAuthz := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
		withoutAuthz := plugincel.OptionalVariableDeclarations{}
		compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
		if err != nil {
			t.Fatal(err)
		}
		vars := make([]plugincel.NamedExpressionAccessor, len(p.Spec.Variables))
		for j, v := range p.Spec.Variables {
			vars[j] = &validating.Variable{Name: v.Name, Expression: v.Expression}
		}
		compiler.CompileAndStoreVariables(vars, withAuthz, environment.StoredExpressions)
		c := compiled{policy: p, action: res.Bindings[i].Spec.ValidationActions[0]}
		var matcher matchconditions.Matcher
		if len(p.Spec.MatchConditions) > 0 {
			accessors := make([]plugincel.ExpressionAccessor, len(p.Spec.MatchConditions))
			for j := range p.Spec.MatchConditions {
				accessors[j] = (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[j])
			}
			c.matches = compiler.CompileCondition(accessors, withAuthz, environment.StoredExpressions)
			matcher = matchconditions.NewMatcher(c.matches, p.Spec.FailurePolicy, "policy", "validate", p.Name)
		}
		validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
		messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
		for j, v := range p.Spec.Validations {
			validations[j] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
			messages[j] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
		c.validations = compiler.CompileCondition(validations, withAuthz, environment.StoredExpressions)
		c.messages = compiler.CompileCondition(messages, withoutAuthz, environment.StoredExpressions)
		single := func(field string, match bool, e plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations) {
			c.single = append(c.single, singleExpression{field, match,
				compiler.CompileCondition([]plugincel.ExpressionAccessor{e}, opts, environment.StoredExpressions)})
		}
		for j := range p.Spec.MatchConditions {
			single(fmt.Sprintf("spec.matchConditions[%d]", j), true, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[j]), withAuthz)
		}
		for j, v := range p.Spec.Variables {
			single(fmt.Sprintf("spec.variables[%d]", j), false, &validating.Variable{Name: v.Name, Expression: v.Expression}, withAuthz)
		}
		for j := range p.Spec.Validations {
			single(fmt.Sprintf("spec.validations[%d].expression", j), false, validations[j], withAuthz)
			single(fmt.Sprintf("spec.validations[%d].messageExpression", j), false, messages[j], withoutAuthz)
		}
		c.validator = validating.NewValidator(c.validations, matcher, compiler.CompileCondition(nil, withAuthz, environment.StoredExpressions),
			c.messages, p.Spec.FailurePolicy, nil)
		if c.namespaces, err = metav1.LabelSelectorAsSelector(p.Spec.MatchConstraints.NamespaceSelector); err != nil {
			t.Fatal(err)
		}
		c.objects = labels.Everything()
		if p.Spec.MatchConstraints.ObjectSelector != nil {
			if c.objects, err = metav1.LabelSelectorAsSelector(p.Spec.MatchConstraints.ObjectSelector); err != nil {
				t.Fatal(err)
			}
		}
		out[i] = c
	}
	return out
}

// request is one DaemonSet write as the API server hands it to admission.
type request struct {
	namespace string
	object    *appsv1.DaemonSet
	old       *appsv1.DaemonSet // nil: CREATE
	user      string
}

func (r request) attributes() *admission.VersionedAttributes {
	obj := r.object.DeepCopy()
	obj.Namespace = r.namespace
	v := &admission.VersionedAttributes{VersionedKind: daemonSetGVK, VersionedObject: admission.NewLazyObject(obj)}
	who := &user.DefaultInfo{Name: r.user}
	if r.old == nil {
		v.Attributes = admission.NewAttributesRecord(obj, nil, daemonSetGVK, r.namespace, obj.Name, daemonSetGVR, "", admission.Create, nil, false, who)
		return v
	}
	old := r.old.DeepCopy()
	old.Namespace = r.namespace
	v.VersionedOldObject = admission.NewLazyObject(old)
	v.Attributes = admission.NewAttributesRecord(obj, old, daemonSetGVK, r.namespace, obj.Name, daemonSetGVR, "", admission.Update, nil, false, who)
	return v
}

// applies reports whether the API server would run the policy on the request.
func (c *compiled) applies(r request) bool {
	if !c.namespaces.Matches(labels.Set{corev1.LabelMetadataName: r.namespace}) {
		return false
	}
	// An UPDATE matches when the old or the new labels match.
	if c.objects.Matches(labels.Set(r.object.Labels)) {
		return true
	}
	return r.old != nil && c.objects.Matches(labels.Set(r.old.Labels))
}

// admit returns the verdict of the rendered policies on a request, as the
// API server would give it: deny, warn or allow, with the messages.
func admit(t testing.TB, policies []compiled, r request) (string, []string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.namespace, Labels: map[string]string{corev1.LabelMetadataName: r.namespace}}}
	verdict := "allow"
	var messages []string
	attrs := r.attributes()
	for i := range policies {
		c := &policies[i]
		if !c.applies(r) {
			continue
		}
		res := c.validator.Validate(context.Background(), daemonSetGVR, attrs, nil, ns, celconfig.RuntimeCELCostBudget, nil)
		for _, d := range res.Decisions {
			if d.Evaluation == validating.EvalError {
				t.Errorf("%s: evaluation error: %s", c.policy.Name, d.Message)
			}
			if d.Action != validating.ActionDeny {
				continue
			}
			// A failed messageExpression falls back to the static message,
			// which has no fix.
			if !strings.Contains(d.Message, "; fix: ") {
				t.Errorf("%s: the message expression did not give the message: %q", c.policy.Name, d.Message)
			}
			switch c.action {
			case admissionregistrationv1.Deny:
				verdict = "deny"
			case admissionregistrationv1.Warn:
				if verdict == "allow" {
					verdict = "warn"
				}
			default:
				continue
			}
			messages = append(messages, d.Message)
		}
	}
	return verdict, messages
}

// cost is what a policy's CEL costs on a request, in the API server's cost
// units.
type cost struct {
	// expression is the most expensive single expression, and field names it.
	expression int64
	field      string
	// matchConditions and validations are the policy's totals against the
	// budgets per binding (messages and the variables they use included).
	matchConditions, validations int64
}

// measure evaluates every expression of the policy alone, then the match
// conditions and the validations with their messages together, as the API
// server charges them.
func measure(t testing.TB, c *compiled, r request, attrs *admission.VersionedAttributes) cost {
	t.Helper()
	ctx := context.Background()
	req := plugincel.CreateAdmissionRequest(attrs.Attributes, metav1.GroupVersionResource(daemonSetGVR), metav1.GroupVersionKind(daemonSetGVK))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.namespace}}
	spend := func(what string, e plugincel.ConditionEvaluator, budget int64) int64 {
		results, left, err := e.ForInput(ctx, attrs, req, plugincel.OptionalVariableBindings{}, ns, budget)
		if err != nil {
			t.Errorf("%s %s: %v", c.policy.Name, what, err)
		}
		for _, res := range results {
			// A message that refers to a missing item (the policy found
			// nothing) fails harmlessly; anything else is a bug.
			if res.Error != nil && !strings.Contains(what, "message") {
				t.Errorf("%s %s: %v", c.policy.Name, what, res.Error)
			}
		}
		return budget - left
	}
	var out cost
	for _, s := range c.single {
		if got := spend(s.field, s.evaluator, celconfig.PerCallLimit+1); got > out.expression {
			out.expression, out.field = got, s.field
		}
	}
	if c.matches != nil {
		out.matchConditions = spend("match conditions", c.matches, celconfig.RuntimeCELCostBudgetMatchConditions)
	}
	out.validations = spend("validations", c.validations, celconfig.RuntimeCELCostBudget)
	out.validations += spend("messages", c.messages, celconfig.RuntimeCELCostBudget)
	return out
}
