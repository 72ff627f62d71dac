package policy

import (
	"fmt"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Rule is one coverage check, declared once with everything a user needs to
// understand and fix what it reports.
type Rule struct {
	// ID is stable and kebab-case; it names the rule in the policy, in
	// exemption annotations, in warnings and in metrics.
	ID string
	// Title is a short summary.
	Title string
	// Why explains what goes wrong for coverage when the rule is violated.
	Why string
	// Remediation is the general fix; findings may carry a more specific one.
	Remediation string
	// DefaultAction is the action when the policy does not set one.
	DefaultAction Action
	// Params documents the rule's parameters (key "parameters" in the policy).
	Params []ParamDoc
	// NeedsNodes marks rules that only run when the node set is known.
	NeedsNodes bool
	// NeedsFit marks rules that also need what the scheduler weighs
	// (Env.Fit): they run where the cluster's Pods are known.
	NeedsFit bool
	// NeedsDaemonSets marks rules that compare the DaemonSet with the
	// cluster's other DaemonSets (Env.DaemonSets).
	NeedsDaemonSets bool
	// OnNodeChange marks rules that judge a change to a Node for each
	// DaemonSet (Env.NodeChange) instead of a DaemonSet itself: they run
	// only in the webhook's Node entry and in `dsguard taint` and `label`.
	OnNodeChange bool
	// Exemptible is false for rules that exemption annotations cannot silence.
	Exemptible bool
	// NotRendered, when set, says why the generated ValidatingAdmissionPolicies
	// leave the rule out (it needs what CEL in the API server does not see)
	// and who judges it instead; docs/modes.md prints it.
	NotRendered string
	// CEL renders the rule for the generated ValidatingAdmissionPolicies:
	// its checks under the policy document. Set only on rules that need
	// nothing CEL in the API server does not see (then NotRendered is
	// empty).
	CEL func(in CELInput) []CELCheck
	// CELGaps lists what the rule's generated policies do not check the way
	// the webhook does; docs/modes.md and each policy's annotation carry it.
	CELGaps []string

	check func(ds *appsv1.DaemonSet, env *Env, params any) []Finding
	// newConfig returns the rule's part of the built-in policy, typed with
	// the rule's own parameters.
	newConfig func() ruleConfig
	// reportedTaints, when set, returns the taints whose skipped nodes the
	// rule's own findings already name for ds; see Env.ReportedTaints.
	reportedTaints func(ds *appsv1.DaemonSet, params any) []corev1.Taint
	// exemptionKey is ExemptionAnnotationPrefix + ID.
	exemptionKey string
}

// ParamDoc documents one rule parameter.
type ParamDoc struct {
	Name        string
	Type        string
	Default     string
	Description string
}

// NewRule binds a check over typed parameters to a rule's description.
// defaults returns fresh default parameters (nil: the zero value). The
// registry decodes the rule's "parameters" in the policy into P, over the
// defaults, so a rule is declared in one place. The type assertion here is
// the only place parameters are untyped: the policy compiler hands each rule
// the parameters decoded for it.
func NewRule[P any](r Rule, defaults func() P, check func(ds *appsv1.DaemonSet, env *Env, p *P) []Finding) *Rule {
	r.check = func(ds *appsv1.DaemonSet, env *Env, params any) []Finding {
		return check(ds, env, params.(*P))
	}
	r.exemptionKey = ExemptionAnnotationPrefix + r.ID
	action := r.DefaultAction
	r.newConfig = func() ruleConfig {
		c := &RuleConfig[P]{RuleOptions: RuleOptions{Action: action}}
		if defaults != nil {
			c.Parameters = defaults()
		}
		return c
	}
	return &r
}

// WithReportedTaints declares which taints r's findings already name for a
// DaemonSet (an empty value stands for every value of the key), so that a rule
// speaking of the same skipped nodes leaves them out. P must be the
// parameter type r was made with.
func WithReportedTaints[P any](r *Rule, taints func(ds *appsv1.DaemonSet, p *P) []corev1.Taint) *Rule {
	r.reportedTaints = func(ds *appsv1.DaemonSet, params any) []corev1.Taint {
		return taints(ds, params.(*P))
	}
	return r
}

// Registry is an ordered, duplicate-free set of rules.
type Registry struct {
	rules []*Rule
	byID  map[string]*Rule
}

var ruleIDPattern = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// NewRegistry checks that every rule is well-formed and that no ID repeats.
func NewRegistry(rules ...*Rule) (*Registry, error) {
	reg := &Registry{byID: make(map[string]*Rule, len(rules))}
	for _, r := range rules {
		if err := r.wellFormed(); err != nil {
			return nil, err
		}
		if _, dup := reg.byID[r.ID]; dup {
			return nil, fmt.Errorf("duplicate rule ID %q", r.ID)
		}
		reg.byID[r.ID] = r
		reg.rules = append(reg.rules, r)
	}
	return reg, nil
}

func (r *Rule) wellFormed() error {
	switch {
	case !ruleIDPattern.MatchString(r.ID):
		return fmt.Errorf("rule ID %q is not kebab-case", r.ID)
	case r.Title == "" || r.Why == "":
		return fmt.Errorf("rule %s: title and why are required", r.ID)
	case !strings.HasSuffix(r.Remediation, "."):
		return fmt.Errorf("rule %s: remediation must be a sentence ending with a period", r.ID)
	case !r.DefaultAction.Valid():
		return fmt.Errorf("rule %s: invalid default action %q", r.ID, r.DefaultAction)
	case r.CEL != nil && r.NotRendered != "":
		return fmt.Errorf("rule %s: a rule with a CEL form is rendered: NotRendered must be empty", r.ID)
	case r.CEL == nil && len(r.CELGaps) > 0:
		return fmt.Errorf("rule %s: CELGaps without a CEL form", r.ID)
	case r.check == nil || r.newConfig == nil:
		return fmt.Errorf("rule %s: not made by NewRule", r.ID)
	}
	return nil
}

// Rules returns the rules in catalogue order.
func (reg *Registry) Rules() []*Rule { return reg.rules }

// Get returns the rule with the given ID.
func (reg *Registry) Get(id string) (*Rule, bool) {
	r, ok := reg.byID[id]
	return r, ok
}
