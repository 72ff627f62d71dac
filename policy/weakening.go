package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// The reasons Weakenings reports besides those of Weaknesses it shares
// (enforcement, deny-rule-lowered, namespace-lowered, rule-parameters-voided).
const (
	// WeakeningRuleLowered: a warn or audit rule's action lowered.
	WeakeningRuleLowered = "rule-lowered"
	// WeakeningScopeNarrowed: a rule applies in fewer namespaces or to
	// fewer DaemonSets.
	WeakeningScopeNarrowed = "rule-scope-narrowed"
	// WeakeningBypassAdded: a user or group added to the break-glass list.
	WeakeningBypassAdded = "bypass-added"
	// WeakeningExemptionsWidened: exemptions last longer, take effect in
	// more places or for more rules, or more people may grant them.
	WeakeningExemptionsWidened = "exemptions-widened"
	// WeakeningRatcheting: ratcheting turned on.
	WeakeningRatcheting = "ratcheting"
	// WeakeningLifecycleTaints: taints added to the lifecycle taints,
	// which never make a coverage finding.
	WeakeningLifecycleTaints = "lifecycle-taints-added"
)

// WeakeningReasons are all reasons Weakenings reports, for metrics.
var WeakeningReasons = []string{"enforcement", "namespace-lowered", "deny-rule-lowered", WeakeningRuleLowered,
	WeakeningScopeNarrowed, "rule-parameters-voided", WeakeningBypassAdded, WeakeningExemptionsWidened,
	WeakeningRatcheting, WeakeningLifecycleTaints}

// ParamLoosener is implemented by parameter types that can tell when a
// change of their values makes the rule find less (a taint dropped from the
// list it checks): Loosened says how, one line each naming the parameter.
// old is a pointer to the same type.
type ParamLoosener interface {
	Loosened(old any) []string
}

// Weakenings lists each change from old to new that lowers enforcement: a
// rule turned off or its action lowered, its scope narrowed, its parameters
// voided or loosened, the enforcement lowered (policy-wide or in some
// namespaces), bypass subjects added, exemptions widened, ratcheting turned
// on, lifecycle taints added. Changes that strengthen the policy or leave its
// meaning as it is (order, comments, formatting) give none. Both must come
// from the same registry; a rule only one of them has is left out.
func Weakenings(old, new *Config) []Weakness {
	if old == nil || new == nil {
		return nil
	}
	var out []Weakness
	add := func(reason, format string, args ...any) {
		out = append(out, Weakness{Reason: reason, Detail: fmt.Sprintf(format, args...)})
	}
	if o, n := old.Enforcement.ceiling(), new.Enforcement.ceiling(); n.strength() < o.strength() {
		add("enforcement", "enforcement %s → %s: %s", old.Enforcement, new.Enforcement, ceilingEffect(n, "anywhere"))
	}
	out = append(out, namespaceLowerings(old.Enforcement.ceiling(), old.NamespaceEnforcement, new.NamespaceEnforcement)...)
	if !isTrue(old.Ratcheting) && isTrue(new.Ratcheting) {
		add(WeakeningRatcheting, "ratcheting false → true: an update that keeps a violation its DaemonSet already had is admitted with a warning instead of denied")
	}
	for _, u := range added(old.Bypass.Users, new.Bypass.Users) {
		add(WeakeningBypassAdded, "bypass.users adds %s: that user's DaemonSet writes are admitted unchecked", u)
	}
	for _, g := range added(old.Bypass.Groups, new.Bypass.Groups) {
		add(WeakeningBypassAdded, "bypass.groups adds %s: its members' DaemonSet writes are admitted unchecked", g)
	}
	out = append(out, exemptionWidenings(&old.Exemptions, &new.Exemptions)...)
	for _, t := range new.LifecycleTaints {
		if !lifecycleCovered(old.LifecycleTaints, t) {
			add(WeakeningLifecycleTaints, "lifecycleTaints adds %s: nodes with that taint are never a coverage gap, so an agent kept off them goes unreported", t)
		}
	}
	for _, r := range new.Rules.rules() {
		oc, nc := old.Rules.byID[r.ID], new.Rules.byID[r.ID]
		if oc == nil || nc == nil {
			continue
		}
		out = append(out, ruleWeakenings(r, oc, nc)...)
	}
	return out
}

// isTrue reads an optional switch without a panic on nil (a document may
// say "ratcheting: null"), which counts as off.
func isTrue(b *bool) bool { return b != nil && *b }

// ceilingEffect says what a ceiling does to the deny rules where it holds.
func ceilingEffect(a Action, where string) string {
	switch a {
	case ActionWarn:
		return "no DaemonSet is denied " + where + ", violations only warn"
	case ActionAudit:
		return "no DaemonSet is denied or warned about " + where + ", violations are only recorded"
	}
	return "deny rules deny " + where
}

// namespaceLowerings reports each entry of the new namespaceEnforcement that
// caps some namespace lower than the old list did. Globs cannot be compared
// as sets, so both lists are judged on sample namespaces: instances of every
// glob in either list, and names that stand for every namespace. Order
// matters (the first match wins), which the samples see as well. A
// namespace the old policy-wide enforcement already held at the new cap
// loses nothing.
func namespaceLowerings(oldCeiling Action, old, new []NamespaceEnforcementConfig) []Weakness {
	var globs []string
	for _, ne := range slices.Concat(old, new) {
		globs = append(globs, ne.Namespaces...)
	}
	samples := namespaceSamples(globs)
	// One Weakness per new entry, naming its first namespace capped lower.
	var out []Weakness
	reported := map[int]bool{}
	for _, ns := range samples {
		i := firstEnforcementMatch(new, ns)
		if i < 0 || reported[i] {
			continue
		}
		n := new[i].Enforcement.ceiling()
		o := oldCeiling
		if j := firstEnforcementMatch(old, ns); j >= 0 {
			o = o.Weaker(old[j].Enforcement.ceiling())
		}
		if n.strength() >= o.strength() {
			continue
		}
		reported[i] = true
		out = append(out, Weakness{Reason: "namespace-lowered", Detail: fmt.Sprintf(
			"namespaceEnforcement[%d] (%s: %s) caps namespace %s at %s, was %s: %s",
			i, strings.Join(new[i].Namespaces, ", "), new[i].Enforcement, ns, n, o, ceilingEffect(n, "in those namespaces"))})
	}
	return out
}

func firstEnforcementMatch(list []NamespaceEnforcementConfig, ns string) int {
	for i, ne := range list {
		if MatchAnyGlob(ne.Namespaces, ns) {
			return i
		}
	}
	return -1
}

// namespaceSamples returns names that stand for the namespaces globs tell
// apart: a few instances of each glob (the more telling examples, first),
// then namespaceProbes.
func namespaceSamples(globs []string) []string {
	var out []string
	for _, g := range globs {
		for _, s := range globInstances(g) {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	for _, s := range namespaceProbes {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// globInstances returns names that g matches: each * as nothing and as a
// short run, each ? and character class as one character of it.
func globInstances(g string) []string {
	var out []string
	for _, star := range []string{"", "x", "x-9"} {
		var b strings.Builder
		for i := 0; i < len(g); i++ {
			switch c := g[i]; c {
			case '*':
				b.WriteString(star)
			case '?':
				b.WriteByte('a')
			case '\\':
				if i+1 < len(g) {
					i++
					b.WriteByte(g[i])
				}
			case '[':
				end := strings.IndexByte(g[i+1:], ']')
				if end < 0 {
					return out
				}
				class := g[i : i+end+2]
				i += end + 1
				for _, r := range "abcdefghijklmnopqrstuvwxyz0123456789-" {
					if ok, _ := path.Match(class, string(r)); ok {
						b.WriteRune(r)
						break
					}
				}
			default:
				b.WriteByte(c)
			}
		}
		if s := b.String(); s != "" && !slices.Contains(out, s) {
			if ok, _ := path.Match(g, s); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// added returns the entries of new that old does not have, in new's order.
func added(old, new []string) []string {
	var out []string
	for _, s := range new {
		if !slices.Contains(old, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// exemptionWidenings reports each way more exemptions take effect.
func exemptionWidenings(old, new *ExemptionsConfig) []Weakness {
	var out []Weakness
	add := func(format string, args ...any) {
		out = append(out, Weakness{Reason: WeakeningExemptionsWidened, Detail: fmt.Sprintf(format, args...)})
	}
	if new.MaxExemptionDays > old.MaxExemptionDays {
		add("exemptions.maxExemptionDays %d → %d: an exemption from a deny rule may keep a DaemonSet uncovered longer",
			old.MaxExemptionDays, new.MaxExemptionDays)
	}
	oldGated := old.grantedByRBAC() || len(old.AllowedGroups) > 0
	newGated := new.grantedByRBAC() || len(new.AllowedGroups) > 0
	switch {
	case oldGated && !newGated:
		add("exemptions.grantedByRBAC false with no allowedGroups: anyone who may edit a DaemonSet may now exempt it from the rules")
	case oldGated:
		if !old.grantedByRBAC() && new.grantedByRBAC() {
			add("exemptions.grantedByRBAC false → true: whoever RBAC lets create exemptions.dsguard.io may now grant exemptions too")
		}
		for _, g := range added(old.AllowedGroups, new.AllowedGroups) {
			add("exemptions.allowedGroups adds %s: its members may grant exemptions", g)
		}
	}
	switch {
	case len(old.AllowedNamespaces) > 0 && len(new.AllowedNamespaces) == 0:
		add("exemptions.allowedNamespaces [%s] → every namespace: exemption annotations now take effect everywhere",
			strings.Join(old.AllowedNamespaces, ", "))
	case len(old.AllowedNamespaces) > 0:
		for _, ns := range namespaceSamples(slices.Concat(old.AllowedNamespaces, new.AllowedNamespaces)) {
			if MatchAnyGlob(new.AllowedNamespaces, ns) && !MatchAnyGlob(old.AllowedNamespaces, ns) {
				add("exemptions.allowedNamespaces [%s] → [%s]: exemption annotations now take effect in namespace %s too",
					strings.Join(old.AllowedNamespaces, ", "), strings.Join(new.AllowedNamespaces, ", "), ns)
				break
			}
		}
	}
	return out
}

// lifecycleCovered reports whether entries already make entry a lifecycle
// taint (the same key, or a prefix of it).
func lifecycleCovered(entries []string, entry string) bool {
	t := lifecycleTaintOf(entry)
	for _, e := range entries {
		o := lifecycleTaintOf(e)
		if o.Key == t.Key && o.Prefix == t.Prefix || o.Prefix && strings.HasPrefix(t.Key, o.Key) {
			return true
		}
	}
	return false
}

// ruleWeakenings reports how rule r's part of the policy got weaker. A rule
// that is off now is said once, by its action; one that was off was
// enforcing nothing, so nothing else about it can be weaker.
func ruleWeakenings(r *Rule, oc, nc ruleConfig) []Weakness {
	o, n := oc.options(), nc.options()
	var out []Weakness
	add := func(reason, format string, args ...any) {
		out = append(out, Weakness{Reason: reason, Detail: fmt.Sprintf("rules.%s.", r.ID) + fmt.Sprintf(format, args...)})
	}
	if n.Action.strength() < o.Action.strength() {
		reason := WeakeningRuleLowered
		if o.Action == ActionDeny {
			reason = "deny-rule-lowered"
		}
		add(reason, "action %s → %s: %s", o.Action, n.Action, actionEffect(r, n.Action))
	}
	if n.Action == ActionOff || o.Action == ActionOff {
		return out
	}
	if why := namespacesNarrowed(&o.Scope.Namespaces, &n.Scope.Namespaces); why != "" {
		add(WeakeningScopeNarrowed, "scope.namespaces %s", why)
	}
	if why := selectorNarrowed(o.Scope.Selector, n.Scope.Selector); why != "" {
		add(WeakeningScopeNarrowed, "scope.selector %s: DaemonSets without it are no longer checked", why)
	}
	if r.Exemptible && o.AllowExemptions != nil && !*o.AllowExemptions && (n.AllowExemptions == nil || *n.AllowExemptions) {
		out = append(out, Weakness{Reason: WeakeningExemptionsWidened, Detail: fmt.Sprintf(
			"rules.%s.allowExemptions false → true: exemption annotations silence the rule again", r.ID)})
	}
	var oldVoid []string
	if w, ok := oc.params().(ParamWeakener); ok {
		oldVoid = w.Weaknesses()
	}
	if w, ok := nc.params().(ParamWeakener); ok {
		for _, d := range w.Weaknesses() {
			if !slices.Contains(oldVoid, d) {
				add("rule-parameters-voided", "parameters.%s", d)
			}
		}
	}
	if l, ok := nc.params().(ParamLoosener); ok {
		for _, d := range l.Loosened(oc.params()) {
			add("rule-parameters-voided", "parameters.%s", d)
		}
	}
	return out
}

// actionEffect says what a rule's new action means for the DaemonSets it
// would have stopped.
func actionEffect(r *Rule, a Action) string {
	switch a {
	case ActionWarn:
		return fmt.Sprintf("a DaemonSet that fails %q is admitted with a warning", r.Title)
	case ActionAudit:
		return fmt.Sprintf("a DaemonSet that fails %q is admitted and only recorded, the person applying it is not told", r.Title)
	}
	return fmt.Sprintf("%q is no longer checked at all", r.Title)
}

// namespacesNarrowed says how a rule's namespaces lost some the old scope
// had, or "" when every namespace the old scope held is still held.
func namespacesNarrowed(old, new *NamespaceScopeConfig) string {
	in := func(s *NamespaceScopeConfig, ns string) bool {
		return (len(s.Include) == 0 || MatchAnyGlob(s.Include, ns)) && !MatchAnyGlob(s.Exclude, ns)
	}
	for _, ns := range namespaceSamples(slices.Concat(new.Exclude, old.Include, new.Include, old.Exclude)) {
		if in(old, ns) && !in(new, ns) {
			return fmt.Sprintf("include [%s] → [%s], exclude [%s] → [%s]: DaemonSets in namespace %s (for one) are no longer checked",
				strings.Join(old.Include, ", "), strings.Join(new.Include, ", "),
				strings.Join(old.Exclude, ", "), strings.Join(new.Exclude, ", "), ns)
		}
	}
	return ""
}

// selectorNarrowed says which requirements of new a DaemonSet the old
// selector matched may fail, or "" when every such DaemonSet still matches.
// A requirement is kept when one of old's implies it (the same key, a
// subset of values); anything else counts as narrowing.
func selectorNarrowed(old, new *LabelSelectorConfig) string {
	newReqs := requirementsOf(new)
	oldReqs := requirementsOf(old)
	var extra []string
	for _, nr := range newReqs {
		if !slices.ContainsFunc(oldReqs, func(or LabelSelectorRequirementConfig) bool { return implies(or, nr) }) {
			extra = append(extra, requirementString(nr))
		}
	}
	if len(extra) == 0 {
		return ""
	}
	return "requires " + strings.Join(extra, ", ")
}

// requirementsOf flattens a selector into requirements (matchLabels as In
// of one value); nil matches every DaemonSet and has none.
func requirementsOf(s *LabelSelectorConfig) []LabelSelectorRequirementConfig {
	if s == nil {
		return nil
	}
	var out []LabelSelectorRequirementConfig
	keys := make([]string, 0, len(s.MatchLabels))
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, LabelSelectorRequirementConfig{Key: k, Operator: "In", Values: []string{s.MatchLabels[k]}})
	}
	return append(out, s.MatchExpressions...)
}

// implies reports whether every label set that meets a also meets b.
func implies(a, b LabelSelectorRequirementConfig) bool {
	if a.Key != b.Key {
		return false
	}
	subset := func(x, y []string) bool {
		return !slices.ContainsFunc(x, func(v string) bool { return !slices.Contains(y, v) })
	}
	disjoint := func(x, y []string) bool {
		return !slices.ContainsFunc(x, func(v string) bool { return slices.Contains(y, v) })
	}
	switch a.Operator + " " + b.Operator {
	case "In In":
		return subset(a.Values, b.Values)
	case "In Exists":
		return true
	case "In NotIn":
		return disjoint(a.Values, b.Values)
	case "Exists Exists", "DoesNotExist DoesNotExist":
		return true
	case "DoesNotExist NotIn":
		return true
	case "NotIn NotIn":
		return subset(b.Values, a.Values)
	}
	return false
}

func requirementString(r LabelSelectorRequirementConfig) string {
	switch r.Operator {
	case "Exists":
		return r.Key
	case "DoesNotExist":
		return "!" + r.Key
	case "In":
		if len(r.Values) == 1 {
			return r.Key + "=" + r.Values[0]
		}
		return r.Key + " in (" + strings.Join(r.Values, ",") + ")"
	}
	return r.Key + " notin (" + strings.Join(r.Values, ",") + ")"
}
