package policy

import (
	"fmt"
	"path"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ParamValidator is implemented by parameter types that have constraints
// beyond their Go types; the registry calls it on the decoded parameters.
type ParamValidator interface {
	Validate(fldPath *field.Path) field.ErrorList
}

// ValidateConfig checks a decoded policy and returns every problem, each with
// its field path.
func ValidateConfig(c *Config) field.ErrorList {
	var errs field.ErrorList
	switch c.APIVersion {
	case ConfigAPIVersion:
	case "":
		errs = append(errs, field.Required(field.NewPath("apiVersion"), "must be "+ConfigAPIVersion))
	default:
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{ConfigAPIVersion}))
	}
	switch c.Kind {
	case ConfigKind:
	case "":
		errs = append(errs, field.Required(field.NewPath("kind"), "must be "+ConfigKind))
	default:
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{ConfigKind}))
	}
	if !c.Enforcement.valid() {
		errs = append(errs, field.NotSupported(field.NewPath("enforcement"), c.Enforcement, stringsOf(Enforcements)))
	}
	if c.Ratcheting == nil {
		errs = append(errs, field.Required(field.NewPath("ratcheting"), "true or false"))
	}
	for _, b := range []struct {
		name string
		list []string
	}{{"users", c.Bypass.Users}, {"groups", c.Bypass.Groups}} {
		for i, v := range b.list {
			if v == "" {
				errs = append(errs, field.Invalid(field.NewPath("bypass", b.name).Index(i), v, "must not be empty"))
			}
		}
	}
	errs = append(errs, validateExemptions(&c.Exemptions, field.NewPath("exemptions"))...)
	errs = append(errs, validateLifecycleTaints(c.LifecycleTaints, field.NewPath("lifecycleTaints"))...)
	nsPath := field.NewPath("namespaceEnforcement")
	for i, ne := range c.NamespaceEnforcement {
		p := nsPath.Index(i)
		if len(ne.Namespaces) == 0 {
			errs = append(errs, field.Required(p.Child("namespaces"), "at least one namespace or glob"))
		}
		errs = append(errs, ValidateGlobs(ne.Namespaces, p.Child("namespaces"))...)
		if !ne.Enforcement.valid() {
			errs = append(errs, field.NotSupported(p.Child("enforcement"), ne.Enforcement, stringsOf(Enforcements)))
		}
	}
	rulesPath := field.NewPath("rules")
	for _, r := range c.Rules.rules() {
		errs = append(errs, validateRuleConfig(c.Rules.byID[r.ID], rulesPath.Child(r.ID))...)
	}
	return errs
}

func validateRuleConfig(rc ruleConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	o := rc.options()
	action, scope := o.Action, &o.Scope
	if !action.Valid() {
		errs = append(errs, field.NotSupported(p.Child("action"), action, stringsOf(Actions)))
	}
	sp := p.Child("scope")
	errs = append(errs, ValidateGlobs(scope.Namespaces.Include, sp.Child("namespaces", "include"))...)
	errs = append(errs, ValidateGlobs(scope.Namespaces.Exclude, sp.Child("namespaces", "exclude"))...)
	if scope.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(scope.Selector.toLabelSelector(),
			metav1validation.LabelSelectorValidationOptions{}, sp.Child("selector"))...)
	}
	if v, ok := rc.params().(ParamValidator); ok {
		errs = append(errs, v.Validate(p.Child("parameters"))...)
	}
	return errs
}

// ValidateGlobs checks namespace globs (path.Match syntax): none empty, each
// well-formed.
func ValidateGlobs(globs []string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, g := range globs {
		if g == "" {
			errs = append(errs, field.Invalid(p.Index(i), g, "must not be empty"))
			continue
		}
		if _, err := path.Match(g, ""); err != nil {
			errs = append(errs, field.Invalid(p.Index(i), g, fmt.Sprintf("not a valid glob: %v", err)))
		}
	}
	return errs
}

func (s *LabelSelectorConfig) toLabelSelector() *metav1.LabelSelector {
	ls := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		ls.MatchExpressions = append(ls.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: r.Key, Operator: metav1.LabelSelectorOperator(r.Operator), Values: r.Values,
		})
	}
	return ls
}
