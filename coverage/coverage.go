package coverage

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingcorev1 "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// SkipKind says why the DaemonSet controller leaves a node out.
type SkipKind string

// The reasons a node does not count toward desiredNumberScheduled, in the
// order the controller checks them.
const (
	// SkipNodeName: the template's nodeName names another node.
	SkipNodeName SkipKind = "nodeName"
	// SkipOSArch: the nodeSelector or required node affinity excludes the
	// node by OS or architecture alone (a Linux agent on a Windows node):
	// normal, counted as intended.
	SkipOSArch SkipKind = "os-arch"
	// SkipSelector: the nodeSelector or required node affinity excludes it.
	SkipSelector SkipKind = "selector"
	// SkipTaint: a NoSchedule or NoExecute taint is not tolerated.
	SkipTaint SkipKind = "taint"
)

// Skip is a group of nodes skipped for the same reason.
type Skip struct {
	Kind SkipKind
	// Taint is the first untolerated taint, for SkipTaint.
	Taint corev1.Taint
	// Transient marks taints a node carries while joining, failing or being
	// scaled away: they count in predictions but never raise a finding.
	Transient bool
	// Nodes are the skipped nodes' names, sorted.
	Nodes []string
}

// Reason describes the skip in words.
func (s Skip) Reason() string {
	switch s.Kind {
	case SkipNodeName:
		return "spec.template.spec.nodeName names another node"
	case SkipOSArch:
		return "operating system or architecture not selected"
	case SkipSelector:
		return "nodeSelector or node affinity does not match"
	default:
		return "taint " + s.Taint.ToString() + " not tolerated"
	}
}

// Describe is the reason followed by the nodes, at most limit of them named.
func (s Skip) Describe(limit int) string {
	names := s.Nodes
	more := ""
	if len(names) > limit {
		more = fmt.Sprintf(" and %d more", len(names)-limit)
		names = names[:limit]
	}
	return fmt.Sprintf("%s (%s%s)", s.Reason(), strings.Join(names, ", "), more)
}

// Coverage is the predicted placement of a DaemonSet on a node set.
type Coverage struct {
	// Total is the number of nodes in the snapshot.
	Total int
	// Eligible is what the DaemonSet controller will report as
	// desiredNumberScheduled.
	Eligible int
	// Skips groups every node left out, largest group first.
	Skips []Skip
}

// Skipped returns the number of nodes skipped for the given kinds (all when none given).
func (c *Coverage) Skipped(kinds ...SkipKind) int {
	n := 0
	for _, s := range c.Skips {
		if len(kinds) == 0 || slices.Contains(kinds, s.Kind) {
			n += len(s.Nodes)
		}
	}
	return n
}

// Gaps returns the skips that count as coverage gaps: nodes left out by an
// untolerated taint that is not transient. The rules, the audit and the
// auditor's Events all mean these when they speak of a gap.
func (c *Coverage) Gaps() []Skip {
	var out []Skip
	for _, s := range c.Skips {
		if s.Kind == SkipTaint && !s.Transient {
			out = append(out, s)
		}
	}
	return out
}

// GapNodes returns how many nodes Gaps covers.
func (c *Coverage) GapNodes() int { return NodesIn(c.Gaps()) }

// NodesIn counts the nodes of skips.
func NodesIn(skips []Skip) int {
	n := 0
	for _, s := range skips {
		n += len(s.Nodes)
	}
	return n
}

// transientTaints come and go with a node's life (joining, failing, being
// scaled away); they must never make dsguard warn, deny or fire an Event.
var transientTaints = map[string]bool{
	corev1.TaintNodeNotReady:                         true,
	corev1.TaintNodeUnreachable:                      true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
	"ToBeDeletedByClusterAutoscaler":                 true,
}

// Predict reproduces the DaemonSet controller's placement decision
// (nodeShouldRunDaemonPod in pkg/controller/daemon): a node counts when the
// template's nodeName is empty or names it, the required node affinity
// (nodeSelector included) matches, and no NoSchedule or NoExecute taint is
// left untolerated by the template's tolerations plus those the controller
// adds. spec.unschedulable (cordon) plays no part: daemon Pods tolerate it.
func Predict(ds *appsv1.DaemonSet, nodes *NodeSnapshot) Coverage {
	cov := Coverage{Total: nodes.Len()}
	spec := &ds.Spec.Template.Spec
	affinity := nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity)
	var relaxed *nodeaffinity.RequiredNodeAffinity
	perNode := spec.NodeName != "" || nodes.looksAtNodeIdentity(spec)
	tolerations := daemonTolerations(spec)
	// Decisions go to groups first (a class, or with perNode each node, gets
	// a group index, -1 when eligible); one pass over the snapshot's sorted
	// names then fills each group's Nodes in order, with no sort per request.
	var groups []Skip
	var sizes []int
	index := map[string]int32{}
	group := func(kind SkipKind, taint *corev1.Taint, n int) int32 {
		key := string(kind)
		if taint != nil {
			// A grouping key, not a message: concatenation, no fmt, on
			// the request path.
			key += "\x00" + taint.Key + "\x00" + taint.Value + "\x00" + string(taint.Effect)
		}
		g, ok := index[key]
		if !ok {
			g = int32(len(groups))
			s := Skip{Kind: kind}
			if taint != nil {
				s.Taint = *taint
				s.Transient = transientTaints[taint.Key]
			}
			groups = append(groups, s)
			sizes = append(sizes, 0)
			index[key] = g
		}
		sizes[g] += n
		return g
	}
	classGroup := make([]int32, len(nodes.classes))
	var nodeGroup []int32 // by position in nodes.names, when perNode
	if perNode {
		nodeGroup = make([]int32, nodes.total)
	}
	for i := range nodes.classes {
		class := &nodes.classes[i]
		node := class.node // a copy: Name and per-node labels are set per member below
		if !perNode {
			if kind, taint, ok := placeOn(&node, spec, affinity, &relaxed, tolerations); ok {
				cov.Eligible += len(class.members)
				classGroup[i] = -1
			} else {
				classGroup[i] = group(kind, taint, len(class.members))
			}
			continue
		}
		labels := make(map[string]string, len(node.Labels)+len(nodes.perNodeKeys))
		for k, v := range node.Labels {
			labels[k] = v
		}
		node.Labels = labels
		// Taints belong to the class: decided once, on first need.
		taintGroup, taintDecided := int32(-1), false
		for _, m := range class.members {
			node.Name = m.name
			for j, k := range nodes.perNodeKeys {
				if m.perNode[j].present {
					labels[k] = m.perNode[j].value
				} else {
					delete(labels, k)
				}
			}
			if spec.NodeName != "" && spec.NodeName != m.name {
				nodeGroup[m.pos] = group(SkipNodeName, nil, 1)
				continue
			}
			if kind, ok := matchAffinity(&node, spec, affinity, &relaxed); !ok {
				nodeGroup[m.pos] = group(kind, nil, 1)
				continue
			}
			if !taintDecided {
				if taint, untolerated := untoleratedTaint(node.Spec.Taints, tolerations); untolerated {
					taintGroup = group(SkipTaint, taint, 0)
				}
				taintDecided = true
			}
			nodeGroup[m.pos] = taintGroup
			if taintGroup < 0 {
				cov.Eligible++
			} else {
				sizes[taintGroup]++
			}
		}
	}
	if len(groups) > 0 {
		for g := range groups {
			groups[g].Nodes = make([]string, 0, sizes[g])
		}
		for p, name := range nodes.names {
			var g int32
			if perNode {
				g = nodeGroup[p]
			} else {
				g = classGroup[nodes.classOf[p]]
			}
			if g >= 0 {
				groups[g].Nodes = append(groups[g].Nodes, name)
			}
		}
		cov.Skips = groups
	}
	sort.Slice(cov.Skips, func(a, b int) bool {
		if len(cov.Skips[a].Nodes) != len(cov.Skips[b].Nodes) {
			return len(cov.Skips[a].Nodes) > len(cov.Skips[b].Nodes)
		}
		return cov.Skips[a].Reason() < cov.Skips[b].Reason()
	})
	return cov
}

// placeOn decides one node: eligible, or why not. The relaxed affinity
// (without OS and architecture terms) is built on first need, to tell an
// OS/architecture mismatch from a deliberate selection.
func placeOn(node *corev1.Node, spec *corev1.PodSpec, affinity nodeaffinity.RequiredNodeAffinity,
	relaxed **nodeaffinity.RequiredNodeAffinity, tolerations []corev1.Toleration) (SkipKind, *corev1.Taint, bool) {
	if kind, ok := matchAffinity(node, spec, affinity, relaxed); !ok {
		return kind, nil, false
	}
	if taint, untolerated := untoleratedTaint(node.Spec.Taints, tolerations); untolerated {
		return SkipTaint, taint, false
	}
	return "", nil, true
}

// matchAffinity applies the required node affinity (nodeSelector included);
// on a mismatch it says whether OS or architecture alone was the reason.
func matchAffinity(node *corev1.Node, spec *corev1.PodSpec, affinity nodeaffinity.RequiredNodeAffinity,
	relaxed **nodeaffinity.RequiredNodeAffinity) (SkipKind, bool) {
	// Parsing errors count as no match, as in the controller.
	if ok, _ := affinity.Match(node); ok {
		return "", true
	}
	if *relaxed == nil {
		r := withoutOSArch(spec)
		*relaxed = &r
	}
	if ok, _ := (*relaxed).Match(node); ok {
		return SkipOSArch, false
	}
	return SkipSelector, false
}

// untoleratedTaint returns the first NoSchedule or NoExecute taint the
// tolerations leave untolerated, as the controller's predicate does.
func untoleratedTaint(taints []corev1.Taint, tolerations []corev1.Toleration) (*corev1.Taint, bool) {
	taint, untolerated := schedulingcorev1.FindMatchingUntoleratedTaint(logr.Discard(), taints, tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, comparisonOperatorsEnabled)
	return &taint, untolerated
}

// daemonTolerations are the tolerations of the Pods the controller creates:
// the template's plus the ones it adds (AddOrUpdateDaemonPodTolerations).
func daemonTolerations(spec *corev1.PodSpec) []corev1.Toleration {
	out := make([]corev1.Toleration, 0, len(spec.Tolerations)+len(daemonPodTolerations)+1)
	out = append(out, spec.Tolerations...)
	out = append(out, daemonPodTolerations...)
	if spec.HostNetwork {
		out = append(out, hostNetworkToleration)
	}
	return out
}

// looksAtNodeIdentity reports whether the placement depends on a node's own
// name or on a per-node label, which classes do not share.
func (s *NodeSnapshot) looksAtNodeIdentity(spec *corev1.PodSpec) bool {
	for k := range spec.NodeSelector {
		if s.isPerNodeKey(k) {
			return true
		}
	}
	if spec.Affinity == nil || spec.Affinity.NodeAffinity == nil ||
		spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, t := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(t.MatchFields) > 0 {
			return true
		}
		for _, r := range t.MatchExpressions {
			if s.isPerNodeKey(r.Key) {
				return true
			}
		}
	}
	return false
}

// osArchLabels select a node by its operating system or architecture alone,
// which is normal (a Linux agent skips Windows nodes) and not a deliberate
// subset of nodes.
var osArchLabels = map[string]bool{
	corev1.LabelOSStable:      true,
	corev1.LabelArchStable:    true,
	"beta.kubernetes.io/os":   true,
	"beta.kubernetes.io/arch": true,
}

// IsOSArchLabel reports whether a node label key selects by operating system
// or architecture alone.
func IsOSArchLabel(key string) bool { return osArchLabels[key] }

// withoutOSArch returns the required node affinity with every OS and
// architecture requirement dropped.
func withoutOSArch(spec *corev1.PodSpec) nodeaffinity.RequiredNodeAffinity {
	selector := map[string]string{}
	for k, v := range spec.NodeSelector {
		if !IsOSArchLabel(k) {
			selector[k] = v
		}
	}
	var affinity *corev1.Affinity
	if spec.Affinity != nil && spec.Affinity.NodeAffinity != nil &&
		spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		var terms []corev1.NodeSelectorTerm
		matchAll := false
		for _, t := range spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
				continue // an empty term matches nothing, relaxed or not
			}
			nt := corev1.NodeSelectorTerm{MatchFields: t.MatchFields}
			for _, r := range t.MatchExpressions {
				if !IsOSArchLabel(r.Key) {
					nt.MatchExpressions = append(nt.MatchExpressions, r)
				}
			}
			if len(nt.MatchExpressions) == 0 && len(nt.MatchFields) == 0 {
				// Only OS and architecture: relaxed, the term
				// matches every node, and so do the ORed terms.
				matchAll = true
				break
			}
			terms = append(terms, nt)
		}
		if !matchAll {
			affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
			}}
		}
	}
	return nodeaffinity.NewRequiredNodeAffinity(selector, affinity)
}
