package policy

import (
	"context"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
)

// Env is everything a verdict depends on besides the DaemonSet itself.
type Env struct {
	// Policy is the compiled policy; Evaluate finds nothing without one.
	Policy *Policy
	// Now is the time exemption expiry is judged against.
	Now time.Time
	// Nodes is the cluster's node set, or nil when it is not known (offline
	// check without --nodes); rules that need nodes are skipped then.
	Nodes *coverage.NodeSnapshot
	// Context, when set, is the request the evaluation serves: Evaluate
	// stops between rules once it is done, and its findings are then
	// incomplete (the caller must not use them).
	Context context.Context
	// Requester is who asks for the change (admission only); the policy's
	// exemption gate checks its groups. Nil offline and in the audit.
	Requester *Requester
	// PreviousAnnotations are the stored object's annotations on UPDATE (nil
	// on CREATE): exemptions the request leaves unchanged are not re-judged
	// by the group gate (admission refuses the others' adds and changes, see
	// Policy.RefuseAnnotationChanges).
	PreviousAnnotations map[string]string
	// Previous is the stored object on UPDATE, status included (the
	// controller's live counts), or nil (CREATE; offline without
	// --previous): rules that say what a change does read it.
	Previous *appsv1.DaemonSet
	// ReadyTimes, when set, observes how long the stored DaemonSet's Pods
	// took to become ready (a sample listed from the API server); it
	// returns nil when not known. Only a rule that needs it calls it, so
	// that no request lists Pods for a rule that is off or out of scope.
	ReadyTimes func() *coverage.ReadyTimes
	// DaemonSets, when set, returns the other DaemonSets the judged one
	// shares the cluster with (the live ones at admission and in the audit,
	// the other manifests in dsguard check): host-port-conflict and
	// anti-affinity-conflict compare it with them. Called only by a rule
	// that needs it; the objects are only read.
	DaemonSets func() []*appsv1.DaemonSet
	// HideNodeNames makes messages count nodes instead of naming them, for
	// callers that have not authenticated.
	HideNodeNames bool
	// Fit is what the scheduler weighs on each node (allocatable, the Pods
	// bound there, PriorityClasses), or nil when it is not known; rules
	// that need it are skipped then.
	Fit *fit.Cluster
	// NodeChange, when set, is a change to one Node under review: only the
	// rules marked OnNodeChange run, each DaemonSet judged for what the
	// change does to it. Nil everywhere else, where those rules never run.
	NodeChange *NodeChange

	// predicted caches the judgement of the last DaemonSet's placement and
	// its prediction, shared by the rules that read them, with the
	// DaemonSet and node snapshot they were made for.
	predicted predicted
}

// NodeChange is a change to one Node, as a person makes it with kubectl
// taint or label.
type NodeChange struct {
	Before, After *corev1.Node
	// WithPod holds the DaemonSets whose Pod runs on the node now
	// (coverage.DaemonSetsWithPod).
	WithPod map[types.NamespacedName]bool
}

// predicted is a placement's judgement and prediction, and what they were
// made for.
type predicted struct {
	ds    *appsv1.DaemonSet
	nodes *coverage.NodeSnapshot
	// tooLarge and work are PlacementTooLarge's and PredictionWork's
	// answers.
	tooLarge string
	work     int
	// coverage is nil until predicted, and stays nil for a placement too
	// large to predict.
	coverage *coverage.Coverage
	// fit is nil until predicted on the covered nodes.
	fit *fit.Report
	// covered is nil until CoveredNodes names them.
	covered []string
}

// judged returns the cache for ds on env.Nodes, judging the placement's
// size first when the cache was made for another DaemonSet or snapshot.
// DaemonSets are only read, so the same pointer means the same object.
func (env *Env) judged(ds *appsv1.DaemonSet) *predicted {
	c := &env.predicted
	if c.ds != ds || c.nodes != env.Nodes {
		*c = predicted{ds: ds, nodes: env.Nodes}
		c.tooLarge, c.work = judgeSize(ds, env.Nodes)
	}
	return c
}

// Coverage returns the predicted coverage of ds on env.Nodes; nil when the
// nodes are not known or the placement is too large to predict. The
// prediction is kept in env for the same DaemonSet (the same pointer) on the
// same snapshot, so the rules of one evaluation, and a caller that asked
// before Evaluate (whose copy of env carries it along), share one.
func (env *Env) Coverage(ds *appsv1.DaemonSet) *coverage.Coverage {
	if env.Nodes == nil {
		return nil
	}
	c := env.judged(ds)
	if c.coverage == nil && c.tooLarge == "" {
		cov := coverage.Predict(ds, env.Nodes)
		if env.Policy != nil && env.Policy.lifecycle != nil {
			cov.MarkLifecycle(env.Policy.lifecycle)
		}
		c.coverage = &cov
	}
	return c.coverage
}

// FitReport returns what the scheduler will do with ds's Pods on the nodes
// its placement covers; nil when env.Fit or the coverage is not known. It
// is kept in env like the coverage.
func (env *Env) FitReport(ds *appsv1.DaemonSet) *fit.Report {
	if env.Fit == nil || !env.Fit.Known() {
		return nil
	}
	nodes := env.CoveredNodes(ds)
	if nodes == nil {
		return nil
	}
	c := env.judged(ds)
	if c.fit == nil {
		c.fit = env.Fit.PredictDaemonSet(ds, nodes)
	}
	return c.fit
}

// CoveredNodes returns, sorted, the nodes of env.Nodes the placement of ds
// covers; nil when the coverage is not known. It is kept in env like the
// coverage.
func (env *Env) CoveredNodes(ds *appsv1.DaemonSet) []string {
	cov := env.Coverage(ds)
	if cov == nil {
		return nil
	}
	c := env.judged(ds)
	if c.covered == nil {
		c.covered = coverage.EligibleNodes(cov, env.Nodes)
	}
	return c.covered
}

// Evaluate runs every rule in scope against ds and returns the findings,
// sorted strongest first. Rules that are off, out of scope, or need nodes
// that env does not have are skipped. The DaemonSet is only read.
func Evaluate(ds *appsv1.DaemonSet, env Env) []Finding {
	p := env.Policy
	if p == nil {
		return nil
	}
	namespace := NamespaceOf(ds)
	if env.Now.IsZero() {
		// A zero time would make every exemption eternal.
		env.Now = time.Now()
	}
	ceiling := p.CeilingFor(namespace)
	var out []Finding
	for i := range p.rules {
		rs := &p.rules[i]
		if env.Context != nil && env.Context.Err() != nil {
			break
		}
		if !rs.applies(ds, namespace, &env) {
			continue
		}
		fs := rs.rule.check(ds, &env, rs.params)
		if len(fs) == 0 {
			continue
		}
		exemption, _, exempted := env.Exemption(ds, rs.rule.ID)
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
				f.ExemptionExpires = exemption.Expires
			}
		}
		if out == nil {
			// Room for a typical verdict's findings in one allocation.
			out = make([]Finding, 0, max(len(fs), 8))
		}
		out = append(out, fs...)
	}
	SortFindings(out)
	return out
}

// applies reports whether the rule runs for ds in namespace: it is not off,
// judges what env judges (a DaemonSet, or a node change), has the nodes it
// needs, and ds is in its scope.
func (rs *ruleSettings) applies(ds *appsv1.DaemonSet, namespace string, env *Env) bool {
	return rs.action != ActionOff && rs.rule.OnNodeChange == (env.NodeChange != nil) && (!rs.rule.NeedsNodes || env.Nodes != nil) && (!rs.rule.NeedsFit || env.Fit != nil) &&
		(!rs.rule.NeedsDaemonSets || env.DaemonSets != nil) &&
		rs.scope.matches(namespace, ds.Labels)
}

// ReportedTaints returns the taints whose skipped nodes the rules that apply
// to ds already report (an empty value stands for every value of the key),
// so that another rule does not report the same nodes twice.
func (env *Env) ReportedTaints(ds *appsv1.DaemonSet) []corev1.Taint {
	if env.Policy == nil {
		return nil
	}
	namespace := NamespaceOf(ds)
	var out []corev1.Taint
	for i := range env.Policy.rules {
		rs := &env.Policy.rules[i]
		if rs.rule.reportedTaints != nil && rs.applies(ds, namespace, env) {
			out = append(out, rs.rule.reportedTaints(ds, rs.params)...)
		}
	}
	return out
}

// MatchesAnyTaint reports whether t matches one of patterns by key and
// effect, and by value unless the pattern's value is empty.
func MatchesAnyTaint(patterns []corev1.Taint, t corev1.Taint) bool {
	return slices.ContainsFunc(patterns, func(p corev1.Taint) bool { return coverage.MatchesTaint(p, t) })
}

// NamespaceOf is the namespace a DaemonSet is judged in: "default" when the
// manifest names none.
func NamespaceOf(ds *appsv1.DaemonSet) string {
	if ds.Namespace == "" {
		return "default"
	}
	return ds.Namespace
}
