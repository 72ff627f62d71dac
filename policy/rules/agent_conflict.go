package rules

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/dsguard/dsguard/coverage"
	"github.com/dsguard/dsguard/coverage/fit"
	"github.com/dsguard/dsguard/policy"
)

const (
	hostPortConflictID     = "host-port-conflict"
	antiAffinityConflictID = "anti-affinity-conflict"
)

// conflictNotRendered is why neither conflict rule has a CEL form.
const conflictNotRendered = "it compares the DaemonSet with the other DaemonSets and the Pods on the nodes both cover: " +
	"the webhook and the auditor judge it by their caches, dsguard check --nodes by a dump that holds DaemonSets (or --previous); in vap mode nothing does"

var hostPortConflictRule = policy.NewRule(policy.Rule{
	ID:    hostPortConflictID,
	Title: "No other agent holds the agent's host ports on the nodes it covers",
	Why: "Two Pods cannot hold the same host port on one node (the same protocol and port, on the same host IP " +
		"or with 0.0.0.0 on either side): kube-scheduler's NodePorts filter turns the second away, and it stays " +
		"Pending there for as long as the first runs. Two DaemonSets that declare the same host port fight over " +
		"every node both cover, and which one loses can differ node by node and after each restart; a Pod " +
		"already bound to the node with the port blocks it the same way. Under hostNetwork every container port " +
		"is a host port.",
	Remediation: "Move one of the agents to another port (and its clients with it), keep the two placements on " +
		"different nodes, or run only one of them.",
	DefaultAction:   policy.ActionDeny,
	NeedsNodes:      true,
	NeedsDaemonSets: true,
	NotRendered:     conflictNotRendered,
	Exemptible:      true,
}, nil, checkHostPortConflict)

var antiAffinityConflictRule = policy.NewRule(policy.Rule{
	ID:    antiAffinityConflictID,
	Title: "No required anti-affinity keeps the agent off the nodes it covers",
	Why: "A required pod anti-affinity term works both ways: kube-scheduler refuses a Pod whose term selects a " +
		"Pod already in the topology domain, and a Pod that a term of a Pod already there selects. Between two " +
		"DaemonSets, or between an agent and the Pods bound to its nodes, such a term keeps one of them Pending " +
		"on every node (or zone) they share, however empty the node is.",
	Remediation: "Narrow the anti-affinity term's labelSelector (or namespaces) so it does not select the other " +
		"agent, make it preferred instead of required, or keep the two placements apart.",
	DefaultAction:   policy.ActionDeny,
	NeedsNodes:      true,
	NeedsDaemonSets: true,
	NotRendered:     conflictNotRendered,
	Exemptible:      true,
}, nil, checkAntiAffinityConflict)

// agentConflict is one source of a conflict and the covered nodes it
// blocks.
type agentConflict struct {
	// with names what holds the node: "DaemonSet ns/name", "Pod ns/name".
	with string
	// what says what collides: "9100/TCP", "(topologyKey zone)".
	what  string
	nodes []string
}

// conflictScope is what both rules start from: the nodes the judged
// DaemonSet covers, and the other DaemonSets to compare with.
type conflictScope struct {
	ds      *appsv1.DaemonSet
	env     *policy.Env
	covered []string
	// coveredSet holds covered, for intersections.
	coveredSet map[string]bool
	// others are sorted by namespace and name, without ds: their Pods on
	// the nodes are judged by their template, not again as Pods (listed).
	others []*appsv1.DaemonSet
	// owners remembers listed's answers: the DaemonSet Pods on the covered
	// nodes have few owners between them.
	owners map[string]bool
}

// byKey orders DaemonSets by namespace, then name (the names compared
// only within a namespace: this runs for every DaemonSet of every audit).
func byKey(a, b *appsv1.DaemonSet) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// newConflictScope returns the scope with the other DaemonSets listed, or
// nil when they are not known. The covered nodes are found by cover, once
// a rule knows it has something to compare. It runs for every audit of
// every DaemonSet, so it takes the others as they come when they come
// sorted (the live ones do, clusterview.DaemonSetLister), without a key or
// a map entry per DaemonSet.
func newConflictScope(ds *appsv1.DaemonSet, env *policy.Env) *conflictScope {
	if env.DaemonSets == nil {
		return nil
	}
	all := env.DaemonSets()
	// The message names the others in this order, so the same request
	// always gets the same words (and API clients fold repeated warnings
	// into one). A stable sort keeps the first of a name first.
	if !slices.IsSortedFunc(all, byKey) {
		all = slices.Clone(all)
		slices.SortStableFunc(all, byKey)
	}
	s := &conflictScope{ds: ds, env: env, others: make([]*appsv1.DaemonSet, 0, len(all))}
	for i, o := range all {
		if byKey(o, ds) == 0 || i > 0 && byKey(all[i-1], o) == 0 {
			continue
		}
		s.others = append(s.others, o)
	}
	return s
}

// listed reports whether the DaemonSet owner (namespace/name) is ds or
// one of the others.
func (s *conflictScope) listed(owner string) bool {
	if found, ok := s.owners[owner]; ok {
		return found
	}
	ns, name, _ := strings.Cut(owner, "/")
	probe := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	found := byKey(probe, s.ds) == 0
	if !found {
		_, found = slices.BinarySearchFunc(s.others, probe, byKey)
	}
	if s.owners == nil {
		s.owners = map[string]bool{}
	}
	s.owners[owner] = found
	return found
}

// cover finds the nodes ds covers; false when there are none or the
// coverage is not known.
func (s *conflictScope) cover() bool {
	if s.covered = s.env.CoveredNodes(s.ds); len(s.covered) == 0 {
		return false
	}
	s.coveredSet = make(map[string]bool, len(s.covered))
	for _, n := range s.covered {
		s.coveredSet[n] = true
	}
	return true
}

// eligible returns the nodes other covers, sorted.
func (s *conflictScope) eligible(other *appsv1.DaemonSet) []string {
	cov := coverage.Predict(other, s.env.Nodes)
	return coverage.EligibleNodes(&cov, s.env.Nodes)
}

// coveredByBoth returns the nodes of theirs that ds covers too, sorted.
func (s *conflictScope) coveredByBoth(theirs []string) []string {
	var out []string
	for _, n := range theirs {
		if s.coveredSet[n] {
			out = append(out, n)
		}
	}
	return out
}

// boundPods calls f with each Pod bound to a covered node that no compared
// DaemonSet controls (its own old Pods included), when the Pods are known.
func (s *conflictScope) boundPods(f func(node *fit.Node, p *fit.Pod)) {
	if s.env.Fit == nil {
		return
	}
	for _, n := range s.env.Fit.On(s.covered) {
		if n == nil {
			continue
		}
		for i := range n.Pods {
			if p := &n.Pods[i]; p.Owner == "" || !s.listed(p.Owner) {
				f(n, p)
			}
		}
	}
}

// podConflicts gathers the Pods found blocking nodes into one conflict per
// reason, naming a few of them.
type podConflicts struct {
	order []string
	byWhy map[string]*podConflict
}

type podConflict struct {
	pods  []string
	nodes map[string]bool
}

func (pc *podConflicts) add(what, pod, node string) {
	if pc.byWhy == nil {
		pc.byWhy = map[string]*podConflict{}
	}
	c := pc.byWhy[what]
	if c == nil {
		c = &podConflict{nodes: map[string]bool{}}
		pc.byWhy[what] = c
		pc.order = append(pc.order, what)
	}
	if !slices.Contains(c.pods, pod) {
		c.pods = append(c.pods, pod)
	}
	c.nodes[node] = true
}

// podsNamed is how many Pods a conflict names.
const podsNamed = 2

func (pc *podConflicts) conflicts(env *policy.Env) []agentConflict {
	out := make([]agentConflict, 0, len(pc.order))
	for _, what := range pc.order {
		c := pc.byWhy[what]
		with := "Pod " + c.pods[0]
		switch {
		case env.HideNodeNames:
			with = plural(len(c.pods), "Pod")
		case len(c.pods) > podsNamed:
			with = fmt.Sprintf("Pods %s and %d more", strings.Join(c.pods[:podsNamed], ", "), len(c.pods)-podsNamed)
		case len(c.pods) > 1:
			with = "Pods " + strings.Join(c.pods, ", ")
		}
		out = append(out, agentConflict{with: with, what: what, nodes: slices.Sorted(maps.Keys(c.nodes))})
	}
	return out
}

// finding says which covered nodes the conflicts block: a deny when they
// block every one, a warning otherwise.
func (s *conflictScope) finding(fieldPath *field.Path, verb string, hits []agentConflict) []policy.Finding {
	if len(hits) == 0 {
		return nil
	}
	blocked := map[string]bool{}
	parts := make([]string, 0, len(hits))
	for _, h := range hits {
		for _, n := range h.nodes {
			blocked[n] = true
		}
		parts = append(parts, fmt.Sprintf("%s %s %s on %s%s", h.with, verb, h.what, plural(len(h.nodes), "node"),
			namedNodes(s.env, h.nodes)))
	}
	f := policy.Finding{Field: fieldPath}
	if len(blocked) == len(s.covered) {
		f.Message = fmt.Sprintf("stays Pending on every node it covers (%d): %s", len(s.covered), strings.Join(parts, "; "))
	} else {
		f.Action = policy.ActionWarn
		f.Message = fmt.Sprintf("stays Pending on %s it covers: %s", ofNodes(len(blocked), len(s.covered)), strings.Join(parts, "; "))
	}
	return []policy.Finding{f}
}

func checkHostPortConflict(ds *appsv1.DaemonSet, env *policy.Env, _ *policy.NoParams) []policy.Finding {
	mine := fit.HostPorts(&ds.Spec.Template.Spec)
	if len(mine) == 0 {
		return nil
	}
	s := newConflictScope(ds, env)
	if s == nil {
		return nil
	}
	type rival struct {
		ds     *appsv1.DaemonSet
		shared []fit.HostPort
	}
	var rivals []rival
	for _, o := range s.others {
		if shared := fit.SharedPorts(mine, fit.HostPorts(&o.Spec.Template.Spec)); len(shared) > 0 {
			rivals = append(rivals, rival{o, shared})
		}
	}
	if len(rivals) == 0 && (env.Fit == nil || !env.Fit.HoldsHostPorts()) || !s.cover() {
		return nil
	}
	var hits []agentConflict
	for _, o := range rivals {
		if nodes := s.coveredByBoth(s.eligible(o.ds)); len(nodes) > 0 {
			hits = append(hits, agentConflict{with: "DaemonSet " + o.ds.Namespace + "/" + o.ds.Name, what: portList(o.shared), nodes: nodes})
		}
	}
	var pods podConflicts
	s.boundPods(func(n *fit.Node, p *fit.Pod) {
		if shared := fit.SharedPorts(mine, p.Ports); len(shared) > 0 {
			pods.add(portList(shared), p.Key(), n.Name)
		}
	})
	hits = append(hits, pods.conflicts(env)...)
	return s.finding(podSpecPath, "holds host port", hits)
}

// portList is "9100/TCP, 53/UDP on 10.0.0.1".
func portList(ports []fit.HostPort) string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if p.HostIP != fit.DefaultBindAllHostIP {
			out[i] += " on " + p.HostIP
		}
	}
	return strings.Join(out, ", ")
}

func checkAntiAffinityConflict(ds *appsv1.DaemonSet, env *policy.Env, _ *policy.NoParams) []policy.Finding {
	s := newConflictScope(ds, env)
	if s == nil {
		return nil
	}
	nsLabels := func(ns string) map[string]string {
		if env.Fit == nil {
			return nil
		}
		return env.Fit.NamespaceLabels(ns)
	}
	me, err := fit.SideOf(ds.Namespace, nsLabels(ds.Namespace), &ds.Spec.Template)
	if err != nil {
		return nil // the API server's validation refuses a malformed term first
	}
	type rival struct {
		ds   *appsv1.DaemonSet
		keys []string
	}
	var rivals []rival
	for _, o := range s.others {
		if len(me.Terms) == 0 && len(fit.RequiredAntiAffinity(&o.Spec.Template.Spec)) == 0 {
			continue // no term on either side: nothing repels
		}
		other, err := fit.SideOf(o.Namespace, nsLabels(o.Namespace), &o.Spec.Template)
		if err != nil {
			continue
		}
		if keys := fit.Repels(me, other); len(keys) > 0 {
			rivals = append(rivals, rival{o, keys})
		}
	}
	// Bound Pods matter when the agent has terms (any Pod may match them)
	// or some Pod has terms of its own.
	podsMatter := env.Fit != nil && (len(me.Terms) > 0 || len(env.Fit.NodesWithAntiAffinity()) > 0)
	if len(rivals) == 0 && !podsMatter || !s.cover() {
		return nil
	}
	var hits []agentConflict
	domains := map[string]map[string]string{} // topology key → node → value
	for _, r := range rivals {
		o, keys := r.ds, r.keys
		theirs := s.eligible(o)
		var nodes []string
		for _, key := range keys {
			nodes = append(nodes, s.sharingDomain(key, theirs, domains)...)
		}
		slices.Sort(nodes)
		nodes = slices.Compact(nodes)
		if len(nodes) > 0 {
			hits = append(hits, agentConflict{with: "DaemonSet " + o.Namespace + "/" + o.Name,
				what: "(topologyKey " + strings.Join(keys, ", ") + ")", nodes: nodes})
		}
	}
	hits = append(hits, s.repellingPods(me, nsLabels)...)
	return s.finding(podSpecPath.Child("affinity", "podAntiAffinity"), "repels it by anti-affinity", hits)
}

// repellingPods finds the Pods bound anywhere (when the Pods are known)
// that no compared DaemonSet controls and that anti-affinity sets against
// ours: each blocks the covered nodes in its node's domain.
func (s *conflictScope) repellingPods(me *fit.Side, nsLabels func(string) map[string]string) []agentConflict {
	if s.env.Fit == nil {
		return nil
	}
	// Without terms of its own, only Pods with terms can repel the agent.
	nodes := s.env.Fit.NodesWithAntiAffinity()
	if len(me.Terms) > 0 {
		nodes = s.env.Fit.Nodes()
	}
	var pods podConflicts
	for _, n := range nodes {
		for i := range n.Pods {
			p := &n.Pods[i]
			if p.Owner != "" && s.listed(p.Owner) || len(me.Terms) == 0 && len(p.AntiAffinity) == 0 {
				continue
			}
			for _, key := range fit.Repels(me, fit.SideOfPod(p, nsLabels(p.Namespace))) {
				v, ok := n.Label(key)
				if !ok {
					continue
				}
				for c, cn := range s.env.Fit.On(s.covered) {
					if cn != nil {
						if cv, ok := cn.Label(key); ok && cv == v {
							pods.add("(topologyKey "+key+")", p.Key(), c)
						}
					}
				}
			}
		}
	}
	return pods.conflicts(s.env)
}

// sharingDomain returns our covered nodes in a topology domain (by key)
// where a node of theirs is: for the node's own hostname, the nodes of
// theirs we cover.
func (s *conflictScope) sharingDomain(key string, theirs []string, domains map[string]map[string]string) []string {
	if key == corev1.LabelHostname {
		return s.coveredByBoth(theirs)
	}
	values, ok := domains[key]
	if !ok {
		values = s.env.Nodes.LabelValues(key)
		domains[key] = values
	}
	taken := map[string]bool{}
	for _, n := range theirs {
		if v, ok := values[n]; ok {
			taken[v] = true
		}
	}
	var out []string
	for _, n := range s.covered {
		if v, ok := values[n]; ok && taken[v] {
			out = append(out, n)
		}
	}
	return out
}
