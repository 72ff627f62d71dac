package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultMaxExemptionDays is how far away the expiry of an exemption from a
// deny rule may lie by default.
const DefaultMaxExemptionDays = 90

// ExemptionsConfig says which exemption annotations take effect. The
// DaemonSets a rule judges belong to the people the rule constrains: an
// exemption they write themselves must end, and the policy may say who may
// write one at all.
type ExemptionsConfig struct {
	// MaxExemptionDays is how far away (in days from today, UTC) the expiry
	// of an exemption from a deny rule may lie. An exemption from a deny rule
	// without an expiry, or with one further out, is void.
	MaxExemptionDays int `yaml:"maxExemptionDays"`
	// AllowedGroups, when not empty, are the groups whose members may add or
	// change an exemption or an intended-coverage annotation. Empty: anyone.
	AllowedGroups []string `yaml:"allowedGroups"`
	// AllowedNamespaces, when not empty, are the namespaces (globs) where
	// exemptions and intended-coverage annotations take effect. Empty: all.
	AllowedNamespaces []string `yaml:"allowedNamespaces"`
}

func validateExemptions(c *ExemptionsConfig, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.MaxExemptionDays < 1 || c.MaxExemptionDays > 3650 {
		errs = append(errs, field.Invalid(p.Child("maxExemptionDays"), c.MaxExemptionDays, "must be between 1 and 3650"))
	}
	for i, g := range c.AllowedGroups {
		if g == "" {
			errs = append(errs, field.Invalid(p.Child("allowedGroups").Index(i), g, "must not be empty"))
		}
	}
	return append(errs, ValidateGlobs(c.AllowedNamespaces, p.Child("allowedNamespaces"))...)
}

// Requester is who asks for the change under admission.
type Requester struct {
	Username string
	Groups   []string
}

// GatedAnnotation reports whether key is an annotation the policy's
// exemption gate governs: every exempt.dsguard.io/* (also one that names no
// rule or a rule that cannot be exempted, so that a later policy cannot turn
// an annotation nobody permitted into one that holds) and
// coverage.dsguard.io/intended.
func GatedAnnotation(key string) bool {
	return key == IntendedCoverageAnnotation || strings.HasPrefix(key, ExemptionAnnotationPrefix)
}

// HasGatedAnnotation reports whether ds carries an annotation the exemption
// gate governs.
func HasGatedAnnotation(ds *appsv1.DaemonSet) bool {
	for key := range ds.Annotations {
		if GatedAnnotation(key) {
			return true
		}
	}
	return false
}

// GroupGated reports whether the policy names exemptions.allowedGroups: then
// only their members may add or change a gated annotation, which only
// admission (knowing the requester) can check.
func (p *Policy) GroupGated() bool { return len(p.exemptions.AllowedGroups) > 0 }

// allowedToAnnotate reports whether the requester is in one of the policy's
// exemptions.allowedGroups (or the policy names none).
func (p *Policy) allowedToAnnotate(r *Requester) bool {
	if len(p.exemptions.AllowedGroups) == 0 {
		return true
	}
	for _, g := range r.Groups {
		if slices.Contains(p.exemptions.AllowedGroups, g) {
			return true
		}
	}
	return false
}

// annotationWritten reports whether a request that stores annotations over
// previous (nil on CREATE) adds or changes key.
func annotationWritten(annotations, previous map[string]string, key string) bool {
	prev, had := previous[key]
	return !had || prev != annotations[key]
}

// GateRefusal is the exemption gate's refusal of a request: a requester
// outside exemptions.allowedGroups adds or changes gated annotations.
type GateRefusal struct {
	// Requester is the user name of whoever asked.
	Requester string
	// AllowedGroups are the policy's exemptions.allowedGroups.
	AllowedGroups []string
	// Keys are the annotations added or changed, sorted.
	Keys []string
}

// RefuseAnnotationChanges returns why the request must be refused, nil when
// it may proceed: with exemptions.allowedGroups set, an add or change of a
// gated annotation by someone outside those groups is refused, whatever the
// exempted rule's action, so that an annotation a later update leaves
// unchanged is one a permitted person wrote (or one that predates the gate).
// previous are the stored object's annotations on UPDATE, nil on CREATE.
// Removing an annotation is always allowed.
func (p *Policy) RefuseAnnotationChanges(ds *appsv1.DaemonSet, previous map[string]string, r Requester) *GateRefusal {
	if p.allowedToAnnotate(&r) {
		return nil
	}
	var keys []string
	for key := range ds.Annotations {
		if GatedAnnotation(key) && annotationWritten(ds.Annotations, previous, key) {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	return &GateRefusal{Requester: r.Username, AllowedGroups: p.exemptions.AllowedGroups, Keys: keys}
}

// Message is the refusal as the person at the terminal reads it: which
// annotations, who asked, who may, and what to do instead.
func (g *GateRefusal) Message() string {
	what := "annotation " + g.Keys[0]
	if len(g.Keys) > 1 {
		what = "annotations " + strings.Join(g.Keys, ", ")
	}
	groups := strings.Join(g.AllowedGroups, ", ")
	return fmt.Sprintf("dsguard refuses the change to %s: only members of %s may add or change exemption and "+
		"intended-coverage annotations (exemptions.allowedGroups), and %s is not one.\n"+
		"  fix: ask a member of %s to apply it, or leave the annotation as it was; removing it is always allowed.",
		what, groups, g.Requester, groups)
}

// Warning is the refusal where dsguard only warns (a fail-open namespace):
// one line, short, naming the rule of the gate, who asked and who may.
func (g *GateRefusal) Warning(namespace string) string {
	what := "annotation " + g.Keys[0]
	if len(g.Keys) > 1 {
		what = "annotations " + strings.Join(g.Keys, ", ")
	}
	return fmt.Sprintf("dsguard would refuse the change to %s: %s is not in exemptions.allowedGroups (%s); admitted: namespace %s fails open",
		what, g.Requester, strings.Join(g.AllowedGroups, ", "), namespace)
}

// gateProblem says why the policy's exemption gate voids the annotation key
// on ds, "" when it lets it through. The namespace gate always applies. The
// group gate needs the requester (admission only: offline and in the audit
// it is not applied) and judges only an annotation the request adds or
// changes: admission refuses those from anyone outside the groups
// (RefuseAnnotationChanges), so one an update leaves unchanged was written by
// a permitted person, or predates the gate, and a rollout restart by someone
// else keeps it. Where admission only warns (the fail-open namespaces), the
// annotation is void for the request that writes it.
func (env *Env) gateProblem(ds *appsv1.DaemonSet, key string) string {
	ex := &env.Policy.exemptions
	ns := NamespaceOf(ds)
	if len(ex.AllowedNamespaces) > 0 && !MatchAnyGlob(ex.AllowedNamespaces, ns) {
		return fmt.Sprintf("the policy allows exemptions only in namespaces %s (exemptions.allowedNamespaces)",
			strings.Join(ex.AllowedNamespaces, ", "))
	}
	if env.Requester == nil || env.Policy.allowedToAnnotate(env.Requester) {
		return ""
	}
	if !annotationWritten(ds.Annotations, env.PreviousAnnotations, key) {
		return ""
	}
	return fmt.Sprintf("%s may not grant it: only members of %s may (exemptions.allowedGroups)",
		env.Requester.Username, strings.Join(ex.AllowedGroups, ", "))
}

// Exemption returns the DaemonSet's exemption from rule id and whether it
// takes effect; when it does not, problem says why ("" when there is no
// exemption annotation at all).
func (env *Env) Exemption(ds *appsv1.DaemonSet, id string) (e Exemption, problem string, active bool) {
	if env.Policy == nil {
		return Exemption{}, "", false
	}
	rs, known := env.Policy.byID[id]
	var key string
	if known && rs.rule.exemptionKey != "" {
		key = rs.rule.exemptionKey // built once: asked for every rule with findings
	} else {
		key = ExemptionAnnotationPrefix + id
	}
	value, ok := ds.Annotations[key]
	if !ok {
		return Exemption{}, "", false
	}
	switch {
	case !known:
		return Exemption{}, fmt.Sprintf("exemption names unknown rule %q, so it exempts nothing", id), false
	case !rs.rule.Exemptible:
		return Exemption{}, fmt.Sprintf("rule %s cannot be exempted", id), false
	case !rs.allowExemptions:
		return Exemption{}, fmt.Sprintf("the policy forbids exemptions from %s, so this one is ignored", id), false
	}
	e, err := ParseExemption(value)
	if err != nil {
		return Exemption{}, fmt.Sprintf("exemption from %s is ignored: %v", id, err), false
	}
	if e.Expired(env.Now) {
		return e, fmt.Sprintf("exemption from %s expired on %s and no longer applies", id, e.LastDay()), false
	}
	if rs.action == ActionDeny {
		maxDays := env.Policy.exemptions.MaxExemptionDays
		if e.Expires.IsZero() {
			return e, fmt.Sprintf("exemption from deny rule %s has no expiry, so it is void: add \"; expires=YYYY-MM-DD\" "+
				"at most %d days from today", id, maxDays), false
		}
		if latest := lastAllowedExpiry(env.Now, maxDays); e.Expires.After(latest) {
			return e, fmt.Sprintf("exemption from deny rule %s expires on %s, more than %d days away, so it is void: "+
				"the latest allowed expiry is %s", id, e.LastDay(), maxDays, latest.AddDate(0, 0, -1).Format(time.DateOnly)), false
		}
	}
	if problem := env.gateProblem(ds, key); problem != "" {
		return e, fmt.Sprintf("exemption from %s is void: %s", id, problem), false
	}
	return e, "", true
}

// lastAllowedExpiry is the latest Expires (the first instant an exemption
// no longer holds) an exemption may have: the end of the day maxDays after
// today, UTC.
func lastAllowedExpiry(now time.Time, maxDays int) time.Time {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).AddDate(0, 0, maxDays+1)
}

// LastDay is the last day the exemption holds, "" when it never expires.
func (e Exemption) LastDay() string {
	if e.Expires.IsZero() {
		return ""
	}
	return e.Expires.AddDate(0, 0, -1).Format(time.DateOnly)
}

// IntendedCoverage returns the reason of the DaemonSet's
// coverage.dsguard.io/intended annotation when it takes effect: not empty, and
// allowed by the policy's exemption gate. When it does not, problem says why
// ("" when there is no annotation at all).
func (env *Env) IntendedCoverage(ds *appsv1.DaemonSet) (reason, problem string, ok bool) {
	value, present := ds.Annotations[IntendedCoverageAnnotation]
	if !present {
		return "", "", false
	}
	reason = CleanReason(value)
	if reason == "" {
		return "", "intended-coverage annotation has no reason, so it is ignored", false
	}
	if env.Policy != nil {
		if problem := env.gateProblem(ds, IntendedCoverageAnnotation); problem != "" {
			return reason, "intended-coverage annotation is void: " + problem, false
		}
	}
	return reason, "", true
}

// ActiveExemption is an exemption that takes effect.
type ActiveExemption struct {
	Rule string
	Exemption
}

// ActiveExemptions lists the exemptions of ds that take effect, sorted by
// rule ID.
func (env *Env) ActiveExemptions(ds *appsv1.DaemonSet) []ActiveExemption {
	var out []ActiveExemption
	for key := range ds.Annotations {
		id, ok := strings.CutPrefix(key, ExemptionAnnotationPrefix)
		if !ok {
			continue
		}
		if e, _, active := env.Exemption(ds, id); active {
			out = append(out, ActiveExemption{Rule: id, Exemption: e})
		}
	}
	slices.SortFunc(out, func(a, b ActiveExemption) int { return strings.Compare(a.Rule, b.Rule) })
	return out
}

// String is "rule until YYYY-MM-DD: reason" (or without "until" when the
// exemption never expires).
func (a ActiveExemption) String() string {
	if day := a.LastDay(); day != "" {
		return a.Rule + " until " + day + ": " + a.Reason
	}
	return a.Rule + ": " + a.Reason
}
