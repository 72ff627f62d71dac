package rules

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/policy"
)

const rolloutImpactID = "rollout-impact"

// RolloutImpactParams are the rollout-impact parameters.
type RolloutImpactParams struct {
	// MaxNodesAtOnce caps, per namespace, the share of the agent's nodes a
	// rollout may leave without it at once: the blast radius.
	MaxNodesAtOnce []NamespacePercent `yaml:"maxNodesAtOnce"`
}

// Validate implements policy.ParamValidator.
func (p *RolloutImpactParams) Validate(fp *field.Path) field.ErrorList {
	return validateNamespacePercents(p.MaxNodesAtOnce, fp.Child("maxNodesAtOnce"))
}

var rolloutImpactRule = policy.NewRule(policy.Rule{
	ID:    rolloutImpactID,
	Title: "An update says what its rollout will do",
	Why: "A change to the Pod template replaces the agent on every node it runs on, a few nodes at a time. " +
		"How many nodes go without the agent at once, roughly how long the rollout takes (at admission, from how " +
		"long a sample of the agent's Pods took from creation to Ready; offline, a floor from the probes), and whether nodes that " +
		"are down will hold it forever follow from the live counts, not from the manifest: nobody sees them " +
		"before the rollout has started. Only an UPDATE that changes spec.template starts a rollout; " +
		"metadata, the update strategy or minReadySeconds alone do not.",
	Remediation: "Read the figures before the rollout runs. To cap how many nodes go without the agent at once, " +
		"lower maxUnavailable (the max-unavailable rule enforces a cap); nodes that are down hold the rollout: " +
		"bring them back or delete them first, or raise maxUnavailable by as many.",
	DefaultAction: policy.ActionWarn,
	Exemptible:    true,
	NotRendered: "it resolves the change against the stored object's counts and the live nodes; " +
		"in vap+webhook mode the webhook says it, in vap mode nothing does",
	Params: []policy.ParamDoc{
		{Name: "maxNodesAtOnce", Type: "list of {namespaces, percent, action}", Default: "[]",
			Description: "Blast-radius caps: in matching namespaces (globs, first match wins), a template change may leave at " +
				"most percent of the agent's nodes without it at once (maxUnavailable resolved against the live nodes; a " +
				"maxSurge rollout leaves none); action (default warn, at most the rule's) applies above it. For example " +
				"{namespaces: [kube-system, calico-system], percent: 5, action: deny} with the rule's action deny."},
	},
}, nil, checkRolloutImpact)

// checkRolloutImpact says, for an UPDATE that changes the Pod template, what
// the DaemonSet controller will then do (pkg/controller/daemon's
// rollingUpdate): it replaces old Pods as a sliding window of
// maxUnavailable nodes (or maxSurge new Pods beside the old), a new Pod
// starting as soon as one becomes available; maxUnavailable and maxSurge
// are resolved against the number of nodes that should run the agent,
// rounding up, and both zero means one.
func checkRolloutImpact(ds *appsv1.DaemonSet, env *policy.Env, p *RolloutImpactParams) []policy.Finding {
	old := env.Previous
	if old == nil || ds.DeletionTimestamp != nil || equality.Semantic.DeepEqual(old.Spec.Template, ds.Spec.Template) {
		return nil
	}
	running := int(old.Status.CurrentNumberScheduled)
	if running == 0 {
		// No Pod to replace (none placed yet, or the controller has not
		// counted them): the change starts nothing but creations.
		return nil
	}
	if !isRollingUpdate(ds) {
		return []policy.Finding{{
			Field: updateStrategyPath.Child("type"),
			Message: fmt.Sprintf("this template change restarts no Pod now (updateStrategy OnDelete): the agent's %d %s "+
				"on the old template until each is deleted by hand", running, either(running, "Pod stays", "Pods stay")),
			Remediation: "delete the old Pods node by node to roll the change out, or switch to RollingUpdate.",
		}}
	}
	desired, basis := int(old.Status.DesiredNumberScheduled), "status.desiredNumberScheduled"
	if cov := env.Coverage(ds); cov != nil {
		desired, basis = cov.Eligible, "the live nodes"
	}
	w := resolveWindow(ds, desired)
	var out []policy.Finding
	if w.surge > 0 {
		out = append(out, policy.Finding{
			Field: rollingUpdatePath.Child("maxSurge"),
			Message: fmt.Sprintf("this template change replaces the agent on %d %s, starting new Pods beside the old on %d "+
				"at a time (maxSurge %s of %d nodes, by %s): each node keeps its old Pod until the new one is available",
				running, either(running, "node", "nodes"), w.surge,
				quoteIntOrString(ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge), desired, basis),
			Remediation: "nothing to fix; if the agent binds host ports, see surge-host-port.",
		})
	} else {
		out = append(out, policy.Finding{
			Field: rollingUpdatePath.Child("maxUnavailable"),
			Message: fmt.Sprintf("this template change restarts the agent on %d %s, %d at a time (maxUnavailable %s of "+
				"%d nodes, by %s): each is without the agent from its old Pod's deletion until the new one is available",
				running, either(running, "node", "nodes"), w.unavailable, w.unavailableText, desired, basis),
			Remediation: "lower maxUnavailable to take fewer nodes at once (the max-unavailable rule caps it).",
		})
		if f, ok := blastRadiusFinding(ds, p, w, desired); ok {
			out = append(out, f)
		}
	}
	var observed *coverage.ReadyTimes
	if env.ReadyTimes != nil {
		observed = env.ReadyTimes()
	}
	if f, ok := durationFinding(ds, observed, running, w); ok {
		out = append(out, f)
	}
	if env.Nodes != nil {
		if f, ok := stallFinding(ds, env, w); ok {
			out = append(out, f)
		}
	}
	return out
}

// blastRadiusFinding holds the nodes a rollout takes at once against the
// policy's cap for the DaemonSet's namespace.
func blastRadiusFinding(ds *appsv1.DaemonSet, p *RolloutImpactParams, w window, desired int) (policy.Finding, bool) {
	namespace := policy.NamespaceOf(ds)
	m, ok := firstFor(p.MaxNodesAtOnce, namespace)
	if !ok || desired == 0 || w.unavailable*100 <= m.Percent*desired {
		return policy.Finding{}, false
	}
	allowed := m.Percent * desired / 100
	fix := fmt.Sprintf("set maxUnavailable to at most %d (%d%% of %d nodes), or roll out with maxSurge and maxUnavailable 0, "+
		"which leaves no node without the agent.", allowed, m.Percent, desired)
	if allowed == 0 {
		fix = fmt.Sprintf("roll out with maxSurge and maxUnavailable 0: even one node is above %d%% of %d.", m.Percent, desired)
	}
	return policy.Finding{
		Action: m.Action,
		Field:  rollingUpdatePath.Child("maxUnavailable"),
		Message: fmt.Sprintf("this rollout leaves %d of %d nodes (%d%%) without the agent at once, above the %d%% the policy "+
			"allows in namespace %s", w.unavailable, desired, w.unavailable*100/desired, m.Percent, namespace),
		Remediation: fix,
	}, true
}

// window is how many nodes a rollout works on at once.
type window struct {
	unavailable     int
	unavailableText string
	surge           int
}

// size is the number of nodes replaced at once: the surge when there is one
// (the controller then ignores maxUnavailable), else maxUnavailable.
func (w window) size() int {
	if w.surge > 0 {
		return w.surge
	}
	return w.unavailable
}

// resolveWindow resolves maxUnavailable and maxSurge as the controller does
// (util.UnavailableCount, util.SurgeCount): percentages of desired, rounded
// up; unset maxUnavailable is the API's default of 1; both zero is one.
func resolveWindow(ds *appsv1.DaemonSet, desired int) window {
	w := window{unavailable: 1, unavailableText: "1 (the default)"}
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil {
		return w
	}
	if ru.MaxUnavailable != nil {
		w.unavailableText = quoteIntOrString(ru.MaxUnavailable)
		if v, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, desired, true); err == nil && v >= 0 {
			w.unavailable = v
		}
	}
	if ru.MaxSurge != nil {
		if v, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, desired, true); err == nil && v > 0 {
			w.surge = v
		}
	}
	if desired > 0 && w.unavailable == 0 && w.surge == 0 {
		w.unavailable = 1
	}
	return w
}

// durationFinding estimates the rollout's length: rounds of the window,
// each as long as a new Pod takes to become available. With the agent's
// Pods observed (ready), that is their median time from creation to Ready,
// plus minReadySeconds: an estimate. Without, it is what the template says
// a Pod needs at least, the slowest container's probes before its first
// possible readiness success plus minReadySeconds: a floor, since image
// pulls and start-up are not known.
func durationFinding(ds *appsv1.DaemonSet, observed *coverage.ReadyTimes, running int, w window) (policy.Finding, bool) {
	minReady := time.Duration(ds.Spec.MinReadySeconds) * time.Second
	slowest, from := time.Duration(0), ""
	for _, c := range ds.Spec.Template.Spec.Containers {
		if d := readyAfter(&c); d > slowest {
			slowest, from = d, c.Name
		}
	}
	perPod := slowest + minReady
	if observed != nil {
		perPod = max(observed.Median, slowest) + minReady
	}
	if perPod == 0 || running == 0 || w.size() == 0 {
		return policy.Finding{}, false
	}
	rounds := (running + w.size() - 1) / w.size()
	total := perPod * time.Duration(rounds)
	if observed != nil {
		return policy.Finding{
			Field: specPath.Child("template"),
			Message: fmt.Sprintf("the rollout takes about %s, an estimate: %d %s of about %s per Pod (the agent's Pods took "+
				"a median %s from creation to Ready, over %d of them, + minReadySeconds %d); an old Pod's termination "+
				"and a new image's pull come on top", total.Round(time.Second), rounds, either(rounds, "round", "rounds"),
				perPod.Round(100*time.Millisecond), observed.Median.Round(100*time.Millisecond), observed.Pods, ds.Spec.MinReadySeconds),
			Remediation: "plan the change window by it.",
		}, true
	}
	basis := fmt.Sprintf("minReadySeconds %d", ds.Spec.MinReadySeconds)
	if from != "" {
		basis = fmt.Sprintf("container %s's probes %s + %s", from, slowest, basis)
	}
	return policy.Finding{
		Field: specPath.Child("template"),
		Message: fmt.Sprintf("the rollout takes at least %s: %d %s of at least %s per Pod (%s); image pulls and "+
			"start-up come on top", total, rounds, either(rounds, "round", "rounds"), perPod, basis),
		Remediation: "plan the change window by it.",
	}, true
}

// readyAfter is the earliest a container can pass readiness once started:
// the startup probe's first success, then the readiness probe's first
// successThreshold successes.
func readyAfter(c *corev1.Container) time.Duration {
	d := time.Duration(0)
	for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe} {
		if p == nil {
			continue
		}
		d += time.Duration(p.InitialDelaySeconds) * time.Second
		if p.SuccessThreshold > 1 {
			period := p.PeriodSeconds
			if period == 0 {
				period = 10
			}
			d += time.Duration(p.SuccessThreshold-1) * time.Duration(period) * time.Second
		}
	}
	return d
}

// stallFinding predicts a rollout that stops for good: each node that is
// NotReady or unreachable and keeps the agent's Pod (coverage's Unready)
// holds one unit of maxUnavailable, or one surge slot, until the node comes
// back. When they hold the whole window, nothing else is replaced.
func stallFinding(ds *appsv1.DaemonSet, env *policy.Env, w window) (policy.Finding, bool) {
	down := env.Nodes.Unready(ds)
	if len(down) == 0 || w.size() == 0 {
		return policy.Finding{}, false
	}
	what, field := "maxUnavailable", rollingUpdatePath.Child("maxUnavailable")
	if w.surge > 0 {
		what, field = "maxSurge", rollingUpdatePath.Child("maxSurge")
	}
	names := env.DescribeNodes(down, len(down), 3)
	if len(down) >= w.size() {
		return policy.Finding{
			Field: field,
			Message: fmt.Sprintf("the rollout will stall: %d covered %s NotReady or unreachable (%s), where the agent's "+
				"Pod can neither be replaced nor become available, holding all %d of %s for good", len(down), either(len(down), "node is", "nodes are"),
				names, w.size(), what),
			Remediation: fmt.Sprintf("bring those nodes back or delete them before the change, or raise %s above %d.", what, len(down)),
		}, true
	}
	return policy.Finding{
		Field: field,
		Message: fmt.Sprintf("%d of the rollout's %d %s at a time %s held for good by covered nodes that are NotReady or "+
			"unreachable (%s): it moves %d at a time", len(down), w.size(), either(w.size(), "node", "nodes"),
			either(len(down), "is", "are"), names, w.size()-len(down)),
		Remediation: "bring those nodes back or delete them before the change.",
	}, true
}

// either picks the word agreeing with n.
func either(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
