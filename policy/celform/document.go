package celform

import (
	"github.com/dsguard/dsguard/policy"
)

// RuleAction, ruleScope and exemptionsAllowed read one rule's settings from
// the policy document by rule ID.
func RuleAction(cfg *policy.Config, id string) policy.Action {
	if o := cfg.Rules.Options(id); o != nil {
		return o.Action
	}
	return policy.ActionOff
}

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
