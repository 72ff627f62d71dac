package celform

import "github.com/dsguard/dsguard/policy"

// RuleAction is the rule's action in the policy document (off when the
// document does not name the rule).
func RuleAction(cfg *policy.Config, id string) policy.Action {
	if o := cfg.Rules.Options(id); o != nil {
		return o.Action
	}
	return policy.ActionOff
}

// RuleScope is the rule's scope in the policy document.
func RuleScope(cfg *policy.Config, id string) *policy.ScopeConfig {
	if o := cfg.Rules.Options(id); o != nil {
		return &o.Scope
	}
	return &policy.ScopeConfig{}
}

// ExemptionsAllowed is the rule's allowExemptions (default true).
func ExemptionsAllowed(cfg *policy.Config, id string) bool {
	o := cfg.Rules.Options(id)
	return o == nil || o.AllowExemptions == nil || *o.AllowExemptions
}

// Params returns a rule's typed parameters from the document.
func Params[P any](cfg *policy.Config, id string) *P {
	if rc := policy.RuleConfigOf[P](cfg, id); rc != nil {
		return &rc.Parameters
	}
	return new(P)
}
