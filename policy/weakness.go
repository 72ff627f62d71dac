package policy

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Weakness is one way a policy is weaker than the built-in baseline.
type Weakness struct {
	// Reason is a stable label: enforcement, bypass-broad-group,
	// bypass-anonymous, deny-rule-lowered, namespace-lowered,
	// exemptions-unbounded, rule-scoped-away, rule-parameters-voided.
	Reason string
	// Detail says what exactly, for a person.
	Detail string
}

// WeaknessReasons are all reasons Weaknesses reports, for metrics.
var WeaknessReasons = []string{"enforcement", "bypass-broad-group", "bypass-anonymous", "deny-rule-lowered",
	"namespace-lowered", "exemptions-unbounded", "rule-scoped-away", "rule-parameters-voided"}

// ParamWeakener is implemented by parameter types some of whose values void
// the rule while it keeps its action (control-plane-toleration with no
// taints to tolerate): Weaknesses says which, one line each, naming the
// parameter.
type ParamWeakener interface {
	Weaknesses() []string
}

// broadGroups are groups every user, or every workload, belongs to: a bypass
// for one of them switches dsguard off for nearly everybody.
var broadGroups = []string{"system:authenticated", "system:unauthenticated", "system:serviceaccounts"}

// maxReasonableExemptionDays is the longest exemption the baseline
// considers normal.
const maxReasonableExemptionDays = 365

// Weaknesses lists how p is weaker than the built-in policy: a lowered
// enforcement, a bypass for broad groups or anonymous users, a deny rule
// lowered, a namespace ceiling that matches every namespace, exemptions that
// may last more than a year. A weaker policy may be intended (a staged
// roll-out); dsguard admits it but says so wherever an operator looks.
func (p *Policy) Weaknesses() []Weakness {
	var out []Weakness
	if p.enforcement != EnforcementEnforce {
		out = append(out, Weakness{"enforcement", fmt.Sprintf("enforcement is %s: no DaemonSet is denied anywhere", p.enforcement)})
	}
	for _, g := range p.bypassGroups {
		if isBroadGroup(g) {
			out = append(out, Weakness{"bypass-broad-group", fmt.Sprintf("bypass.groups has %s: its members are never checked", g)})
		}
	}
	for _, u := range p.bypassUsers {
		if u == "system:anonymous" {
			out = append(out, Weakness{"bypass-anonymous", "bypass.users has system:anonymous"})
		}
	}
	var lowered []string
	for i := range p.rules {
		rs := &p.rules[i]
		if rs.rule.DefaultAction == ActionDeny && rs.configured != ActionDeny {
			lowered = append(lowered, rs.rule.ID+" is "+string(rs.configured))
		}
	}
	if len(lowered) > 0 {
		out = append(out, Weakness{"deny-rule-lowered", "deny rules lowered: " + strings.Join(lowered, ", ")})
	}
	for _, ne := range p.namespaceEnforcement {
		if ne.ceiling != ActionDeny && matchesEveryNamespace(ne.globs) {
			out = append(out, Weakness{"namespace-lowered", fmt.Sprintf("namespaceEnforcement %s caps every namespace at %s",
				strings.Join(ne.globs, ", "), ne.ceiling)})
			break
		}
	}
	var scopedAway, voided []string
	for i := range p.rules {
		rs := &p.rules[i]
		if rs.configured == ActionOff || rs.rule.DefaultAction != ActionDeny {
			// Off is said above; a warn rule may be narrowed or
			// turned off without weakening the baseline.
			continue
		}
		if why := rs.scope.emptiness(); why != "" {
			scopedAway = append(scopedAway, fmt.Sprintf("rules.%s.scope %s", rs.rule.ID, why))
		}
		if w, ok := rs.params.(ParamWeakener); ok {
			for _, d := range w.Weaknesses() {
				voided = append(voided, fmt.Sprintf("rules.%s.parameters.%s", rs.rule.ID, d))
			}
		}
	}
	if len(scopedAway) > 0 {
		out = append(out, Weakness{"rule-scoped-away", "deny rules that apply nowhere: " + strings.Join(scopedAway, "; ")})
	}
	if len(voided) > 0 {
		out = append(out, Weakness{"rule-parameters-voided", "rules whose parameters void them: " + strings.Join(voided, "; ")})
	}
	if p.exemptions.MaxExemptionDays > maxReasonableExemptionDays {
		out = append(out, Weakness{"exemptions-unbounded", fmt.Sprintf("exemptions.maxExemptionDays is %d: exemptions from deny rules may last years",
			p.exemptions.MaxExemptionDays)})
	}
	return out
}

func isBroadGroup(g string) bool {
	// Or every service account of a namespace.
	return slices.Contains(broadGroups, g) || strings.HasPrefix(g, "system:serviceaccounts:")
}

// namespaceProbes are names that stand for every namespace: each character
// a name may start with, alone, and followed by the kinds of character a
// DNS label may hold. Globs that together match all of them match every
// namespace in any sense that matters (path.Match has no other way to
// cover "the rest").
var namespaceProbes = func() []string {
	var out []string
	for _, c := range "abcdefghijklmnopqrstuvwxyz0123456789" {
		for _, rest := range []string{"", "0", "z", "-a", "a-9", "zz-9", "q1-long-name"} {
			out = append(out, string(c)+rest)
		}
	}
	return out
}()

// matchesEveryNamespace reports whether globs together match every
// namespace: "*" and "?*" alone, or sets such as "[a-m]*", "[n-z]*",
// "[0-9]*".
func matchesEveryNamespace(globs []string) bool {
	if len(globs) == 0 {
		return false
	}
	for _, n := range namespaceProbes {
		if !MatchAnyGlob(globs, n) {
			return false
		}
	}
	return true
}

// emptiness says why a scope can match no DaemonSet at all ("" when it
// can): excludes that cover every namespace, or a selector that
// contradicts itself.
func (s *scope) emptiness() string {
	if matchesEveryNamespace(s.exclude) {
		return fmt.Sprintf("excludes every namespace (namespaces.exclude %s)", strings.Join(s.exclude, ", "))
	}
	if s.selector != nil {
		if why := contradiction(s.selector); why != "" {
			return "has a selector that matches no DaemonSet: " + why
		}
	}
	return ""
}

// contradiction says which requirements of sel no label set meets, or "".
func contradiction(sel labels.Selector) string {
	reqs, _ := sel.Requirements()
	type keyState struct {
		exists, absent bool
		in             []string // nil: no In yet
		notIn          []string
	}
	byKey := map[string]*keyState{}
	var keys []string
	for _, r := range reqs {
		k := byKey[r.Key()]
		if k == nil {
			k = &keyState{}
			byKey[r.Key()] = k
			keys = append(keys, r.Key())
		}
		vals := r.Values().List()
		switch r.Operator() {
		case selection.In, selection.Equals, selection.DoubleEquals:
			k.exists = true
			if k.in == nil {
				k.in = vals
			} else {
				k.in = slices.DeleteFunc(k.in, func(v string) bool { return !slices.Contains(vals, v) })
			}
		case selection.NotIn, selection.NotEquals:
			k.notIn = append(k.notIn, vals...)
		case selection.Exists:
			k.exists = true
		case selection.DoesNotExist:
			k.absent = true
		}
	}
	for _, key := range keys {
		k := byKey[key]
		switch {
		case k.exists && k.absent:
			return fmt.Sprintf("label %s must both exist and not exist", key)
		case k.in != nil && len(slices.DeleteFunc(slices.Clone(k.in), func(v string) bool { return slices.Contains(k.notIn, v) })) == 0:
			return fmt.Sprintf("no value of label %s meets every requirement on it", key)
		}
	}
	return ""
}
