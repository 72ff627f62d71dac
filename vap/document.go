package vap

import "github.com/dsguard/dsguard/policy"

// ruleAction, ruleScope and exemptionsAllowed read one rule's settings from
// the policy document by rule ID.
func ruleAction(cfg *policy.Config, id string) policy.Action {
	if o := cfg.Rules.Options(id); o != nil {
		return o.Action
	}
	return policy.ActionOff
}

func ruleScope(cfg *policy.Config, id string) *policy.ScopeConfig {
	if o := cfg.Rules.Options(id); o != nil {
		return &o.Scope
	}
	return &policy.ScopeConfig{}
}

// exemptionsAllowed is the rule's allowExemptions (default true).
func exemptionsAllowed(cfg *policy.Config, id string) bool {
	o := cfg.Rules.Options(id)
	return o == nil || o.AllowExemptions == nil || *o.AllowExemptions
}

// params returns a rule's typed parameters from the document.
func params[P any](cfg *policy.Config, id string) *P {
	if rc := policy.RuleConfigOf[P](cfg, id); rc != nil {
		return &rc.Parameters
	}
	return new(P)
}
