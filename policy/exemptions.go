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
	// GrantedByRBAC (nil: true) lets whoever the cluster's authorizer
	// allows to create exemptions.dsguard.io (named by the DaemonSet's
	// namespace, in dsguard's own namespace) add or change an exemption or
	// an intended-coverage annotation: cluster admins, and those given a
	// RoleBinding to the chart's exemption-granter ClusterRole. Tenants who
	// may edit their DaemonSets may not grant themselves an exemption.
	GrantedByRBAC *bool `yaml:"grantedByRBAC"`
	// AllowedGroups are groups whose members may add or change an exemption
	// or an intended-coverage annotation too. With GrantedByRBAC false and
	// no AllowedGroups, anyone who may update the DaemonSet may.
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

// The permission by which RBAC grants exemptions (exemptions.grantedByRBAC):
// verb GrantVerb on resource GrantResource of group GrantGroup, in dsguard's
// own namespace, named by the namespace of the DaemonSet. No such object
// exists: like the "escalate" verb on roles, it is a permission only, which
// the edit and admin roles a tenant is given do not hold, and which a
// RoleBinding in dsguard's namespace (out of a tenant's reach) gives, for
// all namespaces or, with resourceNames, for some.
const (
	GrantGroup    = "dsguard.io"
	GrantResource = "exemptions"
	GrantVerb     = "create"
)

// GrantorsPhrase says, in a refusal, who may grant exemptions to the
// DaemonSets of namespace: ownNamespace is dsguard's, clusterRole the
// ClusterRole that gives the permission ("" when there is none).
func GrantorsPhrase(ownNamespace, namespace, clusterRole string) string {
	s := fmt.Sprintf("cluster admins and whoever RBAC allows to %s %s.%s named %q in namespace %s",
		GrantVerb, GrantResource, GrantGroup, namespace, ownNamespace)
	if clusterRole != "" {
		s += " (a RoleBinding there to ClusterRole " + clusterRole + ")"
	}
	return s
}

// Requester is who asks for the change under admission.
type Requester struct {
	Username string
	Groups   []string
	// MayGrant asks the cluster's authorizer whether the requester may
	// grant exemptions in namespace (exemptions.grantedByRBAC); it is
	// called only when the requester writes a gated annotation and is in
	// none of exemptions.allowedGroups. Nil: RBAC grants nobody.
	MayGrant func(namespace string) (bool, error)
	// Grantors says, for the person refused, who RBAC lets grant in
	// namespace (which permission, which ClusterRole gives it).
	Grantors func(namespace string) string
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

// grantedByRBAC reports whether the cluster's authorizer decides who may
// grant exemptions (exemptions.grantedByRBAC, the default).
func (c *ExemptionsConfig) grantedByRBAC() bool { return c.GrantedByRBAC == nil || *c.GrantedByRBAC }

// GrantedByRBAC reports whether the cluster's authorizer decides, beside
// exemptions.allowedGroups, who may add or change a gated annotation.
func (p *Policy) GrantedByRBAC() bool { return p.exemptions.grantedByRBAC() }

// GroupGated reports whether the policy restricts who may add or change a
// gated annotation (by RBAC or exemptions.allowedGroups), which only
// admission (knowing the requester) can check.
func (p *Policy) GroupGated() bool { return p.GrantedByRBAC() || len(p.exemptions.AllowedGroups) > 0 }

// mayGrant reports whether the requester may add or change a gated
// annotation in namespace: anyone when the policy restricts nobody, else a
// member of exemptions.allowedGroups or someone RBAC allows. failure is
// why the authorizer could not be asked ("" when it answered or was not
// asked); the requester is then refused.
func (p *Policy) mayGrant(r *Requester, namespace string) (ok bool, failure string) {
	if !p.GroupGated() {
		return true, ""
	}
	for _, g := range r.Groups {
		if slices.Contains(p.exemptions.AllowedGroups, g) {
			return true, ""
		}
	}
	if !p.GrantedByRBAC() || r.MayGrant == nil {
		return false, ""
	}
	ok, err := r.MayGrant(namespace)
	if err != nil {
		return false, err.Error()
	}
	return ok, ""
}

// annotationWritten reports whether a request that stores annotations over
// previous (nil on CREATE) adds or changes key.
func annotationWritten(annotations, previous map[string]string, key string) bool {
	prev, had := previous[key]
	return !had || prev != annotations[key]
}

// GateRefusal is the exemption gate's refusal of a request: a requester who
// may not grant exemptions adds or changes gated annotations.
type GateRefusal struct {
	// Requester is the user name of whoever asked.
	Requester string
	// AllowedGroups are the policy's exemptions.allowedGroups.
	AllowedGroups []string
	// Grantors says who RBAC lets grant, "" when the policy leaves it to
	// AllowedGroups alone (exemptions.grantedByRBAC false).
	Grantors string
	// Failure is why the authorizer could not be asked, "" when it answered.
	Failure string
	// Keys are the annotations added or changed, sorted.
	Keys []string
}

// refusal builds the gate's refusal of r in namespace, or nil when r may
// grant there.
func (p *Policy) refusal(r *Requester, namespace string, keys []string) *GateRefusal {
	ok, failure := p.mayGrant(r, namespace)
	if ok {
		return nil
	}
	g := &GateRefusal{Requester: r.Username, AllowedGroups: p.exemptions.AllowedGroups, Failure: failure, Keys: keys}
	if p.GrantedByRBAC() {
		g.Grantors = "whoever RBAC allows to grant exemptions in " + namespace
		if r.Grantors != nil {
			g.Grantors = r.Grantors(namespace)
		}
	}
	return g
}

// RefuseAnnotationChanges returns why the request must be refused, nil when
// it may proceed: an add or change of a gated annotation by someone who may
// not grant exemptions (neither RBAC nor exemptions.allowedGroups lets
// them) is refused, whatever the exempted rule's action, so that an
// annotation a later update leaves unchanged is one a permitted person
// wrote (or one that predates the gate). previous are the stored object's
// annotations on UPDATE, nil on CREATE. Removing an annotation is always
// allowed. The authorizer is asked only when a gated annotation is written.
func (p *Policy) RefuseAnnotationChanges(ds *appsv1.DaemonSet, previous map[string]string, r Requester) *GateRefusal {
	if !p.GroupGated() {
		return nil
	}
	keys := WrittenGatedAnnotations(ds.Annotations, previous)
	if len(keys) == 0 {
		return nil
	}
	return p.refusal(&r, NamespaceOf(ds), keys)
}

// WrittenGatedAnnotations lists, sorted, the gated annotations that a
// request storing annotations over previous (nil on CREATE) adds or changes.
func WrittenGatedAnnotations(annotations, previous map[string]string) []string {
	var keys []string
	for key := range annotations {
		if GatedAnnotation(key) && annotationWritten(annotations, previous, key) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// who says who may grant and why the requester is refused: "only members
// of G may add or change exemption and intended-coverage annotations
// (exemptions.allowedGroups), and U is not one".
func (g *GateRefusal) who() string {
	groups := strings.Join(g.AllowedGroups, ", ")
	if g.Grantors == "" {
		return fmt.Sprintf("only members of %s may add or change exemption and intended-coverage annotations "+
			"(exemptions.allowedGroups), and %s is not one", groups, g.Requester)
	}
	grantors, fields := g.Grantors, "exemptions.grantedByRBAC"
	if groups != "" {
		grantors += " and members of " + groups
		fields += ", exemptions.allowedGroups"
	}
	s := fmt.Sprintf("only %s may add or change exemption and intended-coverage annotations (%s), and %s is not one of them",
		grantors, fields, g.Requester)
	if g.Failure != "" {
		s += " (dsguard could not ask the API server: " + g.Failure + ")"
	}
	return s
}

func (g *GateRefusal) what() string { return AnnotationsPhrase(g.Keys) }

// AnnotationsPhrase names annotation keys in a message: "annotation a" or
// "annotations a, b".
func AnnotationsPhrase(keys []string) string {
	if len(keys) > 1 {
		return "annotations " + strings.Join(keys, ", ")
	}
	return "annotation " + keys[0]
}

// Message is the refusal as the person at the terminal reads it: which
// annotations, who asked, who may, and what to do instead.
func (g *GateRefusal) Message() string {
	ask := "one of them"
	if g.Grantors == "" {
		ask = "a member of " + strings.Join(g.AllowedGroups, ", ")
	}
	return fmt.Sprintf("dsguard refuses the change to %s: %s.\n"+
		"  fix: ask %s to apply it, or leave the annotation as it was; removing it is always allowed.",
		g.what(), g.who(), ask)
}

// Warning is the refusal where dsguard only warns (a fail-open namespace):
// one short line (warnings are cut), naming the gate, who asked and who may.
func (g *GateRefusal) Warning(namespace string) string {
	why := fmt.Sprintf("%s is not in exemptions.allowedGroups (%s)", g.Requester, strings.Join(g.AllowedGroups, ", "))
	if g.Grantors != "" {
		why = g.Requester + " may not grant exemptions here (exemptions.grantedByRBAC"
		if len(g.AllowedGroups) > 0 {
			why += ", or exemptions.allowedGroups: " + strings.Join(g.AllowedGroups, ", ")
		}
		why += ")"
	}
	return fmt.Sprintf("dsguard would refuse the change to %s: %s; admitted: namespace %s fails open", g.what(), why, namespace)
}

// gateProblem says why the policy's exemption gate voids the annotation key
// on ds, "" when it lets it through. The namespace gate always applies. The
// grant gate (RBAC, exemptions.allowedGroups) needs the requester
// (admission only: offline and in the audit it is not applied) and judges
// only an annotation the request adds or changes: admission refuses those
// from anyone who may not grant (RefuseAnnotationChanges), so one an update
// leaves unchanged was written by a permitted person, or predates the gate,
// and a rollout restart by someone else keeps it. Where admission only
// warns (the fail-open namespaces), the annotation is void for the request
// that writes it.
func (env *Env) gateProblem(ds *appsv1.DaemonSet, key string) string {
	ex := &env.Policy.exemptions
	ns := NamespaceOf(ds)
	if len(ex.AllowedNamespaces) > 0 && !MatchAnyGlob(ex.AllowedNamespaces, ns) {
		return fmt.Sprintf("the policy allows exemptions only in namespaces %s (exemptions.allowedNamespaces)",
			strings.Join(ex.AllowedNamespaces, ", "))
	}
	if env.Requester == nil || !env.Policy.GroupGated() || !annotationWritten(ds.Annotations, env.PreviousAnnotations, key) {
		return ""
	}
	if g := env.Policy.refusal(env.Requester, ns, []string{key}); g != nil {
		return g.who()
	}
	return ""
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
