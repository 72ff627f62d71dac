package coverage

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeSnapshot is an immutable view of the cluster's nodes, grouped into
// equivalence classes of nodes that look the same to the DaemonSet
// controller: same taints and same labels, apart from per-node labels, whose
// value (nearly) every node has its own of (kubernetes.io/hostname, and keys
// like an instance ID). Predictions cost one check per class, not per node,
// so a 5,000-node cluster of a few dozen node pools is as cheap as a small
// one; only a DaemonSet that selects on a per-node label or a node name is
// judged node by node. Build it with NewNodeSnapshot; share it freely.
type NodeSnapshot struct {
	classes []nodeClass
	total   int
	// perNodeKeys are the per-node label keys, sorted; members hold their
	// values in this order.
	perNodeKeys []string
	// names are all node names, sorted, and classOf the class of each, so
	// that a prediction lists skipped nodes in order without sorting them.
	names   []string
	classOf []int32
}

type nodeClass struct {
	// node carries the class's shared labels and taints; Name and the
	// hostname label are set per member only when a DaemonSet looks at them.
	node    corev1.Node
	members []nodeMember // sorted by name
}

type nodeMember struct {
	name string
	// perNode holds the member's values of NodeSnapshot.perNodeKeys.
	perNode []perNodeValue
	// pos is the member's index in NodeSnapshot.names.
	pos int32
}

type perNodeValue struct {
	value string
	// present tells an absent label from an empty value.
	present bool
}

// A label key is per-node when it has at least this many distinct values and
// more than one per perNodeRatio nodes: splitting classes by it would make
// nearly every node a class of its own.
const (
	perNodeMinValues = 32
	perNodeRatio     = 8
)

// perNodeKeysOf returns the hostname label and every high-cardinality key.
func perNodeKeysOf(nodes []*corev1.Node) []string {
	values := map[string]map[string]struct{}{}
	for _, n := range nodes {
		for k, v := range n.Labels {
			vs, ok := values[k]
			if !ok {
				vs = map[string]struct{}{}
				values[k] = vs
			}
			vs[v] = struct{}{}
		}
	}
	keys := []string{corev1.LabelHostname}
	for k, vs := range values {
		if k != corev1.LabelHostname && len(vs) >= perNodeMinValues && len(vs)*perNodeRatio > len(nodes) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

func (s *NodeSnapshot) isPerNodeKey(k string) bool {
	_, found := slices.BinarySearch(s.perNodeKeys, k)
	return found
}

// NewNodeSnapshot groups nodes into classes. Only names, labels and taints are
// read and kept, so the caller may strip everything else before.
func NewNodeSnapshot(nodes []*corev1.Node) *NodeSnapshot {
	s := &NodeSnapshot{total: len(nodes), perNodeKeys: perNodeKeysOf(nodes)}
	index := map[string]int{}
	var key strings.Builder
	for _, n := range nodes {
		key.Reset()
		s.writeClassKey(&key, n)
		i, ok := index[key.String()]
		if !ok {
			i = len(s.classes)
			index[key.String()] = i
			labels := make(map[string]string, len(n.Labels))
			for k, v := range n.Labels {
				if !s.isPerNodeKey(k) {
					labels[k] = v
				}
			}
			s.classes = append(s.classes, nodeClass{node: corev1.Node{}})
			c := &s.classes[i]
			c.node.Labels = labels
			c.node.Spec.Taints = append([]corev1.Taint(nil), n.Spec.Taints...)
		}
		perNode := make([]perNodeValue, len(s.perNodeKeys))
		for j, k := range s.perNodeKeys {
			perNode[j].value, perNode[j].present = n.Labels[k]
		}
		s.classes[i].members = append(s.classes[i].members, nodeMember{name: n.Name, perNode: perNode})
	}
	for i := range s.classes {
		m := s.classes[i].members
		sort.Slice(m, func(a, b int) bool { return m[a].name < m[b].name })
	}
	// Number the nodes in name order once here, so that each prediction
	// lists skipped nodes in order with one pass instead of a sort per request.
	type ref struct{ class, member int32 }
	refs := make([]ref, 0, len(nodes))
	for i := range s.classes {
		for j := range s.classes[i].members {
			refs = append(refs, ref{int32(i), int32(j)})
		}
	}
	name := func(r ref) string { return s.classes[r.class].members[r.member].name }
	slices.SortStableFunc(refs, func(a, b ref) int { return strings.Compare(name(a), name(b)) })
	s.names = make([]string, len(refs))
	s.classOf = make([]int32, len(refs))
	for p, r := range refs {
		m := &s.classes[r.class].members[r.member]
		m.pos = int32(p)
		s.names[p] = m.name
		s.classOf[p] = r.class
	}
	return s
}

// StripNode returns a copy of n with only what the prediction reads: name,
// uid, resourceVersion, labels, taints and cordon. The node informer applies
// it as a cache transform, so a 5,000-node cache holds no images, conditions,
// managed fields or annotations.
func StripNode(n *corev1.Node) *corev1.Node {
	return &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels,
			DeletionTimestamp: n.DeletionTimestamp,
		},
		Spec: corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
	}
}

// writeClassKey writes a canonical encoding of the node's labels (without
// the per-node labels) and taints. Taint order is kept: the controller reports
// the first untolerated taint, so order is part of what a class predicts.
func (s *NodeSnapshot) writeClassKey(b *strings.Builder, n *corev1.Node) {
	keys := make([]string, 0, len(n.Labels))
	for k := range n.Labels {
		if !s.isPerNodeKey(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(n.Labels[k])
		b.WriteByte(0)
	}
	b.WriteByte(1)
	for _, t := range n.Spec.Taints {
		b.WriteString(t.Key)
		b.WriteByte('=')
		b.WriteString(t.Value)
		b.WriteByte(':')
		b.WriteString(string(t.Effect))
		b.WriteByte(0)
	}
}

// Len returns the number of nodes.
func (s *NodeSnapshot) Len() int { return s.total }

// Classes returns the number of equivalence classes.
func (s *NodeSnapshot) Classes() int { return len(s.classes) }

// HasTaint reports whether any node carries a taint with this key and effect
// (and value, when value is not empty).
func (s *NodeSnapshot) HasTaint(key, value string, effect corev1.TaintEffect) bool {
	for i := range s.classes {
		for _, t := range s.classes[i].node.Spec.Taints {
			if t.Key == key && t.Effect == effect && (value == "" || t.Value == value) {
				return true
			}
		}
	}
	return false
}
