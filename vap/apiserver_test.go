package vap

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
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
	"k8s.io/apiserver/pkg/authorization/authorizer"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/lazy"

	"github.com/dsguard/dsguard/policy"
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
	// variables are the policy's variables, compiled, by name.
	variables map[string]plugincel.CompilationResult
	// single holds every match condition, validation and message compiled
	// on its own (with the policy's variables), to measure each one's cost.
	single []singleExpression
}

// singleExpression is one expression of a policy, compiled alone.
type singleExpression struct {
	field     string // e.g. validations[0].messageExpression
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
		c := compiled{policy: p, action: res.Bindings[i].Spec.ValidationActions[0], variables: map[string]plugincel.CompilationResult{}}
		for _, v := range p.Spec.Variables {
			c.variables[v.Name] = compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, withAuthz, environment.StoredExpressions)
		}
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
		single := func(field string, e plugincel.ExpressionAccessor, opts plugincel.OptionalVariableDeclarations) {
			c.single = append(c.single, singleExpression{field,
				compiler.CompileCondition([]plugincel.ExpressionAccessor{e}, opts, environment.StoredExpressions)})
		}
		for j := range p.Spec.MatchConditions {
			single("matchConditions."+p.Spec.MatchConditions[j].Name, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[j]), withAuthz)
		}
		for j := range p.Spec.Validations {
			single(fmt.Sprintf("validations[%d].expression", j), validations[j], withAuthz)
			single(fmt.Sprintf("validations[%d].messageExpression", j), messages[j], withoutAuthz)
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
	groups    []string
	// subresource is "status" for a write through daemonsets/status.
	subresource string
}

// grants are whom the tests' authorizer lets grant exemptions
// (exemptions.grantedByRBAC): by user, the namespaces (nil: all), as
// RoleBindings in dsguard's namespace would, with resourceNames or without.
var grants = map[string][]string{"gina": nil, "nina": {"team-a"}}

// mayGrant is the tests' RBAC: whether user may create exemptions.dsguard.io
// named namespace in own (dsguard's namespace).
func mayGrant(user, own, verb, group, resource, resourceNS, name string) bool {
	names, ok := grants[user]
	return ok && verb == policy.GrantVerb && group == policy.GrantGroup && resource == policy.GrantResource &&
		resourceNS == own && (names == nil || slices.Contains(names, name))
}

// testAuthorizer answers the policies' authorizer by mayGrant, with
// dsguard's namespace own.
type testAuthorizer struct{ own string }

func (a testAuthorizer) Authorize(_ context.Context, at authorizer.Attributes) (authorizer.Decision, string, error) {
	if mayGrant(at.GetUser().GetName(), a.own, at.GetVerb(), at.GetAPIGroup(), at.GetResource(), at.GetNamespace(), at.GetName()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func (r request) attributes() *admission.VersionedAttributes {
	obj := r.object.DeepCopy()
	obj.Namespace = r.namespace
	v := &admission.VersionedAttributes{VersionedKind: daemonSetGVK, VersionedObject: admission.NewLazyObject(obj)}
	who := &user.DefaultInfo{Name: r.user, Groups: r.groups}
	if r.old == nil {
		v.Attributes = admission.NewAttributesRecord(obj, nil, daemonSetGVK, r.namespace, obj.Name, daemonSetGVR, r.subresource, admission.Create, nil, false, who)
		return v
	}
	old := r.old.DeepCopy()
	old.Namespace = r.namespace
	v.VersionedOldObject = admission.NewLazyObject(old)
	v.Attributes = admission.NewAttributesRecord(obj, old, daemonSetGVK, r.namespace, obj.Name, daemonSetGVR, r.subresource, admission.Update, nil, false, who)
	return v
}

// applies reports whether the API server would run the policy on the request.
func (c *compiled) applies(r request) bool {
	if !c.namespaces.Matches(labels.Set{corev1.LabelMetadataName: r.namespace}) {
		return false
	}
	if r.subresource != "" && !slices.ContainsFunc(c.policy.Spec.MatchConstraints.ResourceRules, func(rule admissionregistrationv1.NamedRuleWithOperations) bool {
		return slices.Contains(rule.Resources, "daemonsets/"+r.subresource)
	}) {
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
		res := c.validator.Validate(context.Background(), daemonSetGVR, attrs, nil, ns, celconfig.RuntimeCELCostBudget, testAuthorizer{own: testOwnNamespace})
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
	// programs is the cost of each program the request ran, by field
	// (variables.<name>, matchConditions.<name>,
	// validations[i].expression or .messageExpression): each is limited to
	// celconfig.PerCallLimit on its own. A variable's cost is charged to the
	// budgets once per evaluation that reads it, but never to the program
	// that reads it.
	programs map[string]int64
	// matchConditions and validations are the policy's totals against the
	// budgets per binding (messages and the variables they read included).
	matchConditions, validations int64
}

// costContext stands in for the API server's composition context (the
// lazily evaluated variables of one evaluation) and records what each
// variable it reads costs on its own. Variables are evaluated once per
// request and shared, by their expression, through the cache; each read is
// charged as the API server charges it.
type costContext struct {
	context.Context
	compiled *compiled
	cache    map[string]*evaluated
	read     map[string]bool
	pending  int64
	// reading collects, per variable being evaluated, the variables it
	// reads in turn.
	reading []map[string]bool
}

// evaluated is a variable's value and cost on one request, and the
// variables its evaluation read (charged again with every read of it).
type evaluated struct {
	value ref.Val
	cost  int64
	err   error
	reads map[string]bool
}

// expressionOf is the expression of the policy's variable name.
func (c *compiled) expressionOf(name string) string {
	for _, v := range c.policy.Spec.Variables {
		if v.Name == name {
			return v.Expression
		}
	}
	return ""
}

func newCostContext(c *compiled, cache map[string]*evaluated) *costContext {
	return &costContext{Context: context.Background(), compiled: c, cache: cache, read: map[string]bool{}}
}

// variablesType names the variables' object type, as the API server does.
var variablesType = apiservercel.NewObjectType("kubernetes.variables", map[string]*apiservercel.DeclField{})

func (c *costContext) Variables(activation any) ref.Val {
	m := lazy.NewMapValue(variablesType)
	for _, v := range c.compiled.policy.Spec.Variables {
		result := c.compiled.variables[v.Name]
		m.Append(v.Name, func(*lazy.MapValue) ref.Val {
			e := c.cache[v.Expression]
			fresh := e == nil
			if fresh {
				e = &evaluated{reads: map[string]bool{}}
				c.reading = append(c.reading, e.reads)
				if result.Error != nil {
					e.err = result.Error
				} else {
					var details *cel.EvalDetails
					e.value, details, e.err = result.Program.ContextEval(c, activation)
					if details != nil && details.ActualCost() != nil {
						e.cost = int64(*details.ActualCost())
					}
				}
				c.reading = c.reading[:len(c.reading)-1]
				c.cache[v.Expression] = e
			}
			names := []string{v.Name}
			if !fresh {
				// Fresh, it read them itself.
				names = append(names, slices.Collect(maps.Keys(e.reads))...)
			}
			for _, name := range names {
				for _, r := range c.reading {
					r[name] = true
				}
				// The API server evaluates a variable once per evaluation.
				if !c.read[name] {
					c.read[name] = true
					c.pending += c.cache[c.compiled.expressionOf(name)].cost
				}
			}
			if e.err != nil {
				return types.NewErr("variable %q: %v", v.Name, e.err)
			}
			return e.value
		})
	}
	return m
}

func (c *costContext) GetAndResetCost() int64 {
	cost := c.pending
	c.pending = 0
	return cost
}

// measure evaluates every match condition, validation and message of the
// policy alone, and each variable they read, and adds up what the API
// server charges to the budgets per binding: the match conditions, and the
// validations with every message, each variable once per group that reads
// it (an upper bound: messages run only for failed validations). cache
// holds the variables evaluated for this request so far.
func measure(t testing.TB, c *compiled, r request, attrs *admission.VersionedAttributes, cache map[string]*evaluated) cost {
	t.Helper()
	req := plugincel.CreateAdmissionRequest(attrs.Attributes, metav1.GroupVersionResource(daemonSetGVR), metav1.GroupVersionKind(daemonSetGVK))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.namespace}}
	out := cost{programs: map[string]int64{}}
	// A message that refers to a missing item (the policy found nothing)
	// fails harmlessly; anything else is a bug.
	failed := func(what string, err error) {
		if err != nil && (!strings.Contains(what, "message") || strings.Contains(err.Error(), "cost")) {
			t.Errorf("%s %s: %v", c.policy.Name, what, err)
		}
	}
	read := map[string]map[string]bool{"match": {}, "validations": {}, "messages": {}}
	for _, s := range c.single {
		ctx := newCostContext(c, cache)
		inner := s.evaluator.(*plugincel.CompositedConditionEvaluator).ConditionEvaluator
		results, left, err := inner.ForInput(ctx, attrs, req, plugincel.OptionalVariableBindings{Authorizer: testAuthorizer{own: testOwnNamespace}}, ns, celconfig.RuntimeCELCostBudget)
		failed(s.field, err)
		group := "validations"
		switch {
		case strings.HasPrefix(s.field, "matchConditions."):
			group = "match"
		case strings.HasSuffix(s.field, "messageExpression"):
			group = "messages"
		}
		var variables int64
		for name := range ctx.read {
			e := cache[c.expressionOf(name)]
			variables += e.cost
			out.programs["variables."+name] = e.cost
			read[group][name] = true
			failed(s.field+" reading variables."+name, e.err)
		}
		for _, res := range results {
			failed(s.field, res.Error)
		}
		own := celconfig.RuntimeCELCostBudget - left - variables
		out.programs[s.field] = own
		if group == "match" {
			out.matchConditions += own
		} else {
			out.validations += own
		}
	}
	for group, names := range read {
		for name := range names {
			if group == "match" {
				out.matchConditions += out.programs["variables."+name]
			} else {
				out.validations += out.programs["variables."+name]
			}
		}
	}
	return out
}

// testOwnNamespace is dsguard's namespace in the tests' renders, where
// testAuthorizer's RoleBindings are.
const testOwnNamespace = "dsguard-system"
