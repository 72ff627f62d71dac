package policy

import (
	"fmt"
	"path"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/dsguard/dsguard/coverage"
)

// Policy is a validated, compiled policy, ready to evaluate DaemonSets. It is
// immutable once built, so one value can serve concurrent requests and be
// swapped atomically on reload.
type Policy struct {
	// config is the document compiled, for Weakenings against the next one.
	config               *Config
	enforcement          Enforcement
	namespaceEnforcement []namespaceEnforcement
	ratcheting           bool
	bypassUsers          []string
	bypassGroups         []string
	exemptions           ExemptionsConfig
	lifecycle            *coverage.Lifecycle
	rules                []ruleSettings
	byID                 map[string]*ruleSettings
}

type namespaceEnforcement struct {
	globs   []string
	ceiling Action
}

type ruleSettings struct {
	rule   *Rule
	action Action
	// configured is the action the document gives the rule; it differs
	// from action only for a delegated rule (see RuleOptions.Delegated).
	configured      Action
	scope           scope
	allowExemptions bool
	params          any
}

type scope struct {
	include, exclude []string
	selector         labels.Selector // nil: every DaemonSet
}

func (s *scope) matches(namespace string, dsLabels map[string]string) bool {
	if len(s.include) > 0 && !MatchAnyGlob(s.include, namespace) {
		return false
	}
	if MatchAnyGlob(s.exclude, namespace) {
		return false
	}
	return s.selector == nil || s.selector.Matches(labels.Set(dsLabels))
}

// MatchAnyGlob reports whether s matches one of globs (path.Match syntax,
// validated beforehand).
func MatchAnyGlob(globs []string, s string) bool {
	for _, g := range globs {
		// Globs were validated at compile time, so an error cannot occur here.
		if ok, _ := path.Match(g, s); ok {
			return true
		}
	}
	return false
}

// Config returns the document p was compiled from, to judge the next
// policy against it (Weakenings); it must not be changed.
func (p *Policy) Config() *Config { return p.config }

// Default returns the compiled built-in policy of the registry's rules.
func (reg *Registry) Default() *Policy {
	p, err := Compile(reg.DefaultConfig())
	if err != nil {
		panic(fmt.Sprintf("built-in policy does not compile: %v", err))
	}
	return p
}

// Parse decodes, validates and compiles a policy document for the registry's
// rules.
func (reg *Registry) Parse(data []byte) (*Policy, error) {
	cfg, err := reg.ParseConfig(data)
	if err != nil {
		return nil, err
	}
	return Compile(cfg)
}

// Compile validates a Config and turns it into a Policy. The Policy keeps
// references into c, so c must not be changed afterwards.
func Compile(c *Config) (*Policy, error) {
	if errs := ValidateConfig(c); len(errs) > 0 {
		problems := make([]ConfigProblem, len(errs))
		for i, e := range errs {
			problems[i] = ConfigProblem{Field: e.Field, Message: e.ErrorBody()}
		}
		return nil, &ConfigError{Problems: problems}
	}
	p := &Policy{
		config:       c,
		enforcement:  c.Enforcement,
		ratcheting:   *c.Ratcheting,
		bypassUsers:  append([]string(nil), c.Bypass.Users...),
		bypassGroups: append([]string(nil), c.Bypass.Groups...),
		exemptions: ExemptionsConfig{
			MaxExemptionDays:  c.Exemptions.MaxExemptionDays,
			GrantedByRBAC:     c.Exemptions.GrantedByRBAC,
			AllowedGroups:     append([]string(nil), c.Exemptions.AllowedGroups...),
			AllowedNamespaces: append([]string(nil), c.Exemptions.AllowedNamespaces...),
		},
		lifecycle: compileLifecycle(c.LifecycleTaints),
		byID:      map[string]*ruleSettings{},
	}
	for _, ne := range c.NamespaceEnforcement {
		p.namespaceEnforcement = append(p.namespaceEnforcement, namespaceEnforcement{
			globs: append([]string(nil), ne.Namespaces...), ceiling: ne.Enforcement.ceiling(),
		})
	}
	rules := c.Rules.rules()
	p.rules = make([]ruleSettings, 0, len(rules))
	for _, rule := range rules {
		rc := c.Rules.byID[rule.ID]
		o := rc.options()
		action, sc, allow := o.Action, &o.Scope, o.AllowExemptions
		rs := ruleSettings{
			rule:            rule,
			action:          action,
			configured:      action,
			allowExemptions: rule.Exemptible && (allow == nil || *allow),
			params:          rc.params(),
			scope: scope{
				include: append([]string(nil), sc.Namespaces.Include...),
				exclude: append([]string(nil), sc.Namespaces.Exclude...),
			},
		}
		if sc.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(sc.Selector.toLabelSelector())
			if err != nil {
				return nil, fmt.Errorf("rules.%s.scope.selector: %w", rule.ID, err)
			}
			rs.scope.selector = sel
		}
		if o.Delegated {
			rs.action = ActionOff
		}
		p.rules = append(p.rules, rs)
	}
	for i := range p.rules {
		p.byID[p.rules[i].rule.ID] = &p.rules[i]
	}
	return p, nil
}

// Ratcheting reports whether UPDATEs soften denies that the old object
// already had.
func (p *Policy) Ratcheting() bool { return p.ratcheting }

// Enforcement returns the policy-wide enforcement level.
func (p *Policy) Enforcement() Enforcement { return p.enforcement }

// Bypassed reports whether a user (or one of its groups) is on the
// break-glass list.
func (p *Policy) Bypassed(user string, groups []string) bool {
	return slices.Contains(p.bypassUsers, user) ||
		slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(p.bypassGroups, g) })
}

// RuleAction returns the configured action of a rule.
func (p *Policy) RuleAction(id string) (Action, bool) {
	rs, ok := p.byID[id]
	if !ok {
		return "", false
	}
	return rs.action, true
}

// Rule returns the rule with the given ID, when the policy has it.
func (p *Policy) Rule(id string) (*Rule, bool) {
	rs, ok := p.byID[id]
	if !ok {
		return nil, false
	}
	return rs.rule, true
}

// AllowsExemptions reports whether exemption annotations for rule id take
// effect: false for an unknown rule, a rule that cannot be exempted, or one
// whose exemptions the policy forbids.
func (p *Policy) AllowsExemptions(id string) bool {
	rs, ok := p.byID[id]
	return ok && rs.allowExemptions
}

// ParamsOf returns the compiled parameters of rule id; false when there is no
// such rule or P is not its parameter type.
func ParamsOf[P any](p *Policy, id string) (*P, bool) {
	rs, ok := p.byID[id]
	if !ok {
		return nil, false
	}
	params, ok := rs.params.(*P)
	return params, ok
}

// CeilingFor is the strongest action allowed in a namespace, by the
// policy-wide enforcement and the first namespaceEnforcement entry that
// matches.
func (p *Policy) CeilingFor(namespace string) Action {
	c := p.enforcement.ceiling()
	for _, ne := range p.namespaceEnforcement {
		if MatchAnyGlob(ne.globs, namespace) {
			return c.Weaker(ne.ceiling)
		}
	}
	return c
}
