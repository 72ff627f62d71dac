package coverage

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// PlacementSize measures a pod spec's required node placement: what a
// prediction evaluates per node.
type PlacementSize struct {
	// Terms are the node selector terms of the required node affinity.
	Terms int
	// Requirements are the match expressions and match fields of all terms,
	// plus one per nodeSelector entry: the tests made per node.
	Requirements int
	// Values are the values of all requirements.
	Values int
}

// SizeOf measures spec's nodeSelector and required node affinity.
func SizeOf(spec *corev1.PodSpec) PlacementSize {
	s := PlacementSize{Requirements: len(spec.NodeSelector)}
	required := requiredNodeSelector(spec)
	if required == nil {
		return s
	}
	terms := required.NodeSelectorTerms
	s.Terms = len(terms)
	for i := range terms {
		for _, reqs := range [][]corev1.NodeSelectorRequirement{terms[i].MatchExpressions, terms[i].MatchFields} {
			s.Requirements += len(reqs)
			for j := range reqs {
				s.Values += len(reqs[j].Values)
			}
		}
	}
	return s
}

// NodesExamined is about how many placement decisions a prediction of spec
// makes on the snapshot: one per class of nodes, plus one per node the
// placement names (by name or a per-node label value), or one per node when
// it must judge every node on its own.
func (s *NodeSnapshot) NodesExamined(spec *corev1.PodSpec) int {
	if spec.NodeName == "" && !s.looksAtNodeIdentity(spec) {
		return len(s.classes)
	}
	q := s.identityQuery(spec)
	if q.scan {
		return s.total
	}
	named := len(q.names)
	for _, vs := range q.values {
		named += len(vs)
	}
	return len(s.classes) + min(s.total, named)
}

// ReachesTaint reports whether spec's nodeName, nodeSelector and required
// node affinity select at least one node of the snapshot that carries the
// taint (key and effect, and value unless value is empty). Tolerations play no
// part: the question is where the placement aims, not where Pods land.
func (s *NodeSnapshot) ReachesTaint(spec *corev1.PodSpec, key, value string, effect corev1.TaintEffect) bool {
	affinity := nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity)
	perNode := spec.NodeName != "" || s.looksAtNodeIdentity(spec)
	for _, class := range s.classes {
		if !carriesTaint(class.node.Spec.Taints, key, value, effect) {
			continue
		}
		if !perNode {
			if ok, _ := affinity.Match(&class.node); ok {
				return true
			}
			continue
		}
		if reachesMember(s, class, spec, affinity) {
			return true
		}
	}
	return false
}

// reachesMember reports whether the placement selects a member of class.
func reachesMember(s *NodeSnapshot, class *nodeClass, spec *corev1.PodSpec, affinity nodeaffinity.RequiredNodeAffinity) bool {
	node := s.borrowMemberNode(class)
	defer class.giveBack(&node)
	for i, m := range class.members {
		if spec.NodeName != "" && spec.NodeName != m.name {
			continue
		}
		s.setMember(&node, m.name, class.valuesOf(i))
		if ok, _ := affinity.Match(&node); ok {
			return true
		}
	}
	return false
}

// carriesTaint reports whether one of taints matches the pattern key, value,
// effect (see MatchesTaint).
func carriesTaint(taints []corev1.Taint, key, value string, effect corev1.TaintEffect) bool {
	pattern := corev1.Taint{Key: key, Value: value, Effect: effect}
	for _, t := range taints {
		if MatchesTaint(pattern, t) {
			return true
		}
	}
	return false
}

// MatchesTaint reports whether t matches pattern by key and effect, and by
// value unless the pattern's value is empty (which stands for every value of
// the key).
func MatchesTaint(pattern, t corev1.Taint) bool {
	return pattern.Key == t.Key && pattern.Effect == t.Effect && (pattern.Value == "" || pattern.Value == t.Value)
}

// The role labels (and taint keys) of control-plane nodes.
const (
	controlPlaneRoleLabel = "node-role.kubernetes.io/control-plane"
	masterRoleLabel       = "node-role.kubernetes.io/master"
)

// ModelNodeName is the name and hostname of the model nodes.
const ModelNodeName = "model-control-plane"

// ModelTaintedNodes are stand-ins for the nodes that carry a taint, for
// judging a placement when no live node carries it (offline, or a managed
// control plane): Linux nodes of both common architectures with a hostname,
// with the taint's own key and value as a label (as nodes dedicated by a
// taint usually are), and for the control-plane taint the control-plane
// role label. A placement that reaches none of them excludes such nodes;
// NotIn or DoesNotExist of an unrelated label, or hostname Exists, reaches
// them. The nodes are shared between callers (a policy names a few taints
// and every admission asks): read them, never change them.
func ModelTaintedNodes(key, value string) []*corev1.Node {
	k := modelKey{key, value}
	models.RLock()
	out, ok := models.nodes[k]
	models.RUnlock()
	if ok {
		return out
	}
	out = newModelTaintedNodes(key, value)
	models.Lock()
	defer models.Unlock()
	if len(models.nodes) < maxModels {
		models.nodes[k] = out
	}
	return out
}

type modelKey struct{ key, value string }

// models keeps the model nodes of the taints asked about, up to maxModels
// of them (taints come from policies, so a handful; the bound only keeps a
// stream of distinct policies from growing it without end).
var models = struct {
	sync.RWMutex
	nodes map[modelKey][]*corev1.Node
}{nodes: map[modelKey][]*corev1.Node{}}

const maxModels = 64

func newModelTaintedNodes(key, value string) []*corev1.Node {
	out := make([]*corev1.Node, 0, 2)
	for _, arch := range []string{"amd64", "arm64"} {
		labels := map[string]string{
			corev1.LabelOSStable:      "linux",
			corev1.LabelArchStable:    arch,
			"beta.kubernetes.io/os":   "linux",
			"beta.kubernetes.io/arch": arch,
			corev1.LabelHostname:      ModelNodeName,
		}
		labels[key] = value
		if key == controlPlaneRoleLabel || key == masterRoleLabel {
			labels[controlPlaneRoleLabel] = ""
		}
		n := &corev1.Node{}
		n.Name, n.Labels = ModelNodeName, labels
		out = append(out, n)
	}
	return out
}

// ReachesAny reports whether spec's nodeName, nodeSelector and required
// node affinity select one of nodes.
func ReachesAny(spec *corev1.PodSpec, nodes []*corev1.Node) bool {
	affinity := nodeaffinity.NewRequiredNodeAffinity(spec.NodeSelector, spec.Affinity)
	for _, n := range nodes {
		if spec.NodeName != "" && spec.NodeName != n.Name {
			continue
		}
		if ok, _ := affinity.Match(n); ok {
			return true
		}
	}
	return false
}
