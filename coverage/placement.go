package coverage

import (
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Placement is where a DaemonSet will run on a known node set and why it
// skips every other node: the prediction the coverage rules judge, shown in
// full (findings name only the skips that are a problem).
type Placement struct {
	// Nodes is the size of the node set.
	Nodes int `json:"nodes"`
	// RunsOn is what the DaemonSet controller will report as
	// desiredNumberScheduled.
	RunsOn int `json:"runsOn"`
	// Skipped is Nodes - RunsOn.
	Skipped int `json:"skipped"`
	// RunsOnNodes names the nodes it will run on, sorted.
	RunsOnNodes []string `json:"runsOnNodes"`
	// Skips groups the other nodes by reason, largest group first.
	Skips []SkipGroup `json:"skips"`
}

// SkipGroup is a set of nodes skipped for one reason.
type SkipGroup struct {
	// Kind is nodeName, os-arch, selector or taint.
	Kind SkipKind `json:"kind"`
	// Reason says why, in words: the selector term that does not match,
	// the nodeName, or the taint with its effect.
	Reason string `json:"reason"`
	// Taint is the untolerated taint, for kind taint.
	Taint *corev1.Taint `json:"taint,omitempty"`
	// Transient marks a lifecycle taint, one a node carries while it joins,
	// bootstraps, fails, is disrupted or shuts down (not-ready,
	// karpenter.sh/unregistered, node.cilium.io/agent-not-ready, ...):
	// expected, never a finding.
	Transient bool `json:"transient,omitempty"`
	// Lifecycle says why nodes carry that lifecycle taint.
	Lifecycle string `json:"lifecycle,omitempty"`
	// Count is len(Nodes).
	Count int `json:"count"`
	// Nodes are the skipped nodes' names, sorted.
	Nodes []string `json:"nodes"`
	// TaintedFor says, for a lifecycle taint, how long each node that
	// reports when it got the taint (its timeAdded) has carried it.
	TaintedFor map[string]metav1.Duration `json:"taintedFor,omitempty"`
}

// TaintTimes holds when nodes got their taints, for the taints that say
// (timeAdded, which the API server writes for NoExecute taints): node name,
// then taint key. A snapshot does not keep it (nodes alike share one class
// whatever their times), so a caller that shows times collects them.
type TaintTimes map[string]map[string]time.Time

// Add records the times of n's taints that carry one.
func (t TaintTimes) Add(name string, taints []corev1.Taint) {
	for _, taint := range taints {
		if taint.TimeAdded == nil {
			continue
		}
		if t[name] == nil {
			t[name] = map[string]time.Time{}
		}
		t[name][taint.Key] = taint.TimeAdded.Time
	}
}

// NoteTaintTimes sets TaintedFor on the lifecycle skips, as of now.
func (p *Placement) NoteTaintTimes(times TaintTimes, now time.Time) {
	for i := range p.Skips {
		g := &p.Skips[i]
		if !g.Transient || g.Taint == nil {
			continue
		}
		for _, n := range g.Nodes {
			if added, ok := times[n][g.Taint.Key]; ok {
				if g.TaintedFor == nil {
					g.TaintedFor = map[string]metav1.Duration{}
				}
				g.TaintedFor[n] = metav1.Duration{Duration: max(now.Sub(added), 0).Round(time.Second)}
			}
		}
	}
}

// NewPlacement describes a prediction made on snap, naming the selector
// term each selector-skipped node fails.
func NewPlacement(ds *appsv1.DaemonSet, cov *Coverage, snap *NodeSnapshot) *Placement {
	p := &Placement{
		Nodes: cov.Total, RunsOn: cov.Eligible, Skipped: cov.Total - cov.Eligible,
		RunsOnNodes: EligibleNodes(cov, snap), Skips: []SkipGroup{},
	}
	spec := &ds.Spec.Template.Spec
	for _, s := range cov.Skips {
		switch s.Kind {
		case SkipTaint:
			taint := s.Taint
			p.Skips = append(p.Skips, SkipGroup{Kind: s.Kind, Reason: s.Reason(), Taint: &taint, Transient: s.Transient,
				Lifecycle: s.Lifecycle, Count: s.Count, Nodes: s.Nodes()})
		case SkipNodeName:
			p.Skips = append(p.Skips, SkipGroup{Kind: s.Kind, Reason: fmt.Sprintf("spec.template.spec.nodeName is %s", spec.NodeName),
				Count: s.Count, Nodes: s.Nodes()})
		default:
			p.Skips = append(p.Skips, splitBySelectorTerm(s, spec, snap)...)
		}
	}
	sort.SliceStable(p.Skips, func(a, b int) bool {
		if p.Skips[a].Count != p.Skips[b].Count {
			return p.Skips[a].Count > p.Skips[b].Count
		}
		return p.Skips[a].Reason < p.Skips[b].Reason
	})
	return p
}

// splitBySelectorTerm regroups selector-skipped nodes by the first part of
// the nodeSelector or required node affinity each one fails.
func splitBySelectorTerm(s Skip, spec *corev1.PodSpec, snap *NodeSnapshot) []SkipGroup {
	var out []SkipGroup
	index := map[string]int{}
	for _, name := range s.Nodes() {
		reason := s.Reason()
		if n := snap.Node(name); n != nil {
			if r := selectorMiss(spec, n); r != "" {
				reason = r
			}
		}
		i, ok := index[reason]
		if !ok {
			i = len(out)
			index[reason] = i
			out = append(out, SkipGroup{Kind: s.Kind, Reason: reason})
		}
		out[i].Nodes = append(out[i].Nodes, name)
		out[i].Count++
	}
	return out
}

// selectorMiss names the first nodeSelector entry the node lacks, else the
// first requirement of each node affinity term the node fails (terms are
// ORed, so all of them fail). Each part is matched with the same library the
// controller uses, so the words cannot disagree with the prediction.
func selectorMiss(spec *corev1.PodSpec, n *corev1.Node) string {
	keys := make([]string, 0, len(spec.NodeSelector))
	for k := range spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v, ok := n.Labels[k]; !ok || v != spec.NodeSelector[k] {
			return fmt.Sprintf("nodeSelector %s=%s", k, spec.NodeSelector[k])
		}
	}
	required := requiredNodeSelector(spec)
	if required == nil {
		return ""
	}
	terms := required.NodeSelectorTerms
	var misses []string
	for _, t := range terms {
		miss := ""
		for _, r := range t.MatchExpressions {
			if !matches(n, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{r}}) {
				miss = requirementString(r)
				break
			}
		}
		for _, r := range t.MatchFields {
			if miss != "" {
				break
			}
			if !matches(n, corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{r}}) {
				miss = requirementString(r)
			}
		}
		if miss == "" {
			miss = "an empty term (matches no node)"
		}
		misses = append(misses, miss)
	}
	if len(misses) == 1 {
		return "node affinity " + misses[0]
	}
	return "node affinity, every term fails: " + strings.Join(misses, "; ")
}

func matches(n *corev1.Node, term corev1.NodeSelectorTerm) bool {
	sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}})
	return err == nil && sel.Match(n)
}

func requirementString(r corev1.NodeSelectorRequirement) string {
	switch r.Operator {
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		return r.Key + " " + string(r.Operator)
	}
	return fmt.Sprintf("%s %s [%s]", r.Key, r.Operator, strings.Join(r.Values, ", "))
}
