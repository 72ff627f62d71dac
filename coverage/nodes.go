package coverage

import (
	"cmp"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeSnapshot is an immutable view of the cluster's nodes, grouped into
// equivalence classes of nodes that look the same to the DaemonSet
// controller: same taints and same labels, apart from per-node labels, whose
// value (nearly) every node has its own of (kubernetes.io/hostname, and keys
// like an instance ID). Predictions cost one check per class, not per node,
// so a 5,000-node cluster of a few dozen node pools is as cheap as a small
// one; a DaemonSet that selects on a per-node label or a node name finds the
// nodes it names through each class's index and judges the rest of the class
// once. Build it with NewNodeSnapshot, or keep it current node by node with a
// NodeSet; share it freely.
type NodeSnapshot struct {
	// classes are never modified once the snapshot is published: a NodeSet
	// replaces the class a change touches and shares the others.
	classes []*nodeClass
	total   int
	// perNodeKeys are the per-node label keys, sorted; members hold their
	// values in this order.
	perNodeKeys []string
	// index is built on the first prediction by nodeSelector.
	index struct {
		once sync.Once
		idx  *labelIndex
	}
}

type nodeClass struct {
	// key is the class's canonical encoding (writeClassKey).
	key string
	// node carries the class's shared labels and taints; Name and the
	// per-node labels are set per member only when a DaemonSet looks at them.
	node corev1.Node
	// labels lists node.Labels, for NodeSet.Holds: ranging over a slice
	// costs less than over a map, and Holds runs for every Node update.
	labels  []labelPair
	members []nodeMember // sorted by name
	// values holds the members' values of NodeSnapshot.perNodeKeys, one
	// run of len(perNodeKeys) per member in member order (valuesOf): one
	// array per class rather than a slice per node.
	values []perNodeValue
	// byValue[j] lists, as indices into members, the members that carry
	// perNodeKeys[j], sorted by value then name: the index per-node
	// selectors are answered from.
	byValue [][]int32
	// labelMaps are label maps holding the class's labels, for
	// borrowMemberNode.
	labelMaps sync.Pool
}

type labelPair struct{ key, value string }

type nodeMember struct {
	name string
}

type perNodeValue struct {
	value string
	// present tells an absent label from an empty value.
	present bool
}

// valuesOf returns member i's values of the per-node keys.
func (c *nodeClass) valuesOf(i int) []perNodeValue {
	k := len(c.byValue)
	return c.values[i*k : (i+1)*k : (i+1)*k]
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
	var byClass [][]*corev1.Node
	for _, n := range nodes {
		key := s.classKey(n)
		i, ok := index[key]
		if !ok {
			i = len(s.classes)
			index[key] = i
			s.classes = append(s.classes, s.newClass(key, n))
			byClass = append(byClass, nil)
		}
		byClass[i] = append(byClass[i], n)
	}
	k := len(s.perNodeKeys)
	for i, c := range s.classes {
		members := byClass[i]
		slices.SortFunc(members, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
		c.members = make([]nodeMember, len(members))
		c.values = make([]perNodeValue, len(members)*k)
		for m, n := range members {
			c.members[m].name = n.Name
			s.readValues(c.values[m*k:(m+1)*k], n)
		}
		s.indexValues(c)
	}
	return s
}

// newClass returns an empty class with n's shared labels and taints (copies:
// the snapshot must not change when the informer replaces n).
func (s *NodeSnapshot) newClass(key string, n *corev1.Node) *nodeClass {
	labels := make(map[string]string, len(n.Labels))
	for k, v := range n.Labels {
		if !s.isPerNodeKey(k) {
			labels[k] = v
		}
	}
	c := &nodeClass{key: key, labels: make([]labelPair, 0, len(labels))}
	for k, v := range labels {
		c.labels = append(c.labels, labelPair{k, v})
	}
	c.node.Labels = labels
	c.node.Spec.Taints = append([]corev1.Taint(nil), n.Spec.Taints...)
	return c
}

// memberNode returns a copy of class's node with a label map of its own,
// for setMember to make it stand for one member after another without
// touching the class.
func (s *NodeSnapshot) memberNode(class *nodeClass) corev1.Node {
	node := class.node
	node.Labels = make(map[string]string, len(node.Labels)+len(s.perNodeKeys))
	maps.Copy(node.Labels, class.node.Labels)
	return node
}

// borrowMemberNode is memberNode with a label map from the class's pool,
// which already holds the class's labels: copying them was most of the cost
// of a prediction that judges members one by one. setMember rewrites every
// per-node label, so what the map held before does not matter. Give the map
// back with giveBack.
func (s *NodeSnapshot) borrowMemberNode(class *nodeClass) corev1.Node {
	if labels, ok := class.labelMaps.Get().(map[string]string); ok {
		node := class.node
		node.Labels = labels
		return node
	}
	return s.memberNode(class)
}

// giveBack returns the label map of a node from borrowMemberNode.
func (c *nodeClass) giveBack(node *corev1.Node) { c.labelMaps.Put(node.Labels) }

// setMember makes node (from memberNode) the member called name, whose
// per-node label values are values.
func (s *NodeSnapshot) setMember(node *corev1.Node, name string, values []perNodeValue) {
	node.Name = name
	for j, k := range s.perNodeKeys {
		if values[j].present {
			node.Labels[k] = values[j].value
		} else {
			delete(node.Labels, k)
		}
	}
}

// readValues fills values with n's values of the per-node keys.
func (s *NodeSnapshot) readValues(values []perNodeValue, n *corev1.Node) {
	for j, k := range s.perNodeKeys {
		v, ok := n.Labels[k]
		if v == n.Name {
			// The hostname is often the name: one string serves both.
			v = n.Name
		}
		values[j].value, values[j].present = v, ok
	}
}

// valuesFor returns n's values of the per-node keys.
func (s *NodeSnapshot) valuesFor(n *corev1.Node) []perNodeValue {
	values := make([]perNodeValue, len(s.perNodeKeys))
	s.readValues(values, n)
	return values
}

// indexValues builds c.byValue from c.members and c.values.
func (s *NodeSnapshot) indexValues(c *nodeClass) {
	k := len(s.perNodeKeys)
	c.byValue = make([][]int32, k)
	for j := range k {
		idx := make([]int32, 0, len(c.members))
		for i := range c.members {
			if c.values[i*k+j].present {
				idx = append(idx, int32(i))
			}
		}
		// Members are in name order: a stable sort by value leaves
		// those of one value in name order.
		slices.SortStableFunc(idx, func(a, b int32) int {
			return strings.Compare(c.values[int(a)*k+j].value, c.values[int(b)*k+j].value)
		})
		c.byValue[j] = idx
	}
}

// compareAt orders members a and b by their value of per-node key j, then
// by name (their order in members).
func (c *nodeClass) compareAt(j int, a, b int32) int {
	k := len(c.byValue)
	if x := strings.Compare(c.values[int(a)*k+j].value, c.values[int(b)*k+j].value); x != 0 {
		return x
	}
	return cmp.Compare(a, b)
}

// find returns the index of the member named name, and whether it exists.
func (c *nodeClass) find(name string) (int, bool) {
	return slices.BinarySearchFunc(c.members, name, func(m nodeMember, n string) int { return strings.Compare(m.name, n) })
}

// withValue returns the indices of the members whose perNodeKeys[j] is
// value, in name order.
func (c *nodeClass) withValue(j int, value string) []int32 {
	idx := c.byValue[j]
	k := len(c.byValue)
	valueAt := func(x int) string { return c.values[int(idx[x])*k+j].value }
	lo, _ := slices.BinarySearchFunc(idx, value, func(i int32, v string) int { return strings.Compare(c.values[int(i)*k+j].value, v) })
	hi := lo
	for hi < len(idx) && valueAt(hi) == value {
		hi++
	}
	return idx[lo:hi]
}

// StripNode returns a copy of n with only what the prediction reads: name,
// labels, taints and cordon. The node view's reflector applies it to the
// nodes a streamed list collects before they are handed over, so that the
// list holds no images, conditions, managed fields or annotations. Label
// keys and values are interned: every node decoded from the API server has
// its own copy of the same dozen keys and of its zone, instance type and
// pool, which one copy serves.
func StripNode(n *corev1.Node) *corev1.Node {
	return &corev1.Node{
		TypeMeta:   n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: internLabels(n.Labels)},
		Spec:       corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
	}
}

// internLabels returns labels with its keys and shared values interned
// with unique.Make. The sharing is partial: unique keeps a canonical copy
// only while a Handle to it lives, and the nodes keep the strings, not the
// handles, so nodes decoded after a garbage collection start new copies.
// That still removes most duplicates of an initial list or a burst of
// updates, and pins nothing that no node uses. The hostname's value is each
// node's own: interning it would only add an entry.
func internLabels(labels map[string]string) map[string]string {
	if labels == nil {
		return nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		if k != corev1.LabelHostname {
			v = unique.Make(v).Value()
		}
		out[unique.Make(k).Value()] = v
	}
	return out
}

// classKey returns a canonical encoding of the node's labels (without the
// per-node labels) and taints. Taint order is kept: the controller reports
// the first untolerated taint, so order is part of what a class predicts.
func (s *NodeSnapshot) classKey(n *corev1.Node) string {
	keys := make([]string, 0, len(n.Labels))
	for k := range n.Labels {
		if !s.isPerNodeKey(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
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
	return b.String()
}

// Len returns the number of nodes.
func (s *NodeSnapshot) Len() int { return s.total }

// Classes returns the number of equivalence classes.
func (s *NodeSnapshot) Classes() int { return len(s.classes) }

// Names returns every node name, sorted.
func (s *NodeSnapshot) Names() []string {
	runs := make([]nameRun, len(s.classes))
	for i, c := range s.classes {
		runs[i] = nameRun{members: c.members}
	}
	return mergeRuns(runs, s.total)
}

// HasTaint reports whether any node carries a taint with this key and effect
// (and value, when value is not empty).
func (s *NodeSnapshot) HasTaint(key, value string, effect corev1.TaintEffect) bool {
	for _, c := range s.classes {
		if carriesTaint(c.node.Spec.Taints, key, value, effect) {
			return true
		}
	}
	return false
}

// LabelValues returns, by node name, the value of label key on each node of
// the snapshot that has it (a topology domain, such as a zone). It builds
// every node once: a caller asks only when a domain other than the node
// itself matters.
func (s *NodeSnapshot) LabelValues(key string) map[string]string {
	out := map[string]string{}
	for _, n := range s.nodes() {
		if v, ok := n.Labels[key]; ok {
			out[n.Name] = v
		}
	}
	return out
}
