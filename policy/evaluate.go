package policy

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// Env is everything a verdict depends on besides the DaemonSet itself.
type Env struct {
	// Policy is the compiled policy; nil means the built-in defaults.
	Policy *Policy
	// Now is the time exemption expiry is judged against.
	Now time.Time
	// Nodes is the cluster's node set, or nil when it is not known (offline
	// check without --nodes); rules that need nodes are skipped then.
	Nodes *NodeSnapshot

	// coverage caches the prediction for the DaemonSet under evaluation,
	// shared by the rules that read it.
	coverage *Coverage
}

// Coverage returns the predicted coverage of ds on env.Nodes, computed once
// and kept in env, so an Env serves one DaemonSet; nil when the nodes are not
// known. Evaluate's copy of env carries a prediction made before along.
func (env *Env) Coverage(ds *appsv1.DaemonSet) *Coverage {
	if env.Nodes == nil {
		return nil
	}
	if env.coverage == nil {
		c := PredictCoverage(ds, env.Nodes)
		env.coverage = &c
	}
	return env.coverage
}

// defaultPolicy is compiled once; Policy values are immutable.
var defaultPolicy = Default()

// Evaluate runs every rule in scope against ds and returns the findings,
// sorted strongest first. Rules that are off, out of scope, or need nodes
// that env does not have are skipped. The DaemonSet is only read.
func Evaluate(ds *appsv1.DaemonSet, env Env) []Finding {
	p := env.Policy
	if p == nil {
		p = defaultPolicy
	}
	namespace := ds.Namespace
	if namespace == "" {
		namespace = "default"
	}
	env.Policy = p
	if env.Now.IsZero() {
		// A zero time would make every exemption eternal.
		env.Now = time.Now()
	}
	ceiling := p.ceilingFor(namespace)
	var out []Finding
	for i := range p.rules {
		rs := &p.rules[i]
		if rs.action == ActionOff || (rs.rule.NeedsNodes && env.Nodes == nil) {
			continue
		}
		if !rs.scope.matches(namespace, ds.Labels) {
			continue
		}
		fs := rs.rule.check(ds, &env, rs.params)
		if len(fs) == 0 {
			continue
		}
		exemption, exempted := rs.activeExemption(ds, env.Now)
		for j := range fs {
			f := &fs[j]
			f.RuleID = rs.rule.ID
			// A finding may come with its own, softer action (e.g. a
			// hostNetwork agent that declares no ports only warns).
			f.Action = rs.action.Weaker(f.Action).Weaker(ceiling)
			if f.Remediation == "" {
				f.Remediation = rs.rule.Remediation
			}
			if exempted {
				f.Action = f.Action.Weaker(ActionAudit)
				f.Exempted = exemption.Reason
			}
		}
		out = append(out, fs...)
	}
	SortFindings(out)
	return out
}

// activeExemption returns the DaemonSet's exemption for this rule when it is
// well-formed, unexpired and allowed by the policy.
func (rs *ruleSettings) activeExemption(ds *appsv1.DaemonSet, now time.Time) (Exemption, bool) {
	if !rs.allowExemptions {
		return Exemption{}, false
	}
	value, ok := ds.Annotations[rs.exemptKey]
	if !ok {
		return Exemption{}, false
	}
	e, err := ParseExemption(value)
	if err != nil || e.Expired(now) {
		return Exemption{}, false
	}
	return e, true
}
