package vap

import (
	"fmt"
	"strings"

	"github.com/dsguard/dsguard/policy"
	"github.com/dsguard/dsguard/policy/celform"
	"github.com/dsguard/dsguard/policy/rules"
)

// tier is the set of namespaces where a rule takes one action, after the
// policy-wide enforcement and the first matching namespaceEnforcement entry
// have capped it. Literal namespace names become a namespaceSelector on
// kubernetes.io/metadata.name (in or notIn); globs a CEL matchCondition.
type tier struct {
	action    policy.Action
	in, notIn []string
	cel       string
}

// ceiling is the strongest action an enforcement level lets through.
func ceiling(e policy.Enforcement) policy.Action {
	switch e {
	case policy.EnforcementWarn:
		return policy.ActionWarn
	case policy.EnforcementAudit:
		return policy.ActionAudit
	}
	return policy.ActionDeny
}

// namespaceTiers splits the namespaces by the action a rule whose
// configured action is ruleAction takes in them.
func namespaceTiers(cfg *policy.Config, ruleAction policy.Action) []tier {
	def := ruleAction.Weaker(ceiling(cfg.Enforcement))
	entryAction := func(ne policy.NamespaceEnforcementConfig) policy.Action {
		return def.Weaker(ceiling(ne.Enforcement))
	}
	literal := true
	for _, ne := range cfg.NamespaceEnforcement {
		literal = literal && allLiteral(ne.Namespaces)
	}
	actions := []policy.Action{policy.ActionDeny, policy.ActionWarn, policy.ActionAudit}
	var out []tier
	if literal {
		// The first entry naming a namespace decides for it.
		first := map[string]policy.Action{}
		var names []string
		for _, ne := range cfg.NamespaceEnforcement {
			for _, n := range ne.Namespaces {
				if _, seen := first[n]; !seen {
					first[n] = entryAction(ne)
					names = append(names, n)
				}
			}
		}
		for _, a := range actions {
			var same, other []string
			for _, n := range names {
				if first[n] == a {
					same = append(same, n)
				} else {
					other = append(other, n)
				}
			}
			switch {
			case def == a:
				out = append(out, tier{action: a, notIn: other})
			case len(same) > 0:
				out = append(out, tier{action: a, in: same})
			}
		}
		return out
	}
	// Globs: the first matching entry decides, as a chain of conditionals.
	chain := celform.Lit(string(def))
	present := map[policy.Action]bool{def: true}
	for i := len(cfg.NamespaceEnforcement) - 1; i >= 0; i-- {
		ne := cfg.NamespaceEnforcement[i]
		a := entryAction(ne)
		present[a] = true
		chain = fmt.Sprintf("%s ? %s : %s", celform.NsMatchesAny(ne.Namespaces), celform.Lit(string(a)), chain)
	}
	for _, a := range actions {
		if present[a] {
			out = append(out, tier{action: a, cel: fmt.Sprintf("(%s) == %s", chain, celform.Lit(string(a)))})
		}
	}
	return out
}

// notExpressed lists what the generated policies of a rule (or of the
// exemption gate) do not check the way the webhook does. docs/modes.md
// carries the same list.
func notExpressed(id string) []string {
	if id == GateName {
		return []string{"with more than 32 gated annotations added or changed at once, the message names the first and counts the rest (the webhook names them all)"}
	}
	r, ok := rules.Builtin().Get(id)
	switch {
	case ok && r.CEL != nil:
		return r.CELGaps
	case ok && r.NotRendered != "":
		return []string{"not rendered: " + r.NotRendered}
	}
	return []string{"not rendered"}
}

// notExpressedIDs are the rule IDs, in catalogue order, then the exemption
// gate: what the lists of gaps cover.
func notExpressedIDs() []string {
	var ids []string
	for _, r := range rules.Builtin().Rules() {
		ids = append(ids, r.ID)
	}
	return append(ids, GateName)
}

// joinLines is for the text output of gaps.
func joinLines(lines []string, indent string) string {
	return indent + strings.Join(lines, "\n"+indent)
}
